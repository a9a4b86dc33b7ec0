"""The trainer's losses and whole-query batches: pointwise losses as torch has them, ranking losses prefer the right order."""
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from ticketsim.config import TrainConfig
from ticketsim.model.losses import bce, loss_of, mse, pairwise, softmax
from ticketsim.training.trainer import batches, evaluate_loss, fit

sys.path.insert(0, str(Path(__file__).parent))
from test_siamese import tiny_problem  # noqa: E402

TARGETS = torch.tensor([1.0, 0.5, 0.0, 0.0, 1.0, 0.0])
GROUPS = torch.tensor([4, 4, 4, 9, 9, 9])


@pytest.mark.parametrize("loss", [softmax, pairwise])
def test_ranking_losses_prefer_the_correct_order(loss):
    right = torch.tensor([0.8, 0.6, 0.3, 0.2, 0.7, 0.4])
    wrong = torch.tensor([0.3, 0.6, 0.8, 0.7, 0.2, 0.4])      # the same scores, each query reversed
    assert loss(right, TARGETS, GROUPS) < loss(wrong, TARGETS, GROUPS)
    shifted = torch.sigmoid(torch.logit(right) + torch.tensor([2.0, 2, 2, -1, -1, -1]))
    assert loss(shifted, TARGETS, GROUPS).item() == pytest.approx(loss(right, TARGETS, GROUPS).item(), abs=1e-4)  # per query


def test_softmax_is_the_cross_entropy_of_each_querys_candidates():
    scores = torch.tensor([0.8, 0.6, 0.3, 0.2, 0.7, 0.4, 0.5])
    targets, groups = torch.cat([TARGETS, torch.tensor([0.0])]), torch.cat([GROUPS, torch.tensor([7])])
    z = torch.logit(scores)
    expected = [-(torch.log_softmax(z[:3], 0) * torch.tensor([2 / 3, 1 / 3, 0])).sum() * 3,
                -torch.log_softmax(z[3:6], 0)[1] * 3, 0.0]        # the last query has no relevant candidate
    assert softmax(scores, targets, groups, reduction="sum").item() == pytest.approx(float(sum(expected)), rel=1e-5)
    assert softmax(scores, targets, groups).item() == pytest.approx(float(sum(expected)) / 7, rel=1e-5)


def test_pairwise_hinges_every_better_worse_pair_of_a_query():
    scores = torch.sigmoid(torch.tensor([2.0, 1.5, 0.0, 0.0, 0.5, 3.0]))
    # query 4: (1 > .5): 1 - .5, (1 > 0): 0, (.5 > 0): 0; query 9: (1 > 0): 1 - .5 = .5 and 1 - (-2.5) = 3.5
    assert pairwise(scores, TARGETS, GROUPS, reduction="sum").item() == pytest.approx(0.5 + 0.5 + 3.5, rel=1e-4)
    assert loss_of("pairwise", margin=2.0)(scores, TARGETS, GROUPS, reduction="sum") > 4.5


def test_pointwise_losses_are_torchs_and_ranking_ones_need_groups():
    scores = torch.tensor([0.9, 0.4, 0.2, 0.1, 0.6, 0.3])
    assert mse(scores, TARGETS) == F.mse_loss(scores, TARGETS)
    assert bce(scores, TARGETS) == pytest.approx(F.binary_cross_entropy(scores, TARGETS).item())
    for loss in (mse, bce, softmax, pairwise):   # 'sum' adds per-row terms: batches add up to the whole
        whole = loss(scores, TARGETS, GROUPS, reduction="sum")
        assert loss(scores[:3], TARGETS[:3], GROUPS[:3], reduction="sum") + loss(scores[3:], TARGETS[3:], GROUPS[3:],
                                                                                  reduction="sum") == pytest.approx(whole.item())
    with pytest.raises(ValueError, match="groups"):
        softmax(scores, TARGETS)
    with pytest.raises(ValueError, match="unknown loss 'hinge'"):
        loss_of("hinge")


def test_groups_batching_keeps_queries_whole_and_is_seeded():
    groups = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2, 2, 2, 3, 4, 4, 4])     # query 2 alone is larger than a batch
    rows = torch.tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14])    # row 12 is not a training row
    made = batches(rows, 5, torch.Generator().manual_seed(1), groups)
    assert sorted(torch.cat(made).tolist()) == rows.tolist()
    for batch in made:
        assert len(batch) <= 5 or len(set(groups[batch].tolist())) == 1
        for query in set(groups[batch].tolist()):     # every training row of the query is in this batch
            assert set(rows[groups[rows] == query].tolist()) <= set(batch.tolist())
    assert [b.tolist() for b in made] == [b.tolist() for b in batches(rows, 5, torch.Generator().manual_seed(1), groups)]
    orders = {tuple(torch.cat(batches(rows, 5, torch.Generator().manual_seed(s), groups)).tolist()) for s in range(6)}
    assert len(orders) > 1                                                    # a new query order per seed
    plain = batches(rows, 5, torch.Generator().manual_seed(1))               # without groups: today's shuffle
    expected = rows[torch.randperm(len(rows), generator=torch.Generator().manual_seed(1))].split(5)
    assert [b.tolist() for b in plain] == [b.tolist() for b in expected]


@pytest.mark.slow
def test_fit_batches_whole_queries_and_ranks_with_the_given_loss():
    model, predict, targets, rows = tiny_problem()      # 8 queries x 3 candidates, rows in query order
    groups = rows // 3
    seen = []

    def recording(batch):
        seen.append(batch)
        return predict(batch)

    history = fit(model, recording, targets, rows[:18], rows[18:], TrainConfig(epochs=3, batch_size=7, patience=5), 0,
                  loss=softmax, groups=groups)
    assert all(len(b) == 6 and len(set((b // 3).tolist())) == 2 for b in seen)   # 2 whole queries fit in 7 rows
    assert history.best_dev_loss == pytest.approx(evaluate_loss(model, predict, targets, rows[18:], 6, softmax, groups))
