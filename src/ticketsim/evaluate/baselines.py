"""Unsupervised baselines that need no training: the source's own order, BM25, and one cached channel on one level pair."""
from __future__ import annotations

import numpy as np
import polars as pl

from ticketsim.channels.cache import ChannelVectors
from ticketsim.channels.lexical import lexical_scores
from ticketsim.config import BM25Config, EvaluationConfig
from ticketsim.evaluate.protocols import ScoreMatrix
from ticketsim.evaluate.suite import evaluate_method
from ticketsim.scoring.fused import FusedScore
from ticketsim.scoring.weights import MetricConfig
from ticketsim.text.tokenize import Tokens


def bm25_matrix(tokens: Tokens, cfg: BM25Config) -> ScoreMatrix:
    """BM25 of query SUB+DESC against ticket SUB+DESC+SOL, for every query and every ticket of the pool."""
    scores = lexical_scores(tokens, cfg.k1, cfg.b)
    return ScoreMatrix(scores.query_ids, scores.ticket_ids, scores.bm25)


def source_order_scores(pairs: pl.DataFrame) -> np.ndarray | None:
    """Scores that reproduce the order a source ships (SemEval's search-engine rank); None when it has none."""
    if pairs["source_rank"].null_count():
        return None
    return -pairs["source_rank"].to_numpy().astype(np.float64)


def channel_matrix(vectors: ChannelVectors, level: str, kind: str = "l1") -> ScoreMatrix:
    """Table 5's unsupervised rows: one channel, one level pair ('sub+desc-sub+desc+sol'), g = exp(-d).

    The matrix holds -d, which orders and calibrates exactly as g does but does not underflow to 0
    when long texts are far apart.
    """
    import torch  # BM25 alone (the rows stage's baselines) needs no torch

    score = FusedScore.of(MetricConfig(channels={vectors.channel: 1.0}, levels={level: 1.0}, distance=kind))
    as_tensors = lambda side: {vectors.channel: {c: torch.from_numpy(v).double() for c, v in side.items()}}  # noqa: E731
    values = -score.total(as_tensors(vectors.queries), as_tensors(vectors.tickets), pool=True)
    return ScoreMatrix(vectors.query_ids, vectors.ticket_ids, values.numpy())


def channel_rows(pairs: pl.DataFrame, vectors: ChannelVectors, rows: dict[str, str], distances: tuple[str, ...],
                 cfg: EvaluationConfig) -> dict:
    """Every unsupervised row of one channel (row number -> level pair), under each distance, evaluated.

    Method names read like 'E#11 sub-sub l1'.
    """
    results = {}
    for row, level in rows.items():
        for kind in distances:
            matrix = channel_matrix(vectors, level, kind)
            results[f"{vectors.channel}#{row} {level} {kind}"] = evaluate_method(pairs, matrix.pair_scores(pairs), matrix, cfg)
    return results
