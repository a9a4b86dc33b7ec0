"""A million tickets on one machine (issue 33 item 4): an index of --tickets synthetic tickets for a bundle, and what it
costs: build time per stage, size on disk and in memory, exact top-10 latency for one query and for concurrent clients
on the page, and `ticketsim index add` of 1,000 tickets.

Usage:
  python benchmarks/million.py [--bundle models/default/bundle | --tiny AL|SL] [--tickets 1000000] [--measure 2000]
                               [--precision float32] [--queries 50] [--clients 20] [--requests 200] [--workers 2]
                               [--add 1000]

--bundle: a trained bundle (default the registered models/default/bundle); --tiny builds one of tests/search_bundle.py's
instead (AL: the registered configuration A+L, 1,920 folded dims; SL: S+L on one level pair, 384 dims, F+L's layout),
with params' sentence settings (the encoder's full window: the encoding cost is real) and its query export.

How the knowledge base is made: --measure tickets come from the synthetic generator and are indexed through the bundle
(build_index: tokens, every channel, folding, topics), timed; the other tickets are those, tiled under new ids by the
index's own writer (benchmarks/index_scale.py's `tile`: texts and tokens as they are, vectors with noise). So the table and
encoding stages are measured on --measure tickets and extrapolated per ticket on the CPU (said in the output); BM25,
the vectors and the write are measured at full size. Then: the folder's bytes, a fresh process's RSS after loading it
and after one search, --queries end-user queries one at a time (p50, p95), the page (`ticketsim serve`, --workers) under
--clients concurrent clients (benchmarks/serve_load.py) with its processes' RSS and PSS, and `ticketsim index add` of
1,000 new generated tickets as a new process (loading, encoding, the next generation written).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import numpy as np
import polars as pl
from index_memory import smaps
from index_scale import tile
from serve_load import HOST, end_user_queries, free_port, load, server

from ticketsim.bundle.loader import Scorer
from ticketsim.config import SyntheticConfig, load_params
from ticketsim.data.synthetic import generate
from ticketsim.search.encode import one_side
from ticketsim.search.index import TicketIndex, build_index, model_hash
from ticketsim.search.queries import query_encoder
from ticketsim.search.searcher import Searcher
from ticketsim.text.tokenize import make_tokenizer, tokenize_corpus


def tiny_bundle(variant: str, folder: Path) -> Path:
    """tests/search_bundle.py's bundle of `variant`, read with params' sentence settings, with its query export."""
    from dataclasses import asdict

    from search_bundle import make_bundle, train_parts

    from ticketsim.search.queries import export_queries

    bundle = make_bundle(folder / "bundle", train_parts(folder / "parts"), variant)
    manifest = json.loads((bundle / "manifest.json").read_text())
    (bundle / "manifest.json").write_text(json.dumps({**manifest, "sentence": asdict(load_params().sentence)}) + "\n")
    export_queries(bundle)
    return bundle


def timed(run):
    started = time.perf_counter()
    result = run()
    return result, time.perf_counter() - started


def loaded_memory(index: str, bundle: str) -> None:
    """In a process of its own: RSS after loading the index and after one search (prints JSON)."""
    before = smaps(os.getpid())[0]
    searcher = Searcher.load(bundle, index)
    after_load = smaps(os.getpid())[0]
    searcher.search(pl.DataFrame([{"query_id": "q", **end_user_queries(1)[0]}]), 10)
    print(json.dumps({"load": after_load - before, "search": smaps(os.getpid())[0] - before}))


def server_memory(pid: int) -> dict[str, float]:
    """RSS of each gunicorn worker and PSS of the server's processes (master and workers), in MB."""
    children = [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    figures = {p: smaps(p) for p in [pid, *children]}
    return {"worker RSS": max(figures[c][0] for c in children) / 1e6, "PSS of all": sum(f[1] for f in figures.values()) / 1e6}


def percentiles(seconds: list[float]) -> str:
    seconds = sorted(seconds)
    p95 = seconds[min(len(seconds) - 1, round(0.95 * len(seconds)) - 1)]     # as serve_load's
    return f"p50 {statistics.median(seconds) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bundle", default="models/default/bundle")
    parser.add_argument("--tiny", choices=("AL", "SL"), help="build tests/search_bundle.py's bundle instead of --bundle")
    parser.add_argument("--tickets", type=int, default=1_000_000)
    parser.add_argument("--measure", type=int, default=2000, help="generated tickets indexed through the bundle, timed")
    parser.add_argument("--precision", choices=("float32", "float16"), default="float32")
    parser.add_argument("--queries", type=int, default=50, help="single searches timed")
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--requests", type=int, default=200, help="page searches (0: no page)")
    parser.add_argument("--workers", type=int, default=2, help="the page's gunicorn workers")
    parser.add_argument("--startup", type=float, default=900.0, help="seconds the page may take to answer at all")
    parser.add_argument("--add", type=int, default=1000, help="new tickets given to `ticketsim index add`")
    parser.add_argument("--folder", help="where the index is written (default: a temporary folder, removed)")
    parser.add_argument("--loaded-memory", nargs=2, metavar=("INDEX", "BUNDLE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.loaded_memory:
        return loaded_memory(*args.loaded_memory)
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(args.folder or scratch)
        bundle = tiny_bundle(args.tiny, folder / "tiny") if args.tiny else Path(args.bundle)
        scorer = Scorer.load(bundle)
        corpus = generate(SyntheticConfig(n_tickets=args.measure + args.add, n_labeled_queries=10, n_enduser_queries=10), 13)
        sample, new = corpus.tickets.head(args.measure), corpus.tickets.slice(args.measure)
        build_index(scorer, model_hash(bundle), new.head(5), folder / "warm-up", force=True)    # every model loads on first use
        tokens_only = one_side(sample, "tickets")
        _, table = timed(lambda: tokenize_corpus(tokens_only, make_tokenizer(scorer.text, tokens_only), progress=False))
        measured, built = timed(lambda: build_index(scorer, model_hash(bundle), sample, folder / "measured", precision=args.precision,
                                                    force=True))
        per_ticket = {"table: tokens": table / args.measure,  # the rest of the build: channels, folding, topics
                      "encoding: every channel, folded, topic activity": (built - table) / args.measure}
        print(f"measured: {args.measure} tickets indexed in {built:.1f} s, of which tokens {table:.1f} s", flush=True)
        target = folder / "index"
        shutil.rmtree(target, ignore_errors=True)
        seconds = {"tiled and written by the index's writer (append, doubling)": tile(folder / "measured", args.tickets, target,
                                                                                       np.random.default_rng(0))}
        disk = {path.name: path.stat().st_size for path in TicketIndex.load(target).generation.iterdir()}
        print("written", flush=True)
        memory = json.loads(subprocess.run([sys.executable, __file__, "--loaded-memory", str(target), str(bundle)],
                                           capture_output=True, text=True, check=True).stdout.splitlines()[-1])
        searcher = Searcher(query_encoder(bundle), TicketIndex.load(target), bundle)
        queries = end_user_queries(args.queries)
        searcher.search(pl.DataFrame([{"query_id": "warm", **queries[0]}]), 10)
        single = [timed(partial(searcher.search, pl.DataFrame([{"query_id": "q", **q}]), 10))[1] for q in queries]
        runtime = searcher.queries.runtime
        del searcher
        page, page_memory = None, None
        if args.requests:
            port = free_port()
            command = [sys.executable, "-m", "ticketsim.cli", "serve", "--model", str(bundle), "--index", str(target), "--host",
                       HOST, "--port", str(port), "--workers", str(args.workers), "--feedback", str(folder / "judgments.jsonl")]
            with server(command, port, args.startup, folder / "serve.log") as running:
                page = load(running.uri, end_user_queries(args.requests), args.clients, 10, 120.0)
                page_memory = server_memory(running.process.pid)
        new.write_csv(folder / "new.csv")
        add, add_seconds = timed(lambda: subprocess.run([sys.executable, "-m", "ticketsim.cli", "index", "add", str(folder / "new.csv"),
                                                         "--model", str(bundle), "--index", str(target)], capture_output=True, text=True))
        if args.folder is None:
            shutil.rmtree(folder / "tiny", ignore_errors=True)
    n, dims = args.tickets, measured.vectors.d
    print(f"\n{n:,} tickets, {bundle} ({'tiny ' + args.tiny if args.tiny else 'given'}; {dims} folded dims, {args.precision}); "
          f"{args.measure:,} generated and indexed through the bundle, the rest tiled from them (vectors with noise); "
          f"{os.cpu_count()} CPUs; load average before: {load_before}, after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    print("| index build stage | seconds | how |\n| --- | ---: | --- |")
    for stage, each in per_ticket.items():
        print(f"| {stage} | {each * n:,.0f} | extrapolated: {each * 1000:.2f} s per 1,000 measured on {args.measure:,} (CPU) |")
    for stage, took in seconds.items():
        print(f"| {stage} | {took:,.1f} | measured at {n:,} |")
    print("\n| size | MB | B/ticket |\n| --- | ---: | ---: |")
    on_disk = sum(size for name, size in disk.items() if "memory" not in name)
    for name, size in {**disk, "folder on disk": on_disk, "RSS after load (fresh process)": memory["load"],
                       "RSS after one search": memory["search"]}.items():
        print(f"| {name} | {size / 1e6:,.0f} | {size / n:,.0f} |")
    print(f"\nexact top 10, one query at a time ({args.queries} end-user queries, {runtime} runtime): {percentiles(single)}")
    if page:
        print(f"the page, {args.requests} searches by {args.clients} concurrent clients, gunicorn x{args.workers}: "
              f"{page['per_s']:.1f} requests/s, p50 {page['p50'] * 1000:.0f} ms, p95 {page['p95'] * 1000:.0f} ms, "
              f"{page['errors']} errors; largest worker RSS {page_memory['worker RSS']:,.0f} MB, PSS of all its processes "
              f"{page_memory['PSS of all']:,.0f} MB")
    said = (add.stdout or add.stderr or "no output").strip().splitlines()[-1][:160]
    print(f"`ticketsim index add` of {args.add:,} tickets (a new process: load, encode, write the next generation): {add_seconds:.1f} s, "
          f"exit {add.returncode}: {said}")
    if args.add != 1000:
        more = (1000 - args.add) * sum(per_ticket.values())
        print(f"  1,000 tickets: about {add_seconds + more:.0f} s (extrapolated: the measured tickets' and encoding per ticket)")


if __name__ == "__main__":
    main()
