"""Texts through a bundle's Scorer into flat vectors (scoring/fused.py): the one path for the index's tickets, and for a
search's queries when the bundle has no query export (search/queries.py, whose export gives the same vectors), so both
sides go through exactly the channels, scales and weights the model scores pairs with (ticketsim.bundle.loader)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from ticketsim.data.tables import PAIR_SCHEMA, QUERY_SCHEMA, TICKET_SCHEMA, Corpus
from ticketsim.scoring.fused import FusedScore
from ticketsim.scoring.weights import metric_of

if TYPE_CHECKING:   # torch through them: a search whose bundle has a query export (search/queries.py) never imports it
    from ticketsim.bundle.loader import Scorer
    from ticketsim.channels.cache import ChannelVectors


def search_score(scorer: Scorer) -> FusedScore:
    """The bundle's score as an index and its search hold it: the model's weights in force (learned W and V are
    tensors of the model), as floats."""
    import torch

    with torch.no_grad():
        return FusedScore.for_search(scorer.model.metric(metric_of(scorer.variant)))


def flat_side(scorer: Scorer, score: FusedScore, frame: pl.DataFrame, side: str,
              cached: Sequence[ChannelVectors] = ()) -> tuple[pl.DataFrame, np.ndarray]:
    """(the rows' tokens, their flat vectors (n, dim) float64) of a tickets or queries table (side: 'tickets', 'queries');
    `cached`: as Scorer.encode."""
    from ticketsim.model.scores import side_channels

    tokens, inputs, model = scorer.encode(one_side(frame, side), lexical=False, cached=cached)
    needs = metric_of(scorer.variant).needs()[0 if side == "queries" else 1]
    vectors = side_channels(model, getattr(inputs, side), needs, tickets=side == "tickets")
    return getattr(tokens, side), score.flatten(vectors, side)


def one_side(frame: pl.DataFrame, side: str) -> Corpus:
    """A corpus of tickets alone or of queries alone (side: 'tickets', 'queries'), the other tables empty."""
    empty = {name: pl.DataFrame(schema=schema) for name, schema in
             (("tickets", TICKET_SCHEMA), ("queries", QUERY_SCHEMA), ("pairs", PAIR_SCHEMA))}
    return Corpus(**{**empty, side: frame.select(list(empty[side].schema))})
