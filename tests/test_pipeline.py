"""End to end: `dvc repro` on a bare clone of the repo (conftest's repro_workspace), then metrics and MLflow runs."""
import json

import mlflow
import pandas as pd
import polars as pl
import pytest
import yaml
from benchmarks.common import SMALL_ROWS
from conftest import run

from ticketsim.config import load_params
from ticketsim.training.comparators import title

pytestmark = pytest.mark.slow   # the session's bare-clone `dvc repro` (minutes)


def test_dvc_repro_on_a_bare_clone_ends_in_metrics_and_mlflow_runs(repro_workspace):
    metrics = json.loads(run("dvc", "metrics", "show", "--json", cwd=repro_workspace).stdout)
    flat = json.dumps(metrics)
    assert "metrics/default/rows/baselines.json" in flat and "bm25" in flat
    baselines = json.loads((repro_workspace / "metrics/default/rows/baselines.json").read_text())
    assert 0 < baselines["bm25"]["dev"]["rerank"]["map"] <= 1
    assert set(baselines["bm25"]["test"]["retrieve"]) >= {"map@1", "mrr@5", "acc@10"}
    assert (repro_workspace / "plots/default/rows/baselines/dev.png").stat().st_size > 0
    again = run("dvc", "repro", cwd=repro_workspace).stdout   # only the raw-file check runs; nothing changed, nothing else
    assert [line for line in again.splitlines() if line.startswith("Running stage")] == ["Running stage 'sources@default':"]

    client = mlflow.MlflowClient(f"sqlite:///{repro_workspace / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("ticketsim").experiment_id])
    stages = {r.data.tags.get("stage") for r in runs if r.info.status == "FINISHED"}
    assert {"prepare", "embedding", "topics", "baselines", "rows_E", "siamese", "tune", "final", "table5", "index", "register"} <= stages
    # one key per figure in every run of a stage: the variant or method is a tag, so the compare view has one column
    siamese = client.search_runs([runs[0].info.experiment_id], "tags.stage = 'siamese' and tags.dataset = 'default'")
    cfg = yaml.safe_load((repro_workspace / "params.yaml").read_text())["siamese"]
    final, reference = cfg["final"], cfg["unlabelled"]      # the reference is kept: select compares it (conftest)
    assert sorted((r.info.run_name, r.data.tags["variant"], r.data.params["variant"]) for r in siamese) == sorted(
        (f"siamese#{row}@default", row, row) for row in dict.fromkeys((*SMALL_ROWS, final, reference)))
    assert all(0 <= r.data.metrics["dev.rerank.map"] <= 1 for r in siamese)
    assert all("train_loss" in r.data.metrics for r in siamese if r.data.tags["variant"] != reference)   # it trains nothing
    # the contrastive adapter's L is fused after its contrastive phase: that phase's losses are logged apart
    adapter, = [r for r in siamese if r.data.tags["variant"] == "Ac+L-relpos"]
    assert {"train_loss", "fuse_train_loss", "fuse_dev_loss"} <= set(adapter.data.metrics)
    params = load_params(repro_workspace / "params.yaml")
    models = params.comparators.models
    comparators = client.search_runs([runs[0].info.experiment_id], "tags.stage = 'comparators' and tags.dataset = 'default'")
    assert sorted((r.data.tags["model"], r.data.tags["method"]) for r in comparators) == sorted((m, title(m)) for m in models)
    assert all(r.info.status == "FINISHED" and "dev.retrieve.map_at_10" in r.data.metrics and "dev_loss" in r.data.metrics
               for r in comparators)
    for model in models:   # the siamese metrics format: method -> split -> protocol over seeds, each seed's training
        figures = json.loads((repro_workspace / f"metrics/default/comparators/{model}.json").read_text())
        assert set(figures) == {title(model), "sd", "seeds", "training", "block"}
        assert {"rerank", "retrieve"} <= set(figures[title(model)]["dev"]) and figures["block"] == "comparators"
        assert [run["seed"] for run in figures["seeds"]] == list(params.evaluation.seeds)
        assert {"best_dev_loss", "label_variance", "learns", "seconds", "parameters"} <= set(figures["seeds"][0]["training"])
    assert not [k for r in runs for k in r.data.metrics if k.startswith(("_", "#", "bm25", "E#", "T#"))]
    table5_run, = [r for r in runs if r.data.tags.get("stage") == "table5" and "mlflow.parentRunId" not in r.data.tags]
    methods = {r.data.tags["method"]: r for r in runs if r.data.tags.get("mlflow.parentRunId") == table5_run.info.run_id}
    final_row = f"#{params.siamese.final_row(params.dataset('default'))}"   # #<final>-tuned, or #<final> where none is tuned
    assert {"#15", "#22", f"#{final}", final_row, "bm25"} <= set(methods) and any(m.startswith("T#1 ") for m in methods)
    assert methods[f"#{final}"].data.params["block"] == "beyond the paper" and methods["#22"].data.params["block"] == "the paper"
    assert all("dev.rerank.map" in r.data.metrics for r in methods.values()) and "dev.retrieve.mrr_at_10" in methods["bm25"].data.metrics
    # every run names its dataset (the Dataset column): the prepared corpus, one digest for the whole pipeline
    datasets = {(d.dataset.name, d.dataset.digest) for r in runs for d in r.inputs.dataset_inputs}
    assert len(datasets) == 1 and next(iter(datasets))[0] == "default"
    table = json.loads((repro_workspace / "metrics/default/table5.json").read_text())
    assert "#22" in table and "bm25" in table and any(k.startswith("T#1 ") for k in table) and "S#14 sub+desc-sub+desc+sol l1" in table
    dev_table = (repro_workspace / "reports/default/table5/dev.md").read_text()
    order = [dev_table.index(row) for row in ("**the paper**", "| #22 |", "**beyond the paper**", f"| **{final_row}** (registered) |")]
    assert order == sorted(order) and f"Registered: `{final_row}` (siamese.final), chosen by CV retrieve MRR@10" in dev_table
    assert " ± " in dev_table.split("| #22 |")[1].splitlines()[0] and "#22" in table["sd"]   # trained over seeds
    assert "| #22 |" in (repro_workspace / "reports/default/table5/claims.md").read_text()
    versions = client.search_model_versions("name='ticketsim-siamese-default'")
    assert [str(v.version) for v in versions] == ["1"]
    # the registered model serves texts: one calibrated 1-5 score per query-ticket row
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(f"sqlite:///{repro_workspace / 'mlflow.db'}")
    try:
        served = mlflow.pyfunc.load_model("models:/ticketsim-siamese-default/1")
    finally:
        mlflow.set_tracking_uri(previous)  # the process-wide URI (and MLFLOW_TRACKING_URI) as the next test expects
    requests = pd.DataFrame({"query_subject": ["pump getting hot", "plc wont talk"], "query_description": ["temp 95 C", ""],
                             "ticket_subject": ["Pump overtemperature"] * 2, "ticket_description": ["Bearing alarm E4711."] * 2,
                             "ticket_solution": ["Replaced the bearing."] * 2})
    scores = served.predict(requests)
    assert len(scores) == 2 and all(1 <= s <= 5 for s in scores)
    assert (repro_workspace / "mlartifacts").is_dir()


def test_ticketsim_select_cross_validates_on_the_pipelines_files_and_never_reads_a_test_query(repro_workspace, tmp_path):
    out = tmp_path / "select.json"
    run("ticketsim.cli", "select", "--workspace", str(repro_workspace), "--dataset", "default", "--variants", "Ac+L-relpos", "15",
        "--folds", "3", "--seeds", "1", "--epochs", "1", "--baselines", "--out", str(out), cwd=tmp_path)
    report = json.loads(out.read_text())
    assert list(report["configurations"])[:2] == ["Ac+L-relpos", "15"] and "BM25" in report["configurations"]
    pairs = pl.read_parquet(repro_workspace / "data/default/prepared/pairs.parquet")
    chosen_on = set(pairs.filter(pl.col("split").is_in(["train", "dev"]))["query_id"])
    for name, figures in report["configurations"].items():
        assert set(figures["query_ap"]) <= chosen_on and figures["cv_map"]["values"], name   # CV over train + dev only
    assert {(t["a"], t["b"]) for t in report["tests"]} >= {("15", "Ac+L-relpos"), ("Ac+L-relpos", "BM25")}
    # retrieval decides on this dataset: every configuration's held-out queries searched the whole base too
    assert report["decides"] == "retrieve" and report["judgement"]["decides"] == "retrieve"
    assert all(0 <= f["cv_retrieve"]["mrr"]["mean"] <= 1 and set(f["query_rr"]) <= chosen_on
               for f in report["configurations"].values())
    # and MLflow has it: a select run (cwd's mlflow.db, as params' relative tracking.uri reads), a child per configuration
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    [selected] = [r for r in client.search_runs([e.experiment_id for e in client.search_experiments()], "tags.stage = 'select'")
                  if "mlflow.parentRunId" not in r.data.tags]
    children = client.search_runs([selected.info.experiment_id], f"tags.mlflow.parentRunId = '{selected.info.run_id}'")
    assert {c.data.tags["method"] for c in children} == set(report["configurations"])
    assert all("cv.retrieve.mrr_at_10" in c.data.metrics for c in children if c.data.tags["method"] != "source order")



def test_ticketsim_curve_trains_on_judged_queries_of_train_and_dev_and_writes_its_table_json_and_png(repro_workspace, tmp_path):
    out, png = tmp_path / "curve.json", tmp_path / "curve.png"
    done = run("ticketsim.cli", "curve", "--workspace", str(repro_workspace), "--dataset", "default", "--variants", "Ac+L-relpos",
               "--sizes", "5", "1000", "all", "--seeds", "1", "--folds", "3", "--epochs", "1", "--out", str(out),
               "--plot", str(png), "--no-mlflow", cwd=tmp_path)
    report = json.loads(out.read_text())
    assert report["sizes"] == ["5", "all"] and report["skipped"] == ["1000"] and "| Ac+L-relpos | 5 |" in done.stdout
    pairs = pl.read_parquet(repro_workspace / "data/default/prepared/pairs.parquet")
    chosen_on = set(pairs.filter(pl.col("split").is_in(["train", "dev"]))["query_id"])
    assert set(report["curves"]["Ac+L-relpos"][0]["query_ap"]) == chosen_on
    assert {"BM25", "S#14 zero-shot (cosine)"} == set(report["lines"])
    assert png.read_bytes()[:4] == b"\x89PNG"
    refused = run("ticketsim.cli", "curve", "--workspace", str(repro_workspace), "--dataset", "default", "--variants", "nope",
                  cwd=tmp_path, check=False)
    assert refused.returncode == 2 and "--variants nope: not in siamese.variants" in refused.stderr

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


def test_a_registered_bundle_evaluates_an_external_semeval_file_with_a_gold_file(repro_workspace, tmp_path, monkeypatch):
    from ticketsim.cli import main

    (tmp_path / "test.xml").write_text(SEMEVAL_TEST)
    (tmp_path / "test.relevancy").write_text("Q1\tQ1_R1\t1\t1.0\ttrue\nQ1\tQ1_R2\t2\t0.5\tfalse\n")
    monkeypatch.chdir(repro_workspace)
    code = main(["evaluate", "--model", "models/default/bundle", "--semeval", str(tmp_path / "test.xml"),
                 "--gold", str(tmp_path / "test.relevancy"), "--out", str(tmp_path / "m.json"),
                 "--predictions", str(tmp_path / "pred.tsv")])
    assert code == 0
    results = json.loads((tmp_path / "m.json").read_text())
    assert set(results["test"]) == {"rerank", "retrieve", "similarity"}
    lines = [line.split("\t") for line in (tmp_path / "pred.tsv").read_text().splitlines()]
    assert [(q, r, rank) for q, r, rank, _, _ in lines] == [("Q1", "Q1_R1", "0"), ("Q1", "Q1_R2", "0")]
    assert all(float(score) > 0 and label in ("true", "false") for *_, score, label in lines)


def test_a_dataset_whose_files_are_missing_stops_dvc_repro_with_one_line_naming_the_param(repro_workspace):
    params_file = repro_workspace / "params.yaml"
    original = params_file.read_text()
    params = yaml.safe_load(original)
    params["datasets"]["semeval"] = {"source": "semeval2016", "raw": "../shared/data/semeval2016-task3"}
    try:
        params_file.write_text(yaml.safe_dump(params, sort_keys=False))
        done = run("dvc", "repro", "sources@semeval", cwd=repro_workspace, check=False)
    finally:
        params_file.write_text(original)
    output = done.stdout + done.stderr
    ours = [line for line in output.splitlines() if "datasets.semeval.raw" in line]
    assert done.returncode != 0 and "Traceback" not in output and len(ours) == 1, output
    assert "SemEval2016-Task3-CQA-QL-dev.xml" in ours[0] and "set datasets.semeval.raw to the folder" in ours[0]
    assert not (repro_workspace / "data/semeval").exists()
