"""`ticketsim retrain` end to end in a throwaway repo: good labels -> the gate passes and the champion moves; shuffled
labels -> the gate fails and the champion stays; rollback restores the earlier champion.

The loop runs against a stand-in for the Siamese stage (tests/retrain_standin.py: same seam, seconds instead of
minutes) and against the real pipeline up to its register stage (~12 minutes on 2 cores: three full retrains).
"""
from pathlib import Path

import mlflow
import pytest
import yaml
from retrain_workspace import Deal, Workspace, make_workspace

from ticketsim.config import SyntheticConfig
from ticketsim.tracking import CHAMPION, PREVIOUS, URI_VARIABLE

REPO = Path(__file__).resolve().parents[1]
REGISTER_STAGE = "register" in (yaml.safe_load((REPO / "dvc.yaml").read_text()).get("stages") or {})
# The real pipeline (retrain.targets: register@default and all it depends on) on a small corpus with 6 candidates per
# query: 80 labelled queries, then 80 with true labels, then 120 whose labels are shuffled. Embeddings and the Siamese
# model keep their defaults (the model must learn from the labels for them to matter); topics shrink to the corpus;
# the Optuna search is off. The gate watches what shuffled labels break: the correlation of scores with the labels.
REAL_DEAL = Deal(SyntheticConfig(n_tickets=150, n_labeled_queries=300, pairs_per_query=6, n_enduser_queries=8),
                 initial=80, good=80, shuffled=120)
REAL_PIPELINE = {
    "retrain": {"targets": ["register@default"], "dataset": "default"},
    "topics": {"n_topics": 20, "heldout": 10, "vocabulary": {"min_documents": 2}},
    "tune": {"enabled": False},
    "gate": {"metrics": {"dev.rerank.map": {"direction": "max", "tolerance": 0.02},
                         "dev.similarity.pearson": {"direction": "max", "tolerance": 0.03},
                         "dev.similarity.mse": {"direction": "min", "tolerance": 0.05}}},
}


def registry(ws: Workspace) -> tuple[mlflow.MlflowClient, str]:
    params = ws.params()
    uri = ws.env.get(URI_VARIABLE) or f"sqlite:///{ws.root / 'mlflow.db'}"
    return mlflow.MlflowClient(uri, uri), f"{params['siamese']['registered_model']}-{params['retrain']['dataset']}"


def aliases(ws: Workspace) -> dict[str, str]:
    client, model = registry(ws)
    return {alias: str(version) for alias, version in client.get_registered_model(model).aliases.items()}


def retrain(ws: Workspace, expect: int) -> str:
    done = ws.ticketsim("retrain", "--summary", "summary.md", "--outputs", "outputs.txt")
    assert done.returncode == expect, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def run_the_loop(ws: Workspace) -> None:
    first = retrain(ws, 0)
    assert "first model" in first and "==> dvc repro" in first and aliases(ws) == {CHAMPION: "1"}

    added = ws.ticketsim("pairs", "add", str(ws.good))
    assert added.returncode == 0 and "added from" in added.stdout, added.stderr
    second = retrain(ws, 0)
    assert "### Quality gate passed" in second and "vs champion" in second
    assert aliases(ws) == {CHAMPION: "2", PREVIOUS: "1"}
    assert "mlflow_run_id: " in second and "model_version: 2" in second
    outputs = (ws.root / "outputs.txt").read_text()
    assert "model_version=2\n" in outputs and "gate=passed\n" in outputs
    assert (ws.root / "summary.md").read_text().count("| metric | champion | candidate | delta | verdict |") == 2

    assert ws.ticketsim("pairs", "add", str(ws.shuffled)).returncode == 0
    third = retrain(ws, 1)
    assert "### Quality gate FAILED" in third and "**worse**" in third
    assert aliases(ws) == {CHAMPION: "2", PREVIOUS: "1"}                  # the champion stays
    client, model = registry(ws)
    assert client.get_model_version(model, "3").tags["gate"] == "failed"

    back = ws.ticketsim("rollback")
    assert back.returncode == 0 and "champion is v1 again" in back.stdout
    assert aliases(ws) == {CHAMPION: "1", PREVIOUS: "2"}
    assert any(ws.remote.rglob("*")), "dvc push sent nothing to the remote"


def test_retrain_loop_with_the_standin_stage(tmp_path):
    run_the_loop(make_workspace(tmp_path / "repo"))


@pytest.mark.skipif(not REGISTER_STAGE, reason="needs the pipeline's register stage (no `register` stage in dvc.yaml)")
def test_retrain_loop_with_the_siamese_pipeline(tmp_path):
    ws = make_workspace(tmp_path / "repo", params=REAL_PIPELINE, deal=REAL_DEAL)
    run_the_loop(ws)
    print((ws.root / "summary.md").read_text())     # the three gate tables, for the log (pytest -s)
