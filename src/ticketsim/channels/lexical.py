"""Channel L: BM25 of a query's SUB+DESC against a ticket's SUB+DESC+SOL, as one distance in [0, 1] per pair.

Exact words (error codes, part names) that the dense channels blur count here. BM25 (bm25s, Lucene's variant) is
divided by the query's ceiling, the sum of its words' idf: a ticket nears it only by repeating every query word
without end. The ceiling depends on the query and the ticket pool alone, so a query's tickets keep BM25's order,
a pair's value needs no other query, and d_L = 1 - BM25 / ceiling joins the metric like any distance.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import bm25s
import numpy as np

from ticketsim.channels.cache import component_tokens
from ticketsim.text.tokenize import Tokens

QUERY_LEVEL, TICKET_LEVEL = "sub+desc", "sub+desc+sol"


@dataclass(frozen=True, eq=False)
class LexicalScores:
    """BM25 of every query (rows, query_ids) against every ticket (columns, ticket_ids), and each query's ceiling."""

    query_ids: tuple[str, ...]
    ticket_ids: tuple[str, ...]
    bm25: np.ndarray
    ceilings: np.ndarray

    def distances(self) -> np.ndarray:
        """d_L in [0, 1]: 0 for the ceiling, 1 for no shared word (and for a query of words no ticket has)."""
        ceilings = self.ceilings[:, None]
        return np.where(ceilings > 0, 1 - self.bm25 / np.where(ceilings > 0, ceilings, 1), 1.0)


def idf(documents: list[list[str]]) -> dict[str, float]:
    """Lucene's idf, as bm25s computes it: log(1 + (N - df + .5) / (df + .5))."""
    n, df = len(documents), Counter(word for words in documents for word in set(words))
    return {word: math.log(1 + (n - count + 0.5) / (count + 0.5)) for word, count in df.items()}


def lexical_scores(tokens: Tokens, k1: float = 1.5, b: float = 0.75) -> LexicalScores:
    queries = component_tokens(tokens.queries, QUERY_LEVEL)
    tickets = component_tokens(tokens.tickets, TICKET_LEVEL)
    retriever = bm25s.BM25(k1=k1, b=b)
    retriever.index(tickets, show_progress=False)
    weights = idf(tickets)
    return LexicalScores(tuple(tokens.queries["query_id"]), tuple(tokens.tickets["ticket_id"]),
                         np.stack([retriever.get_scores(q) for q in queries]) if queries else np.zeros((0, len(tickets))),
                         np.array([sum(weights.get(word, 0.0) for word in q) for q in queries]))
