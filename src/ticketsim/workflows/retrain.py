"""`ticketsim retrain`: the retraining loop, each step taken from the floor that owns it: the tracking server checked,
dvc pull, a new model version by one of two roads, the quality gate (ticketsim.lifecycle.promotion), dvc push (with a
DVC remote), one retrain at a time in a workspace (ticketsim.lifecycle.retrain_lock).

The roads (docs/retraining.md#two-roads): the query-tower road, the default, when the champion has a query tower: it is
trained alone (ticketsim.training.query_tower) and registered with the champion's index as a new version
(ticketsim.app.pyfunc); otherwise, or with --full, the full road: dvc repro of retrain.targets, both towers trained and
the index rebuilt.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ticketsim.app.pyfunc import log_bundle
from ticketsim.bundle.manifest import bundle_manifest
from ticketsim.config import Params, load_params
from ticketsim.lifecycle.promotion import GateOutcome, RetrainError, label, run_gate
from ticketsim.lifecycle.registry import CHAMPION, load_version, version_by_alias
from ticketsim.lifecycle.retrain_lock import retrain_lock
from ticketsim.lifecycle.tracking import check_reachable, log_metrics, stage_run, tracking_uri
from ticketsim.model.branches import query_tower_refusal
from ticketsim.training.query_tower import retrain_query_tower
from ticketsim.workflows.gate import reported, step

STAGE = "retrain"   # the MLflow run's stage tag of a query tower: the version was trained outside the DVC pipeline


def retrain_command(params: str, full: bool, wait: float | None, summary: Path | None, outputs: Path | None) -> int:
    """The loop on the workspace's params, under its retrain lock; the gate's verdict printed and written."""
    loaded = load_params(params)
    with retrain_lock(wait):     # before the first write (dvc pull): one retrain at a time in a workspace
        outcome = retrain(loaded, full)
    return reported(outcome, summary, outputs)


def retrain(params: Params, full: bool = False) -> GateOutcome:
    """Tracking server check, dvc pull, a new version by the query-tower road (unless `full`, or the champion has no
    query tower) or the full road, the gate, dvc push of what the full road built when it was promoted."""
    check_reachable(params.tracking)   # before training: a run must never be trained and then lost
    print(f"==> MLflow tracking {tracking_uri(params.tracking)}: ok", flush=True)
    remote = dvc_remote()
    targets = list(params.retrain.targets)
    if remote:
        dvc("pull", "--allow-missing", "--with-deps", *targets)
    full = full or not took_query_tower_road(params)
    if full:
        dvc("repro", *targets)
    outcome = run_gate(params, say=step)
    if remote and outcome.promoted and full:    # the query-tower road's version lives in the registry alone
        dvc("push", "--with-deps", *targets)
    return outcome


def took_query_tower_road(params: Params) -> bool:
    """Register a version with the champion's query tower retrained, when it has one; False (saying why) when there is no
    champion or its variant has no tower to train alone, and the full road is to be taken."""
    cfg, model = params.tracking, params.siamese.registered_name(params.retrain.dataset)
    champion = version_by_alias(cfg, model, CHAMPION)
    with tempfile.TemporaryDirectory(prefix="ticketsim-retrain-") as scratch:
        loaded = load_version(cfg, champion, Path(scratch), "to retrain its query tower") if champion else None
        refusal = road_refusal(loaded)
        if refusal:
            print(f"==> the full road: {model} has no query tower to retrain alone ({refusal})", flush=True)
            return False
        print(f"==> the query-tower road: {label(champion)}'s query side trained as {params.retrain.query_tower}, its index "
              "kept", flush=True)
        register_query_tower(params, Path(loaded.bundle), Path(loaded.index))
    return True


def road_refusal(champion: Any) -> str | None:
    """Why the champion's python model (None: there is none) has no query tower to retrain alone; None when it has."""
    if champion is None:
        return "there is no champion yet"
    if not getattr(champion, "index", None):   # a stand-in's model, or a version registered before the index
        return "its model has no bundle and search index"
    channels = bundle_manifest(Path(champion.bundle))["variant"]["channels"]
    return query_tower_refusal({c for c, w in channels.items() if w})


def register_query_tower(params: Params, bundle: Path, index: Path) -> str:
    """Train the query tower of the champion's `bundle`, register it with its `index` reused; the new version number."""
    dataset, name, row = params.retrain.dataset, params.siamese.registered_name(params.retrain.dataset), params.retrain.query_tower
    with tempfile.TemporaryDirectory(prefix="ticketsim-query-tower-") as scratch:
        trained = retrain_query_tower(params, bundle, index, Path(scratch))
        # the dataset's own files where it has them: this road reads them, not the pipeline's prepared folder
        with stage_run(params.tracking, STAGE, dataset, {"variant": row, "registered_model": name, "weights": trained.variant},
                       tags={"variant": row, "road": "query-tower"}, corpus=params.dataset(dataset).raw) as run:
            log_metrics(trained.results)    # dev.rerank.map, ...: the keys the register stage logs
            version = log_bundle(str(trained.bundle), name, str(trained.index))
    query = f"goes through torch: {trained.torch_query}" if trained.torch_query else "runs without torch"
    print(f"retrain@{dataset}: {name} version {version} (run {run.info.run_id}), the query tower of {bundle} on its index; "
          f"a query {query}", flush=True)
    return version


def dvc(*args: str) -> None:
    """Run a DVC command with its output shown; raise RetrainError if it fails."""
    print(f"==> dvc {' '.join(args)}", flush=True)
    # close_fds=False: the retrain lock's inheritable descriptor (ticketsim.lifecycle.retrain_lock) goes along, so the
    # lock outlives a killed retrain for as long as its dvc command runs
    done = subprocess.run([sys.executable, "-m", "dvc", *args], check=False, close_fds=False)
    if done.returncode:
        raise RetrainError(f"`dvc {' '.join(args)}` failed (exit {done.returncode}); see its output above")


def dvc_remote() -> str | None:
    """The name of the first configured DVC remote, or None when there is none (then nothing is pulled or pushed)."""
    done = subprocess.run([sys.executable, "-m", "dvc", "remote", "list"], capture_output=True, text=True, check=False)
    names = [line.split()[0] for line in done.stdout.splitlines() if line.strip()] if done.returncode == 0 else []
    return names[0] if names else None
