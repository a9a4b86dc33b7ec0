"""The lexical engines side by side in one run, on --tickets synthetic token lists (random words, Zipf-distributed
ranks over a --vocabulary-word vocabulary, 20 to 120 tokens a ticket; queries of 3 to 8 words drawn the same way): the
postings of channels/bm25.py (the one BM25 of training and serving), bm25s (scores precomputed into a sparse matrix)
and tantivy (a segment store with deletes and commits; BM25 with k1 1.2, b .75 fixed and document lengths quantised),
each where installed (an engine that is not is left out and named). For each: the write of the index, its open, BM25
of one query against every ticket (what the exact top-k's bound needs), the top 10 and the share of the postings' top
10 it holds (all at tantivy's k1 1.2, b .75), and adding --add tickets (the postings: a new segment's, written;
bm25s: everything indexed again, since every idf and the mean length move in its stored scores; tantivy: one segment
and a commit).

    python -m benchmarks.lexical_engines [--tickets 100000] [--queries 50] [--add 1000]
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from benchmarks.common import table
from ticketsim.channels.bm25 import Postings

K1, B = 1.2, 0.75    # tantivy's, which it cannot change: the others set alike, so top 10s differ by its lengths alone


def documents(n: int, vocabulary: int, rng: np.random.Generator, shortest: int = 20, longest: int = 120) -> list[list[str]]:
    """n token lists of words w<rank>, rank r of the vocabulary drawn with weight r^-1.1 (Zipf's law, truncated)."""
    lengths = rng.integers(shortest, longest + 1, n)
    weights = np.arange(1, vocabulary + 1, dtype=float) ** -1.1
    ranks = rng.choice(vocabulary, int(lengths.sum()), p=weights / weights.sum()) + 1
    words = np.char.add("w", ranks.astype(str)).tolist()
    ends = np.cumsum(lengths)
    return [words[end - length:end] for end, length in zip(ends.tolist(), lengths.tolist())]


def timed(run: Callable[[], object]) -> tuple[float, object]:
    started = time.perf_counter()
    result = run()
    return time.perf_counter() - started, result


def median_ms(run: Callable[[list[str]], object], queries: list[list[str]]) -> float:
    return 1000 * statistics.median(timed(lambda q=q: run(q))[0] for q in queries)


def top10(scores: np.ndarray) -> set[int]:
    return set(np.argsort(-scores, kind="stable")[:10].tolist())


def share(every: Callable[[list[str]], np.ndarray], queries: list[list[str]], reference: list[set[int]]) -> float:
    return float(np.mean([len(top10(every(q)) & ten) / max(len(ten), 1) for q, ten in zip(queries, reference)]))


def postings_row(docs: list[list[str]], new: list[list[str]], queries: list[list[str]], folder: Path) -> tuple[list, list]:
    """The postings' row and the top 10s it finds (the others' reference)."""
    (folder / "p").mkdir()
    written, _ = timed(lambda: Postings.build(docs, K1, B).save(folder / "p"))
    opened, postings = timed(lambda: Postings.load(folder / "p", K1, B))
    every = median_ms(postings.bm25, queries)
    top = median_ms(lambda q: np.argpartition(-postings.bm25(q), 10)[:10], queries)
    (folder / "p2").mkdir()
    added, _ = timed(lambda: Postings.build(new, K1, B).save(folder / "p2"))   # an add's segment: idf from the counts at query time
    return ["channels/bm25.py", written, 1000 * opened, every, top, 1.0, added], [top10(postings.bm25(q)) for q in queries]


def bm25s_row(docs: list[list[str]], new: list[list[str]], queries: list[list[str]], folder: Path,
              reference: list[set[int]]) -> list:
    import bm25s

    def write(path: Path, texts: list[list[str]]) -> None:
        retriever = bm25s.BM25(k1=K1, b=B)
        retriever.index(texts, show_progress=False)
        retriever.save(str(path))

    written, _ = timed(lambda: write(folder / "s", docs))
    opened, retriever = timed(lambda: bm25s.BM25.load(str(folder / "s"), mmap=True))
    every = median_ms(retriever.get_scores, queries)
    top = median_ms(lambda q: np.argpartition(-retriever.get_scores(q), 10)[:10], queries)
    added, _ = timed(lambda: write(folder / "s2", docs + new))
    return ["bm25s", written, 1000 * opened, every, top, share(retriever.get_scores, queries, reference), added]


def tantivy_row(docs: list[list[str]], new: list[list[str]], queries: list[list[str]], folder: Path,
                reference: list[set[int]]) -> list:
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("text", tokenizer_name="whitespace", index_option="freq")
    builder.add_unsigned_field("row", fast=True)
    schema = builder.build()

    def document(row: int, words: list[str]):
        document = tantivy.Document(text=" ".join(words))
        document.add_unsigned("row", row)
        return document

    def write(path: Path, rows: range, texts: list[list[str]]) -> None:
        writer = tantivy.Index(schema, path=str(path)).writer(heap_size=200_000_000, num_threads=1)
        for row, words in zip(rows, texts):
            writer.add_document(document(row, words))
        writer.commit()
        writer.wait_merging_threads()

    (folder / "t").mkdir()
    written, _ = timed(lambda: write(folder / "t", range(len(docs)), docs))
    opened, index = timed(lambda: tantivy.Index.open(str(folder / "t")))
    searcher = index.searcher()

    def query(words: list[str]):
        return tantivy.Query.boolean_query([(tantivy.Occur.Should, tantivy.Query.term_query(schema, "text", w)) for w in words])

    def every(words: list[str]) -> np.ndarray:     # each matching ticket's score, by its row (a fast field)
        hits = searcher.search(query(words), limit=len(docs)).hits
        scores = np.zeros(len(docs), np.float32)
        scores[searcher.fast_field_values("row", [address for _, address in hits])] = [score for score, _ in hits]
        return scores

    every_ms = median_ms(every, queries)
    top = median_ms(lambda q: searcher.search(query(q), limit=10).hits, queries)

    def add() -> None:
        writer = index.writer(heap_size=50_000_000, num_threads=1)
        for row, words in zip(range(len(docs), len(docs) + len(new)), new):
            writer.add_document(document(row, words))
        writer.commit()

    added, _ = timed(add)
    return ["tantivy", written, 1000 * opened, every_ms, top, share(every, queries, reference), added]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tickets", type=int, default=100_000)
    parser.add_argument("--vocabulary", type=int, default=200_000)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--add", type=int, default=1000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    docs, new = documents(args.tickets, args.vocabulary, rng), documents(args.add, args.vocabulary, rng)
    queries = documents(args.queries, args.vocabulary, rng, 3, 8)
    others = {"bm25s": bm25s_row, "tantivy": tantivy_row}
    missing = [name for name in others if importlib.util.find_spec(name) is None]
    with tempfile.TemporaryDirectory() as folder:
        first, reference = postings_row(docs, new, queries, Path(folder))
        rows = [first] + [row(docs, new, queries, Path(folder), reference) for name, row in others.items()
                          if name not in missing]
    words = len({w for d in docs for w in d})
    print(f"{args.tickets:,} synthetic tickets (Zipf words, {words:,} distinct), {args.queries} queries, add {args.add:,}:")
    print(table(["engine", "write (s)", "open (ms)", "BM25 of every ticket (ms)", "top 10 (ms)", "of the postings' top 10",
                 f"add {args.add:,} (s)"],
                [[name, f"{w:.2f}", f"{o:.1f}", f"{e:.1f}", f"{t:.1f}", f"{s:.3f}", f"{a:.2f}"] for name, w, o, e, t, s, a in rows]))
    for name in missing:
        print(f"{name} is not installed: its row is left out (pip install {name})")


if __name__ == "__main__":
    main()
