"""The losses the one trainer takes (MSE, binary CE, per-query ranking, in-batch contrastive) and the whole-query
batches ranking needs.

A loss is loss(scores, targets, groups, reduction): scores in (0, 1) and targets (labels rescaled to 0..1) of one batch,
groups the query index of each row (None for the pointwise losses). An in-batch loss (IN_BATCH) takes an InBatch
instead of the scores: g of the batch's every query against every ticket of the batch. reduction 'sum' adds one term
per row, so the trainer's dev loss, summed over batches and divided by the rows, is the mean of the same per-row terms.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F

EPS = 1e-6

Loss = Callable[..., torch.Tensor]


def mse(scores: torch.Tensor, targets: torch.Tensor, groups: torch.Tensor | None = None,
        reduction: str = "mean") -> torch.Tensor:
    """The trainer's default: squared error to the rescaled labels."""
    return F.mse_loss(scores, targets, reduction=reduction)


def bce(scores: torch.Tensor, targets: torch.Tensor, groups: torch.Tensor | None = None,
        reduction: str = "mean") -> torch.Tensor:
    """Binary cross-entropy to the rescaled labels (REL = 0.5 is a soft target): HRDE's loss."""
    return F.binary_cross_entropy(scores.clamp(EPS, 1 - EPS), targets, reduction=reduction)


def logits(scores: torch.Tensor) -> torch.Tensor:
    scores = scores.clamp(EPS, 1 - EPS)
    return torch.log(scores) - torch.log1p(-scores)


def grouped(groups: torch.Tensor | None, loss: str) -> tuple[torch.Tensor, int]:
    if groups is None:
        raise ValueError(f"the {loss} loss ranks each query's candidates: pass fit(..., groups=query index of each pair)")
    keys, inverse = torch.unique(groups, return_inverse=True)
    return inverse, len(keys)


def softmax(scores: torch.Tensor, targets: torch.Tensor, groups: torch.Tensor | None = None,
            reduction: str = "mean") -> torch.Tensor:
    """Per query, cross-entropy of the softmax over its candidates' logit(score) against its targets normalised to sum 1
    (DSSM's softmax over a query's documents, graded: YES 1, REL .5, NO 0). A query's loss counts once per candidate
    it has, so every pair weighs alike; a query without a relevant candidate adds 0."""
    inverse, n_groups = grouped(groups, "softmax")
    z = logits(scores)
    top = torch.full((n_groups,), float("-inf")).scatter_reduce(0, inverse, z.detach(), "amax")
    log_norm = torch.log(torch.zeros(n_groups).index_add(0, inverse, torch.exp(z - top[inverse]))) + top
    mass = torch.zeros(n_groups).index_add(0, inverse, targets)
    wanted = torch.where(mass[inverse] > 0, targets / mass[inverse].clamp(min=EPS), torch.zeros_like(targets))
    per_query = torch.zeros(n_groups).index_add(0, inverse, -wanted * (z - log_norm[inverse]))
    total = (per_query * torch.bincount(inverse, minlength=n_groups)).sum()
    return total if reduction == "sum" else total / max(1, len(scores))


def pairwise(scores: torch.Tensor, targets: torch.Tensor, groups: torch.Tensor | None = None, reduction: str = "mean",
             margin: float = 1.0) -> torch.Tensor:
    """Hinge on every two candidates of a query with different targets: max(0, margin - (logit better - logit worse)),
    summed per query; 'mean' divides by the rows."""
    inverse, _ = grouped(groups, "pairwise")
    z = logits(scores)
    better = (inverse.unsqueeze(1) == inverse.unsqueeze(0)) & (targets.unsqueeze(1) > targets.unsqueeze(0))
    total = (margin - (z.unsqueeze(1) - z.unsqueeze(0))).clamp(min=0)[better].sum()
    return total if reduction == "sum" else total / max(1, len(scores))


@dataclass(frozen=True)
class InBatch:
    """g of every query of a batch against every ticket of it (n_q, n_t), and each pair row's query row and ticket
    column there (model.scores.in_batch_predictor makes it)."""

    values: torch.Tensor
    query: torch.Tensor
    ticket: torch.Tensor


# How a REL pair (same equipment, other fault) enters: its weight as a positive, and whether it is a negative too.
REL_ROLE = {"positive": (1.0, False), "soft": (0.5, False), "neither": (0.0, False), "negative": (0.0, True)}


def contrastive(scored: InBatch, targets: torch.Tensor, groups: torch.Tensor | None = None, reduction: str = "mean",
                rel: str = "neither") -> torch.Tensor:
    """In-batch negatives with hard negatives (sentence-transformers' MultipleNegativesRankingLoss): each YES pair's
    -log softmax share, over logits log g, against every ticket of the batch not labelled relevant to its query: its
    NO candidates and the other queries' tickets. `rel` says how a REL pair enters: positive (like YES), soft (a positive
    at half the weight), neither (left out), negative (a hard negative: the nearest wrong answer a help desk sees). Sum
    over the positives; 'mean' divides by the rows.

    Why: a per-query pairwise loss over graded labels asks REL (same equipment, other fault) to outrank NO (same fault,
    other equipment) and learns the equipment word; here a query's answer must beat the whole batch (issue 32)."""
    z = torch.log(scored.values.clamp(min=torch.finfo(scored.values.dtype).tiny))    # log g: minus the distance
    target = torch.full(z.shape, -1.0).index_put((scored.query, scored.ticket), targets)   # -1: unlabelled in the batch
    rel_weight, rel_negative = REL_ROLE[rel]
    negative = target < 1 if rel_negative else target <= 0
    weight = torch.where(target >= 1, 1.0, torch.where(target > 0, rel_weight, 0.0))
    # Not -inf where a row has no negative: logsumexp's gradient there would be nan (its term has weight 0 anyway).
    lse_negative = torch.logsumexp(z.masked_fill(~negative, -1e4), dim=1, keepdim=True)
    total = (weight * F.softplus(lse_negative - z))[weight > 0].sum()     # -log e^z / (e^z + sum over negatives)
    return total if reduction == "sum" else total / max(1, len(targets))


LOSSES: dict[str, Loss] = {"mse": mse, "bce": bce, "softmax": softmax, "pairwise": pairwise, "contrastive": contrastive}
IN_BATCH = frozenset({"contrastive"})    # the losses that read an InBatch, not one score per pair


def loss_of(name: str, **options: float | str) -> Loss:
    """params.yaml's `loss: pairwise` (+ `margin`, or contrastive's `rel`) -> the function fit takes."""
    if name not in LOSSES:
        raise ValueError(f"unknown loss {name!r}; choose one of {sorted(LOSSES)}")
    return partial(LOSSES[name], **options) if options else LOSSES[name]


