"""The measures every model is scored with: similarity of predicted to gold scores, and ranking of tickets per query."""
from __future__ import annotations

import math
from collections.abc import Sequence

import ir_measures
import numpy as np
import polars as pl
from ir_measures import AP, RR, Qrel, ScoredDoc, Success, nDCG

from ticketsim.data.tables import LABELS

# label >= RELEVANT is relevant: YES and REL, as SemEval counts PerfectMatch and Relevant.
RELEVANT = 3
# nDCG's graded gains: a YES solves the query, a REL (same equipment, other fault) is half as useful, a NO nothing.
GAINS = {LABELS["YES"]: 2, LABELS["REL"]: 1, LABELS["NO"]: 0}


def similarity_measures(predicted: np.ndarray, gold: np.ndarray) -> dict[str, float]:
    """Pearson and Spearman correlation and mean squared error; a correlation with constant input is nan."""
    predicted = np.asarray(predicted, dtype=float).ravel()
    gold = np.asarray(gold, dtype=float).ravel()
    if predicted.shape != gold.shape:
        raise ValueError(f"predicted has {predicted.size} values, gold has {gold.size}")
    mse = float(np.mean((predicted - gold) ** 2)) if predicted.size else math.nan
    if predicted.size < 2 or np.ptp(predicted) == 0 or np.ptp(gold) == 0:
        return {"pearson": math.nan, "spearman": math.nan, "mse": mse}
    # Spearman is Pearson of the ranks, ties given their mean rank (as scipy's; scipy.stats took a second to import).
    ranks = [pl.Series(values).rank("average").to_numpy() for values in (predicted, gold)]
    return {"pearson": pearson(predicted, gold), "spearman": pearson(*ranks), "mse": mse}


def pearson(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.corrcoef(a, b)[0, 1])


def ranking(run: pl.DataFrame, qrels: pl.DataFrame, cutoffs: Sequence[int]) -> dict[str, float]:
    """MAP, MRR, nDCG and accuracy (success) at each cutoff, as "map@k", "mrr@k", "ndcg@k", "acc@k": the means of
    ranking_by_query.

    The mean is over every query of `qrels`: one with no relevant ticket, or absent from `run`, scores 0.
    """
    by_query = ranking_by_query(run, qrels, cutoffs)
    return {name: float(by_query[name].mean()) for name in by_query.columns[1:]}


def ranking_by_query(run: pl.DataFrame, qrels: pl.DataFrame, cutoffs: Sequence[int]) -> pl.DataFrame:
    """One row per query of `qrels` (query_id ascending): AP, RR, nDCG and success at each cutoff, as "map@k", "mrr@k",
    "ndcg@k", "acc@k". nDCG weighs YES 2, REL 1 (GAINS); the others count a ticket relevant at label >= RELEVANT.

    `run` has query_id, ticket_id, score (higher is better); `qrels` has query_id, ticket_id, label.
    A query with no relevant ticket, or absent from `run`, scores 0.
    Run rows of queries not in `qrels` are ignored. Equal scores are ordered by ticket_id ascending.
    AP@k divides by all relevant tickets of the query (trec_eval's map_cut), which equals the SemEval
    scorer's rule (divide by the relevant found in the top k) when a query has at most k candidates.
    """
    cutoffs = sorted(set(cutoffs))
    if not cutoffs or cutoffs[0] < 1:
        raise ValueError(f"cutoffs must be positive, got {cutoffs}")
    qrels = qrels.select(pl.col("query_id", "ticket_id").cast(pl.String), pl.col("label").cast(pl.Int64))
    queries = qrels["query_id"].unique().sort()
    if queries.is_empty():
        raise ValueError("qrels has no queries")
    # Providers break ties their own way (trec_eval: docno descending, so AP and RR@k disagreed);
    # strictly decreasing scores impose ticket_id ascending on all of them.
    run = (
        run.select(pl.col("query_id", "ticket_id").cast(pl.String), pl.col("score").cast(pl.Float64))
        .filter(pl.col("query_id").is_in(queries.implode()))
        .sort(["query_id", "score", "ticket_id"], descending=[False, True, False])
        .with_columns(score=-pl.int_range(pl.len()).over("query_id").cast(pl.Float64))
    )
    names = {}
    for k in cutoffs:
        names |= {AP(rel=RELEVANT) @ k: f"map@{k}", RR(rel=RELEVANT) @ k: f"mrr@{k}", nDCG(gains=GAINS) @ k: f"ndcg@{k}",
                  Success(rel=RELEVANT) @ k: f"acc@{k}"}
    # Every qrels query gets every measure, 0 unless a provider reports it (they skip queries missing from the run).
    values = {name: dict.fromkeys(queries, 0.0) for name in names.values()}
    if not run.is_empty():
        # The default pipeline, not the pytrec_eval provider alone: that one has no RR@k and returns uncut RR.
        metrics = ir_measures.iter_calc(
            list(names),
            [Qrel(*row) for row in qrels.iter_rows()],
            [ScoredDoc(*row) for row in run.iter_rows()],
        )
        for metric in metrics:
            values[names[metric.measure]][metric.query_id] = metric.value
    return pl.DataFrame({"query_id": queries, **{name: list(by_id.values()) for name, by_id in values.items()}},
                        schema={"query_id": pl.String, **dict.fromkeys(values, pl.Float64)})
