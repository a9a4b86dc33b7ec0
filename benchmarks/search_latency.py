"""Exact top-10 search, side by side: the FAISS L1 index against (a) numpy brute force, (b) scoring every pair through
the model, (c) one read pass over the index's memory, the physical floor; index build time and memory per ticket; query
encoding throughput on 1 and 2 threads.

    python benchmarks/search_latency.py [--sizes 10000 100000 300000] [--model models/default/bundle] [--repeat 5]

Ticket vectors are random at the real folded dimension (the final variant's level pairs x (h + E + T + S), from
params.yaml): an exact scan costs the same whatever the values. (b) and the encoding figures use the real bundle on the
synthetic corpus's texts: (b) is measured on a sample of tickets paired with one query and extrapolated linearly (each
pair encodes its ticket through every channel; nothing is shared between pairs). A size whose float32 vectors would not
fit in memory is skipped with a note (1M x 5,304 dims is 21 GB); search time grows linearly with the tickets.
"""
import argparse
import os
import statistics
import time
from dataclasses import replace
from pathlib import Path

import faiss
import numpy as np
import polars as pl
import torch
import yaml

from ticketsim.config import SyntheticConfig
from ticketsim.data.synthetic import generate
from ticketsim.data.tables import PAIR_SCHEMA, Corpus
from ticketsim.scorer import Scorer
from ticketsim.search.encode import Layout, encode_side
from ticketsim.search.topk import exact_top_k, flat_vectors

K, CHUNK, S_DIM = 10, 8192, 384   # S: all-MiniLM-L6-v2, the default sentence.model


def folded_dim(params: dict) -> int:
    """Level pairs with V > 0 times the summed dimensions of the final variant's dense channels."""
    variant, embedding = params["siamese"]["variants"][params["siamese"]["final"]], params["embedding"]
    dims = {"h": params["siamese"]["hidden"], "E": embedding["word2vec"]["dim"] + 2 * embedding["char_blstm"]["hidden"],
            "T": params["topics"]["n_topics"], "S": S_DIM}
    return sum(1 for v in variant["levels"].values() if v) * sum(dims[c] for c, w in variant["channels"].items() if w and c in dims)


def median_seconds(run, repeat: int) -> float:
    run()   # warm-up: page faults, lazy initialisation
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def random_index(n: int, dim: int, rng: np.random.Generator) -> tuple[faiss.IndexFlat, float]:
    """An IndexFlat (L1) of n random vectors, filled CHUNK rows at a time (no second copy); the seconds spent in add()."""
    index, seconds = faiss.IndexFlat(dim, faiss.METRIC_L1), 0.0
    for start in range(0, n, CHUNK):
        block = rng.standard_normal((min(CHUNK, n - start), dim), dtype=np.float32)
        started = time.perf_counter()
        index.add(block)
        seconds += time.perf_counter() - started
    return index, seconds


def numpy_top_k(vectors: np.ndarray, query: np.ndarray) -> np.ndarray:
    """(a) brute force in numpy, CHUNK rows at a time (a whole N x dim temporary would not fit)."""
    distances = np.concatenate([np.abs(vectors[s:s + CHUNK] - query).sum(1) for s in range(0, len(vectors), CHUNK)])
    best = np.argpartition(distances, K)[:K]
    return best[np.argsort(distances[best])]


def read_pass(vectors: np.ndarray) -> None:
    """(c) every byte of the index read once: column sums stream the rows through the vector units."""
    np.add.reduce(vectors, axis=0)


def measure(n: int, dim: int, rng: np.random.Generator, repeat: int) -> tuple[float, float, float, float]:
    """Seconds: add() of n random tickets, then per query: our exact top-10, (a) numpy, (c) the read pass."""
    index, add_seconds = random_index(n, dim, rng)
    vectors, order = flat_vectors(index), np.arange(n)
    queries = iter(rng.standard_normal((repeat + 1, dim)))
    ours = median_seconds(lambda: exact_top_k(index, next(queries), K, order), repeat)
    query = rng.standard_normal(dim, dtype=np.float32)
    brute = median_seconds(lambda: numpy_top_k(vectors, query), repeat)
    floor = median_seconds(lambda: read_pass(vectors), repeat)
    assert set(numpy_top_k(vectors, query)) == set(exact_top_k(index, query.astype(np.float64), K, order)[0])
    return add_seconds, ours, brute, floor


