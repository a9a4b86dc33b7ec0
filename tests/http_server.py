"""A server under test as one context manager: started in its own process group on a free local port, polled on
GET /health until it answers, then stopped with its workers. Used for `mlflow server`, `mlflow models serve` and
`ticketsim serve` alike (tests/test_mlflow_server.py, test_mlflow_ui.py, test_search_serving.py, test_postgres.py,
test_feedback_server.py, test_feedback_browser.py); postgres_server.py takes its free port."""
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest


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


# No telemetry, and no job runner beside `mlflow server` (huey consumers for MLflow's GenAI jobs, which these tests never
# start: 14 processes and a minute of CPU across the suite otherwise).
QUIET = {"MLFLOW_DISABLE_TELEMETRY": "true", "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}


@contextmanager
def serving(command: Sequence[str], log: Path, env: dict[str, str] | None = None, startup_seconds: float = 180,
            on_failure: Callable[[str], None] = pytest.fail) -> Iterator[Server]:
    """`command` ({port} filled in with a free port) until the block ends; `on_failure(message)` with the log's tail
    when it exits or does not answer within startup_seconds (the default: torch, transformers and a model loading on a
    busy 2-core box)."""
    port = free_port()
    with Path(log).open("w") as out:
        process = subprocess.Popen([part.format(port=port) for part in command], stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True, env={**os.environ, **QUIET, **(env or {})})
        server = Server(f"http://127.0.0.1:{port}", process)
        try:
            deadline = time.monotonic() + startup_seconds
            while not answers(server.uri):
                if process.poll() is not None or time.monotonic() > deadline:
                    server.stop()
                    on_failure(f"{' '.join(command[:4])} did not answer on {server.uri} within {startup_seconds} s:\n"
                               f"{Path(log).read_text()[-2000:]}")
                time.sleep(0.5)
            yield server
        finally:
            server.stop()
