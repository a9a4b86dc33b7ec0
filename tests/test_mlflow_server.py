"""The retraining loop against a real MLflow tracking server over HTTP (SQLite backend, local artifact root), and its
loud failure before any training when the server is down. tests/test_postgres.py runs the same body against a server
whose backend store is PostgreSQL."""
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import mlflow
import pytest
from retrain_workspace import fake_version, make_workspace

from ticketsim.config import TrackingConfig, load_params
from ticketsim.tracking import CHAMPION, PREVIOUS, aliases

STARTUP_SECONDS = 60


@dataclass(frozen=True)
class Server:
    uri: str
    process: subprocess.Popen

    def stop(self) -> None:
        """Terminate the server and its workers (their own process group), then wait for them; idempotent."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def answers(uri: str) -> bool:
    try:
        with urllib.request.urlopen(f"{uri}/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


@contextmanager
def mlflow_server(tmp_path: Path, backend_store_uri: str, artifacts: Sequence[str], on_failure=pytest.skip) -> Iterator[Server]:
    """`mlflow server` on a free local port until the block ends; `on_failure(message)` when it does not answer."""
    port, log = free_port(), (tmp_path / "server.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", backend_store_uri, *artifacts,
         "--host", "127.0.0.1", "--port", str(port), "--workers", "1"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    running = Server(f"http://127.0.0.1:{port}", process)
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while not answers(running.uri):
            if process.poll() is not None or time.monotonic() > deadline:
                running.stop()
                tail = (tmp_path / "server.log").read_text()[-1500:]
                on_failure(f"`mlflow server` did not answer on {running.uri} within {STARTUP_SECONDS} s:\n{tail}")
            time.sleep(0.5)
        yield running
    finally:
        running.stop()
        log.close()


@pytest.fixture
def server(tmp_path):
    with mlflow_server(tmp_path, f"sqlite:///{tmp_path / 'server.db'}",
                       ["--default-artifact-root", str(tmp_path / "server-artifacts")]) as running:
        yield running


def test_retrain_gate_and_rollback_over_http_then_a_loud_early_failure_when_the_server_is_down(tmp_path, server):
    retrain_gate_and_rollback_over_http(tmp_path, server)


def retrain_gate_and_rollback_over_http(tmp_path: Path, server: Server) -> None:
    """The body, for any server whose artifacts land in tmp_path / "server-artifacts"."""
    ws = make_workspace(tmp_path / "repo", tracking_uri=server.uri, remote=False)
    first = ws.ticketsim("retrain")
    assert first.returncode == 0, first.stdout + first.stderr
    assert f"==> MLflow tracking {server.uri}: ok" in first.stdout and "first model" in first.stdout
    assert "==> dvc pull" not in first.stdout and "==> dvc push" not in first.stdout   # no DVC remote configured
    client, model = mlflow.MlflowClient(server.uri, server.uri), f"{ws.params()['siamese']['registered_model']}-default"
    store = TrackingConfig(uri=server.uri)
    assert aliases(store, model) == {CHAMPION: "1"}
    run = client.get_run(client.get_model_version(model, "1").run_id)
    assert run.data.metrics["dev.rerank.map"] == 1.0 and run.info.run_name == "register@default"
    assert any((tmp_path / "server-artifacts").rglob("model.json")), "artifacts did not go to the server's artifact root"

    # gate -> promote -> rollback, through the command line, over HTTP
    params = load_params(ws.root / "params.yaml")
    params = replace(params, tracking=TrackingConfig(uri=server.uri, experiment=params.tracking.experiment))
    fake_version(params, rerank_map=1.0, mse=0.0)
    gate = ws.ticketsim("gate")
    assert gate.returncode == 0 and "promoted" in gate.stdout, gate.stdout + gate.stderr
    assert aliases(store, model) == {CHAMPION: "2", PREVIOUS: "1"}
    assert ws.ticketsim("rollback").returncode == 0
    assert aliases(store, model) == {CHAMPION: "1", PREVIOUS: "2"}

    server.stop()
    lock = (ws.root / "dvc.lock").read_text()
    started = time.monotonic()
    down = ws.ticketsim("retrain")
    assert down.returncode == 2 and f"MLflow tracking server {server.uri} is not reachable" in down.stderr
    assert "==> dvc" not in down.stdout and (ws.root / "dvc.lock").read_text() == lock   # nothing was trained
    assert time.monotonic() - started < 30
