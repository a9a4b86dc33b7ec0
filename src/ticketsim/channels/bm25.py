"""Channel L's BM25, the one implementation of training, evaluation, mining and the search index: each word's
postings (the tickets that hold it and how often: a CSR matrix), every ticket's length, and the sorted vocabulary,
memory-mapped once saved. BM25 is computed at query time from the raw counts, so opening an index costs nothing per
ticket and adding tickets appends counts: every idf and the mean length follow from the counts exactly as a rebuild
(no maintained library both adds so and gives every ticket's exact score fast: docs/scale.md#the-lexical-engine).

Lucene's variant in float32, step for step as bm25s computed it (which trained the registered models before this
module was the one BM25, so their figures stay): float32 idf and counts, each posting's score rounded to float32,
summed in query-word order.
"""
from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from ticketsim.text.sorted_strings import SortedStrings

ARRAYS = ("indptr", "docs", "tf", "lengths")


def lucene_idf(df: int, n: int) -> float:
    """Lucene's idf: log(1 + (N - df + .5) / (df + .5))."""
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


@dataclass(frozen=True, eq=False)
class Postings:
    vocabulary: SortedStrings   # word t, in byte order
    indptr: np.ndarray          # (words + 1,) int64: word t's postings are [indptr[t], indptr[t + 1])
    docs: np.ndarray            # (postings,) int32: the ticket's row, ascending within a word
    tf: np.ndarray              # (postings,) float32: how often the word occurs in that ticket
    lengths: np.ndarray         # (tickets,) int64: each ticket's number of tokens
    k1: float
    b: float

    @property
    def tickets(self) -> int:
        return len(self.lengths)

    def word_id(self, word: str) -> int | None:
        return self.vocabulary.find(word)

    def df(self, word_id: int) -> int:
        return int(self.indptr[word_id + 1] - self.indptr[word_id])

    @cached_property
    def average_length(self) -> float:
        """The tickets' mean number of tokens (the sum over the count), once per loaded index, not per query."""
        return float(self.lengths.sum()) / self.tickets if self.tickets else 1.0

    @property
    def idf(self) -> Idf:
        return Idf(self)

    def bm25(self, words: Sequence[str]) -> np.ndarray:
        """(tickets,) float32: BM25 of a query's words (repeats count, unknown words add nothing) against every ticket."""
        n, scores, average = self.tickets, np.zeros(self.tickets, np.float32), self.average_length
        for word_id in filter(lambda i: i is not None, map(self.word_id, words)):
            start, end = int(self.indptr[word_id]), int(self.indptr[word_id + 1])
            docs, tf = self.docs[start:end], self.tf[start:end]
            tfc = tf / (self.k1 * ((1 - self.b) + self.b * self.lengths[docs] / average) + tf)
            np.add.at(scores, docs, (np.float32(lucene_idf(end - start, n)) * tfc).astype(np.float32))
        return scores

    def ceiling(self, words: Sequence[str]) -> float:
        """The sum of a query's words' idf (repeats count twice, unknown words nothing): no ticket's BM25 reaches it."""
        return sum(self.idf.get(word, 0.0) for word in words)

    def distances(self, words: Sequence[str]) -> np.ndarray:
        """(tickets,) d_L of a query's words: 1 - BM25 / the query's ceiling (channels.lexical)."""
        return distances(self.bm25(words)[None], np.array([self.ceiling(words)]))[0]

    def plus(self, documents: Sequence[Sequence[str]]) -> Postings:
        """These postings and those of `documents` (new tickets, rows after the last), in memory: equal to the
        postings of every ticket built at once."""
        old = self.vocabulary.strings()
        words = sorted(set(old).union(*map(set, documents)))
        position = {word: i for i, word in enumerate(words)}
        remap = np.fromiter((position[w] for w in old), np.int64, len(old))
        old_terms = remap[np.repeat(np.arange(len(old)), np.diff(self.indptr))]
        flat = [w for doc in documents for w in doc]
        new_terms = np.fromiter((position[w] for w in flat), np.int64, len(flat))
        new_docs = np.repeat(np.arange(self.tickets, self.tickets + len(documents)), [len(d) for d in documents])
        pairs, counts = np.unique(new_terms * (self.tickets + len(documents)) + new_docs, return_counts=True)
        terms = np.concatenate([old_terms, pairs // (self.tickets + len(documents))])
        docs = np.concatenate([np.asarray(self.docs, np.int64), pairs % (self.tickets + len(documents))])
        tf = np.concatenate([self.tf, counts.astype(np.float32)])
        keep = np.lexsort((docs, terms))
        indptr = np.zeros(len(words) + 1, np.int64)
        np.cumsum(np.bincount(terms, minlength=len(words)), out=indptr[1:])
        lengths = np.concatenate([self.lengths, np.array([len(d) for d in documents], np.int64)])
        vocabulary = SortedStrings.of(words)
        return Postings(vocabulary, indptr, docs[keep].astype(np.int32), tf[keep], lengths, self.k1, self.b)

    @classmethod
    def build(cls, documents: Sequence[Sequence[str]], k1: float, b: float) -> Postings:
        empty = cls(SortedStrings.of([]), np.zeros(1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.float32),
                    np.zeros(0, np.int64), k1, b)
        return empty.plus(documents)

    @staticmethod
    def files(folder: Path) -> list[Path]:
        """The files save(folder) writes."""
        return [*SortedStrings.files(folder / "vocabulary"), *(folder / f"{name}.npy" for name in ARRAYS)]

    def save(self, folder: Path) -> None:
        self.vocabulary.save(folder / "vocabulary")
        for name in ARRAYS:
            np.save(folder / f"{name}.npy", getattr(self, name))

    @classmethod
    def load(cls, folder: Path, k1: float, b: float) -> Postings:
        arrays = {name: np.load(folder / f"{name}.npy", mmap_mode="r") for name in ARRAYS}
        return cls(SortedStrings.load(folder / "vocabulary"), **arrays, k1=k1, b=b)


def distances(bm25: np.ndarray, ceilings: np.ndarray) -> np.ndarray:
    """d_L in [0, 1] of BM25 rows (one per query) and their ceilings: 0 for the ceiling, 1 for no shared word (and for a
    query of words no ticket has)."""
    ceilings = ceilings[:, None]
    return np.where(ceilings > 0, 1 - bm25 / np.where(ceilings > 0, ceilings, 1), 1.0)


class Idf(Mapping):
    """word -> Lucene's idf on the index's tickets (the reasons' weights, channel L's ceilings), looked up on demand."""

    def __init__(self, postings: Postings):
        self.postings = postings

    def __getitem__(self, word: str) -> float:
        word_id = self.postings.word_id(word)
        if word_id is None:
            raise KeyError(word)
        return lucene_idf(self.postings.df(word_id), self.postings.tickets)

    def __iter__(self) -> Iterator[str]:
        return iter(self.postings.vocabulary.strings())

    def __len__(self) -> int:
        return len(self.postings.vocabulary)
