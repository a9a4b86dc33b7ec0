"""The fused score g = exp(-total), total = sum_pq V_pq sum_c W_c d(x_p^c, x_q^c) + W_L d_L + W_R d_R, in one object
(FusedScore) that the trainer, the evaluator, the tuner's rescoring, the index build and the top-k search all call.

p ranges over query components, q over ticket components, c over the channels with vectors (h, E, T, S, A, F, ...);
d is the L1 distance of the paper (or cosine distance, for comparison). The pair channels (PAIR_CHANNELS) bring one
distance in [0, 1] per query-ticket pair instead of vectors, an input here: d_L is BM25's (channels/lexical.py,
channels/bm25.py), d_R the source's rank; they add W_c d_c outside the level sum.

Flat vectors: sum_pq V_pq sum_c W_c |x_p^c - x_q^c|_1 = ||Q - D||_1 when Q concatenates the blocks V_pq W_c x_p^c of the
query and D the blocks V_pq W_c x_q^c of the ticket, in the same order: the weights are positive, so each can move inside
the absolute value. A ticket component read by several level pairs appears once per pair, each time with its pair's
weight. The top k by g is then a nearest-neighbour search under L1 plus W_L d_L, exact (scoring/topk.py). Cosine
distances do not flatten. In a search R (the source's candidate order) has no value and counts as 1, as in the retrieve
protocol: the constant W_R.

Channel vectors are torch tensors (training: a learned W or V keeps its gradient; evaluation, rescoring) and torch is
imported only to measure them; flat vectors are numpy arrays, so a search over a query export never imports torch.
"""
from __future__ import annotations

import sys
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ticketsim.scoring.weights import PAIR_CHANNELS, MetricConfig

if TYPE_CHECKING:
    import torch

Vectors = Mapping[str, Mapping[str, "torch.Tensor"]]   # channel -> component -> (n, dim)
PairDistances = Mapping[str, "torch.Tensor"]           # pair channel -> (n,) for paired rows, (n_q, n_t) for a pool


@dataclass(frozen=True)
class Block:
    """One slice of the flat vectors: channel `channel` of query component `query` and ticket component `ticket`."""

    channel: str
    query: str
    ticket: str
    weight: float   # V_pq * W_c (a tensor while W or V learn)


