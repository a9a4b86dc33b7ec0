"""A throwaway repo for the retraining tests, where `ticketsim` runs as a user would run it.

It holds this repo's pipeline (params.yaml, dvc.yaml, stages/, src/ for the stage dependencies), a tiny labelled CSV
dataset under DVC (`dvc add`) with a local DVC remote, all committed to git, and two batches of new labelled pairs
from the same synthetic generator: one with its true labels, one with its labels shuffled.
"""
from __future__ import annotations

import io
import os
import random
import shutil
import subprocess
import sys
from contextlib import chdir, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import polars as pl
import yaml
from retrain_standin import FixedFigures, register

from ticketsim.cli import main
from ticketsim.config import Params, SyntheticConfig
from ticketsim.data.csvsource import write_corpus
from ticketsim.data.synthetic import generate
from ticketsim.data.tables import Corpus
from ticketsim.lifecycle.tracking import URI_VARIABLE, log_metrics, stage_run

REPO = Path(__file__).resolve().parents[1]
STANDIN = "standin"     # the stand-in for the Siamese stage (tests/retrain_standin.py)


@dataclass(frozen=True)
class Deal:
    """The generator's settings and how its labelled queries are dealt: to the folder at first, then in two batches."""
    synthetic: SyntheticConfig = SyntheticConfig(n_tickets=120, n_labeled_queries=100, n_enduser_queries=8,
                                                          n_lay_queries=0)
    initial: int = 40
    good: int = 30
    shuffled: int = 30


@dataclass(frozen=True)
class Command:
    returncode: int
    stdout: str
    stderr: str


@dataclass(frozen=True)
class Workspace:
    root: Path
    good: Path          # a batch with true labels
    shuffled: Path      # a batch whose labels are shuffled among its rows
    remote: Path        # the DVC remote
    env: dict[str, str]

    def ticketsim(self, *args: str) -> Command:
        """`ticketsim ...` run in the workspace with its environment: the command's own main(), in this process
        (importing MLflow once instead of per command keeps the tests fast); DVC's output is not captured."""
        out, err = io.StringIO(), io.StringIO()
        with chdir(self.root), mock.patch.dict(os.environ, self.env, clear=True), redirect_stdout(out), redirect_stderr(err):
            code = main(list(args))
        return Command(code, out.getvalue(), err.getvalue())

    def params(self) -> dict:
        return yaml.safe_load((self.root / "params.yaml").read_text())