def synthetic_texts(n_tickets: int) -> Corpus:
    return generate(SyntheticConfig(n_tickets=n_tickets, n_labeled_queries=64, n_enduser_queries=0), seed=7)


def pair_seconds(scorer: Scorer, corpus: Corpus, n: int) -> float:
    """(b) seconds per query-ticket pair scored through the model (pair scoring, as the served model did before search)."""
    tickets = corpus.tickets.head(n)
    pairs = pl.DataFrame({"query_id": [corpus.queries["query_id"][0]] * n, "ticket_id": tickets["ticket_id"],
                          "label": [None] * n, "split": ["test"] * n, "source_rank": [None] * n}, schema=PAIR_SCHEMA)
    one = Corpus(tickets, corpus.queries.head(1), pairs)
    return median_seconds(lambda: scorer.score(one, pool=False), 1) / n


def encoding_rate(scorer: Scorer, queries: pl.DataFrame, threads: int, batch: int) -> float:
    """Queries encoded per second (subject and description, every channel, folded), `batch` queries per call."""
    scorer = replace(scorer, sentence=replace(scorer.sentence, threads=threads))
    layout = Layout.of(scorer)
    torch.set_num_threads(threads)
    calls = [queries.slice(s, batch) for s in range(0, queries.height, batch)]
    seconds = median_seconds(lambda: [encode_side(scorer, layout, part, "queries") for part in calls], 1)
    return queries.height / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 300_000])
    parser.add_argument("--model", default="models/default/bundle", help="a bundle, for (b) and the encoding figures")
    parser.add_argument("--repeat", type=int, default=5, help="queries timed per size (the median counts)")
    parser.add_argument("--sample", type=int, default=64, help="tickets scored through the model for (b)")
    args = parser.parse_args()
    dim = folded_dim(yaml.safe_load(Path("params.yaml").read_text()))
    faiss.omp_set_num_threads(1)
    rng = np.random.default_rng(0)
    scorer, texts = Scorer.load(args.model), synthetic_texts(max(args.sample, 100))
    per_pair = pair_seconds(scorer, texts, args.sample)
    free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    print(f"folded dimension {dim} ({4 * dim / 1024:.1f} KiB per ticket in float32); FAISS on 1 thread; median of "
          f"{args.repeat} queries\n")
    print("| tickets | index GB | build (add) s | FAISS top-10 ms | (a) numpy ms | (b) model s | (c) read pass ms "
          "| FAISS / floor | numpy / FAISS | model / FAISS |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for n in args.sizes:
        size = 4 * n * dim
        if size > 0.6 * free:
            print(f"| {n:,} | {size / 1e9:.1f} | – | does not fit: {free / 1e9:.0f} GB free | | | | | | |")
            continue
        add_seconds, ours, brute, floor = measure(n, dim, rng, args.repeat)
        model = per_pair * n
        print(f"| {n:,} | {size / 1e9:.2f} | {add_seconds:.1f} | {1e3 * ours:.1f} | {1e3 * brute:.1f} | {model:.0f} | "
              f"{1e3 * floor:.1f} | {ours / floor:.2f} | {brute / ours:.1f} | {model / ours:,.0f} |")
    print(f"\n(b) {1e3 * per_pair:.1f} ms per pair, measured on {args.sample} tickets of the synthetic corpus with {args.model}")
    queries = texts.queries.head(64)
    for threads in (1, 2):
        one, batched = encoding_rate(scorer, queries, threads, 1), encoding_rate(scorer, queries, threads, 64)
        print(f"query encoding, {threads} thread(s): {one:.1f} queries/s one at a time ({1e3 / one:.0f} ms each), "
              f"{batched:.1f} queries/s in batches of 64")


if __name__ == "__main__":
    main()
