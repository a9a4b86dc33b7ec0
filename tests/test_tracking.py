"""MLflow tracking: one run per stage run in a SQLite store, with tags, params, metrics and artifacts."""
import mlflow

from ticketsim.config import TextConfig, TrackingConfig
from ticketsim.tracking import log_artifacts, log_metrics, stage_run


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
