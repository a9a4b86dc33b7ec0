"""Scale-out on real services: a real PostgreSQL server as the Optuna storage that `ticketsim tune` workers share, and as
the backend store of the MLflow tracking server that the retraining loop's registry and quality gate talk to.

Where the PostgreSQL binaries are missing the tests skip, except in CI (CI set), where they fail: .ci/run installs them.
"""
from __future__ import annotations

import importlib.util
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from contextlib import chdir, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import mlflow
import optuna
import pytest
import sqlalchemy
import yaml
from conftest import random_channel, tiny_corpus
from optuna.distributions import FloatDistribution
from postgres_server import PostgresServer, find_bin_dir, start
from test_mlflow_server import mlflow_server, retrain_gate_and_rollback_over_http

from ticketsim.channels.char_blstm import save_checkpoint, train_char_blstm
from ticketsim.channels.registry import cache_path, word_files
from ticketsim.channels.word2vec import corpus_sentences, save_vectors, train_word2vec
from ticketsim.cli import main
from ticketsim.config import CharBLSTMConfig, TuneConfig, Word2VecConfig
from ticketsim.lifecycle.tracking import URI_VARIABLE
from ticketsim.tuning.study import HEARTBEAT_VARIABLE, open_study, surplus

pytestmark = pytest.mark.slow   # a PostgreSQL server, MLflow over it, tune workers

DRIVER = "postgresql+psycopg2"   # SQLAlchemy 2.1 reads a bare postgresql:// as psycopg 3; the test extra has psycopg2
N_TRIALS = 8
EPOCHS = 3                       # per trial (retrain mode)
HEARTBEAT = 1                    # seconds: a killed worker's trial is stale after study.GRACE_BEATS of them
Trial = optuna.trial.FrozenTrial
State = optuna.trial.TrialState


