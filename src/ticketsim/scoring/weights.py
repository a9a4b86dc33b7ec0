"""W and V, the weights of the fused score (scoring/fused.py): a variant's, or those a model learns.

W weighs each channel c (h, E, T, S, ... and the pair channels L and R), V each level pair 'p-q' of a query component p
and a ticket component q (e.g. 'sub-desc': .2). Every row of Table 5 is the one score with other channels, W and V:
unsupervised baselines, trained models and re-scoring alike. Read without torch: a learned W or V is a tensor here,
a configured one a float.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from ticketsim.config import VariantConfig

PAIR_CHANNELS = ("L", "R")      # BM25's distance (channels/lexical.py) and the source's rank: one per pair, no vectors


@dataclass(frozen=True)
class MetricConfig:
    """W: channel -> weight; V: 'query_component-ticket_component' -> weight; the distance d of each channel's vectors."""

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


def metric_of(variant: VariantConfig) -> MetricConfig:
    return MetricConfig(channels=dict(variant.channels), levels=dict(variant.levels))
