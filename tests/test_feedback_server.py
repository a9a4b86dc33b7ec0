"""`ticketsim serve` as it runs, on gunicorn with two workers over a tiny real bundle: it listens on loopback unless told
otherwise, a few hundred judgments posted at once are all in the journal, and a server killed while judgments pour in
has every judgment it answered on disk."""
import json
import os
import signal
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from benchmarks.common import make_bundle, serving

from ticketsim.app.access import TOKEN_VARIABLE
from ticketsim.bundle.loader import Scorer
from ticketsim.search.index import build_index, model_hash

pytestmark = pytest.mark.slow   # `ticketsim serve` on gunicorn, hundreds of concurrent clients, a SIGKILLed server


@pytest.fixture(scope="module")
def model(search_parts, tmp_path_factory) -> tuple[Path, Path, list[str]]:
    root = tmp_path_factory.mktemp("served")
    bundle = make_bundle(root / "bundle", search_parts, "22")
    build_index(Scorer.load(bundle), model_hash(bundle), search_parts.corpus.tickets, out=root / "index")
    return bundle, root / "index", search_parts.corpus.tickets["ticket_id"].to_list()


def serve(model, journal: Path) -> list[str]:
    """`ticketsim serve` with two workers on the tiny bundle, for benchmarks.common.serving ({port} filled in there)."""
    bundle, index, _ = model
    return [sys.executable, "-m", "ticketsim.cli", "serve", "--model", str(bundle), "--index", str(index), "--port", "{port}",
            "--feedback", str(journal), "--workers", "2"]


def post(uri: str, body: dict, token: str | None = None) -> int:
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    request = urllib.request.Request(f"{uri}/api/feedback", json.dumps(body).encode(), headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def listening_addresses(port: int) -> set[str]:
    """The local IPv4 addresses with a socket listening on `port` (from /proc/net/tcp: little-endian hex)."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, hex_port = local.split(":")
        if state == "0A" and int(hex_port, 16) == port:
            found.add(socket.inet_ntoa(bytes.fromhex(address)[::-1]))
    return found


def journal_lines(path: Path) -> list[dict]:
    """Every whole line (a kill in the middle of a write may leave a last one cut short: never answered)."""
    return [json.loads(line) for line in path.read_text().split("\n")[:-1]]


def test_it_listens_on_loopback_and_keeps_every_one_of_300_concurrent_judgments(model, tmp_path):
    journal, tickets = tmp_path / "feedback" / "judgments.jsonl", model[2]
    with serving(serve(model, journal), tmp_path / "serve.log") as server:
        uri = server.uri
        assert listening_addresses(int(uri.rsplit(":", 1)[1])) == {"127.0.0.1"}
        bodies = [{"subject": f"pump trouble {i}", "description": "oil under it", "ticket_id": tickets[i % len(tickets)],
                   "label": ("YES", "REL", "NO")[i % 3]} for i in range(300)]
        with ThreadPoolExecutor(20) as pool:
            statuses = list(pool.map(lambda body: post(uri, body), bodies))
    assert statuses == [200] * 300
    written = journal_lines(journal)
    assert sorted((r["subject"], r["ticket_id"], r["label"]) for r in written) == \
        sorted((b["subject"], b["ticket_id"], b["label"]) for b in bodies)
    assert "127.0.0.1" in (tmp_path / "serve.log").read_text().splitlines()[0]


def test_a_killed_server_has_every_judgment_it_answered_and_refuses_those_without_its_token(model, tmp_path):
    journal, tickets = tmp_path / "judgments.jsonl", model[2]
    answered, stop = [], threading.Event()

    def judge_until_stopped(client: int) -> None:
        for i in range(10_000):
            if stop.is_set():
                return
            body = {"subject": f"client {client} query {i}", "description": "", "ticket_id": tickets[i % len(tickets)],
                    "label": "YES"}
            try:
                if post(uri, body, token="s3cret") == 200:
                    answered.append(body["subject"])
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                return      # the server is gone

    with serving(serve(model, journal), tmp_path / "serve.log", {TOKEN_VARIABLE: "s3cret"}) as server:
        uri = server.uri
        assert post(uri, {"subject": "no token", "description": "", "ticket_id": tickets[0], "label": "YES"}) == 401
        clients = [threading.Thread(target=judge_until_stopped, args=(c,)) for c in range(8)]
        for client in clients:
            client.start()
        deadline = time.monotonic() + 120
        while len(answered) < 100 and time.monotonic() < deadline:
            time.sleep(0.05)
        os.killpg(server.process.pid, signal.SIGKILL)      # no chance to flush or clean up
        server.process.wait(timeout=30)
        stop.set()
        for client in clients:
            client.join(timeout=60)
    assert len(answered) >= 100
    kept = {r["subject"] for r in journal_lines(journal)}
    assert set(answered) <= kept and "no token" not in kept
