"""The MLflow model registry of `ticketsim retrain`: the champion and previous versions of a registered model are the
aliases CHAMPION and PREVIOUS, and a version's metrics are those of the run that produced it."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlflow
from mlflow.entities.model_registry import RegisteredModel
from mlflow.exceptions import MlflowException

from ticketsim.config import TrackingConfig
from ticketsim.errors import StepError
from ticketsim.lifecycle.tracking import client, tracking_uri

CHAMPION, PREVIOUS = "champion", "previous"


@dataclass(frozen=True)
class ModelVersion:
    """A version of a registered model, its tags, and the metrics (latest value per key) of the run that produced it."""

    model: str
    version: str
    run_id: str
    metrics: dict[str, float]
    tags: dict[str, str]


def aliases(cfg: TrackingConfig, model: str) -> dict[str, str]:
    """alias -> version of a registered model; {} when the model is not registered yet."""
    found = registered_model(client(cfg), model)
    return {alias: str(version) for alias, version in found.aliases.items()} if found else {}


def registered_model(registry: mlflow.MlflowClient, model: str) -> RegisteredModel | None:
    try:
        return registry.get_registered_model(model)
    except MlflowException as error:
        if error.error_code == "RESOURCE_DOES_NOT_EXIST":
            return None
        raise


def model_version(cfg: TrackingConfig, model: str, version: str) -> ModelVersion:
    registry = client(cfg)
    found = registry.get_model_version(model, version)
    metrics = dict(registry.get_run(found.run_id).data.metrics) if found.run_id else {}
    return ModelVersion(model, str(found.version), found.run_id or "", metrics, dict(found.tags))


def version_by_alias(cfg: TrackingConfig, model: str, alias: str) -> ModelVersion | None:
    version = aliases(cfg, model).get(alias)
    return model_version(cfg, model, version) if version else None


def latest_version(cfg: TrackingConfig, model: str) -> ModelVersion | None:
    """The newest version of `model`: the candidate a retraining run has just registered."""
    newest = client(cfg).search_model_versions(f"name = '{model}'", order_by=["version_number DESC"], max_results=1)
    return model_version(cfg, model, str(newest[0].version)) if newest else None


def promote(cfg: TrackingConfig, model: str, version: str) -> str | None:
    """Make `version` the champion; the champion it replaces becomes PREVIOUS (returned), so rollback can restore it."""
    registry, current = client(cfg), aliases(cfg, model)
    demoted = current.get(CHAMPION)
    if demoted == version:
        return None
    registry.set_registered_model_alias(model, CHAMPION, version)
    if demoted:
        registry.set_registered_model_alias(model, PREVIOUS, demoted)
    return demoted


def rollback(cfg: TrackingConfig, model: str) -> tuple[str, str]:
    """Swap CHAMPION and PREVIOUS: the previous champion is restored, the demoted one stays addressable. (restored, demoted)"""
    current = aliases(cfg, model)
    if CHAMPION not in current or PREVIOUS not in current:
        raise LookupError(f"{model}: no {PREVIOUS!r} version to roll back to (aliases: {current or 'none'})")
    registry = client(cfg)
    registry.set_registered_model_alias(model, CHAMPION, current[PREVIOUS])
    registry.set_registered_model_alias(model, PREVIOUS, current[CHAMPION])
    return current[PREVIOUS], current[CHAMPION]


def tag_version(cfg: TrackingConfig, model: str, version: str, tags: Mapping[str, str]) -> None:
    registry = client(cfg)
    for key, value in tags.items():
        registry.set_model_version_tag(model, version, key, value)


def load_version(cfg: TrackingConfig, version: ModelVersion, scratch: Path, why: str) -> Any:
    """A registered version's python model (ticketsim.app.pyfunc.TicketSimModel: its bundle and index folders), downloaded
    into `scratch`; a StepError saying `why` it was wanted when it cannot be fetched or loaded."""
    uri = tracking_uri(cfg)
    try:
        # The version's own artifact address from this registry: a models:/ address would be resolved against the
        # process's global registry URI, which an earlier set_tracking_uri of another store may have left behind.
        source = mlflow.MlflowClient(uri, registry_uri=uri).get_model_version_download_uri(version.model, version.version)
        local = mlflow.artifacts.download_artifacts(source, dst_path=str(scratch), tracking_uri=uri)
        return mlflow.pyfunc.load_model(local).unwrap_python_model()
    except Exception as error:   # noqa: BLE001 - any failure to fetch or load means the version cannot be used
        raise StepError(f"{version.model} v{version.version}: its model could not be loaded from the registry {why} "
                        f"({type(error).__name__}: {error})") from error
