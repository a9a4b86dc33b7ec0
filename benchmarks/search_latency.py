"""Exact top-10 search, side by side: the index's L1 scan (search/vectors.py) against (a) numpy brute force, (b) scoring every pair through
the model, (c) one read pass over the index's memory, the physical floor; index build time and memory per ticket; query
encoding throughput on 1 and 2 threads.

    python benchmarks/search_latency.py [--sizes 10000 100000 1000000] [--model models/default/bundle]
                                        [--index models/default/index] [--repeat 5]

The knowledge base of each size is the real index's tickets repeated: their folded vectors with noise that puts two
copies as far apart as real neighbours, their words as they are (BM25 sees real postings, and a query's best words are
shared by every copy of a ticket, a hard case for the lexical bounds). The queries are end-user queries encoded by the
bundle. (b) is measured on a sample of tickets paired with one query and extrapolated linearly (each pair encodes its
ticket through every channel; nothing is shared between pairs). The vectors keep the real index's precision (float16
by default); a size whose vectors would not fit in memory is skipped with a note. FAISS and numpy run on one thread.
"""
import argparse
import os
import statistics
import time
from dataclasses import replace

import faiss
import numpy as np
import polars as pl
import torch

from ticketsim.bundle.loader import Scorer
from ticketsim.channels.cache import component_tokens
from ticketsim.channels.lexical import QUERY_LEVEL, LexicalIndex
from ticketsim.config import SyntheticConfig
from ticketsim.data.synthetic import generate
from ticketsim.data.tables import PAIR_SCHEMA, Corpus
from ticketsim.search.encode import Layout, fold_side
from ticketsim.search.index import TicketIndex
from ticketsim.search.topk import exact_top_k
from ticketsim.search.vectors import TicketVectors

K, CHUNK = 10, 8192
READS = {  # (c) every byte of the index read once, on one thread; the fastest of these is the floor
    "max of the bytes as int32": lambda vectors: vectors.reshape(-1).view(np.int32).max(),
    "column sums": lambda vectors: np.add.reduce(vectors, axis=0),
}


def median_seconds(run, repeat: int) -> float:
    run()   # warm-up: page faults, lazy initialisation
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def repeated(real: TicketIndex, n: int, rng: np.random.Generator) -> tuple[TicketVectors, float, LexicalIndex, float]:
    """n tickets: the real ones over and over; (vectors, seconds to store them, BM25 over their words, seconds). Each copy's vector
    gets noise of the size that puts two copies of a ticket as far apart as a real ticket is from its nearest neighbour
    (the median): more tickets of the same kinds, not clones (E|a - b|_1 = dim * sigma * 2 / sqrt(pi) for two copies)."""
    vectors = np.asarray(real.vectors.array, dtype=np.float32)
    nearest = float(np.median(real.vectors.search(vectors, 2)[0][:, 1]))
    noise = nearest * np.sqrt(np.pi) / (2 * vectors.shape[1])
    blocks = [vectors[rows] + rng.normal(0, noise, (len(rows), vectors.shape[1])).astype(np.float32)
              for rows in (np.arange(start, min(n, start + CHUNK)) % len(vectors) for start in range(0, n, CHUNK))]
    started = time.perf_counter()
    index = TicketVectors.of(np.concatenate(blocks), real.vectors.precision)
    seconds = time.perf_counter() - started
    words = real.words()
    started = time.perf_counter()
    lexical = LexicalIndex.build(tuple(map(str, range(n))), [words[i % len(words)] for i in range(n)], real.bm25.k1, real.bm25.b)
    return index, seconds, lexical, time.perf_counter() - started


def numpy_top_k(vectors: np.ndarray, query: np.ndarray) -> np.ndarray:
    """(a) brute force in numpy, CHUNK rows at a time (a whole n x dim temporary would not fit)."""
    distances = np.concatenate([np.abs(vectors[s:s + CHUNK] - query).sum(1) for s in range(0, len(vectors), CHUNK)])
    best = np.argpartition(distances, K)[:K]
    return best[np.argsort(distances[best])]


def measure(real: TicketIndex, n: int, queries: np.ndarray, words: list[list[str]], rng: np.random.Generator,
            repeat: int) -> dict[str, float]:
    """Seconds: building n tickets, then per query (median): the search with L, dense only, (a) numpy, (c) the floor."""
    index, add_seconds, lexical, bm25_seconds = repeated(real, n, rng)
    vectors, order, weight = index.array, np.arange(n), real.layout.lexical_weight
    rounds = []

    def search(i: int, dense_only: bool = False) -> np.ndarray:
        if dense_only:
            return exact_top_k(index, queries[i], K, order)[0]
        counted = Counting(index)
        rows = exact_top_k(counted, queries[i], K, order, lexical.scores(("q",), [words[i]]).distances()[0], weight)[0]
        rounds.append(counted.calls)
        return rows

    picks = iter(range(10**9))
    with_l = median_seconds(lambda: search(next(picks) % len(queries)), repeat)
    dense = median_seconds(lambda: search(next(picks) % len(queries), dense_only=True), repeat)
    query32 = queries[0].astype(np.float32)
    brute = median_seconds(lambda: numpy_top_k(vectors, query32), repeat)
    floor = min(median_seconds(lambda: read(vectors), repeat) for read in READS.values())
    assert set(numpy_top_k(vectors, query32)) == set(search(0, dense_only=True))
    return {"add": add_seconds, "bm25_build": bm25_seconds, "with_l": with_l, "dense": dense, "numpy": brute, "floor": floor,
            "rounds": max(rounds)}


