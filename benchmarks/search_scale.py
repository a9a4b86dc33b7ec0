"""Search and serving at any size, side by side in one run: a bundle's index tiled by the index's own writer to each of
--sizes (benchmarks.common.tile: more tickets of the same kinds, every file real at full size), then at each size a cold
`ticketsim search` (a new process: wall, CPU, peak RSS; the sizes in turns, the fastest of --repeat kept), exact top 10
one query at a time in one process (p50, p95; exact below --graph-from tickets, through the index's graph from there on:
benchmarks.approximate compares the two), the top 10 with BM25 of every ticket beside the pruned BM25 the search runs,
the index's bytes per ticket on disk, the search page (`ticketsim serve` on --workers gunicorn workers: seconds until it
answers; requests/s, p50, p95 and errors under --clients concurrent clients; the largest worker's RSS and the PSS of all
its processes), and `ticketsim index add` of --add new tickets
into the largest index, as a new process.

    python -m benchmarks.search_scale [--model models/default/bundle --index models/default/index | --tiny AL|SL]
                                      [--sizes 10000 100000 1000000] [--repeat 3] [--queries 50] [--requests 200]
                                      [--clients 20] [--workers 2] [--add 1000] [--measure 200] [--graph-from 1000000]

The index build (tokens, every channel, flattening, topics) is timed on --measure generated tickets through the bundle and
extrapolated per ticket to each size (said in the output). --tiny builds a tiny bundle here (benchmarks/common.py; AL:
the registered configuration A+L, 1,920 flat dims; SL: S+L on one level pair, 384 dims, F+L's layout) reading S as
params' sentence settings do (the encoder's full window: the encoding cost is real), with its query export, and tiles
the index of those --measure tickets instead of --index. The queries are the synthetic corpus's end-user queries.
"""
import argparse
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np
import polars as pl

from benchmarks.common import (
    alternate,
    cold,
    end_user_queries,
    load_average,
    make_bundle,
    memory,
    page_load,
    percentiles,
    searched_one_by_one,
    serving,
    table,
    tile,
    train_parts,
)
from ticketsim.bundle.loader import Scorer
from ticketsim.channels.cache import component_tokens
from ticketsim.channels.lexical import QUERY_LEVEL
from ticketsim.config import IndexConfig, SyntheticConfig, load_params
from ticketsim.data.synthetic import generate
from ticketsim.scoring.topk import top_k
from ticketsim.search.index import TicketIndex, build_index, model_hash
from ticketsim.search.queries import export_queries, query_encoder
from ticketsim.search.searcher import Searcher

CLI = [sys.executable, "-m", "ticketsim.cli"]
QUERY = {"subject": "pump getting hot", "description": "the feed pump runs at 95 C since monday, bearing noise"}


def tiny_bundle(variant: str, folder: Path) -> Path:
    """benchmarks.common's bundle of `variant`, reading S as params' sentence settings do, with its query export."""
    bundle = make_bundle(folder / "bundle", train_parts(folder / "parts"), variant, sentence=load_params().sentence)
    export_queries(bundle)
    return bundle


def build_seconds(bundle: Path, n: int, out: Path) -> float:
    """Seconds per ticket of `ticketsim index build`'s work on n generated tickets (after a warm-up: every model loads on
    first use); the index is left at `out`."""
    scorer, tickets = Scorer.load(bundle), generate(SyntheticConfig(n_tickets=n, n_labeled_queries=10, n_enduser_queries=10), 13).tickets
    build_index(scorer, model_hash(bundle), tickets.head(5), out, force=True)
    started = time.perf_counter()
    build_index(scorer, model_hash(bundle), tickets, out, force=True)
    return (time.perf_counter() - started) / n


def cold_search(bundle: Path, index: Path):
    """A cold `ticketsim search` of one query (load the bundle and the index, search, print): common.Cold."""
    done = cold([*CLI, "search", "--model", str(bundle), "--index", str(index), "--subject", QUERY["subject"],
                 "--description", QUERY["description"], "--json"], env={"HF_HUB_OFFLINE": "1"})
    if done.code:
        raise SystemExit(f"search of {index} failed:\n{done.output[-2000:]}")
    return done


def warm_seconds(bundle: Path, index: Path, queries: list[dict[str, str]]) -> list[float]:
    """Seconds of each query's top 10, one at a time, in one process that loaded the index once (common.searched_one_by_one)."""
    return searched_one_by_one(Searcher(query_encoder(bundle), TicketIndex.load(index), bundle), queries)[1]


