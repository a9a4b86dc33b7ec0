"""Top-k by the fused score g (scoring/fused.py) over an index's flat ticket vectors and BM25's lexical distances, ranked
by FusedScore.flat_total = ||Q - D||_1 + W_L d_L (the constant W_R orders nothing): exact over the vectors' scan,
approximate over a large index's graph.

A threshold algorithm (after Fagin's TA) reads the dense distances in sorted order from the index's vectors and the lexical ones
by random access (`Lexical`: BM25 of the rows asked for, channels/bm25.py's QueryDistances). Take the m tickets nearest
under the dense distance (m > k), score them exactly, and let T be the k-th best total among them. Every other ticket t
has a dense distance of at least the m-th one, so its total is at least its own bound, (m-th dense distance) + W_L
d_L(t). The tickets whose bound does not exceed T are scored exactly as well (usually none or a handful: they share the
query's rarest words); every other ticket's total is above T, so it cannot enter the top k, not even by a tie. The top
k of the two sets is therefore exact, after one scan. Those tickets have d_L <= (T - m-th distance) / W_L, a BM25 floor,
which only tickets holding the query's rarer words can reach: BM25 reads those words' postings alone (MaxScore's
pruning), not every ticket's score. Many rows to rescore are first
scored by FAISS in float32, and only those that may reach the top k again in float64 (`prescored`). Only if rescoring them would cost more
than another scan (more than an eighth of the tickets), or, without L, if the k-th total ties the m-th distance, does m
double: a deeper dense list raises the bounds.

The textbook TA, which also reads the lexical list in sorted order and bounds every unseen ticket by the m-th values of
both lists, needed up to 8 scans of the index for a top-10 over 1M tickets (docs/search.md): its one bound for all
unseen tickets is loose when many tickets share the query's best words.

Over a graph (search/graph.py) the m nearest are those its walk finds, so the m-th distance may be larger than the
true one and a ticket the walk misses is missed: the top k is approximate, the totals of the tickets it lists exact.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import faiss
import numpy as np

if TYPE_CHECKING:
    from ticketsim.scoring.fused import FusedScore

FIRST_CANDIDATES = 64   # m of the first scan (at least 4k)
SLACK = 1e-5            # relative: FAISS sums thousands of float32 terms, the exact rescoring sums in float64
RESCORE_COST = 8        # exact rescoring in numpy costs about this many times FAISS's scan per ticket (benchmark: 5-7)
PRESCORED_FROM = 1024   # candidates from which FAISS's float32 distances pick those rescored in float64


class Nearest(Protocol):
    """Flat ticket vectors searched nearest first under L1: search/vectors.py's scan (exact) or search/graph.py's walk."""

    @property
    def ntotal(self) -> int: ...

    def take(self, rows: np.ndarray) -> np.ndarray: ...     # (len(rows), d): the vectors of these rows, row i of ticket i

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]: ...


class Lexical(Protocol):
    """One query's d_L of the index's tickets, read by row or by bound."""

    def at(self, rows: np.ndarray) -> np.ndarray: ...     # d_L of these rows

    def within(self, bound: float) -> np.ndarray | None: ...    # the rows whose d_L may be <= bound (more allowed); None: all


@dataclass(frozen=True)
class Given:
    """Every ticket's d_L, an array computed already."""

    distances: np.ndarray

    def at(self, rows: np.ndarray) -> np.ndarray:
        return self.distances[rows]

    def within(self, bound: float) -> np.ndarray:
        return np.flatnonzero(self.distances <= bound)


Ties = Callable[[np.ndarray], np.ndarray]     # rows -> their ticket ids, which order equal totals


def best_of(rows: np.ndarray, totals: np.ndarray, k: int, ids: Ties) -> tuple[np.ndarray, np.ndarray]:
    """(rows, totals) of the k smallest totals, equal ones in ticket-id order (as ScoreMatrix.top_k breaks ties): only the
    rows at or below the k-th total need their ids."""
    if len(rows) > k:
        kept = totals <= np.partition(totals, k - 1)[k - 1]
        rows, totals = rows[kept], totals[kept]
    best = np.lexsort((ids(rows), totals))[:k]
    return rows[best], totals[best]


