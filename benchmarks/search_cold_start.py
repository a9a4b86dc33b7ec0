"""One query through `ticketsim search` from a new process, the code at a baseline revision beside the working tree, in
one run; the imports a search cannot avoid (each alone in a new process: the floor); and the warm path, where the model
is loaded once: a Searcher in this process, the search page (`ticketsim serve`) over HTTP, the served MLflow model's
predict (the function `mlflow models serve` calls per request).

The baseline is checked out into a temporary git worktree and run with PYTHONPATH at its src/, the working tree with
PYTHONPATH at this tree's src/. Each side runs once before timing (its bytecode compiled, the files in the page cache, as
for any second search from a shell), then both sides alternate `--repeat` times; the fastest and the median wall times
and the CPU time (user + sys) of the process are printed. Both sides search the same bundle and index: a bundle with a
query export (search/queries.py) is searched without torch by the working tree, through torch by a baseline from before
the export (it ignores the folder). Without --model, a small bundle of the registered configuration (A+L: the adapter over
the packaged MiniLM read at 32 tokens, BM25, learned W and V), with its query export, and its index of 80 tickets are
built first (tests/search_bundle.py, about 40 s).

Usage: python benchmarks/search_cold_start.py [--before bd2a200] [--model BUNDLE --index INDEX]
                                             [--before-model BUNDLE --before-index INDEX] [--repeat 3]
"""
import argparse
import os
import resource
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
USED = ("polars", "pyarrow", "faiss", "onnxruntime", "tokenizers")     # what an exported bundle's search imports
AVOIDED = ("torch", "sentence_transformers", "nltk", "gensim.models")  # what the torch runtime imports beside
GOAL = 3.0      # seconds, issue 20


def small_bundle(folder: Path) -> tuple[Path, Path]:
    from search_bundle import make_bundle, train_parts

    from ticketsim.bundle.loader import Scorer
    from ticketsim.search.index import build_index, model_hash
    from ticketsim.search.queries import export_queries

    parts = train_parts(folder / "parts")
    bundle = make_bundle(folder / "bundle", parts, "AL")
    print(f"query export: {export_queries(bundle) or 'written'}")
    build_index(Scorer.load(bundle), model_hash(bundle), parts.corpus.tickets, out=folder / "index")
    return bundle, folder / "index"


def run(command: list[str], src: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + sys) of a new process."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    before, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run(command, env=env, check=True, capture_output=True)
    wall, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def figures(runs: list[tuple[float, float]]) -> str:
    seconds, cpu = [w for w, _ in runs], [c for _, c in runs]
    return (f"wall fastest {min(seconds):6.2f} s, median {statistics.median(seconds):6.2f} s; "
            f"CPU fastest {min(cpu):6.2f} s, median {statistics.median(cpu):6.2f} s")


def cold(args: argparse.Namespace, bundle: Path, index: Path, baseline: Path) -> None:
    search = lambda bundle, index: [sys.executable, "-m", "ticketsim.cli", "search", "--model", str(bundle),  # noqa: E731
                                    "--index", str(index), "--subject", QUERY["subject"], "--description", QUERY["description"]]
    sides = {f"before ({args.before})": (baseline / "src", search(args.before_model or bundle, args.before_index or index)),
             "after (working tree)": (ROOT / "src", search(bundle, index))}
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
    for src, command in sides.values():
        run(command, src)
    for _ in range(args.repeat):
        for name, (src, command) in sides.items():
            times[name].append(run(command, src))
    for name, runs in times.items():
        print(f"ticketsim search, one query, {name:<22} {figures(runs)}   (load {os.getloadavg()[0]:.1f})")
    (before, before_cpu), (after, after_cpu) = ((min(w for w, _ in r), min(c for _, c in r)) for r in times.values())
    print(f"after / before: wall {after / before:.2f}, CPU {after_cpu / before_cpu:.2f}; after / the {GOAL:.0f} s goal: {after / GOAL:.2f}")
    print("imports, each alone in a new process (python -c 'import X'):")
    print(f"  {'(python alone)':<24} {figures([run([sys.executable, '-c', 'pass'], ROOT / 'src') for _ in range(args.repeat)])}")
    for module in USED + AVOIDED:
        label = module + ("" if module in USED else " (not any more)")
        print(f"  {label:<24} {figures([run([sys.executable, '-c', f'import {module}'], ROOT / 'src') for _ in range(args.repeat)])}")


def warm(args: argparse.Namespace, bundle: Path, index: Path, scratch: Path) -> None:
    import pandas as pd
    import polars as pl
    from http_server import serving

    from ticketsim.app.pyfunc import TicketSimModel
    from ticketsim.search.searcher import Searcher

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
    print(f"warm: Searcher.load {time.perf_counter() - started:.1f} s, once per process; the query runtime: {searcher.queries.runtime}")
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
    parser.add_argument("--before", default="bd2a200", help="the baseline git revision (default bd2a200: before the query export)")
    parser.add_argument("--model", type=Path, help="a bundle (default: a small one of the best configuration, built here)")
    parser.add_argument("--index", type=Path, help="its index (with --model)")
    parser.add_argument("--before-model", type=Path, help="the bundle the baseline searches (default: --model's), for an export "
                        "the baseline cannot read: the same bundle without its query/ folder")
    parser.add_argument("--before-index", type=Path, help="its index (with --before-model)")
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
