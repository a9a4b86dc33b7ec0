"""An index searched whole and split into --shards shards, side by side in one run: the index (or it tiled to --tickets
by its own writer, benchmarks.common.tile) split by its own writer (each shard a copy with the other shards' tickets
deleted), then the top 10 of --queries end-user queries, one at a time, p50 and p95: the whole index as one shard,
the shards one after the other in this process, and with --ray the shards as actors of a Ray cluster (a local one
unless RAY_ADDRESS names one), each query's two rounds (BM25's counts, then each shard's top 10) sent to every shard
at once. The merged top 10s are checked against the whole's (the same tickets, in the same order, with the same
totals); the last line, the time over the whole index's for each way.

    python -m benchmarks.shards [--model models/default/bundle --index models/default/index] [--tickets N] [--shards 2]
                                [--queries 50] [--ray]
"""
import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

from benchmarks.common import end_user_queries, load_average, percentiles, table, tile
from ticketsim.config import GraphConfig
from ticketsim.search.index import TicketIndex, delete_tickets
from ticketsim.search.shards import Shard, Shards, on_ray


def split(index: Path, shards: int, scratch: Path) -> list[Path]:
    """The index's tickets dealt round-robin into `shards` copies of it, each without the others' tickets."""
    ids = TicketIndex.load(index).table["ticket_id"].to_pylist()
    folders = [scratch / f"shard-{i}" for i in range(shards)]
    for i, folder in enumerate(folders):
        shutil.copytree(index, folder)
        delete_tickets(folder, [t for j, t in enumerate(ids) if j % shards != i])
    return folders


def timed(shards: Shards, queries: list[dict[str, str]]) -> tuple[list[float], list]:
    """(seconds of each query's top 10, the top 10s)."""
    seconds, found = [], []
    for i, query in enumerate(queries):
        frame = pl.DataFrame({"query_id": [str(i)], "subject": [query["subject"]], "description": [query["description"]]})
        started = time.perf_counter()
        found.append(shards.search(frame, 10)[0])
        seconds.append(time.perf_counter() - started)
    return seconds, found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=Path("models/default/bundle"))
    parser.add_argument("--index", type=Path, default=Path("models/default/index"), help="built with --model")
    parser.add_argument("--tickets", type=int, help="tile the index to this many tickets first (default: as it is)")
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--ray", action="store_true", help="also the shards as Ray actors")
    args = parser.parse_args()
    before, queries = load_average(), end_user_queries(args.queries)
    with tempfile.TemporaryDirectory(prefix="shards-") as scratch:
        scratch, index = Path(scratch), args.index
        if args.tickets:
            index = scratch / "tiled"
            tile(args.index, args.tickets, index, np.random.default_rng(0), GraphConfig(tickets=0))
        folders, tickets = split(index, args.shards, scratch), len(TicketIndex.load(index))
        ways = {"the whole index": Shards(args.model, [Shard(index)]),
                f"{args.shards} shards, here": Shards(args.model, [Shard(folder) for folder in folders])}
        if args.ray:
            ways[f"{args.shards} shards, Ray actors"] = on_ray(args.model, folders)
        for shards in ways.values():   # untimed: the first query loads what the rest find loaded
            shards.search(pl.DataFrame({"query_id": ["0"], **{k: [v] for k, v in queries[0].items()}}), 10)
        results = {way: timed(shards, queries) for way, shards in ways.items()}
    whole = results["the whole index"][1]
    rows = []
    for way, (seconds, found) in results.items():
        same = sum(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in zip(found, whole))
        rows.append((way, *(f"{1000 * s:.1f}" for s in percentiles(seconds)), f"{same} of {len(queries)}"))
    print(f"\n{args.model}; {tickets:,} tickets{' (tiled)' if args.tickets else ''} in {args.shards} shards; "
          f"{args.queries} end-user queries one at a time; load average before: {before}, after: {load_average()}\n")
    print(table(("search", "top 10 p50 ms", "p95 ms", "top 10s equal to the whole's (tickets, order, totals)"), rows))
    p50 = {way: percentiles(seconds)[0] for way, (seconds, _) in results.items()}
    print("\n" + ", ".join(f"{way}: {p50[way] / p50['the whole index']:.2f}x" for way in p50 if way != "the whole index")
          + " the whole index's p50")


if __name__ == "__main__":
    main()
