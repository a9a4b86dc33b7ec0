"""The one place that talks to MLflow: a run per stage run, tagged with stage, dataset and git revision."""
from __future__ import annotations

import dataclasses
import re
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import mlflow

from ticketsim.config import TrackingConfig


@contextmanager
def stage_run(cfg: TrackingConfig, stage: str, dataset: str | None = None,
              params: Mapping[str, Any] | None = None) -> Iterator[mlflow.ActiveRun]:
    """An MLflow run named 'stage@dataset' in the configured experiment, with params logged once."""
    mlflow.set_tracking_uri(cfg.uri)
    experiment = mlflow.get_experiment_by_name(cfg.experiment)
    experiment_id = experiment.experiment_id if experiment else mlflow.create_experiment(
        cfg.experiment, artifact_location=artifact_uri(cfg.artifact_location))
    tags = {"stage": stage, "dataset": dataset or "", "git_revision": git_revision()}
    with mlflow.start_run(experiment_id=experiment_id, run_name=f"{stage}@{dataset}" if dataset else stage, tags=tags) as run:
        if params:
            mlflow.log_params(flatten(params))
        yield run


def log_metrics(metrics: Mapping[str, Any], prefix: str = "") -> None:
    """Nested metric dicts become dotted keys; '@' (not allowed by MLflow) becomes '_at_'; NaN is skipped."""
    flat = {sanitize(k): float(v) for k, v in flatten(metrics, prefix).items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v}
    mlflow.log_metrics(flat)


def log_artifacts(*paths: str | Path) -> None:
    for path in map(Path, paths):
        (mlflow.log_artifacts if path.is_dir() else mlflow.log_artifact)(str(path))


def log_dict(payload: Mapping[str, Any], name: str) -> None:
    mlflow.log_dict(dict(payload), name)


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    if dataclasses.is_dataclass(tree) and not isinstance(tree, type):
        tree = dataclasses.asdict(tree)
    if not isinstance(tree, Mapping):
        return {prefix: tree}
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        flat.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return flat


def sanitize(key: str) -> str:
    return re.sub(r"[^\w\-. :/]", "_", key.replace("@", "_at_"))


def artifact_uri(location: str) -> str:
    return location if "://" in location else Path(location).resolve().as_uri()


def git_revision() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
