"""Model inputs: every query and ticket as padded token ids per component (channel h), its raw component texts (channel F)
and its cached channel vectors (E, T, S; A reads S)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import polars as pl
import torch

from ticketsim.channels.cache import ChannelVectors, component_strings, component_tokens
from ticketsim.channels.lexical import lexical_scores
from ticketsim.config import (
    BM25Config,
)
from ticketsim.data.tables import Corpus
from ticketsim.model.branches import BRANCHES
from ticketsim.model.siamese import Side, Texts
from ticketsim.scoring.fused import PairDistances
from ticketsim.scoring.weights import MetricConfig
from ticketsim.text.tokenize import Tokens

PAD = 0


def vocabulary_index(words: Sequence[str]) -> dict[str, int]:
    """word -> row of the embedding table; row 0 is padding."""
    return {word: i for i, word in enumerate(words, start=1)}


def padded(token_lists: list[list[str]], index: Mapping[str, int], max_tokens: int) -> Texts:
    """Ids of the first max_tokens known words of each text, right-padded."""
    ids = [[index[w] for w in tokens if w in index][:max_tokens] for tokens in token_lists]
    lengths = torch.tensor([len(x) for x in ids], dtype=torch.long)
    table = torch.full((len(ids), max([1, *map(len, ids)])), PAD, dtype=torch.long)
    for row, x in enumerate(ids):
        table[row, : len(x)] = torch.tensor(x, dtype=torch.long)
    return Texts(table, lengths)


@dataclass(frozen=True)
class Encoded:
    """One side (queries or tickets): row i is ids[i]; texts[component], strings[component] and
    cached[channel][component] share the rows."""

    ids: tuple[str, ...]
    texts: dict[str, Texts]
    cached: dict[str, dict[str, torch.Tensor]]
    strings: dict[str, list[str]] = field(default_factory=dict)
    tickets: bool = False           # the ticket side: what a branch reads there (Branch.source)

    def take(self, rows: torch.Tensor, needs: Mapping[str, Sequence[str]]) -> Side:
        """The rows' inputs for the channels and components the metric needs (channel -> components)."""
        side: dict[str, dict[str, object]] = {}
        for channel, components in needs.items():
            source = BRANCHES[channel].source(self.tickets) if channel in BRANCHES else channel
            if source == "words":
                side[channel] = {c: self.trimmed(self.texts[c], rows) for c in components}
            elif source == "strings":
                side[channel] = {c: [self.strings[c][i] for i in rows.tolist()] for c in components}
            else:
                side[channel] = {c: self.cached[source][c][rows] for c in components}
        return side

    @staticmethod
    def trimmed(texts: Texts, rows: torch.Tensor) -> Texts:
        lengths = texts.lengths[rows]
        return Texts(texts.ids[rows, : max(1, int(lengths.max()))], lengths)

    def row(self, ids: Sequence[str]) -> torch.Tensor:
        position = {x: i for i, x in enumerate(self.ids)}
        return torch.tensor([position[x] for x in ids], dtype=torch.long)


def encode_side(frame: pl.DataFrame, id_column: str, components: Sequence[str], index: Mapping[str, int],
                max_tokens: int, channels: Sequence[ChannelVectors], side: str, raw: pl.DataFrame | None = None,
                string_components: Sequence[str] = ()) -> Encoded:
    """`side` is 'queries' or 'tickets': which half of each ChannelVectors to take (rows aligned by id); `raw`: the
    prepared table of the same side, whose texts of `string_components` channel F reads."""
    ids = tuple(frame[id_column])
    texts = {c: padded(component_tokens(frame, c), index, max_tokens) for c in components}
    strings = {}
    if string_components:
        if raw is None or tuple(raw[id_column]) != ids:
            raise ValueError(f"channel F reads the raw {side}: pass their prepared table, in the tokens' order")
        strings = {c: component_strings(raw, c) for c in string_components}
    cached = {}
    for vectors in channels:
        cache_ids = vectors.query_ids if side == "queries" else vectors.ticket_ids
        arrays = vectors.queries if side == "queries" else vectors.tickets
        if not arrays:          # a cache of one side only (the query-tower road's tickets)
            continue
        position = {x: i for i, x in enumerate(cache_ids)}
        order = np.array([position[x] for x in ids], dtype=np.intp) if cache_ids != ids else slice(None)
        cached[vectors.channel] = {c: torch.from_numpy(np.asarray(a[order], dtype=np.float32)) for c, a in arrays.items()}
    return Encoded(ids, texts, cached, strings, side == "tickets")


