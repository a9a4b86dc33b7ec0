"""The retraining loop behind `ticketsim gate | rollback | retrain`: two roads to a new model version (the champion's
query tower alone, or DVC's pipeline), the quality gate of the newest version against the champion, and promotion in the
MLflow registry. Steps are printed as they run (`==> ...`).

The seam with the training pipeline (stage register@<dataset>): each model it trains becomes a new version of
`siamese.registered_name(dataset)`, from a run that logged the final variant's results (tracking.log_metrics of
{"dev": {"rerank": {"map": ...}}, ...}). The newest version is the candidate; once judged it carries the tag `gate`
(passed / failed), so it is judged once. The champion and the candidate are both loaded and scored in the gate's own
run (ticketsim.lifecycle.gate_pairs) on the trusted pairs (ticketsim.lifecycle.trusted: the dev pairs frozen with the
champion at its promotion, which no later feedback changes), the dev pairs added since shown beside them; a promoted
version has the dev pairs of that moment frozen with it. Without a registry champion there is no model to score: the
champion's figures are the final variant's metrics file (BASELINE_FILE, as dvc.yaml's final stage writes it) on
`gate.baseline_rev`, against the candidate's stored ones. A dry run (`record` False) writes nothing to the registry.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ticketsim.bundle.manifest import bundle_manifest
from ticketsim.config import GateRule, Params
from ticketsim.errors import StepError
from ticketsim.lifecycle.gate import GateResult, compare, dvc_baseline
from ticketsim.lifecycle.gate_pairs import version_figures
from ticketsim.lifecycle.registry import (
    CHAMPION,
    ModelVersion,
    latest_version,
    load_version,
    model_version,
    promote,
    tag_version,
    version_by_alias,
)
from ticketsim.lifecycle.tracking import check_reachable, sanitize, tracking_uri
from ticketsim.lifecycle.trusted import freeze, gate_basis
from ticketsim.model.branches import query_tower_refusal

GATE_TAG = "gate"
BASELINE_FILE = "metrics/{dataset}/final.json"     # the final stage's: {"#<final>-tuned": results, ...}


class RetrainError(StepError):
    """A step of the loop failed; the message names the step and what to do."""


@dataclass(frozen=True)
class GateOutcome:
    markdown: str
    candidate: ModelVersion
    result: GateResult | None = None    # None: nothing new to decide (the candidate is the champion or was judged)
    promoted: bool = False

    @property
    def passed(self) -> bool:
        """False also when the newest version failed the gate before: it is still not fit to be champion."""
        return self.result.passed if self.result else self.candidate.tags.get(GATE_TAG) != "failed"


def gate_rules(params: Params) -> dict[str, GateRule]:
    """Gate params name metrics as in the final variant's results; MLflow holds them sanitized ('map@10' -> 'map_at_10')."""
    return {sanitize(name): rule for name, rule in params.gate.metrics.items()}


def run_gate(params: Params, version: str | None = None, record: bool = True) -> GateOutcome:
    """Judge `version` (default: the newest, unless already judged) against the champion; if it passes, promote it and
    freeze the dev pairs with it. `record` False (a dry run): judge only, no tag, no promotion, nothing frozen."""
    cfg, model = params.tracking, params.siamese.registered_name(params.retrain.dataset)
    if not getattr(params.datasets.get(params.retrain.dataset), "labels", True):
        raise RetrainError(f"retrain.dataset = {params.retrain.dataset!r} has no labelled pairs (labels: false): its model "
                           f"has no quality figure for the gate to judge; add labelled pairs, or gate a labelled dataset")
    candidate = model_version(cfg, model, version) if version else latest_version(cfg, model)
    if candidate is None:
        raise RetrainError(f"no version of model {model!r} is registered: the training stage registers one "
                           f"(targets: {' '.join(params.retrain.targets)})")
    champion = version_by_alias(cfg, model, CHAMPION)
    judged = candidate.tags.get(GATE_TAG)
    if version is None and (judged or (champion and champion.version == candidate.version)):
        state = "the champion" if champion and champion.version == candidate.version else f"judged before (gate: {judged})"
        return GateOutcome(f"### Quality gate: nothing new\n\n{label(candidate)} is {state}; no newer version was registered.\n",
                           candidate)
    rules, scored, aside = gate_rules(params), None, ""
    if champion is not None:   # both models scored here, on the same trusted pairs: like with like
        scored = gate_basis(params, champion)
        sets = [scored.decide, *([scored.new] if scored.new else [])]
        print(f"==> scoring {label(champion)} and {label(candidate)} on {'; and '.join(p.describe() for p in sets)}", flush=True)
        (baseline, *new_baseline), (figures, *new_figures) = (version_figures(cfg, v, sets, params.evaluation)
                                                              for v in (champion, candidate))
        baseline_label, basis = label(champion), scored.basis()
        if scored.new:
            aside = (f"\n#### New dev pairs: shown, not deciding\n\n{scored.new.describe()}.\n\n"
                     + compare(new_baseline[0], new_figures[0], rules).table())
    else:
        row = params.siamese.final_row(params.dataset(params.retrain.dataset))
        diff = dvc_metrics_diff(params.gate.baseline_rev)
        path = BASELINE_FILE.format(dataset=params.retrain.dataset)
        baseline = {sanitize(key): value for key, value in dvc_baseline(diff, path, f"#{row}.").items()}
        baseline_label, figures = f"`{params.gate.baseline_rev}` (dvc metrics diff)", candidate.metrics
        basis = ("No champion model to score: the figures are those stored with each (the candidate's registration run, "
                 f"{path} on `{params.gate.baseline_rev}`), each measured on the dev pairs of its own run.") if baseline else None
    result = compare(baseline or None, figures, rules)
    markdown = result.markdown(label(candidate), baseline_label if baseline else None, basis) + aside
    if not record:
        return GateOutcome(markdown + "\nDry run: nothing was written to the registry (no tag, no promotion).\n", candidate,
                           result)
    tag_version(cfg, model, candidate.version, {GATE_TAG: "passed" if result.passed else "failed"})
    if result.passed:
        promote(cfg, model, candidate.version)
        markdown += "\n" + freeze(params, candidate, scored.current if scored else None)
    return GateOutcome(markdown, candidate, result, result.passed)


