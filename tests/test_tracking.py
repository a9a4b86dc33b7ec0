"""MLflow tracking: one run per stage run in a SQLite store, with tags, params, metrics and artifacts."""
import mlflow

from ticketsim.config import TextConfig, TrackingConfig
from ticketsim.tracking import URI_VARIABLE, log_artifacts, log_metrics, stage_run, tracking_uri


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
