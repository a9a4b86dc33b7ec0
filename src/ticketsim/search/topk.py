"""Exact top-k of total = ||Q - D||_1 + W_L d_L over a FAISS L1 index and BM25's lexical distances.

Without the lexical channel the index's own top-k is the answer. With it, a threshold algorithm (Fagin's TA) joins the
m tickets nearest under the dense distance and the m lexically nearest, scores each candidate exactly, and stops once
the k-th best exact total is below bound = (m-th dense distance) + W_L (m-th lexical distance), else doubles m.
Why that is exact: a ticket in neither list has dense distance >= the m-th dense one and lexical distance >= the m-th
lexical one, both weights are positive, so its total is >= bound; when the k-th best candidate lies strictly below the
bound no unseen ticket can enter the top k, not even by a tie. At m = n every ticket is a candidate.
"""
from __future__ import annotations

import faiss
import numpy as np

FIRST_CANDIDATES = 64   # m of the first round (at least 4k): most queries stop there
SLACK = 1e-5            # relative: FAISS sums thousands of float32 terms, the exact rescoring sums in float64


def flat_vectors(index: faiss.IndexFlat) -> np.ndarray:
    """The index's stored vectors (n, d) float32, as a view of its memory (no copy)."""
    return faiss.rev_swig_ptr(index.get_xb(), index.ntotal * index.d).reshape(index.ntotal, index.d)


def exact_top_k(index: faiss.IndexFlat, query: np.ndarray, k: int, order: np.ndarray, lexical: np.ndarray | None = None,
                lexical_weight: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """(rows, totals) of the k tickets with the smallest total distance, best first; equal totals in `order`
    (each row's position in ticket-id order, as ScoreMatrix.top_k breaks ties). query: (d,) float64."""
    n = index.ntotal
    k = min(k, n)
    vectors, query32 = flat_vectors(index), query.astype(np.float32)[None]

    def rescored(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        totals = np.abs(vectors[rows].astype(np.float64) - query).sum(1)
        if lexical_weight:
            totals += lexical_weight * lexical[rows]
        best = np.lexsort((order[rows], totals))[:k]
        return rows[best], totals[best]

    if not lexical_weight:
        return rescored(index.search(query32, k)[1][0])
    m = min(n, max(4 * k, FIRST_CANDIDATES))
    while True:
        dense, dense_rows = index.search(query32, m)
        lexical_rows = np.argpartition(lexical, m - 1)[:m] if m < n else np.arange(n)
        rows, totals = rescored(np.union1d(dense_rows[0], lexical_rows))
        if m == n:
            return rows, totals
        bound = float(dense[0, -1]) + lexical_weight * float(lexical[lexical_rows].max())
        if totals[-1] < bound * (1 - SLACK):
            return rows, totals
        m = min(2 * m, n)
