"""g from a model and its inputs: of given pairs, of a whole pool, and each side's channel vectors."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import polars as pl
import torch

from ticketsim.model.branches import BRANCHES
from ticketsim.model.inputs import Encoded, Inputs
from ticketsim.model.losses import InBatch
from ticketsim.model.siamese import SiameseLSTM
from ticketsim.scoring.fused import FusedScore
from ticketsim.scoring.weights import MetricConfig


def pair_predictor(model: SiameseLSTM, inputs: Inputs, pairs: pl.DataFrame,
                   metric: MetricConfig) -> Callable[[torch.Tensor], torch.Tensor]:
    """predict(rows) = g of those rows of `pairs`."""
    q_rows, t_rows = inputs.queries.row(pairs["query_id"]), inputs.tickets.row(pairs["ticket_id"])
    needs_q, needs_t = metric.needs()
    pair = inputs.pair_distances(metric, pairs)
    return lambda rows: model(inputs.queries.take(q_rows[rows], needs_q), inputs.tickets.take(t_rows[rows], needs_t), metric,
                              pair={c: d[rows] for c, d in pair.items()})


def in_batch_predictor(model: SiameseLSTM, inputs: Inputs, pairs: pl.DataFrame, metric: MetricConfig,
                       fixed: bool = False) -> Callable[[torch.Tensor], InBatch]:
    """predict(rows) = g of those rows' every query against every ticket (an in-batch loss's input). Without `fixed`,
    the trained channels alone, through the model's branches (the encoder learns what they miss: L would hand it BM25's
    shortcut, S kept beside F would leave it the residual); with it, every weighed channel over the branches' vectors
    computed once, so that only the metric's weights learn (fusing L, and S beside F, after the encoder is trained)."""
    q_rows, t_rows = inputs.queries.row(pairs["query_id"]), inputs.tickets.row(pairs["ticket_id"])
    values = fixed_values(model, inputs, metric) if fixed else branch_values(model, inputs, metric)

    def predict(rows: torch.Tensor) -> InBatch:
        q, q_at = torch.unique(q_rows[rows], return_inverse=True)
        t, t_at = torch.unique(t_rows[rows], return_inverse=True)
        return InBatch(values(q, t), q_at, t_at)
    return predict


def branch_values(model: SiameseLSTM, inputs: Inputs, metric: MetricConfig) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """(queries, tickets) -> g of every pair over the trained channels alone (BRANCHES), through the model's branches."""
    needs_q, needs_t = metric.needs()
    return lambda q, t: model(inputs.queries.take(q, needs_q), inputs.tickets.take(t, needs_t), metric, pool=True,
                              only=BRANCHES)


def fixed_values(model: SiameseLSTM, inputs: Inputs, metric: MetricConfig) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """(queries, tickets) -> g of every pair of every weighed channel, the branches' vectors computed once here."""
    needs_q, needs_t = metric.needs()
    pair = inputs.pair_distances(metric)
    q_vectors = side_channels(model, inputs.queries, needs_q)
    t_vectors = side_channels(model, inputs.tickets, needs_t, tickets=True)
    return lambda q, t: FusedScore.of(model.metric(metric)).similarity(    # the learned W and V of this step
        taken(q_vectors, q, torch.float32), taken(t_vectors, t, torch.float32), pool=True, pair={c: d[q][:, t] for c, d in pair.items()})


def taken(vectors: dict[str, dict[str, torch.Tensor]], rows: torch.Tensor, dtype: torch.dtype) -> dict[str, dict[str, torch.Tensor]]:
    """These rows of side_channels' vectors, as `dtype`."""
    return {c: {k: x[rows].to(dtype) for k, x in comps.items()} for c, comps in vectors.items()}


@torch.no_grad()
def predict_all(predict: Callable[[torch.Tensor], torch.Tensor], n: int, batch_size: int = 256) -> np.ndarray:
    """predict() of rows 0..n-1 in batches, as float64 scores."""
    parts = [predict(rows) for rows in torch.arange(n).split(batch_size)]
    return torch.cat(parts).double().numpy() if parts else np.zeros(0)


@torch.no_grad()
def pair_values(model: SiameseLSTM, inputs: Inputs, pairs: pl.DataFrame, metric: MetricConfig) -> np.ndarray:
    """g of every row of `pairs`, from each query's and ticket's channels computed once (in eval mode), as pool_values:
    thousands of pairs read a few hundred texts (the default's 8,692 pairs, 1,400 texts)."""
    needs_q, needs_t = metric.needs()
    q_rows, t_rows = inputs.queries.row(pairs["query_id"]), inputs.tickets.row(pairs["ticket_id"])
    queries, tickets = side_channels(model, inputs.queries, needs_q), side_channels(model, inputs.tickets, needs_t, tickets=True)
    score = FusedScore.of(model.metric(metric))
    return score.similarity(taken(queries, q_rows, torch.float64), taken(tickets, t_rows, torch.float64),
                            pair={c: d.double() for c, d in inputs.pair_distances(metric, pairs).items()}).numpy()


@torch.no_grad()
def pool_values(model: SiameseLSTM, inputs: Inputs, metric: MetricConfig, batch_size: int = 256) -> np.ndarray:
    """g of every query (rows) against every ticket (columns) of the pool (channels computed once per text, in eval mode)."""
    needs_q, needs_t = metric.needs()
    values = FusedScore.of(model.metric(metric)).similarity(
        side_channels(model, inputs.queries, needs_q, batch_size), side_channels(model, inputs.tickets, needs_t, batch_size, tickets=True),
        pool=True, pair={c: d.double() for c, d in inputs.pair_distances(metric).items()})
    return values.numpy()


@torch.no_grad()
def side_channels(model: SiameseLSTM, side: Encoded, needs: dict[str, tuple[str, ...]], batch_size: int = 256,
                  tickets: bool = False) -> dict[str, dict[str, torch.Tensor]]:
    """Every row's vectors of the needed channels and components (h computed once per text, in eval mode), float64;
    `tickets`: `side` is the ticket side (a two-sided branch, Fq, takes its ticket side)."""
    was_training = model.training
    model.eval()
    parts = [model.channels(side.take(rows, needs), tickets) for rows in torch.arange(len(side.ids)).split(batch_size)]
    model.train(was_training)
    return {c: {k: torch.cat([p[c][k] for p in parts]).double() for k in needs[c]} for c in needs}