class Counting:
    """The index, counting the scans the threshold algorithm asks for."""

    def __init__(self, index: TicketVectors):
        self.index, self.calls, self.ntotal, self.d, self.array = index, 0, index.ntotal, index.d, index.array

    def search(self, x: np.ndarray, k: int):
        self.calls += 1
        return self.index.search(x, k)


def pair_seconds(scorer: Scorer, corpus: Corpus, n: int) -> float:
    """(b) seconds per query-ticket pair scored through the model (pair scoring, as the served model did before search)."""
    tickets = corpus.tickets.head(n)
    pairs = pl.DataFrame({"query_id": [corpus.queries["query_id"][0]] * n, "ticket_id": tickets["ticket_id"],
                          "label": [None] * n, "split": ["test"] * n, "source_rank": [None] * n}, schema=PAIR_SCHEMA)
    return median_seconds(lambda: scorer.score(Corpus(tickets, corpus.queries.head(1), pairs), pool=False), 1) / n


def encoding_rate(scorer: Scorer, queries: pl.DataFrame, threads: int, batch: int) -> float:
    """Queries encoded per second (subject and description, every channel, folded), `batch` queries per call."""
    scorer = replace(scorer, sentence=replace(scorer.sentence, threads=threads))
    layout = Layout.of(scorer)
    torch.set_num_threads(threads)
    calls = [queries.slice(s, batch) for s in range(0, queries.height, batch)]
    return queries.height / median_seconds(lambda: [fold_side(scorer, layout, part, "queries") for part in calls], 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--model", default="models/default/bundle")
    parser.add_argument("--index", default="models/default/index", help="built with --model: its tickets are repeated")
    parser.add_argument("--repeat", type=int, default=5, help="queries timed per size (the median counts)")
    parser.add_argument("--sample", type=int, default=64, help="tickets scored through the model for (b)")
    args = parser.parse_args()
    faiss.omp_set_num_threads(1)
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    scorer, real = Scorer.load(args.model), TicketIndex.load(args.index)
    texts = generate(SyntheticConfig(n_tickets=max(args.sample, 100), n_labeled_queries=0, n_enduser_queries=64), seed=7)
    tokens, queries = fold_side(scorer, real.layout, texts.queries, "queries")
    words = component_tokens(tokens, QUERY_LEVEL)
    per_pair = pair_seconds(scorer, texts, args.sample)
    free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    dim, width = real.vectors.d, real.vectors.array.itemsize
    print(f"{dim} dimensions ({width * dim / 1024:.1f} KiB per ticket in {real.vectors.precision}), "
          f"L weighed {real.layout.lexical_weight:.2f}; median of {args.repeat} queries; one thread\n")
    print("| tickets | index GB | add s | BM25 s | top-10 with L ms | dense top-10 ms | (a) numpy ms | (b) model s "
          "| (c) floor ms | with L / floor | dense / floor | numpy / dense | model / with L | TA rounds |")
    print("|" + " ---: |" * 15)
    for n in args.sizes:
        size = width * n * dim
        if size > 0.6 * free:
            print(f"| {n:,} | {size / 1e9:.1f} | does not fit: {free / 1e9:.0f} GB free |" + " |" * 12)
            continue
        m = measure(real, n, queries, words, rng, args.repeat)
        model = per_pair * n
        print(f"| {n:,} | {size / 1e9:.2f} | {m['add']:.1f} | {m['bm25_build']:.1f} | {1e3 * m['with_l']:.1f} | "
              f"{1e3 * m['dense']:.1f} | {1e3 * m['numpy']:.0f} | {model:,.0f} | {1e3 * m['floor']:.1f} | "
              f"{m['with_l'] / m['floor']:.2f} | {m['dense'] / m['floor']:.2f} | {m['numpy'] / m['dense']:.1f} | "
              f"{model / m['with_l']:,.0f} | {m['rounds']} |")
    print(f"\n(b) {1e3 * per_pair:.0f} ms per pair, measured on {args.sample} tickets of the synthetic corpus with {args.model}")
    for threads in (1, 2):
        one, batched = encoding_rate(scorer, texts.queries, threads, 1), encoding_rate(scorer, texts.queries, threads, 64)
        print(f"query encoding, {threads} thread(s): {one:.1f} queries/s one at a time ({1e3 / one:.0f} ms each), "
              f"{batched:.1f} queries/s in batches of 64")


if __name__ == "__main__":
    main()
