"""The in-batch contrastive loss (model/losses.py) and its two phases in fit_variant: the encoder learns from in-batch
negatives over its trained branches alone, then the fixed channels' weights (L, S kept beside it) are fused over its
fixed vectors."""
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from test_finetune import F_ONLY, SIAMESE, encoder_folder, fault_corpus, setup, train_map, with_random_s  # noqa: F401

from ticketsim.config import ConfigError, SiameseParams, VariantConfig
from ticketsim.model.losses import InBatch, contrastive
from ticketsim.training.variant import fit_variant, fuses_after, trains_on_labels

# Two queries, three tickets: q0's YES t0, REL t1 and NO t2; q1's YES t1 (t0 and t2 are only in-batch for q1).
ROWS = InBatch(torch.tensor([[0.9, 0.5, 0.4], [0.3, 0.8, 0.2]]), torch.tensor([0, 0, 0, 1]), torch.tensor([0, 1, 2, 1]))
TARGETS = torch.tensor([1.0, 0.5, 0.0, 1.0])


def mnrl(z: torch.Tensor, positive: int, negatives: list[int]) -> torch.Tensor:
    """-log softmax share of the positive among itself and the negatives (MultipleNegativesRankingLoss's term)."""
    return -F.log_softmax(z[[positive, *negatives]], dim=0)[0]


def test_each_positive_is_scored_against_the_batchs_tickets_not_relevant_to_its_query():
    z = ROWS.values.log()
    q0, q1 = mnrl(z[0], 0, [2]), mnrl(z[1], 1, [0, 2])     # REL t1 is no negative of q0; q1's negatives are in-batch
    assert contrastive(ROWS, TARGETS, reduction="sum", rel="neither") == pytest.approx((q0 + q1).item())
    assert contrastive(ROWS, TARGETS, rel="neither") == pytest.approx((q0 + q1).item() / 4)
    rel = mnrl(z[0], 1, [2])
    assert contrastive(ROWS, TARGETS, reduction="sum", rel="positive") == pytest.approx((q0 + q1 + rel).item())
    assert contrastive(ROWS, TARGETS, reduction="sum", rel="soft") == pytest.approx((q0 + q1 + rel / 2).item())
    q0_beside_rel = mnrl(z[0], 0, [1, 2])                     # negative: REL t1 joins q0's negatives, no positive of its own
    assert contrastive(ROWS, TARGETS, reduction="sum", rel="negative") == pytest.approx((q0_beside_rel + q1).item())


@pytest.mark.parametrize("rel, push", [("negative", "apart"), ("neither", "none"), ("positive", "together")])
def test_a_rel_pair_as_a_hard_negative_is_pushed_apart(rel, push):
    values = ROWS.values.clone().requires_grad_(True)
    contrastive(InBatch(values, ROWS.query, ROWS.ticket), TARGETS, rel=rel).backward()
    step = -values.grad[0, 1].item()    # gradient descent's move of g(q0, its REL t1)
    assert {"apart": step < 0, "none": step == 0, "together": step > 0}[push], step


def test_a_higher_in_batch_negative_costs_more_and_a_row_without_negatives_adds_nothing():
    higher = InBatch(ROWS.values.clone(), ROWS.query, ROWS.ticket)
    higher.values[1, 0] = 0.7                                 # q0's ticket t0, unlabelled for q1, closer to q1
    assert contrastive(higher, TARGETS) > contrastive(ROWS, TARGETS)
    values = torch.tensor([[0.9, 0.5]], requires_grad=True)   # one query, both tickets YES: nothing to push away
    loss = contrastive(InBatch(values, torch.tensor([0, 0]), torch.tensor([0, 1])), torch.tensor([1.0, 1.0]))
    loss.backward()
    assert loss.item() == pytest.approx(0.0, abs=1e-6) and torch.isfinite(values.grad).all()


CONTRASTIVE = replace(F_ONLY, loss="contrastive", train={**F_ONLY.train, "epochs": 3, "patience": 3})
FUSED = replace(CONTRASTIVE, channels={"F": 1.0, "L": 0.5})


BESIDE = VariantConfig({"A": 5.0, "S": 1.0}, {"sub+desc-sub+desc+sol": 1.0}, learn=True, loss="contrastive", rel="positive",
                       train={"optimizer": "adamw", "lr": 0.05, "epochs": 3, "patience": 3, "batch_size": 12})