def lexical_seconds(bundle: Path, index: Path, queries: list[dict[str, str]]) -> dict[str, list[float]]:
    """Seconds of each query's top 10 (its encoding aside) with BM25 of every ticket (`every`: Lexicon.distances) and
    with the pruned BM25 the search runs (`pruned`: Lexicon.query), in turns; the same rows and totals, checked."""
    searcher = Searcher(query_encoder(bundle), TicketIndex.load(index), bundle)
    index, score = searcher.index, searcher.index.score
    frame = pl.DataFrame([{"query_id": str(i), **query} for i, query in enumerate(queries)])
    tokens, flat = searcher.queries.encode(frame, score)
    seconds = {"every": [], "pruned": []}
    for words, vector in zip(component_tokens(tokens, QUERY_LEVEL), flat):
        found = {}
        for way, lexical in (("every", index.postings.distances), ("pruned", index.postings.query)) * 2:
            started = time.perf_counter()
            found[way] = top_k(index.vectors, vector, 10, index.ids_at, score, lexical(words))
            seconds[way].append(time.perf_counter() - started)     # the second of each pair counts (warm)
        if not all(np.array_equal(a, b) for a, b in zip(found["every"], found["pruned"])):
            raise SystemExit(f"{index.folder}: the pruned BM25's top 10 differs from every ticket's for {words}")
    return {way: times[1::2] for way, times in seconds.items()}


def disk_bytes(index: Path) -> dict[str, int]:
    """Bytes of each kind of file of the index's generation in force, its segments' summed (vectors.npy, ...)."""
    found: dict[str, int] = {}
    for path in (p for p in TicketIndex.load(index).generation.rglob("*") if p.is_file()):
        found[path.name] = found.get(path.name, 0) + path.stat().st_size
    return found


