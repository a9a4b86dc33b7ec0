"""Channel L: BM25 of a query's SUB+DESC against a ticket's SUB+DESC+SOL, as one distance in [0, 1] per pair.

Exact words (error codes, part names) that the dense channels blur count here. BM25 (channels/bm25.py, Lucene's
variant: the search index's own postings) is divided by the query's ceiling, the sum of its words' idf: a ticket nears
it only by repeating every query word without end. The ceiling depends on the query and the ticket pool alone, so a
query's tickets keep BM25's order, a pair's value needs no other query, and d_L = 1 - BM25 / ceiling joins the metric
like any distance.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ticketsim.channels import bm25
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
        return bm25.distances(self.bm25, self.ceilings)


@dataclass(frozen=True, eq=False)
class LexicalIndex:
    """A ticket pool's ids and BM25 postings, the same the search index keeps: a query's L needs nothing else."""

    ticket_ids: tuple[str, ...]
    postings: bm25.Postings

    @classmethod
    def build(cls, ticket_ids: tuple[str, ...], documents: list[list[str]], k1: float = 1.5, b: float = 0.75) -> LexicalIndex:
        return cls(ticket_ids, bm25.Postings.build(documents, k1, b))

    def scores(self, query_ids: tuple[str, ...], queries: list[list[str]]) -> LexicalScores:
        """BM25 and ceilings of token lists (a query's QUERY_LEVEL tokens) against the pool; no words, no score."""
        rows = [self.postings.bm25(q) for q in queries]
        return LexicalScores(query_ids, self.ticket_ids, np.stack(rows) if rows else np.zeros((0, len(self.ticket_ids))),
                             np.array([self.postings.ceiling(q) for q in queries]))


def lexical_scores(tokens: Tokens, k1: float = 1.5, b: float = 0.75) -> LexicalScores:
    pool = LexicalIndex.build(tuple(tokens.tickets["ticket_id"]), component_tokens(tokens.tickets, TICKET_LEVEL), k1, b)
    return pool.scores(tuple(tokens.queries["query_id"]), component_tokens(tokens.queries, QUERY_LEVEL))
