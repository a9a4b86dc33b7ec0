"""The Replicated Siamese similarity g = exp(-sum_pq V_pq sum_c W_c d(x_p^c, x_q^c)), as one pure function.

p ranges over query components, q over ticket components, c over channels (h, E, T, S, ...); d is the L1
distance of the paper (or cosine distance, for comparison). Every row of Table 5 is this function with
other channels, weights W and level pairs V: unsupervised baselines, trained models and re-scoring alike.
Pair channels (PAIR_CHANNELS: lexical L, first-stage rank R) bring one distance in [0, 1] per query-ticket pair
instead of vectors; they add W_c d_c outside the level sum, so the dense part stays one L1 distance.
"""
from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F

from ticketsim.config import (
    VariantConfig,
)

Vectors = Mapping[str, Mapping[str, torch.Tensor]]  # channel -> component -> (n, dim)
PairDistances = Mapping[str, torch.Tensor]          # pair channel -> (n,) for paired rows, (n_q, n_t) for a pool
PAIR_CHANNELS = ("L", "R")                          # BM25 (channels/lexical.py) and the source's rank: no vectors


@dataclass(frozen=True)
class MetricConfig:
    """W: channel -> weight; V: 'query_component-ticket_component' -> weight (e.g. 'sub-desc': .2)."""

    channels: Mapping[str, float]
    levels: Mapping[str, float]
    distance: Literal["l1", "cosine"] = "l1"

    def level_pairs(self) -> list[tuple[str, str, float]]:
        return [(*key.split("-"), weight) for key, weight in self.levels.items() if weight]

    def needs(self) -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]]]:
        """(query side, ticket side): channel -> the components the weighted levels read, sorted.

        Sorted, not a set: the LSTM encodes components in this order and each draws its dropout masks in turn, so a
        set's order (it follows Python's per-process string hashing) would make every training run different.
        """
        channels = [c for c, w in self.channels.items() if w and c not in PAIR_CHANNELS]
        pairs = self.level_pairs()
        return ({c: tuple(sorted({p for p, _, _ in pairs})) for c in channels},
                {c: tuple(sorted({q for _, q, _ in pairs})) for c in channels})


def paired_distance(a: torch.Tensor, b: torch.Tensor, kind: str) -> torch.Tensor:
    """d(a_i, b_i) for each row i."""
    if kind == "l1":
        return (a - b).abs().sum(-1)
    return 1 - F.cosine_similarity(a, b, dim=-1)


def cross_distance(a: torch.Tensor, b: torch.Tensor, kind: str) -> torch.Tensor:
    """d(a_i, b_j) for every i, j."""
    if kind == "l1":
        return torch.cdist(a, b, p=1)
    return 1 - F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T


def distance(queries: Vectors, tickets: Vectors, cfg: MetricConfig, pool: bool = False,
             pair: PairDistances | None = None, only: Collection[str] | None = None) -> torch.Tensor:
    """Weighted distance of paired rows (n,), or with pool=True of every query to every ticket (n_q, n_t).
    only: the channels weighed, the others left out (None: all; an in-batch loss's first phase weighs the trained
    branches alone)."""
    measure = cross_distance if pool else paired_distance
    weighed = {c: w for c, w in cfg.channels.items() if w and (only is None or c in only)}
    total = 0.0
    for p, q, level_weight in cfg.level_pairs():
        for channel, channel_weight in weighed.items():
            if channel not in PAIR_CHANNELS:
                total = total + level_weight * channel_weight * measure(queries[channel][p], tickets[channel][q], cfg.distance)
    for channel in PAIR_CHANNELS:
        if channel in weighed:
            if pair is None or channel not in pair:
                raise ValueError(f"the metric weighs pair channel {channel} but got no distances for it")
            total = total + cfg.channels[channel] * pair[channel]
    return total


def similarity(queries: Vectors, tickets: Vectors, cfg: MetricConfig, pool: bool = False,
               pair: PairDistances | None = None, only: Collection[str] | None = None) -> torch.Tensor:
    """g in (0, 1]: 1 for identical representations."""
    return torch.exp(-distance(queries, tickets, cfg, pool, pair, only))


def metric_of(variant: VariantConfig) -> MetricConfig:
    return MetricConfig(channels=dict(variant.channels), levels=dict(variant.levels))