def server_memory(pid: int) -> dict[str, float]:
    """The largest RSS of the server's workers (its child processes) and the PSS of all its processes, in bytes: PSS
    divides the pages they share (the mapped index) among them."""
    children = [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    figures = {p: memory(p) for p in [pid, *children]}
    return {"worker_rss": max(figures[c]["rss"] for c in children), "pss": sum(f["pss"] for f in figures.values())}


def page(bundle: Path, index: Path, args: argparse.Namespace, log: Path) -> dict[str, float]:
    """`ticketsim serve` on the index: seconds until it answers, then its figures under args.clients clients."""
    command = [*CLI, "serve", "--model", str(bundle), "--index", str(index), "--port", "{port}", "--workers", str(args.workers),
               "--feedback", str(log.with_suffix(".jsonl"))]
    started = time.perf_counter()
    with serving(command, log, startup_seconds=args.startup) as server:
        ready = time.perf_counter() - started
        measured = page_load(server.uri, end_user_queries(args.requests), args.clients)
        return {"start": ready, **measured, **server_memory(server.process.pid)}


def index_add(bundle: Path, index: Path, n: int, scratch: Path):
    """`ticketsim index add` of n new generated tickets as a new process: common.Cold."""
    tickets = generate(SyntheticConfig(n_tickets=n, n_labeled_queries=10, n_enduser_queries=10), 29).tickets
    tickets.with_columns(ticket_id="NEW-" + pl.col("ticket_id")).write_csv(scratch / "new.csv")
    return cold([*CLI, "index", "add", str(scratch / "new.csv"), "--model", str(bundle), "--index", str(index)])


def index_arguments(description: str) -> argparse.ArgumentParser:
    """A parser with the arguments of the index a scale benchmark tiles: --model and --index, or --tiny."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--model", type=Path, default=Path("models/default/bundle"))
    parser.add_argument("--index", type=Path, default=Path("models/default/index"), help="built with --model: it is tiled")
    parser.add_argument("--tiny", choices=("AL", "SL"), help="build a tiny bundle of this configuration instead of --model")
    return parser


def main() -> None:
    parser = index_arguments(__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--repeat", type=int, default=3, help="cold searches per size, in turns (the fastest counts)")
    parser.add_argument("--queries", type=int, default=50, help="single searches timed per size in one process")
    parser.add_argument("--requests", type=int, default=200, help="page searches per size (0: no page)")
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2, help="the page's gunicorn workers")
    parser.add_argument("--startup", type=float, default=900.0, help="seconds the page may take to answer at all")
    parser.add_argument("--add", type=int, default=1000, help="new tickets given to `ticketsim index add` (0: none)")
    parser.add_argument("--measure", type=int, default=200, help="generated tickets the index build is timed on")
    parser.add_argument("--graph-from", type=int, default=IndexConfig.graph.tickets,
                        help="index.graph.tickets of the tiled indexes (default: the library's; 0: every search exact)")
    args = parser.parse_args()
    before = load_average()
    with tempfile.TemporaryDirectory(prefix="search-scale-") as scratch:
        scratch = Path(scratch)
        bundle = tiny_bundle(args.tiny, scratch / "tiny") if args.tiny else args.model
        per_ticket = build_seconds(bundle, args.measure, scratch / "measured")
        source = scratch / "measured" if args.tiny else args.index
        print(f"index build: {per_ticket * 1000:.2f} s per 1,000 tickets (measured on {args.measure})", flush=True)
        folders, tiled, searched = {}, {}, {}
        for n in sorted(args.sizes):
            folders[n] = scratch / f"tiled-{n}"
            tiled[n] = tile(source, n, folders[n], np.random.default_rng(0), replace(IndexConfig.graph, tickets=args.graph_from))
            searched[n] = "graph" if TicketIndex.load(folders[n]).vectors.graphs else "exact"
            print(f"tiled to {n:,} in {tiled[n]:.1f} s", flush=True)
        searches = alternate({n: partial(cold_search, bundle, folder) for n, folder in folders.items()}, args.repeat)
        fastest = {n: min(runs, key=lambda run: run.seconds) for n, runs in searches.items()}
        queries = end_user_queries(args.queries)
        warm = {n: percentiles(warm_seconds(bundle, folder, queries)) for n, folder in folders.items()}
        lexical = {n: {way: percentiles(times) for way, times in lexical_seconds(bundle, folder, queries).items()}
                   for n, folder in folders.items()}
        disk = {n: disk_bytes(folder) for n, folder in folders.items()}
        pages = {n: page(bundle, folder, args, scratch / f"page-{n}.log") for n, folder in folders.items()} if args.requests else {}
        largest = max(folders)
        added = index_add(bundle, folders[largest], args.add, scratch) if args.add else None
        for n in folders:
            shutil.rmtree(folders[n])
        base = TicketIndex.load(source)
    print(f"\n{bundle} ({'tiny ' + args.tiny if args.tiny else 'given'}; {base.vectors.d} flat dims, {base.vectors.precision}); "
          f"its index of {len(base):,} tickets tiled; cold search the fastest of {args.repeat} in turns; {args.queries} "
          f"end-user queries; load average before: {before}, after: {load_average()}\n")
    print(table(("tickets", "search", "tiled s", "build s (extrapolated)", "on disk MB", "B/ticket", "cold search s", "CPU s",
                 "peak RSS MB", "top 10 p50 ms", "p95 ms"),
                [(f"{n:,}", searched[n], f"{tiled[n]:.1f}", f"{per_ticket * n:,.0f}", f"{sum(disk[n].values()) / 1e6:,.1f}",
                  f"{sum(disk[n].values()) / n:,.0f}", f"{fastest[n].seconds:.2f}", f"{fastest[n].cpu:.2f}",
                  f"{fastest[n].peak_rss / 1e6:,.0f}", f"{warm[n][0] * 1000:.1f}", f"{warm[n][1] * 1000:.1f}") for n in folders]))
    print("\ntop 10 without the query's encoding, BM25 of every ticket beside the pruned BM25 the search runs (the same "
          "top 10s, checked)\n")
    print(table(("tickets", "every ticket p50 ms", "p95 ms", "pruned p50 ms", "p95 ms", "p50 ratio"),
                [(f"{n:,}", *(f"{lexical[n][way][i] * 1000:.1f}" for way in ("every", "pruned") for i in (0, 1)),
                  f"{lexical[n]['pruned'][0] / lexical[n]['every'][0]:.2f}x") for n in folders]))
    smallest = min(folders)
    print(f"\n{largest:,} / {smallest:,} tickets: cold search {fastest[largest].seconds / fastest[smallest].seconds:.2f}x the "
          f"time, {fastest[largest].peak_rss / fastest[smallest].peak_rss:.2f}x the peak RSS\n")
    files = sorted(disk[largest].items(), key=lambda item: -item[1])
    print(table(("file", f"MB at {largest:,}", "B/ticket"), [(name, f"{size / 1e6:,.1f}", f"{size / largest:,.1f}")
                                                             for name, size in files]))
    if pages:
        print(f"\nthe page, gunicorn x{args.workers}, {args.requests} searches by {args.clients} concurrent clients\n")
        print(table(("tickets", "answers after s", "requests/s", "p50 ms", "p95 ms", "errors", "largest worker RSS MB",
                     "PSS of all MB"),
                    [(f"{n:,}", f"{p['start']:.1f}", f"{p['per_s']:.1f}", f"{p['p50'] * 1000:.0f}", f"{p['p95'] * 1000:.0f}",
                      p["errors"], f"{p['worker_rss'] / 1e6:,.0f}", f"{p['pss'] / 1e6:,.0f}") for n, p in pages.items()]))
    if added:
        said = (added.output.strip().splitlines() or ["no output"])[-1][:160]
        print(f"\n`ticketsim index add` of {args.add:,} new tickets into {largest:,} (a new process: load, encode, write the "
              f"next generation): {added.seconds:.1f} s, exit {added.code}: {said}")


if __name__ == "__main__":
    main()
