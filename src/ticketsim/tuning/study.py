"""An Optuna study shared by workers: its RDB storage, the heartbeats that return a dead worker's trial to the queue,
and the count of claimed trials that keeps a study at exactly n_trials. What a trial computes is ticketsim.tuning.tuner's."""
from __future__ import annotations

import os
import random
import time
import warnings

import optuna
import sqlalchemy.exc

from ticketsim.config import TuneConfig

DIRECTION = {"cv": "maximize", "cv_retrieve": "maximize", "cv_map": "maximize", "map": "maximize", "mse": "minimize"}
FINISHED = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
CLAIMED = (*FINISHED, optuna.trial.TrialState.RUNNING)   # trials that count towards n_trials, done or under way
# A worker's running trial writes a heartbeat to the storage every HEARTBEAT seconds; one silent for GRACE_BEATS beats
# (its worker was killed, or its machine lost) is failed and queued again with the same params, and a live worker runs it.
HEARTBEAT_VARIABLE, HEARTBEAT, GRACE_BEATS, MAX_RETRIES = "TICKETSIM_TUNE_HEARTBEAT", 10, 6, 3


class Surplus(Exception):
    """The trial would go past n_trials: earlier trials (of this or other workers) already take every place."""


def surplus(trial: optuna.Trial, n_trials: int) -> bool:
    """Whether n_trials trials numbered before this one are finished, running or queued: then it is one too many.

    Optuna numbers a new trial under a lock on the study, so numbers follow creation order: when workers start trials
    at once for the last places, the lower numbers take them, and the study never finishes more than n_trials.
    """
    ahead = trial.study.get_trials(deepcopy=False, states=(*CLAIMED, optuna.trial.TrialState.WAITING))
    return sum(t.number < trial.number for t in ahead) >= n_trials


def heartbeat() -> int:
    """Seconds between a running trial's heartbeats (TICKETSIM_TUNE_HEARTBEAT, default 10; a trial is stale after
    GRACE_BEATS of them). Longer when workers are busy enough to miss beats: a live trial failed as stale is run twice."""
    seconds = int(os.environ.get(HEARTBEAT_VARIABLE) or HEARTBEAT)
    if seconds < 1:
        raise ValueError(f"{HEARTBEAT_VARIABLE}={seconds}: the heartbeat interval is a whole number of seconds >= 1")
    return seconds


def storage(url: str) -> optuna.storages.BaseStorage:
    """An RDB storage; SQLite waits up to 30 s for a lock, so a few local workers can share one file.

    Running trials send heartbeats: a trial whose worker died is failed after the grace period and queued again
    (up to MAX_RETRIES times), so a killed worker loses its trial's work, not the trial.
    """
    kwargs = {"connect_args": {"timeout": 30}} if url.startswith("sqlite") else {}
    beat, attempts = heartbeat(), 5
    for attempt in range(1, attempts + 1):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return optuna.storages.RDBStorage(
                    url, engine_kwargs=kwargs, heartbeat_interval=beat, grace_period=GRACE_BEATS * beat,
                    heartbeat_stale_trial_callback=optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=MAX_RETRIES))
        except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError):
            # Workers started at once on an empty PostgreSQL database race to create Optuna's tables; the losers'
            # CREATE fails on the winner's, and a moment later they find the tables there.
            if attempt == attempts:
                raise
            time.sleep(attempt * random.random())


def fail_stale_trials(study: optuna.Study) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)


def open_study(cfg: TuneConfig, name: str, seed: int) -> optuna.Study:
    return create_or_load(cfg, name, seed)[0]


def create_or_load(cfg: TuneConfig, name: str, seed: int) -> tuple[optuna.Study, bool]:
    """The study, and whether this call created it: of workers started at once on many machines, exactly one does."""
    found = {"study_name": name, "storage": storage(cfg.storage), "sampler": optuna.samplers.TPESampler(seed=seed),
             "pruner": optuna.pruners.MedianPruner(n_startup_trials=cfg.pruner.n_startup_trials, n_warmup_steps=cfg.pruner.n_warmup_steps)}
    try:
        return optuna.create_study(**found, direction=DIRECTION[cfg.objective]), True
    except optuna.exceptions.DuplicatedStudyError:
        return optuna.load_study(**found), False


def finished(study: optuna.Study) -> int:
    return len(study.get_trials(deepcopy=False, states=FINISHED))
