"""Memory per ticket of the search index, float32 beside float16, and the memory of the page's workers, each holding a
FAISS IndexFlat of its own (the format before issue 33) beside mapping one shared float16 file (search/vectors.py).

Usage:
  python benchmarks/index_memory.py [--tickets 80] [--enduser 10] [--rows 200000] [--dim 384] [--workers 2]

1. Per ticket: tiny bundles (tests/search_bundle.py) of the registered configuration A+L (five level pairs: 1,920
   folded dims) and of S+L on one level pair (384 dims: F+L's layout, S in F's place) over --tickets synthetic tickets
   with --enduser end-user queries, each indexed as float32 and as float16: the vectors' bytes per ticket on disk, the
   tickets' table on disk and in memory (polars' estimate), and against float32 how many end-user queries keep the same
   top 10 (in order; as a set), and for the others the largest relative gap between the scores at a rank that differs.
2. Workers: --rows random --dim vectors written in both formats; --workers processes each load the index and scan it
   once (every page touched), then, all alive together, the kernel's figures of each (/proc/PID/smaps_rollup): RSS
   (pages it touched, shared ones included), PSS (shared pages divided among the processes mapping them) and private
   bytes, above what the process held before loading. Then one exact scan (top 64) of each on one thread: median and
   fastest of 7.
"""
import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import faiss
import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
WORKER = """
import sys, faiss, numpy as np, torch  # torch: a large float16 scan converts with it (search/vectors.py)
from ticketsim.search.vectors import TicketVectors
print("imported", flush=True)
sys.stdin.readline()
path, query = sys.argv[1], np.zeros((1, int(sys.argv[2])), np.float32)
index = faiss.read_index(path) if path.endswith(".faiss") else TicketVectors.load(path)
index.search(query, 10)
print("loaded", flush=True)
sys.stdin.read()
"""


def per_ticket(n_tickets: int, n_enduser: int, folder: Path) -> None:
    from search_bundle import make_bundle, train_parts

    from ticketsim.bundle.loader import Scorer
    from ticketsim.search.enduser import SPLIT
    from ticketsim.search.index import TICKETS, VECTORS, TicketIndex, build_index, model_hash
    from ticketsim.search.queries import query_encoder
    from ticketsim.search.searcher import Searcher

    parts = train_parts(folder / "parts", n_tickets, n_enduser=n_enduser)
    corpus = parts.corpus
    queries = corpus.queries.filter(corpus.queries["query_id"].is_in(corpus.split(SPLIT)["query_id"].unique().implode()))
    print("| configuration | dims | precision | vectors B/ticket (disk) | tickets table B/ticket (disk) "
          "| tickets table B/ticket (memory) | top 10 as float32 | same ten tickets | largest score gap where not |")
    print("|" + " --- |" * 2 + " ---: |" * 7)
    for variant, label in (("AL", "A+L (registered)"), ("SL", "S+L, one level pair (F+L's layout)")):
        bundle = make_bundle(folder / variant, parts, variant)
        scorer = Scorer.load(bundle)
        found = {}
        for precision in ("float32", "float16"):
            where = folder / f"{variant}-{precision}"
            build_index(scorer, model_hash(bundle), corpus.tickets, precision=precision, out=where)
            index = TicketIndex.load(where)
            found[precision] = Searcher(query_encoder(bundle, scorer), index, bundle).search(queries, 10)
            pairs = [([h.ticket_id for h in a.hits], [h.ticket_id for h in b.hits], a, b)
                     for a, b in zip(found["float32"], found[precision])]
            gaps = [abs(a.hits[i].score - b.hits[i].score) / a.hits[i].score
                    for wide, half, a, b in pairs for i in range(len(wide)) if wide[i] != half[i]]
            files = index.generation
            print(f"| {label} | {index.vectors.d} | {precision} | {((files / VECTORS).stat().st_size - 128) / len(index):,.0f} | "
                  f"{(files / TICKETS).stat().st_size / len(index):,.0f} | {index.tickets.estimated_size() / len(index):,.0f} | "
                  f"{sum(w == h for w, h, _, _ in pairs)} of {len(pairs)} | {sum(set(w) == set(h) for w, h, _, _ in pairs)} | "
                  f"{max(gaps, default=0):.1e} |")


def workers(rows: int, dim: int, n_workers: int, folder: Path) -> None:
    from ticketsim.search.vectors import TicketVectors

    vectors = np.random.default_rng(0).normal(size=(rows, dim)).astype(np.float32)
    flat = faiss.IndexFlat(dim, faiss.METRIC_L1)
    flat.add(vectors)
    faiss.write_index(flat, str(folder / "vectors.faiss"))
    TicketVectors.of(vectors, "float16").save(folder / "vectors.npy")
    print(f"\n{rows:,} x {dim} vectors, {n_workers} workers; MB each worker holds above its state before loading\n")
    print("| index | file MB | RSS per worker | PSS per worker | private per worker | PSS of all workers |")
    print("| --- |" + " ---: |" * 5)
    for name, label in (("vectors.faiss", "FAISS IndexFlat, float32 (before)"), ("vectors.npy", "float16, memory-mapped (after)")):
        procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(folder / name), str(dim)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True) for _ in range(n_workers)]
        for proc in procs:
            proc.stdout.readline()
        before = [smaps(proc.pid) for proc in procs]
        for proc in procs:
            proc.stdin.write("go\n")
            proc.stdin.flush()
        for proc in procs:
            proc.stdout.readline()
        # read while every worker is alive: PSS divides a shared page among the processes mapping it
        grown = np.array([smaps(proc.pid) for proc in procs]) - np.array(before)
        for proc in procs:
            proc.communicate("")
        rss, pss, clean, dirty = grown.mean(0) / 1e6
        print(f"| {label} | {(folder / name).stat().st_size / 1e6:,.0f} | {rss:,.0f} | {pss:,.0f} | {clean + dirty:,.0f} | "
              f"{grown[:, 1].sum() / 1e6:,.0f} |")
    faiss.omp_set_num_threads(1)
    torch.set_num_threads(1)
    TicketVectors.of(vectors, "float32").save(folder / "float32.npy")
    query = vectors[:1] + 0.1
    print()
    for label, index in (("FAISS IndexFlat, float32", flat), ("mapped float32", TicketVectors.load(folder / "float32.npy")),
                         ("mapped float16", TicketVectors.load(folder / "vectors.npy"))):
        index.search(query, 64)     # warm-up: the pages read, torch imported
        seconds = []
        for _ in range(7):
            started = time.perf_counter()
            index.search(query, 64)
            seconds.append(time.perf_counter() - started)
        print(f"one scan, {label}: median {1e3 * statistics.median(seconds):.0f} ms (fastest {1e3 * min(seconds):.0f})")


def smaps(pid: int) -> list[int]:
    """Rss, Pss, Private_Clean, Private_Dirty of a process, in bytes."""
    fields = dict(line.split(":") for line in open(f"/proc/{pid}/smaps_rollup").read().splitlines()[1:])
    return [int(fields[k].split()[0]) * 1024 for k in ("Rss", "Pss", "Private_Clean", "Private_Dirty")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tickets", type=int, default=80)
    parser.add_argument("--enduser", type=int, default=10)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        per_ticket(args.tickets, args.enduser, Path(scratch))
        workers(args.rows, args.dim, args.workers, Path(scratch))


if __name__ == "__main__":
    main()