def label(version: ModelVersion) -> str:
    return f"{version.model} v{version.version} (run {version.run_id})"


QueryRoad = Callable[[Params, Path, Path], object]   # (params, the champion's bundle, its index): train, register a version


def retrain(params: Params, query_road: QueryRoad | None = None) -> GateOutcome:
    """The whole loop: tracking server check, dvc pull, training by one of two roads, gate, promote, dvc push (with a
    DVC remote). The query-tower road (`query_road`, the default of `ticketsim retrain`) when the champion has a query
    tower: it trains that alone and registers a version on the champion's index; otherwise, or without `query_road`
    (--full), dvc repro of retrain.targets: both towers trained, the index rebuilt (docs/retraining.md#two-roads)."""
    check_reachable(params.tracking)   # before training: a run must never be trained and then lost
    print(f"==> MLflow tracking {tracking_uri(params.tracking)}: ok", flush=True)
    remote = dvc_remote()
    targets = list(params.retrain.targets)
    if remote:
        dvc("pull", "--allow-missing", "--with-deps", *targets)
    full = query_road is None or not took_query_road(params, query_road)
    if full:
        dvc("repro", *targets)
    outcome = run_gate(params)
    if remote and outcome.promoted and full:    # the query road's version lives in the registry alone
        dvc("push", "--with-deps", *targets)
    return outcome


def took_query_road(params: Params, query_road: QueryRoad) -> bool:
    """Run `query_road` on the champion's bundle and index when the champion has a query tower; False (saying why) when
    there is no champion or its variant has no tower to train alone, and the full road is to be taken."""
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
        query_road(params, Path(loaded.bundle), Path(loaded.index))
    return True


def road_refusal(champion: Any) -> str | None:
    """Why the champion's python model (None: there is none) has no query tower to retrain alone; None when it has."""
    if champion is None:
        return "there is no champion yet"
    if not getattr(champion, "index", None):   # a stand-in's model, or a version registered before the index
        return "its model has no bundle and search index"
    channels = bundle_manifest(Path(champion.bundle))["variant"]["channels"]
    return query_tower_refusal({c for c, w in channels.items() if w})


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


def dvc_metrics_diff(rev: str) -> dict:
    """`dvc metrics diff <rev> --all --json`, or {} when there is nothing to diff against (no git, no such revision)."""
    known = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], capture_output=True, check=False)
    if known.returncode:  # asking git first is instant; DVC would take seconds to say the same
        return {}
    done = subprocess.run([sys.executable, "-m", "dvc", "metrics", "diff", rev, "--all", "--json"],
                          capture_output=True, text=True, check=False)
    try:
        return json.loads(done.stdout) if done.returncode == 0 and done.stdout.strip() else {}
    except json.JSONDecodeError:
        return {}


def write_github(summary: Path | None, outputs: Path | None, outcome: GateOutcome) -> None:
    """Append the gate table to a job summary file and run_id / model_version / gate to an outputs file (GitHub's)."""
    if summary:
        with summary.open("a", encoding="utf-8") as out:
            out.write(outcome.markdown + "\n")
    if outputs:
        with outputs.open("a", encoding="utf-8") as out:
            out.write(f"run_id={outcome.candidate.run_id}\nmodel_version={outcome.candidate.version}\n"
                      f"gate={'passed' if outcome.passed else 'failed'}\n")
