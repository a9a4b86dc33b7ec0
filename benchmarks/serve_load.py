"""The search page under load, old server and new side by side in one run: Flask's development server (one request at a
time, as `ticketsim serve` ran before issue 22) encoding each query through the Scorer (torch, as every search did
before issue 20), and `ticketsim serve` on gunicorn with the bundle's own road (its query export when it has one,
search/queries.py), over the same bundle and index, each sent the same page searches by the same concurrent clients.
Prints throughput, p50, p95, errors and the ratios.

    python benchmarks/serve_load.py [--model models/default/bundle] [--index models/default/index]
                                    [--requests 200] [--clients 20] [--workers 2] [--k 10]

The queries are the synthetic corpus's end-user queries (params synthetic and seed), distinct, cycled when more are
asked. Each server gets two untimed warm-up searches, then the timed ones. Bounded and loopback only: both servers bind
127.0.0.1 on free ports and run one after the other; a server has --startup seconds to answer, a request --timeout
seconds, and every server is stopped (its process group) before the script ends.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from http_server import Server, answers, free_port  # noqa: E402  (the tests' server helpers: one way to stop a server)

from ticketsim.config import SyntheticConfig, load_params  # noqa: E402
from ticketsim.data.synthetic import generate  # noqa: E402

HOST = "127.0.0.1"


def end_user_queries(n: int) -> list[dict[str, str]]:
    params = load_params() if Path("params.yaml").is_file() else None
    corpus = generate(params.synthetic if params else SyntheticConfig(), params.seed if params else 13)
    asked = corpus.pairs.filter(pl.col("split") == "test")["query_id"].unique(maintain_order=True)
    queries = corpus.queries.filter(pl.col("query_id").is_in(asked.implode())).select("subject", "description").to_dicts()
    return [queries[i % len(queries)] for i in range(n)]


def search_url(uri: str, query: dict[str, str], k: int) -> str:
    return f"{uri}/?{urllib.parse.urlencode({**query, 'k': k})}"


def get(url: str, timeout: float) -> tuple[float, int | str]:
    """(seconds, HTTP status or the error's name)."""
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            response.read()
            status: int | str = response.status
    except urllib.error.HTTPError as error:
        status = error.code
    except (urllib.error.URLError, ConnectionError, TimeoutError) as error:
        status = type(error).__name__
    return time.perf_counter() - started, status


@contextmanager
def server(command: list[str], port: int, startup: float, log: Path):
    """`command` in its own process group until the block ends (yields its Server); waits until it answers."""
    with log.open("w") as out:
        running = Server(f"http://{HOST}:{port}", subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                                                     start_new_session=True))
    try:
        deadline = time.monotonic() + startup
        while not answers(running.uri):
            if running.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{command[2:4]} did not answer on {running.uri} within {startup} s:\n{log.read_text()[-2000:]}")
            time.sleep(0.5)
        yield running
    finally:
        running.stop()


def load(uri: str, queries: list[dict[str, str]], clients: int, k: int, timeout: float) -> dict[str, float]:
    for query in queries[:2]:
        get(search_url(uri, query, k), timeout)     # warm-up: the old server loads the sentence encoder on its first search
    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        results = list(pool.map(lambda query: get(search_url(uri, query, k), timeout), queries))
    wall = time.perf_counter() - started
    seconds = sorted(s for s, _ in results)
    return {"requests": len(results), "per_s": len(results) / wall, "p50": statistics.median(seconds),
            "p95": seconds[min(len(seconds) - 1, round(0.95 * len(seconds)) - 1)], "max": seconds[-1],
            "errors": sum(status != 200 for _, status in results)}


def dev_server(args: argparse.Namespace) -> None:
    """The old way: Flask's development server, one request at a time, queries through torch (run by this script in a
    process of its own)."""
    from ticketsim.app.access import Access
    from ticketsim.app.page import create_app
    from ticketsim.bundle.loader import Scorer
    from ticketsim.config import ServeConfig
    from ticketsim.data.feedback import Journal
    from ticketsim.search.index import TicketIndex
    from ticketsim.search.queries import ScorerQueries
    from ticketsim.search.searcher import Searcher

    searcher = Searcher(ScorerQueries(Scorer.load(args.model)), TicketIndex.load(args.index), args.model, args.index)
    app = create_app(searcher, ServeConfig(), Journal(args.journal), Access(HOST, None))
    app.run(host=HOST, port=args.port, threaded=False)


def road(bundle: str) -> str:
    from ticketsim.search.queries import QUERY

    return "exported (no torch)" if (Path(bundle) / QUERY).is_dir() else "torch (the bundle has no query export)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="models/default/bundle")
    parser.add_argument("--index", default="models/default/index")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers of the new server")
    parser.add_argument("--k", type=int, default=10, help="tickets per search")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds a request may take (then it counts as an error)")
    parser.add_argument("--startup", type=float, default=300.0, help="seconds a server may take to answer at all")
    parser.add_argument("--dev-server", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--journal", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.dev_server:
        return dev_server(args)

    queries = end_user_queries(args.requests)
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())   # the box's load (1, 5, 15 min): other jobs skew the figures
    rows = {}
    with tempfile.TemporaryDirectory() as scratch:
        journal = Path(scratch) / "judgments.jsonl"
        old_port, new_port = free_port(), free_port()
        commands = {
            "old: Flask dev server, 1 at a time, torch": [sys.executable, __file__, "--dev-server", "--model", args.model, "--index",
                                                   args.index, "--port", str(old_port), "--journal", str(journal)],
            f"new: ticketsim serve, gunicorn x{args.workers}, {road(args.model)}": [
                sys.executable, "-m", "ticketsim.cli", "serve", "--model", args.model, "--index", args.index, "--host", HOST,
                "--port", str(new_port), "--workers", str(args.workers), "--feedback", str(journal)],
        }
        for (name, command), port in zip(commands.items(), (old_port, new_port)):
            print(f"{name}: starting", flush=True)
            with server(command, port, args.startup, Path(scratch) / f"{port}.log") as running:
                rows[name] = load(running.uri, queries, args.clients, args.k, args.timeout)
            print(f"{name}: {rows[name]['per_s']:.1f} requests/s", flush=True)

    print(f"\n{args.requests} page searches (k = {args.k}) by {args.clients} concurrent clients, {args.model}; "
          f"load average before: {load_before}\n")
    print("| server | requests/s | p50 s | p95 s | max s | errors |\n| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, row in rows.items():
        print(f"| {name} | {row['per_s']:.1f} | {row['p50']:.3f} | {row['p95']:.3f} | {row['max']:.3f} | {row['errors']} |")
    old, new = rows.values()
    print(f"\nthroughput new / old: {new['per_s'] / old['per_s']:.2f} x (goal >= 2); p95 old / new: {old['p95'] / new['p95']:.2f} x; "
          f"new p95 {new['p95']:.3f} s (goal < 0.5); errors: old {old['errors']}, new {new['errors']} (goal 0)")


if __name__ == "__main__":
    main()
