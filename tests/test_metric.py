"""The fused score (scoring/fused.py) against a hand computation; its flat vectors' one L1 distance is its level sum; the
index's layout round-trips; a search's side of it imports no torch."""
import json
import math
import subprocess
import sys

import numpy as np
import pytest
import torch

from ticketsim.scoring.fused import FusedScore, g
from ticketsim.scoring.weights import MetricConfig


def test_similarity_matches_a_hand_computation_paired_and_pooled():
    queries = {"h": {"sub": torch.tensor([[1.0, 0.0]]), "desc": torch.tensor([[0.0, 2.0]])},
               "E": {"sub": torch.tensor([[1.0, 1.0]]), "desc": torch.tensor([[3.0, 0.0]])}}
    tickets = {"h": {"sub": torch.tensor([[0.0, 0.0], [1.0, 0.0]]), "sol": torch.tensor([[0.0, 1.0], [0.0, 2.0]])},
               "E": {"sub": torch.tensor([[1.0, 2.0], [1.0, 1.0]]), "sol": torch.tensor([[3.0, 3.0], [3.0, 0.0]])}}
    score = FusedScore.of(MetricConfig(channels={"h": 0.7, "E": 0.3}, levels={"sub-sub": 0.6, "desc-sol": 0.4, "sub-sol": 0.0}))
    # ticket 0: sub-sub: h |1|+|0| = 1, E 0+1 = 1 -> .6 * (.7*1 + .3*1); desc-sol: h 0+1 = 1, E 0+3 = 3 -> .4 * (.7 + .9)
    expected0 = math.exp(-(0.6 * 1.0 + 0.4 * 1.6))
    expected1 = 1.0  # identical representations on every weighted level
    pooled = score.similarity(queries, tickets, pool=True)
    assert pooled.shape == (1, 2)
    assert pooled[0].tolist() == pytest.approx([expected0, expected1])
    paired = score.similarity({c: {k: v.expand(2, -1) for k, v in side.items()} for c, side in queries.items()}, tickets)
    assert paired.tolist() == pytest.approx([expected0, expected1])


def test_cosine_distance_ignores_length():
    queries = {"E": {"sub": torch.tensor([[1.0, 1.0]])}}
    tickets = {"E": {"sub": torch.tensor([[5.0, 5.0], [1.0, -1.0]])}}
    score = FusedScore.of(MetricConfig(channels={"E": 1.0}, levels={"sub-sub": 1.0}, distance="cosine"))
    assert score.similarity(queries, tickets, pool=True)[0].tolist() == pytest.approx([1.0, math.exp(-1.0)])


def test_learned_weights_keep_their_gradient_and_only_keeps_the_channels_named():
    w, v = torch.tensor(0.5, requires_grad=True), torch.tensor(2.0, requires_grad=True)
    score = FusedScore.of(MetricConfig({"S": w, "E": torch.tensor(1.0), "L": torch.tensor(0.3)}, {"sub-sol": v}))
    q, t = {c: {"sub": torch.ones(1, 2)} for c in "SE"}, {c: {"sol": torch.zeros(1, 2)} for c in "SE"}
    score.only({"S"}).similarity(q, t).sum().backward()
    assert w.grad is not None and v.grad is not None
    assert float(score.only({"S"}).total(q, t).detach()) == pytest.approx(2.0 * 0.5 * 2)     # E and L left out
    with pytest.raises(ValueError, match="pair channel L"):
        score.total(q, t)


def test_flat_vectors_turn_the_weighted_level_sum_into_one_l1_distance():
    """The flattening the index's exactness rests on: ||Q - D||_1 of the flat vectors is the level sum, plus W_L d_L and
    the constant W_R (R counts as 1 in a search) in g."""
    gen = torch.Generator().manual_seed(0)
    q = {c: {p: torch.randn(4, d, generator=gen, dtype=torch.float64) for p in ("sub", "desc")} for c, d in (("h", 3), ("E", 5))}
    t = {c: {p: torch.randn(6, d, generator=gen, dtype=torch.float64) for p in ("sub", "desc", "sol")} for c, d in (("h", 3), ("E", 5))}
    metric = MetricConfig({"h": 0.7, "E": 0.3, "L": 0.5, "R": 0.2}, {"sub-sub": 0.3, "sub-sol": 0.2, "desc-sol": 0.5, "desc-desc": 0.0})
    score = FusedScore.for_search(metric)
    assert len(score.blocks) == 3 * 2 and all(b.channel not in "LR" for b in score.blocks)  # zero V and pair channels: no block
    flat_q, flat_t = score.flatten(q, "queries"), score.flatten(t, "tickets")
    lexical = np.random.default_rng(0).random(6)
    pair = {"L": torch.from_numpy(np.tile(lexical, (4, 1))), "R": torch.ones(4, 6)}
    expected = FusedScore.of(metric).similarity(q, t, pool=True, pair=pair).numpy()
    flat = np.stack([score.flat_similarity(score.flat_totals(flat_t, row, lexical)) for row in flat_q])
    assert np.allclose(flat, expected, rtol=1e-12)
    with pytest.raises(ValueError, match="cosine distance, which does not flatten"):
        FusedScore.for_search(MetricConfig({"h": 1.0}, {"sub-sub": 1.0}, distance="cosine"))


def test_the_layout_an_index_stores_gives_back_the_same_score():
    score = FusedScore.for_search(MetricConfig({"S": 0.7, "L": 0.5, "R": 0.25}, {"sub-sol": 0.5, "desc-sol": 0.25}))
    stored = json.loads(json.dumps(score.layout()))
    assert set(stored) == {"blocks", "lexical_weight", "constant"} and (stored["lexical_weight"], stored["constant"]) == (0.5, 0.25)
    assert FusedScore.from_layout(stored) == score
    dense_only = FusedScore.from_layout({**stored, "lexical_weight": 0.0, "constant": 0.0})
    assert dense_only.pair == {} and dense_only.flat_total(np.ones(2), None).tolist() == [1.0, 1.0]


def test_g_is_exp_of_minus_the_total_for_arrays_and_tensors():
    total = np.array([0.0, 1.0, 30.0])
    assert np.allclose(g(total), np.exp(-total)) and isinstance(g(total), np.ndarray)
    assert torch.allclose(g(torch.from_numpy(total)), torch.exp(-torch.from_numpy(total)))


def test_the_score_imports_without_torch():
    script = "import sys; sys.modules['torch'] = None\nimport ticketsim.scoring.fused, ticketsim.scoring.topk"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
