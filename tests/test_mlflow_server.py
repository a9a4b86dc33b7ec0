"""The retraining loop against a real MLflow tracking server over HTTP (SQLite backend, local artifact root), and its
loud failure before any training when the server is down. tests/test_postgres.py runs the same body against a server
whose backend store is PostgreSQL."""
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import mlflow
import pytest
from benchmarks.common import Server, serving
from retrain_workspace import fake_version, make_workspace

from ticketsim.config import TrackingConfig, load_params
from ticketsim.lifecycle.registry import CHAMPION, PREVIOUS, aliases

pytestmark = pytest.mark.slow   # a real MLflow tracking server and the retraining loop

STARTUP_SECONDS = 60


def mlflow_server(tmp_path: Path, backend_store_uri: str, artifacts: Sequence[str], on_failure=pytest.skip):
    """`mlflow server` on a free local port until the block ends; `on_failure(message)` when it does not answer."""
    command = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", backend_store_uri, *artifacts,
               "--host", "127.0.0.1", "--port", "{port}", "--workers", "1"]
    return serving(command, tmp_path / "server.log", startup_seconds=STARTUP_SECONDS, on_failure=on_failure)


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
    assert f"==> MLflow tracking {server.uri}: ok" in first.stdout and "is the champion since its registration" in first.stdout
    assert "==> dvc pull" not in first.stdout and "==> dvc push" not in first.stdout   # no DVC remote configured
    client, model = mlflow.MlflowClient(server.uri, server.uri), f"{ws.params()['siamese']['registered_model']}-default"
    store = TrackingConfig(uri=server.uri)
    assert aliases(store, model) == {CHAMPION: "1"}
    run = client.get_run(client.get_model_version(model, "1").run_id)
    assert run.data.metrics["dev.rerank.map"] == 1.0 and run.info.run_name == "register@default"
    assert any((tmp_path / "server-artifacts").rglob("MLmodel")), "artifacts did not go to the server's artifact root"

    # gate -> promote -> rollback, through the command line, over HTTP
    params = load_params(ws.root / "params.yaml")
    params = replace(params, tracking=TrackingConfig(uri=server.uri, experiment=params.tracking.experiment))
    fake_version(params, ranking=1.0, mse=0.0)
    gate = ws.ticketsim("gate")
    assert gate.returncode == 0 and "promoted" in gate.stdout, gate.stdout + gate.stderr
    assert aliases(store, model) == {CHAMPION: "2", PREVIOUS: "1"}
    assert ws.ticketsim("rollback").returncode == 0
    assert aliases(store, model) == {CHAMPION: "1", PREVIOUS: "2"}

    server.stop()
    lock = (ws.root / "dvc.lock").read_text()
    down = ws.ticketsim("retrain")     # how soon it fails: `python -m benchmarks.pipeline_time repro --goals`
    assert down.returncode == 2 and f"MLflow tracking server {server.uri} is not reachable" in down.stderr
    assert "==> dvc" not in down.stdout and (ws.root / "dvc.lock").read_text() == lock   # nothing was trained
