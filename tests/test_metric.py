"""The shared metric against a hand computation."""
import math

import pytest
import torch

from ticketsim.model.metric import MetricConfig, similarity


def test_similarity_matches_a_hand_computation_paired_and_pooled():
    queries = {"h": {"sub": torch.tensor([[1.0, 0.0]]), "desc": torch.tensor([[0.0, 2.0]])},
               "E": {"sub": torch.tensor([[1.0, 1.0]]), "desc": torch.tensor([[3.0, 0.0]])}}
    tickets = {"h": {"sub": torch.tensor([[0.0, 0.0], [1.0, 0.0]]), "sol": torch.tensor([[0.0, 1.0], [0.0, 2.0]])},
               "E": {"sub": torch.tensor([[1.0, 2.0], [1.0, 1.0]]), "sol": torch.tensor([[3.0, 3.0], [3.0, 0.0]])}}
    cfg = MetricConfig(channels={"h": 0.7, "E": 0.3}, levels={"sub-sub": 0.6, "desc-sol": 0.4, "sub-sol": 0.0})
    # ticket 0: sub-sub: h |1|+|0| = 1, E 0+1 = 1 -> .6 * (.7*1 + .3*1); desc-sol: h 0+1 = 1, E 0+3 = 3 -> .4 * (.7 + .9)
    expected0 = math.exp(-(0.6 * 1.0 + 0.4 * 1.6))
    expected1 = 1.0  # identical representations on every weighted level
    pooled = similarity(queries, tickets, cfg, pool=True)
    assert pooled.shape == (1, 2)
    assert pooled[0].tolist() == pytest.approx([expected0, expected1])
    paired = similarity({c: {k: v.expand(2, -1) for k, v in side.items()} for c, side in queries.items()}, tickets, cfg)
    assert paired.tolist() == pytest.approx([expected0, expected1])


def test_cosine_distance_ignores_length():
    queries = {"E": {"sub": torch.tensor([[1.0, 1.0]])}}
    tickets = {"E": {"sub": torch.tensor([[5.0, 5.0], [1.0, -1.0]])}}
    cfg = MetricConfig(channels={"E": 1.0}, levels={"sub-sub": 1.0}, distance="cosine")
    assert similarity(queries, tickets, cfg, pool=True)[0].tolist() == pytest.approx([1.0, math.exp(-1.0)])