@dataclass(frozen=True)
class FusedScore:
    """g of the weights in force: the dense part as blocks (one per level pair and channel), the pair channels' W."""

    blocks: tuple[Block, ...]
    pair: Mapping[str, float]       # pair channel -> W_c, the weighed ones
    distance: Literal["l1", "cosine"] = "l1"

    @classmethod
    def of(cls, metric: MetricConfig) -> FusedScore:
        """The score of W and V as given (floats, or a model's learned tensors)."""
        return cls(tuple(Block(c, p, q, v * w) for p, q, v in metric.level_pairs()
                         for c, w in metric.channels.items() if w and c not in PAIR_CHANNELS),
                   {c: w for c in PAIR_CHANNELS if (w := metric.channels.get(c))}, metric.distance)

    @classmethod
    def for_search(cls, metric: MetricConfig) -> FusedScore:
        """The score as an index holds it: its weights floats (a learned W and V read off their tensors), its dense
        part one L1 distance of flat vectors."""
        if metric.distance != "l1":
            raise ValueError(f"the metric uses {metric.distance} distance, which does not flatten into one L1 distance: an "
                             "exact L1 index cannot search it; use a variant with l1 distance")
        return cls.of(MetricConfig({c: float(w) for c, w in metric.channels.items()},
                                   {k: float(v) for k, v in metric.levels.items()}))

    def only(self, channels: Collection[str]) -> FusedScore:
        """The terms of these channels alone (an in-batch loss's first phase weighs the trained branches alone)."""
        return replace(self, blocks=tuple(b for b in self.blocks if b.channel in channels),
                       pair={c: w for c, w in self.pair.items() if c in channels})

    @property
    def lexical_weight(self) -> float:
        return self.pair.get("L", 0.0)

    @property
    def constant(self) -> float:
        """W_R d_R in a search, where R counts as 1."""
        return self.pair.get("R", 0.0)

    # Channel vectors (torch): training, evaluation, rescoring.

    def total(self, queries: Vectors, tickets: Vectors, pool: bool = False, pair: PairDistances | None = None) -> torch.Tensor:
        """The total distance of paired rows (n,), or with pool=True of every query to every ticket (n_q, n_t)."""
        total = 0.0
        for block in self.blocks:
            total = total + block.weight * measure(queries[block.channel][block.query], tickets[block.channel][block.ticket],
                                                   self.distance, pool)
        for channel, weight in self.pair.items():
            if pair is None or channel not in pair:
                raise ValueError(f"the metric weighs pair channel {channel} but got no distances for it")
            total = total + weight * pair[channel]
        return total

    def similarity(self, queries: Vectors, tickets: Vectors, pool: bool = False, pair: PairDistances | None = None
                   ) -> torch.Tensor:
        """g in (0, 1]: 1 for identical representations."""
        return g(self.total(queries, tickets, pool, pair))

    # Flat vectors (numpy): the index and the search.

    def flatten(self, vectors: Mapping[str, Mapping[str, Any]], side: str) -> np.ndarray:
        """(n, dim) float64: one side's channel vectors (channel -> component -> (n, d), numpy arrays or CPU tensors) as
        flat vectors; side 'queries' or 'tickets'."""
        parts = [block.weight * np.asarray(vectors[block.channel][block.query if side == "queries" else block.ticket],
                                           dtype=np.float64) for block in self.blocks]
        return np.concatenate(parts, axis=1)

    def flat_total(self, dense: np.ndarray | float, lexical: np.ndarray | None = None) -> np.ndarray:
        """The search's total less the constant: the dense L1 distance of flat vectors plus W_L d_L (`lexical`: d_L of
        the same tickets; unread where W_L is 0). It orders tickets as g does."""
        return dense + self.lexical_weight * lexical if self.lexical_weight else dense

    def flat_totals(self, tickets: np.ndarray, query: np.ndarray, lexical: np.ndarray | None = None) -> np.ndarray:
        """flat_total of these tickets' flat vectors (n, dim) against one query's (dim,), in float64."""
        return self.flat_total(np.abs(tickets.astype(np.float64) - query).sum(1), lexical)

    def flat_similarity(self, flat_totals: np.ndarray) -> np.ndarray:
        """g of flat_total's totals."""
        return g(flat_totals + self.constant)

    def layout(self) -> dict:
        """The generation manifest's `layout` (search/index.py): the blocks, W_L and the constant."""
        return {"blocks": [{"channel": b.channel, "query": b.query, "ticket": b.ticket, "weight": b.weight} for b in self.blocks],
                "lexical_weight": self.lexical_weight, "constant": self.constant}

    @classmethod
    def from_layout(cls, layout: Mapping[str, Any]) -> FusedScore:
        weights = {"L": layout["lexical_weight"], "R": layout["constant"]}
        return cls(tuple(Block(**b) for b in layout["blocks"]), {c: w for c, w in weights.items() if w})


def g(total: Any) -> Any:
    """exp(-total): a tensor through torch (keeping its gradient), an array or a float through numpy."""
    torch = sys.modules.get("torch")    # a tensor means torch is imported already
    return (-total).exp() if torch is not None and isinstance(total, torch.Tensor) else np.exp(-total)


def measure(a: torch.Tensor, b: torch.Tensor, kind: str, pool: bool) -> torch.Tensor:
    """d(a_i, b_i) for each row i, or with `pool` d(a_i, b_j) for every i, j."""
    import torch
    import torch.nn.functional as F

    if kind == "l1":
        return torch.cdist(a, b, p=1) if pool else (a - b).abs().sum(-1)
    if pool:
        return 1 - F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T
    return 1 - F.cosine_similarity(a, b, dim=-1)