def run(args: list[str], cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def make_workspace(root: Path, tracking_uri: str | None = None, params: dict | None = None, remote: bool = True,
                   deal: Deal = Deal()) -> Workspace:
    """The workspace in `root`; `tracking_uri` goes in TICKETSIM_TRACKING_URI (else params' SQLite file in `root`).

    `remote`: the default DVC remote is a folder beside `root` (else there is none, so retrain neither pulls nor pushes).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", URI_VARIABLE))}
    env.update(DVC_NO_ANALYTICS="1", GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t", **({URI_VARIABLE: tracking_uri} if tracking_uri else {}))
    for folder in ("src", "stages"):
        shutil.copytree(REPO / folder, root / folder, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("params.yaml", "params-research.yaml", "dvc.yaml", "channels.yaml", "workspace.yaml", ".dvcignore", ".dvc/config",
                 ".dvc/.gitignore"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, root / name)
    shutil.copy2(REPO / "tests" / "retrain_standin.py", root / "stages" / f"{STANDIN}.py")

    full = generate(deal.synthetic, seed=13)
    labelled = full.pairs.filter(pl.col("split") != "test")["query_id"].unique(maintain_order=True).to_list()
    assert len(labelled) >= deal.initial + deal.good + deal.shuffled, "the generator made too few labelled queries"
    good_end = deal.initial + deal.good
    keep = set(labelled[:deal.initial]) | set(full.pairs.filter(pl.col("split") == "test")["query_id"])
    write_corpus(Corpus(full.tickets, full.queries.filter(pl.col("query_id").is_in(keep)),
                        full.pairs.filter(pl.col("query_id").is_in(keep))), root / "data" / "labeled")
    full.pairs.select("query_id", "ticket_id", "label").write_csv(root / "reference.csv")
    good = batch(full, labelled[deal.initial:good_end], root / "batches" / "good.csv", shuffle=False)
    shuffled = batch(full, labelled[good_end:good_end + deal.shuffled], root / "batches" / "shuffled.csv", shuffle=True)

    settings = yaml.safe_load((root / "params.yaml").read_text())
    settings["datasets"] = {"default": {"source": "csv", "raw": "data/labeled"}}
    settings["gate"] = {"metrics": {"dev.rerank.map": {"direction": "max", "tolerance": 0.01},
                                    "dev.similarity.mse": {"direction": "min", "tolerance": 0.05}}}
    settings["retrain"] = {"targets": [STANDIN], "dataset": "default"}
    merge(settings, params or {})
    (root / "params.yaml").write_text(yaml.safe_dump(settings, sort_keys=False))
    pipeline = yaml.safe_load((root / "dvc.yaml").read_text())
    metrics = f"metrics/default/{STANDIN}.json"   # not the siamese stage's file: dvc.yaml keeps that stage
    pipeline["stages"][STANDIN] = {
        "cmd": f"python stages/{STANDIN}.py default --reference reference.csv --metrics {metrics}",
        "deps": [f"stages/{STANDIN}.py", "reference.csv", "data/labeled"],
        "metrics": [{metrics: {"cache": False}}],
    }
    (root / "dvc.yaml").write_text(yaml.safe_dump(pipeline, sort_keys=False))

    storage = root.parent / f"{root.name}-dvc-remote"
    dvc = [sys.executable, "-m", "dvc"]
    for command in (["git", "init", "-q", "-b", "main"],
                    [*dvc, "remote", "modify", "local", "url", str(storage)] if remote else [*dvc, "remote", "remove", "local"],
                    [*dvc, "add", "-q", "data/labeled"], ["git", "add", "-A"], ["git", "commit", "-q", "-m", "labelled data under DVC"],
                    *([[*dvc, "push", "-q"]] if remote else [])):
        run(command, root, env)
    return Workspace(root, good, shuffled, storage, env)


def merge(into: dict, changes: dict) -> None:
    """Nested dicts of `changes` update those of `into` key by key; other values replace."""
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = value


def batch(full: Corpus, query_ids: list[str], path: Path, shuffle: bool) -> Path:
    """New pairs as a labeller sends them: query id and text (new queries), ticket id, label as YES/REL/NO."""
    names = {value: name for name, value in (("YES", 5), ("REL", 3), ("NO", 1))}
    rows = (full.pairs.filter(pl.col("query_id").is_in(query_ids)).join(full.queries, on="query_id", maintain_order="left")
            .select("query_id", "subject", "description", "ticket_id", pl.col("label").replace_strict(names, return_dtype=pl.String)))
    if shuffle:
        labels = rows["label"].to_list()
        random.Random(7).shuffle(labels)
        rows = rows.with_columns(label=pl.Series(labels))
    path.parent.mkdir(parents=True, exist_ok=True)
    rows.write_csv(path)
    return path


def fake_version(params: Params, ranking: float, mse: float = 1.0, retrieve_map: float = 0.5, pearson: float = 0.3) -> str:
    """A model version as the register stage leaves one: a run with the final variant's results, registered, whose model
    gives the same results on any pairs (the gate scores it). `ranking`: its rerank MAP and retrieve MRR@10 and
    nDCG@10, what makes one version better than another here."""
    figures = {"dev": {"rerank": {"map": ranking}, "similarity": {"mse": mse, "pearson": pearson},
                       "retrieve": {"mrr@10": ranking, "map@10": retrieve_map, "ndcg@10": ranking}}}
    with stage_run(params.tracking, "register", params.retrain.dataset):
        log_metrics(figures)
        return register(params.siamese.registered_name(params.retrain.dataset), FixedFigures(figures))