def prescored(approximate: np.ndarray, k: int) -> np.ndarray:
    """The rows (a mask) whose exact total may be among the k smallest, from totals whose dense part FAISS summed in
    float32 (within SLACK of the exact one, relative; the lexical part is exact): the k best approximate totals are
    exactly at most a = their k-th / (1 - SLACK), so a row whose exact total is at most that has an approximate one of
    at most a (1 + SLACK); every other row is kept out."""
    kth = np.partition(approximate, k - 1)[k - 1]
    return approximate <= kth * (1 + SLACK) / (1 - SLACK)


def top_k(index: Nearest, query: np.ndarray, k: int, ids: Ties, score: FusedScore,
          lexical: Lexical | np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(rows, flat totals) of the k tickets with the smallest flat_total, best first; equal totals in the order of their
    `ids`. query: (d,) float64, flat; lexical: the tickets' d_L (an array: every ticket's; None where the score weighs
    no L)."""
    n = index.ntotal
    k = min(k, n)
    query32 = query.astype(np.float32)[None]
    lexical = Given(lexical) if isinstance(lexical, np.ndarray) else lexical

    def rescored(rows: np.ndarray, lexicals: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        vectors = index.take(rows)
        lexicals = lexical.at(rows) if lexicals is None and lexical is not None else lexicals
        if len(rows) >= max(PRESCORED_FROM, 4 * k):     # FAISS's float32 totals first; float64 for those that may reach the top k
            near = prescored(score.flat_total(faiss.pairwise_distances(query32, np.ascontiguousarray(vectors, np.float32),
                                                                       faiss.METRIC_L1)[0], lexicals), k)
            rows, vectors, lexicals = rows[near], vectors[near], None if lexicals is None else lexicals[near]
        return best_of(rows, score.flat_totals(vectors, query, lexicals), k, ids)

    m = min(n, max(4 * k, FIRST_CANDIDATES))
    while True:
        dense, dense_rows = index.search(query32, m)
        rows, totals = rescored(dense_rows[0])
        if m == n:
            return rows, totals
        nearest_unseen = float(dense[0, -1]) * (1 - SLACK)      # no ticket outside the list is nearer than this
        if not score.lexical_weight:
            if totals[-1] < nearest_unseen:     # strictly: a tie at the boundary could hide a ticket of lower id
                return rows, totals
        else:
            unseen = lexical.within((totals[-1] - nearest_unseen) / score.lexical_weight)
            if unseen is not None:
                unseen = np.setdiff1d(unseen, dense_rows[0], assume_unique=True)
                lexicals = lexical.at(unseen)
                kept = score.flat_total(nearest_unseen, lexicals) <= totals[-1]
                if kept.sum() * RESCORE_COST <= n:     # the unseen rows' d_L read once, not again for their rescoring
                    return rescored(np.concatenate([rows, unseen[kept]]), np.concatenate([lexical.at(rows), lexicals[kept]]))
        m = min(2 * m, n)


def top_k_within(index: Nearest, rows: np.ndarray, query: np.ndarray, k: int, ids: Ties, score: FusedScore,
                 lexical: Lexical | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(rows, totals) of the k best of `rows` only (a filter's tickets), as top_k orders them: every one of them scored
    exactly, so the top k under a filter is exact even where the index keeps a graph (whose walk would be cut to the
    filter's tickets after it, and miss those it does not reach)."""
    totals = np.zeros(len(rows))
    for start in range(0, len(rows), 65536):    # in blocks: a broad filter over a large index is not one copy of it
        block = rows[start:start + 65536]
        totals[start:start + len(block)] = score.flat_totals(index.take(block), query, None if lexical is None else lexical.at(block))
    return best_of(rows, totals, min(k, len(rows)), ids)
