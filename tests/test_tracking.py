"""MLflow tracking: one run per stage run in a SQLite store, with tags, params, metrics and artifacts."""
import mlflow
import pytest

from ticketsim.config import TextConfig, TrackingConfig
from ticketsim.lifecycle.tracking import URI_VARIABLE, log_artifacts, log_methods, log_metrics, stage_run, tracking_uri


def test_stage_run_logs_params_metrics_tags_and_artifacts(tmp_path):
    cfg = TrackingConfig(uri=f"sqlite:///{tmp_path / 'mlflow.db'}", experiment="test", artifact_location=str(tmp_path / "art"))
    report = tmp_path / "report.md"
    report.write_text("| a |\n")
    with stage_run(cfg, "baselines", "tiny", {"text": TextConfig(), "seed": 3}) as run:
        log_metrics({"bm25": {"dev": {"retrieve": {"map@10": 0.5, "mrr@10": float("nan")}}}})
        log_artifacts(report)
    stored = mlflow.MlflowClient(cfg.uri).get_run(run.info.run_id)
    assert stored.info.run_name == "baselines@tiny" and stored.info.status == "FINISHED"
    assert stored.data.tags["stage"] == "baselines" and stored.data.tags["dataset"] == "tiny"
    assert stored.data.tags["git_revision"]
    assert stored.data.params["text.numbers"] == "mask" and stored.data.params["seed"] == "3"
    assert stored.data.metrics == {"bm25.dev.retrieve.map_at_10": 0.5}  # NaN is not logged
    assert (tmp_path / "art").is_dir() and any(p.name == "report.md" for p in (tmp_path / "art").rglob("*"))


def test_a_stage_run_joins_the_experiment_another_process_created_after_it_looked(tmp_path, monkeypatch):
    """Two tune workers start at once on an empty store: both find no experiment, one creates it, the other's create
    fails on the name (PostgreSQL: a unique violation) and it reads the winner's, instead of dying with exit 70."""
    cfg = TrackingConfig(uri=f"sqlite:///{tmp_path / 'mlflow.db'}", experiment="raced", artifact_location=str(tmp_path / "art"))
    with stage_run(cfg, "tune", "tiny") as first:      # the other worker, first to create it
        pass
    looked, found = [], mlflow.get_experiment_by_name

    def first_look_misses(name: str):       # this worker looked before the other created it
        looked.append(name)
        return None if len(looked) == 1 else found(name)

    monkeypatch.setattr(mlflow, "get_experiment_by_name", first_look_misses)
    with stage_run(cfg, "tune", "tiny") as second:
        pass
    assert len(looked) == 2 and second.info.experiment_id == first.info.experiment_id
    monkeypatch.setattr(mlflow, "get_experiment_by_name", lambda name: None)   # a create that fails for another reason
    with pytest.raises(mlflow.exceptions.MlflowException), stage_run(cfg, "tune", "tiny"):
        pass


def test_a_relative_sqlite_uri_is_the_file_in_the_working_directory_each_time(tmp_path, monkeypatch):
    """MLflow keeps one store per URI string in a process: two folders' `sqlite:///mlflow.db` must be two URIs."""
    monkeypatch.delenv(URI_VARIABLE, raising=False)
    cfg = TrackingConfig(uri="sqlite:///mlflow.db", experiment="test", artifact_location=str(tmp_path / "art"))
    runs = {}
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        monkeypatch.chdir(tmp_path / folder)
        assert tracking_uri(cfg) == f"sqlite:///{tmp_path / folder / 'mlflow.db'}"
        with stage_run(cfg, "baselines", folder) as run:
            runs[folder] = run.info.run_id
    for folder, run_id in runs.items():
        found = mlflow.MlflowClient(f"sqlite:///{tmp_path / folder / 'mlflow.db'}").search_runs(["0", "1"])
        assert [r.info.run_id for r in found] == [run_id]
    assert tracking_uri(TrackingConfig(uri="http://host:5000")) == "http://host:5000"


