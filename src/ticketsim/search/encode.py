"""Texts through a bundle's Scorer into folded vectors: the one path for the index's tickets, and for a search's queries
when the bundle has no query export (search/queries.py, whose export gives the same vectors), so both sides go
through exactly the channels, scales and weights the model scores pairs with (ticketsim.bundle.loader)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from ticketsim.data.tables import PAIR_SCHEMA, QUERY_SCHEMA, TICKET_SCHEMA, Corpus
from ticketsim.search.fold import Block, blocks, fold

if TYPE_CHECKING:   # torch through them: a search whose bundle has a query export (search/queries.py) never imports it
    from ticketsim.bundle.loader import Scorer
    from ticketsim.channels.cache import ChannelVectors


@dataclass(frozen=True)
class Layout:
    """The model's weights in force, as a search uses them: the folded dense blocks and the pair channels' weights.
    R (the source's candidate order) has no value in a search and counts as 1, as in the retrieve protocol."""

    blocks: tuple[Block, ...]
    lexical_weight: float      # W_L
    constant: float            # W_R * 1

    @classmethod
    def of(cls, scorer: Scorer) -> Layout:
        import torch

        from ticketsim.model.metric import metric_of

        with torch.no_grad():   # learned W and V are tensors of the model
            metric = scorer.model.metric(metric_of(scorer.variant))
        weight = {c: float(w) for c, w in metric.channels.items()}
        return cls(blocks(metric), weight.get("L", 0.0), weight.get("R", 0.0))


def fold_side(scorer: Scorer, layout: Layout, frame: pl.DataFrame, side: str,
                cached: Sequence[ChannelVectors] = ()) -> tuple[pl.DataFrame, np.ndarray]:
    """(the rows' tokens, their folded vectors (n, dim) float64) of a tickets or queries table (side: 'tickets', 'queries');
    `cached`: as Scorer.encode."""
    from ticketsim.model.metric import metric_of
    from ticketsim.model.scores import side_channels

    tokens, inputs, model = scorer.encode(one_side(frame, side), lexical=False, cached=cached)
    needs = metric_of(scorer.variant).needs()[0 if side == "queries" else 1]
    vectors = side_channels(model, getattr(inputs, side), needs, tickets=side == "tickets")
    return getattr(tokens, side), fold(vectors, layout.blocks, side)


def one_side(frame: pl.DataFrame, side: str) -> Corpus:
    """A corpus of tickets alone or of queries alone (side: 'tickets', 'queries'), the other tables empty."""
    empty = {name: pl.DataFrame(schema=schema) for name, schema in
             (("tickets", TICKET_SCHEMA), ("queries", QUERY_SCHEMA), ("pairs", PAIR_SCHEMA))}
    return Corpus(**{**empty, side: frame.select(list(empty[side].schema))})
