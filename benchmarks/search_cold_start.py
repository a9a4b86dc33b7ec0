"""One query through `ticketsim search` from a new process, the code at a baseline revision beside the working tree, in
one run; the imports a search cannot avoid (each alone in a new process: the floor); and the warm path, where the model
is loaded once: a Searcher in this process, the search page (`ticketsim serve`) over HTTP, the served MLflow model's
predict (the function `mlflow models serve` calls per request).

The baseline is checked out into a temporary git worktree and run with PYTHONPATH at its src/, the working tree with
PYTHONPATH at this tree's src/. Each side runs once before timing (its bytecode compiled, the files in the page cache, as
for any second search from a shell), then both sides alternate `--repeat` times; the fastest and the median are printed.
Without --model, a small bundle of the best configuration (S on five level pairs + L, learned W and V; the packaged
MiniLM) and its index of 80 tickets are built first (tests/search_bundle.py, about 20 s).

Usage: python benchmarks/search_cold_start.py [--before 6872c56] [--model BUNDLE --index INDEX] [--repeat 3]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
QUERY = {"subject": "pump getting hot", "description": "the feed pump runs at 95 C since monday, bearing noise"}
FLOOR = ("torch", "nltk.tokenize.punkt", "gensim.models", "sentence_transformers", "polars", "faiss", "bm25s")
GOAL = 3.0      # seconds, issue 20


def small_bundle(folder: Path) -> tuple[Path, Path]:
    from search_bundle import make_bundle, train_parts

    from ticketsim.scorer import Scorer
    from ticketsim.search.index import build_index, model_hash

    parts = train_parts(folder / "parts")
    bundle = make_bundle(folder / "bundle", parts, "best")
    build_index(Scorer.load(bundle), model_hash(bundle), parts.corpus.tickets).save(folder / "index")
    return bundle, folder / "index"


def wall(command: list[str], src: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(src)}
    started = time.perf_counter()
    subprocess.run(command, env=env, check=True, capture_output=True)
    return time.perf_counter() - started


def figures(seconds: list[float]) -> str:
    return f"fastest {min(seconds):6.2f} s, median {statistics.median(seconds):6.2f} s"


def cold(args: argparse.Namespace, bundle: Path, index: Path, baseline: Path) -> None:
    search = [sys.executable, "-m", "ticketsim.cli", "search", "--model", str(bundle), "--index", str(index),
              "--subject", QUERY["subject"], "--description", QUERY["description"]]
    sides = {f"before ({args.before})": baseline / "src", "after (working tree)": ROOT / "src"}
    times: dict[str, list[float]] = {name: [] for name in sides}
    for src in sides.values():
        wall(search, src)
    for _ in range(args.repeat):
        for name, src in sides.items():
            times[name].append(wall(search, src))
    for name, seconds in times.items():
        print(f"ticketsim search, one query, {name:<22} {figures(seconds)}   (load {os.getloadavg()[0]:.1f})")
    before, after = (min(s) for s in times.values())
    print(f"after / before: {after / before:.2f}; after / the {GOAL:.0f} s goal: {after / GOAL:.2f}")
    print("imports a search of this bundle cannot avoid, each in a new process (python -c 'import X'):")
    print(f"  {'(python alone)':<24} {figures([wall([sys.executable, '-c', 'pass'], ROOT / 'src') for _ in range(args.repeat)])}")
    for module in FLOOR:
        print(f"  {module:<24} {figures([wall([sys.executable, '-c', f'import {module}'], ROOT / 'src') for _ in range(args.repeat)])}")


def warm(args: argparse.Namespace, bundle: Path, index: Path, scratch: Path) -> None:
    import pandas as pd
    import polars as pl
    from http_server import serving

    from ticketsim.search.searcher import Searcher
    from ticketsim.serving import TicketSimModel

    def timed(call, n: int = 20) -> str:
        call()      # the first query loads what the index and the encoder load lazily
        seconds = []
        for _ in range(n):
            started = time.perf_counter()
            call()
            seconds.append(time.perf_counter() - started)
        return f"median {1000 * statistics.median(seconds):7.1f} ms, fastest {1000 * min(seconds):7.1f} ms (of {n})"

    started = time.perf_counter()
    searcher = Searcher.load(bundle, index)
    print(f"warm: Searcher.load {time.perf_counter() - started:.1f} s, once per process")
    query = pl.DataFrame([{"query_id": "1", **QUERY}])
    print(f"warm: Searcher.search, one query, k 10        {timed(lambda: searcher.search(query, 10))}")
    model = TicketSimModel()
    model.load_context(type("Context", (), {"artifacts": {"bundle": str(bundle), "index": str(index)}})())
    request = pd.DataFrame([QUERY])
    print(f"warm: served model predict, one query, k 10   {timed(lambda: model.predict(None, request, {'k': 10}))}")
    command = [sys.executable, "-m", "ticketsim.cli", "serve", "--model", str(bundle), "--index", str(index), "--port", "{port}"]
    with serving(command, scratch / "page.log", startup_seconds=300, env={"PYTHONPATH": str(ROOT / "src")}) as page:
        url = f"{page.uri}/?{urllib.parse.urlencode(QUERY)}&k=10"
        print(f"warm: search page GET over HTTP, k 10         {timed(lambda: urllib.request.urlopen(url).read())}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", default="6872c56", help="the baseline git revision (default 6872c56: before issue 20)")
    parser.add_argument("--model", type=Path, help="a bundle (default: a small one of the best configuration, built here)")
    parser.add_argument("--index", type=Path, help="its index (with --model)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="search-cold-") as scratch:
        scratch = Path(scratch)
        bundle, index = (args.model, args.index) if args.model else small_bundle(scratch)
        baseline = scratch / "before"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(baseline), args.before], cwd=ROOT, check=True)
        try:
            cold(args, bundle, index, baseline)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(baseline)], cwd=ROOT, check=True)
        warm(args, bundle, index, scratch)


if __name__ == "__main__":
    main()