# The merged components every channel has: their query-ticket distance sets a cached channel's scale.
SCALE_LEVEL = ("sub+desc", "sub+desc+sol")


def rank_distances(pairs: pl.DataFrame) -> np.ndarray:
    """Channel R: 1 - 1/rank of the candidate order the source ships (0 for its first); 1 where it ships none."""
    rank = pairs["source_rank"].cast(pl.Float64).fill_null(float("inf")).to_numpy()
    return 1 - 1 / np.maximum(rank, 1)


def scaled(vectors: ChannelVectors, scale: float) -> ChannelVectors:
    return ChannelVectors(vectors.channel, vectors.query_ids, vectors.ticket_ids,
                          {c: v / scale for c, v in vectors.queries.items()}, {c: v / scale for c, v in vectors.tickets.items()})


@dataclass(frozen=True)
class Inputs:
    queries: Encoded
    tickets: Encoded
    words: tuple[str, ...]     # embedding rows 1..n (row 0 pads)
    lexical: torch.Tensor | None = None   # d_L of every query (rows) against every ticket, when the metric weighs L

    def pair_distances(self, metric: MetricConfig, pairs: pl.DataFrame | None = None) -> PairDistances:
        """The pair channels the metric weighs, for `pairs` (n,) or, without them, for the whole pool (n_q, n_t).

        The pool has no source order (R is 1 throughout): only given candidates have one, and ranking the pool by it
        would hand the labelled candidates to the retrieve protocol.
        """
        out = {}
        if metric.channels.get("L"):
            out["L"] = self.lexical if pairs is None else self.lexical[self.queries.row(pairs["query_id"]),
                                                                       self.tickets.row(pairs["ticket_id"])]
        if metric.channels.get("R"):
            out["R"] = (torch.ones(len(self.queries.ids), len(self.tickets.ids)) if pairs is None
                        else torch.from_numpy(rank_distances(pairs)).float())
        return out


def lexical_distances(tokens: Tokens, bm25: BM25Config) -> torch.Tensor:
    """Channel L of every query against every ticket (rows and columns in the tokens' order)."""
    return torch.from_numpy(lexical_scores(tokens, bm25.k1, bm25.b).distances()).float()


def build_inputs(tokens: Tokens, channels: Sequence[ChannelVectors], metric: MetricConfig, max_tokens: int,
                 bm25: BM25Config = BM25Config(), corpus: Corpus | None = None, words: Sequence[str] | None = None) -> Inputs:
    """`corpus`: the prepared texts of the tokens' rows, which channel F reads (required when the metric weighs F);
    `words`: the embedding rows of a model already trained (its Inputs.words), default the tokens' vocabulary."""
    words = tuple(tokens.vocabulary()["token"]) if words is None else tuple(words)
    index = vocabulary_index(words)
    needs_q, needs_t = metric.needs()
    lexical = lexical_distances(tokens, bm25) if metric.channels.get("L") else None
    raw = (None, None) if corpus is None else (aligned(corpus.queries, tokens.queries, "query_id"),
                                               aligned(corpus.tickets, tokens.tickets, "ticket_id"))
    return Inputs(encode_side(tokens.queries, "query_id", read_as(needs_q, "words"), index, max_tokens, channels, "queries",
                              raw[0], read_as(needs_q, "strings")),
                  encode_side(tokens.tickets, "ticket_id", read_as(needs_t, "words", True), index, max_tokens, channels,
                              "tickets", raw[1], read_as(needs_t, "strings", True)),
                  words, lexical)


def read_as(needs: dict[str, tuple[str, ...]], kind: str, tickets: bool = False) -> list[str]:
    """The components that the needed trained branches read as `kind` ("words" or "strings", model/branches.py) on
    one side."""
    return sorted({c for channel, components in needs.items() if channel in BRANCHES
                   and BRANCHES[channel].source(tickets) == kind for c in components})


def aligned(raw: pl.DataFrame, tokens: pl.DataFrame, id_column: str) -> pl.DataFrame:
    """The prepared rows of `raw` in the order of the tokens' rows."""
    return tokens.select(id_column).join(raw, on=id_column, how="left", maintain_order="left")
