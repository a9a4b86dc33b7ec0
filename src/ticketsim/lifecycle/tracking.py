"""MLflow runs: a run per stage run, tagged with stage, dataset and git revision, its params, metrics, artifacts and
dataset input; child runs (methods, tuning trials); and where the runs are (the tracking URI, a server that answers).
The model registry is ticketsim.lifecycle.registry's."""
from __future__ import annotations

import dataclasses
import os
import re
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import mlflow
from mlflow.exceptions import MlflowException

from ticketsim.config import TrackingConfig, Workspace
from ticketsim.errors import StepError


@contextmanager
def stage_run(cfg: TrackingConfig, stage: str, dataset: str | None = None, params: Mapping[str, Any] | None = None, *,
              name: str | None = None, tags: Mapping[str, str] | None = None, corpus: str | Path | None = None,
              raw: str | None = None, context: str = "train") -> Iterator[mlflow.ActiveRun]:
    """An MLflow run of one stage run in the configured experiment: tags stage, dataset, git revision (and `tags`), params
    logged once, and the dataset's prepared corpus as the run's input (the Dataset column of the MLflow UI).

    The stage tag is the stage alone (`siamese`, never `siamese#15`): a variant, method or configuration is a tag and a
    param, never part of a metric key, so every run of a stage logs a figure under one key (`dev.rerank.map`) and the
    compare view charts one column for all of them. `name` (default 'stage@dataset') may say more: 'siamese#15@default'.
    `corpus`: the prepared folder (default: the dataset's, config.workspace, relative to where dvc runs every stage);
    `raw`: the raw files it was prepared from (the input's source);
    `context`: how the run uses it, "train" (fits something to it) or "eval" (only scores it).
    """
    uri = tracking_uri(cfg)
    mlflow.set_tracking_uri(uri)
    experiment_id = experiment_of(cfg, uri)
    run_tags = {"stage": stage, "dataset": dataset or "", "git_revision": git_revision(), **(tags or {})}
    run_name = name or (f"{stage}@{dataset}" if dataset else stage)
    with mlflow.start_run(experiment_id=experiment_id, run_name=run_name, tags=run_tags) as run:
        if params:
            mlflow.log_params({sanitize(k): v for k, v in flatten(params).items()})
        folder = Path(corpus) if corpus else Workspace(dataset).corpus if dataset else None
        # What the run found when it started; a run that finds none (prepare, whose old output DVC removed) logs what it wrote.
        logged = folder is not None and log_corpus(dataset, folder, raw, context)
        yield run
        if folder is not None and not logged:
            log_corpus(dataset, folder, raw, context)


def experiment_of(cfg: TrackingConfig, uri: str) -> str:
    """The configured experiment's id, created if missing: by whichever of several processes starting at once (tune
    workers on one database) gets there first, the others then reading it."""
    experiment = mlflow.get_experiment_by_name(cfg.experiment)
    if experiment:
        return experiment.experiment_id
    try:    # a tracking server keeps artifacts where it is configured to; a local path would exist only on this machine
        return mlflow.create_experiment(cfg.experiment, artifact_location=None if is_server(uri) else artifact_uri(cfg.artifact_location))
    except MlflowException:
        if experiment := mlflow.get_experiment_by_name(cfg.experiment):     # another process created it meanwhile
            return experiment.experiment_id
        raise


