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
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path

import numpy as np

from ticketsim.text.sorted_strings import SortedStrings

ARRAYS = ("indptr", "docs", "tf", "lengths")
WORDS_CACHED = 1 << 14    # a lexicon's word lookups kept
SEARCHED_BELOW = 16       # rows looked up one by one in a word's postings below 1/16 of them (a lookup: log2 steps)
PRUNED_BELOW = 0.5     # the share of a query's postings, read whole, below which MaxScore's pruning pays


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
    def lexicon(self) -> Lexicon:
        """These postings as the one part of a lexicon: BM25, its ceilings and idf on these tickets alone."""
        return Lexicon((self,))

    @property
    def idf(self) -> Idf:
        return self.lexicon.idf

    def bm25(self, words: Sequence[str]) -> np.ndarray:
        return self.lexicon.bm25(words)

    def ceiling(self, words: Sequence[str]) -> float:
        return self.lexicon.ceiling(words)

    def distances(self, words: Sequence[str]) -> np.ndarray:
        return self.lexicon.distances(words)

    def add_scores(self, scores: np.ndarray, word_id: int, idf: np.float32, average: float) -> None:
        """Add one word's BM25 terms (its idf and the tickets' mean length those of the whole lexicon) to `scores`, one
        per ticket of these postings."""
        start, end = int(self.indptr[word_id]), int(self.indptr[word_id + 1])
        # a word's postings name each ticket once: no np.add.at
        scores[self.docs[start:end]] += self.term_scores(slice(start, end), idf, average)

    def term_scores(self, postings: slice | np.ndarray, idf: np.float32, average: float) -> np.ndarray:
        """float32 BM25 terms of these postings (positions in docs and tf)."""
        tf = self.tf[postings]
        tfc = tf / (self.k1 * ((1 - self.b) + self.b * self.lengths[self.docs[postings]] / average) + tf)
        return (idf * tfc).astype(np.float32)

    @classmethod
    def build(cls, documents: Sequence[Sequence[str]], k1: float, b: float) -> Postings:
        words = sorted(set().union(*map(set, documents)))
        position, n = {word: i for i, word in enumerate(words)}, max(len(documents), 1)
        flat = [w for doc in documents for w in doc]
        terms = np.fromiter((position[w] for w in flat), np.int64, len(flat))
        docs = np.repeat(np.arange(len(documents)), [len(d) for d in documents])
        pairs, counts = np.unique(terms * n + docs, return_counts=True)     # by word, then ticket
        indptr = np.zeros(len(words) + 1, np.int64)
        np.cumsum(np.bincount(pairs // n, minlength=len(words)), out=indptr[1:])
        return cls(SortedStrings.of(words), indptr, (pairs % n).astype(np.int32), counts.astype(np.float32),
                   np.array([len(d) for d in documents], np.int64), k1, b)

    @classmethod
    def joined(cls, parts: Sequence[tuple[Postings, np.ndarray | None]], k1: float, b: float) -> Postings:
        """The postings of each part's kept rows (sorted; None: every row), rows numbered part after part: those `build`
        gives the kept tickets' documents, array for array (a word no kept ticket holds leaves the vocabulary). Each
        part's postings are placed, not sorted: they are in word order, and a word's rows ascend part after part. No
        document is read, so a merge of a million tickets costs their postings' arrays, not their tokens."""
        if len(parts) == 1 and parts[0][1] is None:     # one part kept whole (a build's, an add's own): already so
            return parts[0][0]
        words = sorted(set().union(*(part.vocabulary.strings() for part, _ in parts)))
        position, counts, pieces, lengths = {word: i for i, word in enumerate(words)}, np.zeros(len(words), np.int64), [], []
        for part, keep in parts:
            strings = part.vocabulary.strings()
            remap = np.fromiter((position[w] for w in strings), np.int64, len(strings))    # ascending: both in byte order
            terms, docs, tf = np.repeat(remap, np.diff(part.indptr)), np.asarray(part.docs, np.int64), np.asarray(part.tf)
            if keep is not None:
                renumbered = np.full(part.tickets, -1, np.int64)
                renumbered[keep] = np.arange(len(keep))
                docs = renumbered[docs]
                terms, docs, tf = terms[docs >= 0], docs[docs >= 0], tf[docs >= 0]
            here = np.bincount(terms, minlength=len(words))
            pieces.append((terms, docs + sum(map(len, lengths)), tf, here))
            counts += here
            lengths.append(np.asarray(part.lengths if keep is None else part.lengths[keep], np.int64))
        indptr = np.zeros(len(words) + 1, np.int64)
        np.cumsum(counts, out=indptr[1:])
        docs, tf, filled = np.empty(indptr[-1], np.int32), np.empty(indptr[-1], np.float32), indptr[:-1].copy()
        for terms, part_docs, part_tf, here in pieces:
            at = filled[terms] + np.arange(len(terms)) - (np.cumsum(here) - here)[terms]
            docs[at], tf[at] = part_docs, part_tf
            filled += here
        held = np.flatnonzero(counts)
        return cls(SortedStrings.of([words[i] for i in held]), np.concatenate([np.zeros(1, np.int64), np.cumsum(counts[held])]),
                   docs, tf, np.concatenate(lengths), k1, b)

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
        # plain views of the mappings: numpy's memmap subclass costs microseconds per word's slice
        arrays = {name: np.load(folder / f"{name}.npy", mmap_mode="r").view(np.ndarray) for name in ARRAYS}
        return cls(SortedStrings.load(folder / "vocabulary"), **arrays, k1=k1, b=b)


@dataclass(frozen=True, eq=False)
class Lexicon:
    """BM25 over the postings of several parts (an index's segments, rows numbered part after part): every idf and the
    mean length from the parts' counts together, so each ticket's score is the one postings of every ticket built at
    once would give it (the terms are the same float32 values, added in the same order)."""

    parts: tuple[Postings, ...]

    @cached_property
    def tickets(self) -> int:
        return sum(part.tickets for part in self.parts)

    @cached_property
    def offsets(self) -> tuple[int, ...]:
        """The first row of each part."""
        return tuple(np.cumsum([0, *(part.tickets for part in self.parts)])[:-1].tolist())

    @cached_property
    def tokens(self) -> int:
        """The tickets' tokens in all, once per loaded index, not per query."""
        return sum(int(part.lengths.sum()) for part in self.parts)

    def counts(self, words: Sequence[str]) -> Counts:
        """What BM25 of these words reads of these tickets (Counts.summed over shards gives a whole's)."""
        return Counts(self.tickets, self.tokens, {word: self.df(word) for word in set(words)})

    @cached_property
    def found(self) -> Callable[[str], tuple[tuple[Postings, int, int], ...]]:
        """word -> (part, its first row, the word's id there) of each part that holds it: a search looks a query's words
        up for BM25, its ceiling, its warnings and its reasons, so the last WORDS_CACHED are kept."""
        return lru_cache(maxsize=WORDS_CACHED)(lambda word: tuple(
            (part, offset, i) for part, offset in zip(self.parts, self.offsets) if (i := part.word_id(word)) is not None))

    def df(self, word: str) -> int:
        """The tickets that hold the word (0: none)."""
        return sum(part.df(i) for part, _, i in self.found(word))

    @property
    def idf(self) -> Idf:
        return Idf(self)

    def bm25(self, words: Sequence[str], counts: Counts | None = None) -> np.ndarray:
        """(tickets,) float32: BM25 of a query's words (repeats count, unknown words add nothing) against every ticket;
        counts: the idf and mean length of a larger whole these tickets are a shard of (None: these tickets')."""
        scores, counts = np.zeros(self.tickets, np.float32), self.counts(words) if counts is None else counts
        for word in words:
            found = self.found(word)
            if found:
                idf = np.float32(counts.idf(word))
                for part, offset, word_id in found:
                    part.add_scores(scores[offset:offset + part.tickets], word_id, idf, counts.average_length)
        return scores

    def ceiling(self, words: Sequence[str], counts: Counts | None = None) -> float:
        """The sum of a query's words' idf (repeats count twice, unknown words nothing): no ticket's BM25 reaches it."""
        counts = self.counts(words) if counts is None else counts
        return sum(counts.idf(word) for word in words)

    def distances(self, words: Sequence[str], counts: Counts | None = None) -> np.ndarray:
        """(tickets,) d_L of a query's words: 1 - BM25 / the query's ceiling (channels.lexical); counts as bm25's."""
        counts = self.counts(words) if counts is None else counts
        return distances(self.bm25(words, counts)[None], np.array([self.ceiling(words, counts)]))[0]

    def query(self, words: Sequence[str], counts: Counts | None = None) -> QueryDistances:
        """A query's d_L read by row or by bound (QueryDistances), each value that of `distances`; counts as bm25's."""
        counts = self.counts(words) if counts is None else counts
        return QueryDistances(self, tuple(words), counts, self.ceiling(words, counts))


@dataclass
class QueryDistances:
    """One query's d_L over a lexicon's tickets without scoring every ticket: by row (`at`, each word's postings probed
    for the rows) or by bound (`within`, MaxScore: only the postings of the words a ticket must hold to reach the bound
    are read). Each value is bit for bit that of Lexicon.distances: the same float32 terms, added in the same order.
    Where pruning would read about as much as scoring every ticket (the words to read whole hold most of the query's
    postings, many rows are asked for at once, or a second bound: the search went deeper because the first was loose),
    every ticket's d_L is computed once (`every`) and read from then on."""

    lexicon: Lexicon
    words: tuple[str, ...]
    counts: Counts
    ceiling: float
    bounds: int = 0     # within's calls so far
    scored: np.ndarray | None = field(default=None, repr=False)    # every ticket's d_L, once computed

    def every(self) -> np.ndarray:
        if self.scored is None:
            self.scored = self.lexicon.distances(self.words, self.counts)
        return self.scored

    def terms(self, word: str, rows: np.ndarray) -> np.ndarray:
        """(len(rows),) float32: the word's BM25 term of each of these rows (sorted, distinct; 0 where a row lacks it)."""
        out = np.zeros(len(rows), np.float32)
        idf = np.float32(self.counts.idf(word))
        for part, offset, word_id in self.lexicon.found(word):
            low, high = np.searchsorted(rows, (offset, offset + part.tickets))
            start, end = int(part.indptr[word_id]), int(part.indptr[word_id + 1])
            if low == high:
                continue
            local, docs = rows[low:high] - offset, part.docs[start:end]
            if len(local) * SEARCHED_BELOW < len(docs):     # few rows: look each up in the word's postings
                at = np.minimum(np.searchsorted(docs, local), len(docs) - 1)
                held = docs[at] == local
                out[low:high][held] = part.term_scores(start + at[held], idf, self.counts.average_length)
            else:   # many: every posting's term laid out by row, the rows' read
                laid = np.zeros(part.tickets, np.float32)
                laid[docs] = part.term_scores(slice(start, end), idf, self.counts.average_length)
                out[low:high] = laid[local]
        return out

    def bm25(self, rows: np.ndarray) -> np.ndarray:
        """(len(rows),) float32: BM25 of the query against these rows (sorted, distinct)."""
        scores = np.zeros(len(rows), np.float32)
        for word in self.words:
            if self.lexicon.found(word):
                scores += self.terms(word, rows)    # + 0 where a row lacks the word: the sum of every ticket's pass
        return scores

    def at(self, rows: np.ndarray) -> np.ndarray:
        """d_L of these rows (any order, repeats allowed)."""
        if self.scored is not None or len(rows) * SEARCHED_BELOW > self.lexicon.tickets:
            return self.every()[rows]
        distinct, back = np.unique(rows, return_inverse=True)
        return distances(self.bm25(distinct)[None], np.array([self.ceiling]))[0][back]

    def within(self, bound: float) -> np.ndarray | None:
        """The rows (ascending) whose d_L may be at most `bound`, a few more at most; None: possibly every ticket.

        MaxScore: a ticket's BM25 is below the sum of its query words' idf (each term idf * tf / (tf + K), K > 0), so the
        commonest words whose idf sums (`spared`) below BM25's floor for the bound cannot lift a ticket to it alone.
        The other words' postings are read whole; the spared words then add their terms to the tickets still in reach,
        the rarest first, each time dropping those that the words left cannot lift to the floor (1e-4 spare for
        float32's sums)."""
        if self.ceiling <= 0 or bound >= 1:     # no word of the query is known (every d_L is 1), or any d_L will do
            return None if bound >= 1 else np.zeros(0, np.int64)
        self.bounds += 1
        if self.bounds > 1 or self.scored is not None:  # a deeper search, or every ticket's d_L read already (by `at`)
            return np.flatnonzero(self.every() <= bound)
        floor = self.ceiling * (1 - bound) * (1 - 1e-4)     # d_L <= bound <=> BM25 >= ceiling (1 - bound)
        said = Counter(word for word in self.words if self.counts.idf(word) > 0)
        spared, essential, rarest_first = 0.0, [], []
        for word in sorted(said, key=lambda word: (said[word] * self.counts.idf(word), word)):
            weight = said[word] * self.counts.idf(word)
            if spared + weight < floor:
                spared += weight
                rarest_first.insert(0, word)
            else:
                essential.append(word)
        postings = {word: said[word] * self.counts.df[word] for word in said}    # what each word's reading costs
        if sum(postings[word] for word in essential) > PRUNED_BELOW * sum(postings.values()):
            return np.flatnonzero(self.every() <= bound)    # pruning would save little and leave many tickets to refine
        partial = np.zeros(self.lexicon.tickets, np.float32)
        for word in essential:
            idf = np.float32(self.counts.idf(word))
            for part, offset, word_id in self.lexicon.found(word):
                for _ in range(said[word]):
                    part.add_scores(partial[offset:offset + part.tickets], word_id, idf, self.counts.average_length)
        rows = np.flatnonzero(partial >= floor - spared)
        partial = partial[rows]
        for word in rarest_first:
            spared -= said[word] * self.counts.idf(word)
            partial += said[word] * self.terms(word, rows)
            kept = partial >= floor - max(spared, 0.0)
            rows, partial = rows[kept], partial[kept]
        return rows


@dataclass(frozen=True)
class Counts:
    """What BM25 of a query reads of a collection: its tickets, their tokens in all, and each query word's document
    frequency. Counts add up, so shards summed give the idf and mean length of the whole they split."""

    tickets: int
    tokens: int
    df: Mapping[str, int]

    @property
    def average_length(self) -> float:
        return self.tokens / self.tickets if self.tickets else 1.0

    def idf(self, word: str) -> float:
        """Lucene's idf of the word (0 where no ticket holds it: it adds nothing)."""
        return lucene_idf(self.df[word], self.tickets) if self.df.get(word) else 0.0

    @classmethod
    def summed(cls, parts: Sequence[Counts]) -> Counts:
        words = set().union(*(part.df for part in parts))
        return cls(sum(p.tickets for p in parts), sum(p.tokens for p in parts),
                   {word: sum(p.df.get(word, 0) for p in parts) for word in words})


def distances(bm25: np.ndarray, ceilings: np.ndarray) -> np.ndarray:
    """d_L in [0, 1] of BM25 rows (one per query) and their ceilings: 0 for the ceiling, 1 for no shared word (and for a
    query of words no ticket has)."""
    ceilings = ceilings[:, None]
    return np.where(ceilings > 0, 1 - bm25 / np.where(ceilings > 0, ceilings, 1), 1.0)


class Idf(Mapping):
    """word -> Lucene's idf on a lexicon's tickets (the reasons' weights, channel L's ceilings), looked up on demand."""

    def __init__(self, lexicon: Lexicon):
        self.lexicon = lexicon

    def __getitem__(self, word: str) -> float:
        df = self.lexicon.df(word)
        if not df:
            raise KeyError(word)
        return lucene_idf(df, self.lexicon.tickets)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(set().union(*(part.vocabulary.strings() for part in self.lexicon.parts))))

    def __len__(self) -> int:
        return sum(1 for _ in self)
