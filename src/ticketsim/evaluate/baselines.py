"""Unsupervised baselines that need no training: the source's own candidate order, and BM25."""
from __future__ import annotations

import bm25s
import numpy as np
import polars as pl

from ticketsim.config import BM25Config
from ticketsim.data.tables import QUERY_FIELDS, TICKET_FIELDS
from ticketsim.evaluate.protocols import ScoreMatrix
from ticketsim.text.tokenize import Tokens


def joined(frame: pl.DataFrame, fields: tuple[str, ...]) -> list[list[str]]:
    """One token list per row: the given components concatenated."""
    return frame.select(pl.concat_list(fields)).to_series().to_list()


def bm25_matrix(tokens: Tokens, cfg: BM25Config) -> ScoreMatrix:
    """BM25 of query SUB+DESC against ticket SUB+DESC+SOL, for every query and every ticket of the pool."""
    retriever = bm25s.BM25(k1=cfg.k1, b=cfg.b)
    retriever.index(joined(tokens.tickets, TICKET_FIELDS), show_progress=False)
    values = np.stack([retriever.get_scores(query) for query in joined(tokens.queries, QUERY_FIELDS)])
    return ScoreMatrix(tuple(tokens.queries["query_id"]), tuple(tokens.tickets["ticket_id"]), values)


def source_order_scores(pairs: pl.DataFrame) -> np.ndarray | None:
    """Scores that reproduce the order a source ships (SemEval's search-engine rank); None when it has none."""
    if pairs["source_rank"].null_count():
        return None
    return -pairs["source_rank"].to_numpy().astype(np.float64)
