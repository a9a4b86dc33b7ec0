"""End to end: `dvc repro` on a copy of the repo with a small synthetic corpus, then metrics and MLflow runs."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import mlflow
import pandas as pd
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]


def run(*args: str, cwd: Path) -> str:
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    done = subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    """The tracked files of the repo (no outputs, no lock: as in a fresh clone) with small params."""
    root = tmp_path_factory.mktemp("clone")
    tracked = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                             capture_output=True, text=True, check=True).stdout.split()
    for name in tracked:
        if (REPO / name).is_file() and not name.startswith(("data/", "metrics/", "plots/", "reports/")) and name != "dvc.lock":
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, root / name)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["synthetic"].update(n_tickets=120, n_labeled_queries=40, n_enduser_queries=8)
    params["datasets"] = {"default": params["datasets"]["default"]}
    # every stage runs, each briefly: the pipeline's wiring is under test here, not the models
    params["embedding"]["word2vec"]["epochs"] = 2
    params["embedding"]["char_blstm"]["epochs"] = 2
    params["topics"].update(n_topics=8, heldout=10)
    params["topics"]["docnade"]["epochs"] = 3
    params["topics"]["lda"].update(passes=2, particles=5)
    params["siamese"]["train"]["epochs"] = 2
    params["tune"].update(n_trials=4, epochs=2)
    params["siamese"]["variants"] = {k: params["siamese"]["variants"][k] for k in ("15", "22")}
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return root


def test_dvc_repro_from_a_fresh_copy_ends_in_metrics_and_mlflow_runs(workspace):
    run("dvc", "repro", cwd=workspace)
    metrics = json.loads(run("dvc", "metrics", "show", "--json", cwd=workspace))
    flat = json.dumps(metrics)
    assert "metrics/default/baselines.json" in flat and "bm25" in flat
    baselines = json.loads((workspace / "metrics/default/baselines.json").read_text())
    assert 0 < baselines["bm25"]["dev"]["rerank"]["map"] <= 1
    assert set(baselines["bm25"]["test"]["retrieve"]) >= {"map@1", "mrr@5", "acc@10"}
    assert (workspace / "plots/default/baselines/dev.png").stat().st_size > 0
    assert "up to date" in run("dvc", "repro", cwd=workspace).lower()  # nothing reruns

    client = mlflow.MlflowClient(f"sqlite:///{workspace / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("ticketsim").experiment_id])
    stages = {r.data.tags["stage"] for r in runs if r.info.status == "FINISHED"}
    assert {"generate", "prepare", "tokenize", "baselines", "siamese#15", "siamese#22", "table5", "register"} <= stages
    table = json.loads((workspace / "metrics/default/table5.json").read_text())
    assert "#22" in table and "bm25" in table and any(k.startswith("T#1 ") for k in table)
    versions = client.search_model_versions("name='ticketsim-siamese-default'")
    assert [str(v.version) for v in versions] == ["1"]
    # the registered model serves texts: one calibrated 1-5 score per query-ticket row
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(f"sqlite:///{workspace / 'mlflow.db'}")
    try:
        served = mlflow.pyfunc.load_model("models:/ticketsim-siamese-default/1")
    finally:
        mlflow.set_tracking_uri(previous)  # the process-wide URI (and MLFLOW_TRACKING_URI) as the next test expects
    requests = pd.DataFrame({"query_subject": ["pump getting hot", "plc wont talk"], "query_description": ["temp 95 C", ""],
                             "ticket_subject": ["Pump overtemperature"] * 2, "ticket_description": ["Bearing alarm E4711."] * 2,
                             "ticket_solution": ["Replaced the bearing."] * 2})
    scores = served.predict(requests)
    assert len(scores) == 2 and all(1 <= s <= 5 for s in scores)
    assert (workspace / "mlartifacts").is_dir()


SEMEVAL_TEST = """<?xml version="1.0" encoding="utf-8"?>
<xml version="1.0">
<OrgQuestion ORGQ_ID="Q1"><OrgQSubject>pump getting hot</OrgQSubject><OrgQBody>pump runs hot since monday</OrgQBody>
<Thread THREAD_SEQUENCE="Q1_R1"><RelQuestion RELQ_ID="Q1_R1" RELQ_RANKING_ORDER="1" RELQ_CATEGORY="c" RELQ_DATE="d"
 RELQ_USERID="u" RELQ_USERNAME="n" RELQ_RELEVANCE2ORGQ="?"><RelQSubject>Pump overtemperature</RelQSubject>
<RelQBody>Bearing temperature alarm on the pump.</RelQBody></RelQuestion>
<RelComment RELC_ID="Q1_R1_C1" RELC_DATE="d" RELC_USERID="u" RELC_USERNAME="n" RELC_RELEVANCE2ORGQ="?" RELC_RELEVANCE2RELQ="?">
<RelCText>Replace the bearing.</RelCText></RelComment></Thread></OrgQuestion>
<OrgQuestion ORGQ_ID="Q1"><OrgQSubject>pump getting hot</OrgQSubject><OrgQBody>pump runs hot since monday</OrgQBody>
<Thread THREAD_SEQUENCE="Q1_R2"><RelQuestion RELQ_ID="Q1_R2" RELQ_RANKING_ORDER="2" RELQ_CATEGORY="c" RELQ_DATE="d"
 RELQ_USERID="u" RELQ_USERNAME="n" RELQ_RELEVANCE2ORGQ="?"><RelQSubject>PLC offline</RelQSubject>
<RelQBody>Communication loss to the PLC.</RelQBody></RelQuestion></Thread></OrgQuestion>
</xml>
"""


def test_a_registered_bundle_evaluates_an_external_semeval_file_with_a_gold_file(workspace, tmp_path, monkeypatch):
    from ticketsim.cli import main

    if not (workspace / "models/default/bundle/manifest.json").exists():
        run("dvc", "repro", cwd=workspace)
    (tmp_path / "test.xml").write_text(SEMEVAL_TEST)
    (tmp_path / "test.relevancy").write_text("Q1\tQ1_R1\t1\t1.0\ttrue\nQ1\tQ1_R2\t2\t0.5\tfalse\n")
    monkeypatch.chdir(workspace)
    code = main(["evaluate", "--model", "models/default/bundle", "--semeval", str(tmp_path / "test.xml"),
                 "--gold", str(tmp_path / "test.relevancy"), "--out", str(tmp_path / "m.json"),
                 "--predictions", str(tmp_path / "pred.tsv")])
    assert code == 0
    results = json.loads((tmp_path / "m.json").read_text())
    assert set(results["test"]) == {"rerank", "retrieve", "similarity"}
    lines = [line.split("\t") for line in (tmp_path / "pred.tsv").read_text().splitlines()]
    assert [(q, r, rank) for q, r, rank, _, _ in lines] == [("Q1", "Q1_R1", "0"), ("Q1", "Q1_R2", "0")]
    assert all(float(score) > 0 and label in ("true", "false") for *_, score, label in lines)
