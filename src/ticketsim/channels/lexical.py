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
from typing import TYPE_CHECKING

import numpy as np

from ticketsim.channels.cache import component_tokens
from ticketsim.text.tokenize import Tokens

if TYPE_CHECKING:   # bm25s imports scipy.sparse (0.2 s): a search reads the index's own postings (search/postings.py)
    import bm25s

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


@dataclass(frozen=True, eq=False)
class LexicalIndex:
    """BM25's statistics of a ticket pool (bm25s's index and Lucene's idf): a query's L needs nothing else, so a search
    index keeps this object, and rebuilds it when tickets are added (every idf and the mean length move)."""

    ticket_ids: tuple[str, ...]
    retriever: bm25s.BM25
    idf: dict[str, float]

    @classmethod
    def build(cls, ticket_ids: tuple[str, ...], documents: list[list[str]], k1: float = 1.5, b: float = 0.75) -> LexicalIndex:
        import bm25s

        retriever = bm25s.BM25(k1=k1, b=b)
        retriever.index(documents, show_progress=False)
        return cls(ticket_ids, retriever, idf(documents))

    def scores(self, query_ids: tuple[str, ...], queries: list[list[str]]) -> LexicalScores:
        """BM25 and ceilings of token lists (a query's QUERY_LEVEL tokens) against the pool; no words, no score."""
        bm25 = [self.retriever.get_scores(q) if q else np.zeros(len(self.ticket_ids), np.float32) for q in queries]
        return LexicalScores(query_ids, self.ticket_ids, np.stack(bm25) if bm25 else np.zeros((0, len(self.ticket_ids))),
                             np.array([sum(self.idf.get(word, 0.0) for word in q) for q in queries]))


def lexical_scores(tokens: Tokens, k1: float = 1.5, b: float = 0.75) -> LexicalScores:
    pool = LexicalIndex.build(tuple(tokens.tickets["ticket_id"]), component_tokens(tokens.tickets, TICKET_LEVEL), k1, b)
    return pool.scores(tuple(tokens.queries["query_id"]), component_tokens(tokens.queries, QUERY_LEVEL))