def test_only_an_in_batch_loss_over_a_fixed_channel_fuses_after():
    assert fuses_after(FUSED) and not fuses_after(CONTRASTIVE) and not fuses_after(replace(FUSED, loss="pairwise"))
    assert fuses_after(BESIDE) and not fuses_after(replace(BESIDE, channels={"A": 5.0}))
    assert trains_on_labels(BESIDE) and not trains_on_labels(replace(BESIDE, channels={"S": 1.0, "L": 0.5}))
    assert trains_on_labels(replace(BESIDE, channels={"S": 1.0, "L": 0.5}, loss="pairwise"))


def test_the_encoder_learns_without_l_then_only_the_weights_learn_with_it(encoder_folder):  # noqa: F811
    corpus, _, inputs, model = setup(encoder_folder, FUSED)
    before = train_map(corpus, inputs, model, FUSED)
    seen = {"labels": [], "fuse": []}     # per phase, after each epoch: W and V, and the encoder's weights

    def snapshot(phase, epoch, train_loss, dev_loss):
        weights = model.weights()
        seen[phase].append(({k: float(w) for k, w in {**weights.channels, **weights.levels}.items()},
                            [p.detach().clone() for p in model.branches["F"].parameters()]))

    histories = fit_variant(model, inputs, corpus.pairs, FUSED, SIAMESE, seed=0, on_epoch=snapshot)
    assert list(histories) == ["labels", "fuse"] and len(seen["fuse"]) == 3
    start = [p.detach() for p in model.branches["F"].parameters()]
    # L is out of the encoder's phase: no gradient reaches its weight (AdamW's weight decay alone moves it, by < 1e-3);
    assert all(w["L"] == pytest.approx(0.5, rel=1e-3) for w, _ in seen["labels"]), seen["labels"]
    first, last = seen["fuse"][0][0], seen["fuse"][-1][0]
    assert first != last, first        # the weights learn in phase fuse,
    assert all(torch.equal(a, b) for _, encoder in seen["fuse"] for a, b in zip(encoder, start))   # the encoder fixed
    assert train_map(corpus, inputs, model, FUSED) > before, before


def test_an_in_batch_loss_over_fixed_channels_alone_learns_their_weights_in_phase_fuse(encoder_folder):  # noqa: F811
    variant = replace(BESIDE, channels={"S": 1.0})
    _, inputs, model = with_random_s(encoder_folder, variant)
    histories = fit_variant(model, inputs, fault_corpus().pairs, variant, SIAMESE, seed=0)
    assert list(histories) == ["fuse"] and float(model.weights().channels["S"]) != pytest.approx(1.0, rel=1e-2)


def test_s_kept_beside_a_branch_joins_after_it_is_trained(encoder_folder):  # noqa: F811
    """The branch learns what it alone scores (S's weight untouched by its phase), then S's weight is fused over it."""
    _, inputs, model = with_random_s(encoder_folder, BESIDE)
    corpus = fault_corpus()
    seen = {"labels": [], "fuse": []}     # per phase, after each epoch: the gradient of W_S's last step, the adapter
    at = model.weights.channel_names.index("S")

    def snapshot(phase, epoch, train_loss, dev_loss):
        seen[phase].append((float(model.weights.w.grad[at]), [p.detach().clone() for p in model.branches["A"].parameters()]))

    fit_variant(model, inputs, corpus.pairs, BESIDE, SIAMESE, seed=0, on_epoch=snapshot)
    adapter = [p.detach() for p in model.branches["A"].parameters()]
    assert all(grad == 0.0 for grad, _ in seen["labels"]), seen["labels"]      # S is out of the branch's phase
    assert all(p.abs().sum() > 0 for p in seen["labels"][0][1])                  # the adapter (M from 0) learns,
    assert any(grad != 0.0 for grad, _ in seen["fuse"])                           # then its weight learns
    assert all(torch.equal(a, b) for _, branch in seen["fuse"] for a, b in zip(branch, adapter))   # over the fixed adapter


def test_a_deployable_configuration_never_weighs_the_sources_order():
    with_r = VariantConfig({"S": 1.0, "R": 0.5}, {"sub-sub": 1.0})
    SiameseParams(variants={"S+R": with_r})      # a benchmark row may weigh it
    with pytest.raises(ConfigError, match="siamese.final: S\\+R weighs R"):
        SiameseParams(variants={"S+R": with_r}, final="S+R")
