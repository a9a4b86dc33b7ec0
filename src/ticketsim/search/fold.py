"""The dense part of the metric as one L1 distance between two vectors, one per query and one per ticket.

sum_pq V_pq sum_c W_c |x_p^c - x_q^c|_1 = ||Q - D||_1 when Q concatenates the blocks V_pq W_c x_p^c of the query and D
the blocks V_pq W_c x_q^c of the ticket, in the same order: the weights are positive, so each can move inside the
absolute value. A ticket component read by several level pairs appears once per pair, each time with its pair's
weight. Top-k by g = exp(-distance) is then an exact nearest-neighbour search under L1. Cosine distances do not fold.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ticketsim.model.metric import MetricConfig


@dataclass(frozen=True)
class Block:
    """One slice of the folded vectors: channel x of query component `query` and ticket component `ticket`, times weight."""

    channel: str
    query: str
    ticket: str
    weight: float   # V_pq * W_c


def blocks(metric: MetricConfig) -> tuple[Block, ...]:
    """The folded layout of a metric (its weights in force: learned W and V are tensors, read as floats here)."""
    from ticketsim.model.metric import PAIR_CHANNELS  # torch: only a model's layout, never a query's, needs it

    if metric.distance != "l1":
        raise ValueError(f"the metric uses {metric.distance} distance, which does not fold into one L1 distance: an exact "
                         "L1 index cannot search it; use a variant with l1 distance")
    return tuple(Block(channel, p, q, float(v) * float(w)) for p, q, v in metric.level_pairs()
                 for channel, w in metric.channels.items() if float(w) and channel not in PAIR_CHANNELS)


def fold(vectors: Mapping[str, Mapping[str, np.ndarray]], layout: tuple[Block, ...], side: str) -> np.ndarray:
    """(n, dim) float64: one side's channel vectors (channel -> component -> (n, d), numpy arrays or CPU tensors)
    folded; side 'queries' or 'tickets'."""
    parts = [block.weight * np.asarray(vectors[block.channel][block.query if side == "queries" else block.ticket], dtype=np.float64)
             for block in layout]
    return np.concatenate(parts, axis=1)
