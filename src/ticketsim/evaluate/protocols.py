"""The two evaluation protocols: rerank each query's labelled candidates (SemEval), retrieve from the whole pool (the paper)."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import polars as pl

from ticketsim.evaluate.measures import RELEVANT, ranking, ranking_by_query

# Rows of the matrix handled at once by top_k, so its temporaries stay near this many cells.
_CELLS_PER_BLOCK = 1 << 22


@dataclass(frozen=True, eq=False)
class ScoreMatrix:
    """Similarity of every query to every ticket of the pool; higher is more similar."""

    query_ids: tuple[str, ...]
    ticket_ids: tuple[str, ...]
    values: np.ndarray

    def __post_init__(self) -> None:
        expected = (len(self.query_ids), len(self.ticket_ids))
        if self.values.shape != expected:
            raise ValueError(f"values has shape {self.values.shape}, ids give {expected}")
        for kind, ids in (("query", self.query_ids), ("ticket", self.ticket_ids)):
            if len(set(ids)) != len(ids):
                raise ValueError(f"duplicate {kind} ids")
        if np.isnan(self.values).any():
            raise ValueError("values contain nan")

    @cached_property
    def _rows(self) -> dict[str, int]:
        return {query_id: i for i, query_id in enumerate(self.query_ids)}

    @cached_property
    def _columns(self) -> dict[str, int]:
        return {ticket_id: j for j, ticket_id in enumerate(self.ticket_ids)}

    def pair_scores(self, pairs: pl.DataFrame) -> np.ndarray:
        """The score of each (query_id, ticket_id) row of `pairs`."""
        rows = _positions(self._rows, pairs["query_id"], "query")
        columns = _positions(self._columns, pairs["ticket_id"], "ticket")
        return self.values[rows, columns]

    def restrict(self, query_ids: Iterable[str]) -> ScoreMatrix:
        """The rows of `query_ids`, in that order."""
        query_ids = tuple(query_ids)
        return ScoreMatrix(query_ids, self.ticket_ids, self.values[_positions(self._rows, query_ids, "query")])

    def top_k(self, k: int) -> pl.DataFrame:
        """The k best tickets of each query (query_id, ticket_id, score, rank 1..k); equal scores by ticket_id ascending."""
        if k < 1:
            raise ValueError(f"k must be positive, got {k}")
        n_queries, n_tickets = self.values.shape
        k = min(k, n_tickets)
        # Columns in ticket_id order, so that column position breaks ties.
        order = np.argsort(np.asarray(self.ticket_ids), kind="stable")
        step = max(1, _CELLS_PER_BLOCK // max(1, n_tickets))
        blocks = [_top_columns(self.values[i : i + step][:, order], k) for i in range(0, n_queries, step)]
        picked = np.concatenate(blocks) if blocks else np.empty((0, k), dtype=np.intp)
        columns = order[picked]
        return pl.DataFrame(
            {
                "query_id": np.repeat(np.asarray(self.query_ids, dtype=object), k),
                "ticket_id": np.asarray(self.ticket_ids, dtype=object)[columns].ravel(),
                "score": np.take_along_axis(self.values, columns, axis=1).ravel().astype(np.float64),
                "rank": np.tile(np.arange(1, k + 1, dtype=np.int32), n_queries),
            },
            schema={"query_id": pl.String, "ticket_id": pl.String, "score": pl.Float64, "rank": pl.Int32},
        )


def _positions(index: dict[str, int], ids: Iterable[str], kind: str) -> np.ndarray:
    try:
        return np.array([index[i] for i in ids], dtype=np.intp)
    except KeyError as missing:
        raise KeyError(f"{kind} id {missing.args[0]!r} is not in the score matrix") from None


def _top_columns(block: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k largest of each row, best first; ties go to the leftmost."""
    n = block.shape[1]
    kth = np.take_along_axis(block, np.argpartition(block, n - k, axis=1)[:, n - k : n - k + 1], axis=1)
    above, tied = block > kth, block == kth
    # argpartition picks arbitrary members of a tie at the k-th value; keep the leftmost that fit instead.
    room = k - above.sum(axis=1, keepdims=True)
    keep = above | (tied & (np.cumsum(tied, axis=1) <= room))
    picked = np.nonzero(keep)[1].reshape(-1, k)
    best_first = np.argsort(-np.take_along_axis(block, picked, axis=1).astype(np.float64), axis=1, kind="stable")
    return np.take_along_axis(picked, best_first, axis=1)


def rerank_by_query(scored_pairs: pl.DataFrame, depth: int = 10) -> pl.DataFrame:
    """SemEval-2016 subtask B per query: its labelled candidates ranked by score; AP, RR and nDCG at depth, success at 1.

    `scored_pairs` has query_id, ticket_id, label, score. One row per query (query_id ascending), columns ap, rr, ndcg,
    acc@1; null for a query with no relevant candidate: it has nothing to find, so no ranking can be judged on it.
    """
    return by_query(scored_pairs, scored_pairs, depth)


def retrieve_by_query(matrix: ScoreMatrix, pairs: pl.DataFrame, depth: int = 10) -> pl.DataFrame:
    """The user's job per query: each query of `pairs` ranks every ticket of the pool, and its top `depth` are judged
    by `pairs` (a ticket it does not label counts as not relevant). Rows as rerank_by_query's."""
    return by_query(matrix.restrict(pairs["query_id"].unique(maintain_order=True)).top_k(depth), pairs, depth)


def by_query(run: pl.DataFrame, qrels: pl.DataFrame, depth: int) -> pl.DataFrame:
    """ranking_by_query at `depth` as columns ap, rr, ndcg, acc@1; null for a query with no relevant ticket in `qrels`."""
    measured = ranking_by_query(run, qrels, (1, depth))
    answerable = qrels.group_by(pl.col("query_id").cast(pl.String)).agg(answerable=(pl.col("label") >= RELEVANT).any())
    columns = {"ap": f"map@{depth}", "rr": f"mrr@{depth}", "ndcg": f"ndcg@{depth}", "acc@1": "acc@1"}
    return measured.join(answerable, on="query_id", maintain_order="left").select(
        "query_id", *(pl.when("answerable").then(pl.col(column)).alias(name) for name, column in columns.items()))


def query_means(rows: pl.DataFrame) -> dict[str, float]:
    """MAP, MRR, nDCG and accuracy@1 of rerank_by_query's (or retrieve_by_query's) rows. A query with no relevant
    candidate counts 0, as in the organizers' scorer (ev.py, unless run with --ignore_noanswer): that reproduces their
    search-engine baseline."""
    columns = {"map": "ap", "mrr": "rr", "ndcg": "ndcg", "acc@1": "acc@1"}
    return {name: float(rows[column].fill_null(0.0).mean()) for name, column in columns.items() if column in rows.columns}


def rerank(scored_pairs: pl.DataFrame, depth: int = 10) -> dict[str, float]:
    """SemEval-2016 subtask B: each query's labelled candidates ranked by score; MAP and MRR at depth, and accuracy@1.

    `scored_pairs` has query_id, ticket_id, label, score. A query with no relevant candidate scores 0.
    """
    return query_means(rerank_by_query(scored_pairs, depth))


def retrieve(matrix: ScoreMatrix, pairs: pl.DataFrame, cutoffs: Sequence[int]) -> dict[str, float]:
    """The paper's setting: each query of `pairs` ranks the whole pool; tickets unjudged in `pairs` are not relevant."""
    queries = pairs["query_id"].unique(maintain_order=True)
    run = matrix.restrict(queries).top_k(max(cutoffs))
    return ranking(run, pairs, cutoffs)