def metric_values(metrics: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """Nested metric dicts as MLflow metrics: dotted keys, '@' (not allowed by MLflow) as '_at_', NaN and non-numbers skipped."""
    return {sanitize(k): float(v) for k, v in flatten(metrics, prefix).items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v}


def log_metrics(metrics: Mapping[str, Any], prefix: str = "", step: int | None = None) -> None:
    """Nested metric dicts become dotted keys; '@' (not allowed by MLflow) becomes '_at_'; NaN is skipped.

    `step` (an epoch, say) makes a metric that changes over time one stepped series instead of many keys. Keys name the
    figure only (`dev.rerank.map`): the method or variant that produced it is the run's tag (see stage_run); a stage
    that scores several methods logs each in a child run of its own (log_methods).
    """
    mlflow.log_metrics(metric_values(metrics, prefix), step=step)


def log_methods(results: Mapping[str, Mapping[str, Any]], params: Mapping[str, Mapping[str, Any]] | None = None,
                skip: tuple[str, ...] = ("training",)) -> dict[str, str]:
    """One run per method of `results` (method -> split -> protocol -> measure), nested under the active stage run.

    A stage that evaluates several methods in one process (baselines: bm25 and source_order; rows_E: one per Table 5
    row; table5: all of them) logs each method's figures under identical keys (`dev.rerank.map`, `test.retrieve.mrr_at_10`)
    in its own child run, tagged stage, dataset and method (also a param, with `params[method]`), with the stage run's
    dataset input: selecting the children and pressing Compare charts one column per figure. Returns method -> run id.
    """
    import time

    from mlflow.entities import Metric, Param
    from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID

    active = mlflow.active_run()
    if active is None:
        raise RuntimeError("log_methods needs an active stage run (inside `with stage_run(...)`)")
    registry = mlflow.MlflowClient(mlflow.get_tracking_uri())
    parent = registry.get_run(active.info.run_id)
    inherited = {key: parent.data.tags.get(key, "") for key in ("stage", "dataset", "git_revision")}
    dataset, now, runs = inherited["dataset"], int(time.time() * 1000), {}
    for order, (method, figures) in enumerate((m, f) for m, f in results.items() if m not in skip):
        tags = {**inherited, "method": method, MLFLOW_PARENT_RUN_ID: parent.info.run_id}
        started = now - order   # the UI lists runs newest first: this keeps the results' order
        child = registry.create_run(parent.info.experiment_id, start_time=started, tags=tags,
                                    run_name=f"{method}@{dataset}" if dataset else method)
        run_id = child.info.run_id
        logged = {"method": method, **flatten((params or {}).get(method, {}))}
        registry.log_batch(run_id, metrics=[Metric(k, v, now, 0) for k, v in metric_values(figures).items()],
                           params=[Param(sanitize(k), str(v)) for k, v in logged.items()])
        if parent.inputs and parent.inputs.dataset_inputs:
            registry.log_inputs(run_id, datasets=list(parent.inputs.dataset_inputs))
        registry.set_terminated(run_id, end_time=started)
        runs[method] = run_id
    return runs


def log_corpus(dataset: str | None, folder: str | Path, raw: str | None = None, context: str = "train") -> bool:
    """The prepared corpus in `folder` as the active run's input: name = dataset, digest = a hash of its files, source =
    the raw files (else the folder). Metadata only: nothing is uploaded. False (nothing logged) when the folder is empty.
    """
    found = corpus_dataset(dataset or Path(folder).name, folder, raw)
    if found is None:
        return False
    try:
        mlflow.log_input(found, context=context)
    except MlflowException:
        # Runs that start at once (tuning workers on several machines) race to create the experiment's dataset row:
        # MLflow looks it up, then inserts it, and the loser's insert breaks the unique key. Now it finds the row.
        mlflow.log_input(found, context=context)
    return True


def corpus_dataset(name: str, folder: str | Path, raw: str | None = None):
    """A MetaDataset (an mlflow.data.Dataset without the data) of a prepared corpus folder, with the row count of each
    Parquet table as its profile; None when the folder holds no files.
    """
    import hashlib
    import json
    import warnings

    from mlflow.data.dataset_source_registry import resolve_dataset_source
    from mlflow.data.meta_dataset import MetaDataset

    folder = Path(folder)
    files = sorted(p for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []
    if not files:
        return None
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
        with path.open("rb") as stream:
            while block := stream.read(1 << 20):
                digest.update(block)
    profile = parquet_rows(files)

    class CorpusDataset(MetaDataset):
        @property
        def profile(self) -> dict:
            return profile

        def to_dict(self) -> dict[str, str]:
            return {**super().to_dict(), "profile": json.dumps(profile)}

    with warnings.catch_warnings():   # a local path matches two registered local sources: the same class, harmless
        warnings.simplefilter("ignore")
        try:
            source = resolve_dataset_source(str(raw if raw is not None else folder))
        except MlflowException:       # a raw location no registered source understands: name the folder that was read
            source = resolve_dataset_source(str(folder))
    return CorpusDataset(source, name=name, digest=digest.hexdigest()[:8])


def parquet_rows(files: list[Path]) -> dict[str, int]:
    """Table name -> rows, from each Parquet file's footer (nothing else is read)."""
    import pyarrow.parquet as pq

    return {path.stem: pq.read_metadata(path).num_rows for path in files if path.suffix == ".parquet"}


def log_artifacts(*paths: str | Path) -> None:
    for path in map(Path, paths):
        (mlflow.log_artifacts if path.is_dir() else mlflow.log_artifact)(str(path))


def log_dict(payload: Mapping[str, Any], name: str) -> None:
    mlflow.log_dict(dict(payload), name)


@contextmanager
def child_run(cfg: TrackingConfig, parent_run_id: str, name: str, params: Mapping[str, Any] | None = None,
              tags: Mapping[str, str] | None = None) -> Iterator[mlflow.ActiveRun]:
    """A run nested under `parent_run_id` (a tuning trial under its study's stage run), from any process.

    A worker process has no active run: the parent is named by id, and the child lands in the parent's experiment with
    the parent's stage, dataset and git revision tags (and `tags`) and the parent's dataset input.
    """
    mlflow.set_tracking_uri(tracking_uri(cfg))
    registry = client(cfg)
    parent = registry.get_run(parent_run_id)
    inherited = {key: parent.data.tags.get(key, "") for key in ("stage", "dataset", "git_revision")}
    with mlflow.start_run(experiment_id=parent.info.experiment_id, run_name=name, parent_run_id=parent_run_id,
                          nested=True, tags={**inherited, **(tags or {})}) as run:
        if params:
            mlflow.log_params({sanitize(k): v for k, v in flatten(params).items()})
        if parent.inputs and parent.inputs.dataset_inputs:
            registry.log_inputs(run.info.run_id, datasets=list(parent.inputs.dataset_inputs))
        yield run


def set_tags(tags: Mapping[str, str]) -> None:
    mlflow.set_tags(dict(tags))


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


# ---------------------------------------------------------------- where the runs are: the tracking URI and server

# Not MLFLOW_TRACKING_URI: mlflow.set_tracking_uri writes that variable, so in a process that ran one stage_run it
# would silently override every later configuration.
URI_VARIABLE = "TICKETSIM_TRACKING_URI"
SQLITE = "sqlite:///"


class TrackingUnavailable(StepError):
    """The tracking server does not answer: raised before any training, so no run is lost."""


def tracking_uri(cfg: TrackingConfig) -> str:
    """TICKETSIM_TRACKING_URI when set (CI passes its server that way), else params' tracking.uri.

    A relative SQLite path is made absolute against the working directory: MLflow keeps one store per URI string for
    the life of a process, so `sqlite:///mlflow.db` used in a second folder would still reach the first folder's file.
    """
    uri = os.environ.get(URI_VARIABLE) or cfg.uri
    relative = uri.removeprefix(SQLITE)
    if uri.startswith(SQLITE) and not relative.startswith("/") and relative != ":memory:":
        return SQLITE + str(Path(relative).resolve())
    return uri


def is_server(uri: str) -> bool:
    return uri.startswith(("http://", "https://"))


def client(cfg: TrackingConfig) -> mlflow.MlflowClient:
    uri = tracking_uri(cfg)
    return mlflow.MlflowClient(tracking_uri=uri, registry_uri=uri)


def check_reachable(cfg: TrackingConfig, timeout_seconds: int = 10) -> None:
    """Raise TrackingUnavailable unless a tracking server answers a cheap request within the timeout.

    MLflow's client retries for minutes by default; one short try is enough to tell a server that is down.
    """
    uri = tracking_uri(cfg)
    if not is_server(uri):
        return
    limits = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": str(timeout_seconds)}
    saved = {name: os.environ.get(name) for name in limits}
    os.environ.update(limits)
    try:
        client(cfg).search_experiments(max_results=1)
    except Exception as error:  # any failure (refused, timeout, 5xx, auth) means: do not start training
        raise TrackingUnavailable(f"MLflow tracking server {uri} is not reachable ({type(error).__name__}: {error}); "
                                  f"start it, or set {URI_VARIABLE} / tracking.uri to one that runs") from None
    finally:
        for name, value in saved.items():
            os.environ.pop(name) if value is None else os.environ.update({name: value})
