"""A knowledge base at a help desk's size beside the one it was tiled from, side by side in one run: a cold
`ticketsim search` (a new process: load the bundle and the index, one query) on a bundle's index and on the same index
tiled to --tickets, the page's start (`ticketsim serve` until it answers), its throughput under concurrent clients, and
`ticketsim index add` of --add new tickets into the large index.

The large index is the small one's tickets over and over under new ids, their vectors with noise (as
benchmarks/search_latency.py's `repeated`: more tickets of the same kinds, not clones), written by the index's own
writer (search.index.append, doubling), so BM25's postings and every other file are the real ones at full size.
Both sides alternate --repeat times; the fastest of each is printed, with the peak RSS of the process and the part of it
that is private memory (RssAnon: what each worker pays; the mapped files are the page cache, shared).

Usage: python benchmarks/index_scale.py [--model models/default/bundle --index models/default/index] [--tickets 100000]
                                        [--repeat 3] [--add 1000] [--clients 20] [--requests 200] [--workers 2]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl
from serve_load import HOST, end_user_queries, free_port, load, server

from ticketsim.config import SyntheticConfig
from ticketsim.data.synthetic import generate
from ticketsim.search.index import Encoded, TicketIndex, append

QUERY = {"subject": "pump getting hot", "description": "the feed pump runs at 95 C since monday, bearing noise"}
# A cold search in a process of its own, which prints its memory at the end (VmHWM: peak RSS; RssAnon: private).
PROBE = ("import json, sys\nfrom ticketsim.cli import main\ncode = main(sys.argv[1:])\n"
         "status = dict(line.split(':', 1) for line in open('/proc/self/status').read().splitlines())\n"
         "print(json.dumps({k: int(status[k].split()[0]) * 1024 for k in ('VmHWM', 'RssAnon', 'RssFile')}))\nsys.exit(code)")


def tile(source: Path, n: int, target: Path, rng: np.random.Generator) -> float:
    """The index at `source` as `n` tickets at `target` (seconds): appended to itself until it holds n."""
    started = time.perf_counter()
    shutil.copytree(source, target)
    base = TicketIndex.load(source)
    vectors, frame = np.asarray(base.vectors.array, np.float32), base.tickets
    nearest = float(np.median(base.vectors.search(vectors, 2)[0][:, 1]))
    noise = nearest * np.sqrt(np.pi) / (2 * vectors.shape[1])   # two copies as far apart as a ticket from its neighbour
    size = len(base)
    while size < n:
        positions = np.arange(size, min(n, 2 * size))
        rows = positions % len(base)
        copies = pl.Series((positions // len(base)).astype(str))
        new = frame[rows].with_columns(ticket_id=pl.col("ticket_id") + "~" + copies)
        noisy = vectors[rows] + rng.normal(0, noise, (len(rows), vectors.shape[1])).astype(np.float32)
        size = len(append(target, base.model_hash, Encoded(noisy, new)))
    return time.perf_counter() - started


def cold_search(model: str, index: Path) -> dict[str, float]:
    command = [sys.executable, "-c", PROBE, "search", "--model", model, "--index", str(index), "--subject", QUERY["subject"],
               "--description", QUERY["description"], "--json"]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    seconds = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(f"search of {index} failed:\n{done.stderr[-2000:]}")
    return {"seconds": seconds, **json.loads(done.stdout.splitlines()[-1])}


def page(model: str, index: Path, args: argparse.Namespace, log: Path) -> dict[str, float]:
    """Seconds until `ticketsim serve` answers, then its throughput under args.clients concurrent clients."""
    port, started = free_port(), time.perf_counter()
    command = [sys.executable, "-m", "ticketsim.cli", "serve", "--model", model, "--index", str(index), "--host", HOST,
               "--port", str(port), "--workers", str(args.workers), "--feedback", str(log.with_suffix(".jsonl"))]
    with server(command, port, 900.0, log) as running:
        ready = time.perf_counter() - started
        measured = load(running.uri, end_user_queries(args.requests), args.clients, 10, 120.0)
    return {"start": ready, **measured}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="models/default/bundle")
    parser.add_argument("--index", default="models/default/index")
    parser.add_argument("--tickets", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--add", type=int, default=1000, help="new tickets given to `ticketsim index add` (0: none)")
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--requests", type=int, default=200, help="page searches (0: no page)")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        large = Path(scratch) / "large"
        tiled = tile(Path(args.index), args.tickets, large, np.random.default_rng(0))
        sides = {"small": Path(args.index), "large": large}
        sizes = {name: len(TicketIndex.load(folder)) for name, folder in sides.items()}
        print(f"tiled {sizes['small']:,} tickets to {sizes['large']:,} in {tiled:.0f} s; {os.cpu_count()} CPUs, load "
              f"{os.getloadavg()[0]:.2f}", flush=True)
        runs = {name: [] for name in sides}
        for name, folder in sides.items():
            cold_search(args.model, folder)     # once each first: bytecode compiled, the files in the page cache
        for _ in range(args.repeat):
            for name, folder in sides.items():
                runs[name].append(cold_search(args.model, folder))
        best = {name: min(found, key=lambda run: run["seconds"]) for name, found in runs.items()}
        pages = {name: page(args.model, folder, args, Path(scratch) / f"{name}.log") for name, folder in sides.items()} \
            if args.requests else {}
        added = None
        if args.add:
            tickets = generate(SyntheticConfig(n_tickets=args.add, n_labeled_queries=10, n_enduser_queries=10), 29).tickets
            tickets.with_columns(ticket_id="NEW-" + pl.col("ticket_id")).write_csv(Path(scratch) / "new.csv")
            started = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "ticketsim.cli", "index", "add", str(Path(scratch) / "new.csv"),
                                   "--model", args.model, "--index", str(large)], capture_output=True, text=True)
            added = (time.perf_counter() - started, done.returncode, (done.stdout or done.stderr).strip().splitlines()[-1][:140])
    print(f"\nbundle {args.model}; cold `ticketsim search`, fastest of {args.repeat} alternating runs\n")
    print("| index | tickets | seconds | peak RSS MB | private MB (RssAnon) | mapped files MB (RssFile) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name in sides:
        run = best[name]
        print(f"| {name} | {sizes[name]:,} | {run['seconds']:.2f} | {run['VmHWM'] / 1e6:,.0f} | {run['RssAnon'] / 1e6:,.0f} | "
              f"{run['RssFile'] / 1e6:,.0f} |")
    ratio = {key: best["large"][key] / best["small"][key] for key in ("seconds", "VmHWM", "RssAnon")}
    print(f"\nlarge / small: time {ratio['seconds']:.2f}x, peak RSS {ratio['VmHWM']:.2f}x, private memory {ratio['RssAnon']:.2f}x "
          f"(goal: within 2x)")
    for name, measured in pages.items():
        print(f"the page on {sizes[name]:,} tickets, gunicorn x{args.workers}: answers {measured['start']:.1f} s after start; "
              f"{args.requests} searches by {args.clients} clients: {measured['per_s']:.1f} requests/s, "
              f"p50 {measured['p50'] * 1000:.0f} ms, p95 {measured['p95'] * 1000:.0f} ms, {measured['errors']} errors")
    if added:
        print(f"`ticketsim index add` of {args.add:,} new tickets into {sizes['large']:,}: {added[0]:.1f} s, exit {added[1]}: {added[2]}")


if __name__ == "__main__":
    main()