def tiny_corpus(folder):
    """A prepared corpus folder as the prepare stage writes it (Parquet tables + intake.json)."""
    import polars as pl

    folder.mkdir(parents=True)
    pl.DataFrame({"ticket_id": ["t1", "t2"]}).write_parquet(folder / "tickets.parquet")
    pl.DataFrame({"query_id": ["q1"], "ticket_id": ["t1"], "label": [5]}).write_parquet(folder / "pairs.parquet")
    (folder / "intake.json").write_text("{}\n")
    return folder


def test_methods_are_child_runs_with_the_same_keys_and_the_runs_show_their_dataset(tmp_path):
    """The compare view charts a column per key: a method or variant is a tag (and param), never part of a metric key."""
    cfg = TrackingConfig(uri=f"sqlite:///{tmp_path / 'mlflow.db'}", experiment="test", artifact_location=str(tmp_path / "art"))
    corpus = tiny_corpus(tmp_path / "prepared")
    figures = {"dev": {"rerank": {"map": 0.5}, "retrieve": {"mrr@10": 0.25}}, "test": {"rerank": {"map": 0.4}}}
    with stage_run(cfg, "baselines", "tiny", corpus=corpus, raw="data/tiny-raw", context="eval") as run:
        log_methods({"bm25": figures, "source_order": figures, "training": {"seconds": 1}})
    for variant in ("15", "16"):
        with stage_run(cfg, "siamese", "tiny", {"variant": variant}, name=f"siamese#{variant}@tiny",
                       tags={"variant": variant, "method": f"#{variant}"}, corpus=corpus) as trained:
            log_metrics(figures["dev"], prefix="dev")

    store = mlflow.MlflowClient(cfg.uri)
    experiment = store.get_experiment_by_name("test").experiment_id
    parent = store.get_run(run.info.run_id)
    assert parent.data.metrics == {}        # nothing keyed by method on the stage run
    children = store.search_runs([experiment], f"tags.mlflow.parentRunId = '{run.info.run_id}'")
    assert sorted(c.info.run_name for c in children) == ["bm25@tiny", "source_order@tiny"]
    keys = {"dev.rerank.map", "dev.retrieve.mrr_at_10", "test.rerank.map"}
    for child in children:
        assert set(child.data.metrics) == keys and child.data.metrics["dev.rerank.map"] == 0.5
        assert {k: child.data.tags[k] for k in ("stage", "dataset")} == {"stage": "baselines", "dataset": "tiny"}
        assert child.data.tags["method"] == child.data.params["method"] == child.info.run_name.split("@")[0]
        assert child.info.status == "FINISHED"

    siamese = store.search_runs([experiment], "tags.stage = 'siamese' and tags.dataset = 'tiny'")
    assert sorted(r.info.run_name for r in siamese) == ["siamese#15@tiny", "siamese#16@tiny"]
    assert {r.data.tags["variant"] for r in siamese} == {"15", "16"} and all("dev.rerank.map" in r.data.metrics for r in siamese)

    # every run names its dataset: the same name and digest (same files), the context tag saying how it was used
    for found, context in ((parent, "eval"), (children[0], "eval"), (store.get_run(trained.info.run_id), "train")):
        (used,) = found.inputs.dataset_inputs
        assert used.dataset.name == "tiny" and len(used.dataset.digest) == 8
        assert {t.key: t.value for t in used.tags}["mlflow.data.context"] == context
    assert {r.inputs.dataset_inputs[0].dataset.digest for r in [parent, *siamese]} == {parent.inputs.dataset_inputs[0].dataset.digest}
    assert "data/tiny-raw" in parent.inputs.dataset_inputs[0].dataset.source
    assert '"pairs": 1' in parent.inputs.dataset_inputs[0].dataset.profile
    assert not (tmp_path / "art").exists() or not any((tmp_path / "art").rglob("*.parquet"))   # metadata only, no upload

    (corpus / "pairs.parquet").unlink()     # other data, other digest
    with stage_run(cfg, "baselines", "tiny", corpus=corpus) as changed:
        pass
    assert store.get_run(changed.info.run_id).inputs.dataset_inputs[0].dataset.digest != parent.inputs.dataset_inputs[0].dataset.digest