def unavailable(reason: str) -> None:
    """CI must run these tests: there a missing piece fails them; elsewhere they skip and say why."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set: .ci/run installs it)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def postgres():
    """One PostgreSQL server for the module (each test makes its own databases), stopped with -m immediate."""
    bin_dir = find_bin_dir()
    if bin_dir is None:
        unavailable("PostgreSQL server binaries (initdb, pg_ctl) not found: apt-get install postgresql")
    if importlib.util.find_spec("psycopg2") is None:
        unavailable("psycopg2 is not installed: pip install -e '.[test]'")
    server = start(bin_dir)
    try:
        yield server
    finally:
        server.stop()


# ---------------------------------------------------------------- ticketsim tune workers on one PostgreSQL study

FINAL = {"channels": {"h": 0.7, "E": 0.1, "T": 0.2},
         "levels": {"sub-sub": 0.3, "desc-desc": 0.3, "sub-desc": 0.2, "sub-sol": 0.1, "desc-sol": 0.1}}


def tune_workspace(root: Path, storage: str, tracking: str) -> Path:
    """What `ticketsim tune tiny` reads (the tune stage's inputs, config.workspace), from a tiny synthetic corpus, in a few seconds:
    prepared tables, tokens, a small word2vec and char-BLSTM, E and T caches (random vectors: only their shapes matter
    here), params.yaml with retrain-mode trials of a few epochs (each a second or so, long enough to be killed in)."""
    corpus, tokens = tiny_corpus()
    data = root / "data" / "tiny"
    corpus.write(data / "prepared")
    tokens.write(data / "tokens")
    vectors, _ = train_word2vec(corpus_sentences(tokens), Word2VecConfig(dim=8, min_count=1, epochs=1), seed=0)
    save_vectors(vectors, word_files(data / "channels")[0])
    chars, _ = train_char_blstm(vectors.index_to_key, vectors.vectors,
                                CharBLSTMConfig(hidden=2, char_dim=4, epochs=1, max_words=300), seed=0, progress=False)
    save_checkpoint(chars, word_files(data / "channels")[1])
    for seed, channel in enumerate(("E", "T")):
        random_channel(channel, corpus, seed).save(cache_path(data / "channels", channel))
    params = {
        "seed": 0,
        "tracking": {"uri": tracking, "experiment": "tune-postgres", "artifact_location": str(root / "mlartifacts")},
        "datasets": {"tiny": {"source": "synthetic", "raw": "unused"}},
        "siamese": {"hidden": 8, "max_tokens": 20, "train": {"epochs": 3, "batch_size": 16, "patience": 3},
                    "variants": {"22": FINAL}, "final": "22"},
        "tune": {"enabled": True, "storage": storage, "n_trials": N_TRIALS, "timeout": None, "workers": 1, "mode": "retrain",
                 "objective": "map", "epochs": EPOCHS, "hidden": [8], "pruner": {"n_startup_trials": N_TRIALS, "n_warmup_steps": 0},
                 "ranges": {"channels": {"h": [0.5, 1.0], "E": [0.0, 0.4], "T": [0.0, 0.4]},   # around FINAL's weights
                            "levels": dict.fromkeys(FINAL["levels"], [0.0, 0.4])}},
    }
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return root


def ticketsim_command() -> str:
    """The installed console script (its process is the worker: the pid a trial records is this process's)."""
    beside = Path(sys.executable).with_name("ticketsim")
    found = str(beside) if beside.is_file() else shutil.which("ticketsim")
    assert found, "the ticketsim console script is not installed (pip install -e .)"
    return found


@dataclass
class Worker:
    """`ticketsim tune tiny --workers 1` as a machine of a tuning cluster runs it, with outputs of its own."""
    name: str
    process: subprocess.Popen
    log: Path

    @classmethod
    def start(cls, root: Path, name: str) -> Worker:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", URI_VARIABLE))}
        env.update({HEARTBEAT_VARIABLE: str(HEARTBEAT), "PYTHONUNBUFFERED": "1"})
        log = root / f"{name}.log"
        with log.open("w") as out:
            process = subprocess.Popen(
                [ticketsim_command(), "tune", "tiny", "--workers", "1", "--out", f"tuned/{name}.yaml",
                 "--metrics", f"metrics/{name}.json", "--plots", f"plots/{name}"],
                cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT)
        return cls(name, process, log)

    @property
    def id(self) -> str:
        """What tune.py records as a trial's `worker`."""
        return f"{socket.gethostname()}:{self.process.pid}"

    def output(self) -> str:
        return f"--- {self.name} (exit {self.process.poll()}):\n{self.log.read_text()[-3000:]}"

    def finish(self, timeout: float) -> None:
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            pytest.fail(f"worker {self.name} did not finish within {timeout:.0f} s\n{self.output()}")
        assert self.process.returncode == 0, self.output()

    def metrics(self) -> dict:
        return json.loads((self.log.parent / "metrics" / f"{self.name}.json").read_text())


class StudyReader:
    """The workers' one study, read with one connection pool, without creating Optuna's tables itself: the workers
    start on an empty database and race to (study.storage must cope)."""

    def __init__(self, url: str) -> None:
        self.url, self.storage = url, None

    def trials(self) -> list[Trial]:
        if self.storage is None:
            engine = sqlalchemy.create_engine(self.url, poolclass=sqlalchemy.pool.NullPool)
            try:
                with engine.connect() as connection:
                    if not connection.execute(sqlalchemy.text("SELECT count(*) FROM studies")).scalar():
                        return []
            except sqlalchemy.exc.ProgrammingError:    # no table yet
                return []
            finally:
                engine.dispose()
            self.storage = optuna.storages.RDBStorage(self.url)
        names = [s.study_name for s in self.storage.get_all_studies()]
        assert len(names) == 1, names
        return optuna.load_study(study_name=names[0], storage=self.storage).get_trials()


def wait_for(condition: Callable[[], object], workers: list[Worker], what: str, timeout: float = 150.0):
    """Poll until condition() is truthy (returned); fail early, with the workers' logs, when one of them exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        if any(w.process.poll() is not None for w in workers):
            pytest.fail(f"a worker exited while waiting for {what}\n" + "\n".join(w.output() for w in workers))
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}\n" + "\n".join(w.output() for w in workers))


def test_tune_workers_share_a_postgresql_study_survive_a_killed_worker_and_resume(tmp_path, postgres: PostgresServer):
    storage = postgres.url(postgres.create_database("optuna"), DRIVER)
    tracking = postgres.url(postgres.create_database("mlflow"), DRIVER)
    mlflow.MlflowClient(tracking).search_experiments()   # MLflow's schema, made once (as by the server an admin starts)
    root = tune_workspace(tmp_path / "ws", storage, tracking)
    study = StudyReader(storage)

    # Two machines start at once on an empty database; "doomed" is SIGKILLed in the middle of its second trial or later.
    doomed, survivor = workers = [Worker.start(root, name) for name in ("doomed", "survivor")]
    try:
        def doomed_mid_trial() -> Trial | None:
            mine = [t for t in study.trials() if t.user_attrs.get("worker") == doomed.id]
            if not any(t.state == State.COMPLETE for t in mine):
                return None
            # two epochs or more to go: the kill lands long before the trial could end
            return next((t for t in mine if t.state == State.RUNNING and len(t.intermediate_values) <= EPOCHS - 2), None)

        held = wait_for(doomed_mid_trial, workers, "the doomed worker to finish a trial and be in the middle of another")
        doomed.process.send_signal(signal.SIGKILL)
        doomed.process.wait()
        survivor.finish(timeout=180)
    finally:
        for worker in workers:
            if worker.process.poll() is None:
                worker.process.kill()
                worker.process.wait()

    trials = study.trials()
    finished = [t for t in trials if t.state in (State.COMPLETE, State.PRUNED)]
    by_number = {t.number: t for t in trials}
    ran_by = {t.user_attrs["worker"] for t in finished}
    # Shared, once each: exactly n_trials finished over both workers, no number twice, no point proposed twice.
    assert len(finished) == N_TRIALS, [(t.number, t.state.name, t.user_attrs.get("worker")) for t in trials]
    assert len(by_number) == len(trials) and ran_by == {doomed.id, survivor.id}
    assert len({json.dumps(t.params, sort_keys=True) for t in finished}) == N_TRIALS, [t.params for t in finished]
    assert sum(t.user_attrs.get("final", False) for t in trials if t.state != State.FAIL) == 1   # the paper's point, once
    # The killed worker's trial: failed by the survivor once its heartbeat stopped, and run again there with the params
    # it had (those it had suggested before the kill are fixed in the retry; any others are sampled there).
    assert by_number[held.number].state == State.FAIL
    retried = [t for t in finished if t.system_attrs.get("failed_trial") == held.number]
    assert len(retried) == 1 and by_number[held.number].params.items() <= retried[0].params.items()
    assert retried[0].user_attrs["worker"] == survivor.id
    assert not [t for t in trials if t.state in (State.RUNNING, State.WAITING)]
    # The survivor waited for the whole study: its outputs hold the best of every worker's trials.
    best = max(t.value for t in finished if t.state == State.COMPLETE)
    result = survivor.metrics()
    assert result["trials"]["complete"] + result["trials"].get("pruned", 0) == N_TRIALS and result["best"]["value"] == best
    # Every finished trial is a nested MLflow run in the PostgreSQL-backed store, whichever worker ran it.
    client = mlflow.MlflowClient(tracking)
    runs = client.search_runs([client.get_experiment_by_name("tune-postgres").experiment_id], "tags.stage = 'tune'")
    assert {f"trial {t.number}" for t in finished} <= {r.info.run_name for r in runs if r.data.tags.get("trial_state") == "complete"}

    # A rerun (the command's own main(), in this process: its imports are loaded) finds the study finished: no new trial.
    with chdir(root), mock.patch.dict(os.environ, {HEARTBEAT_VARIABLE: str(HEARTBEAT)}), redirect_stdout(io.StringIO()):
        for variable in [v for v in os.environ if v.startswith(("MLFLOW_", URI_VARIABLE))]:
            del os.environ[variable]
        code = main(["tune", "tiny", "--out", "tuned/rerun.yaml", "--metrics", "metrics/rerun.json", "--plots", "plots/rerun"])
        mlflow.set_tracking_uri(None)   # the command set this process's default to a store that is about to go away
    assert code == 0
    assert [(t.number, t.state) for t in study.trials()] == [(t.number, t.state) for t in trials]
    assert json.loads((root / "metrics" / "rerun.json").read_text())["best"]["value"] == best


def test_of_two_trials_started_at_once_for_the_last_place_the_later_is_surplus(postgres: PostgresServer):
    """What keeps workers from finishing more than n_trials: trial numbers, given under a lock, decide the last place."""
    cfg = TuneConfig(storage=postgres.url(postgres.create_database("optuna_last_place"), DRIVER), n_trials=3)
    study = open_study(cfg, "last-place", seed=0)
    for value in (0.1, 0.2):
        study.add_trial(optuna.create_trial(params={"x": value}, distributions={"x": FloatDistribution(0, 1)}, value=value))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")       # Optuna: heartbeats are meant for optimize(); here two workers' asks
        first, second = study.ask(), study.ask()
    assert not surplus(first, cfg.n_trials) and surplus(second, cfg.n_trials)
    study.tell(first, 0.3)
    assert surplus(second, cfg.n_trials)   # still: three earlier trials are finished


# ---------------------------------------------------------------- the MLflow tracking server on PostgreSQL

def test_retrain_registry_and_gate_against_an_mlflow_server_on_postgresql(tmp_path, postgres: PostgresServer):
    backend = postgres.url(postgres.create_database("mlflow_server"), DRIVER)
    with mlflow_server(tmp_path, backend, ["--artifacts-destination", str(tmp_path / "server-artifacts")],
                       on_failure=lambda message: pytest.fail(message, pytrace=False)) as server:
        retrain_gate_and_rollback_over_http(tmp_path, server)
