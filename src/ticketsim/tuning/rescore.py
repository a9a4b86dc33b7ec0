"""What a rescore trial reads, its rescore vectors: each pair's channel vectors as a model computes them, on which new W
and V only recompute g; from one model of the final variant (objectives map and mse: scored on dev) or from k fold models
(objectives cv_map and cv_retrieve: every train + dev query scored by the model of its fold, which never saw it). For
cv_retrieve each fold also keeps a pool: its held-out queries' vectors and every ticket's, so that a trial ranks the
whole knowledge base for each held-out query as a search would (exact: the same g over every ticket)."""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import polars as pl
import torch

from ticketsim.config import ConfigError, TuneConfig, VariantConfig
from ticketsim.evaluate.protocols import ScoreMatrix, query_means, retrieve_by_query
from ticketsim.model.branches import reads
from ticketsim.model.inputs import Inputs, build_inputs, encode_side, lexical_distances, vocabulary_index
from ticketsim.model.saved import load_model, read_inputs
from ticketsim.model.scores import side_channels
from ticketsim.model.siamese import SiameseLSTM
from ticketsim.scoring.fused import FusedScore
from ticketsim.scoring.weights import MetricConfig, metric_of
from ticketsim.training.selection import fold_pairs, per_query, query_folds
from ticketsim.training.variant import TrainingInputs, train_variant


def space_metric(cfg: TuneConfig, final: VariantConfig) -> MetricConfig:
    """Every channel and level the study can weigh for `final`: what its rescore vectors must hold."""
    space = cfg.space(final)
    return MetricConfig(channels=dict.fromkeys(space.channels, 1.0), levels=dict.fromkeys(space.levels, 1.0))


def space_inputs(problem: TrainingInputs, metric: MetricConfig) -> Inputs:
    """The inputs of every pair for every channel and level of `metric` (the cached channels its branches read too)."""
    cached = reads(metric)
    return build_inputs(problem.tokens, [v for v in problem.channels if v.channel in cached], metric,
                        problem.siamese.max_tokens, problem.params.bm25, problem.corpus)


def model_vectors(model: SiameseLSTM, inputs: Inputs, pairs: pl.DataFrame, metric: MetricConfig) -> tuple[dict, dict, dict]:
    """Each pair's query and ticket vectors of the metric's channels as `model` computes them, and its pair channels'
    distances: TrainingInputs.rescore_vectors, what `rescore` reads."""
    needs_q, needs_t = metric.needs()
    q_rows, t_rows = inputs.queries.row(pairs["query_id"]), inputs.tickets.row(pairs["ticket_id"])
    queries, tickets = side_channels(model, inputs.queries, needs_q), side_channels(model, inputs.tickets, needs_t, tickets=True)
    return ({c: {k: v[q_rows] for k, v in comps.items()} for c, comps in queries.items()},
            {c: {k: v[t_rows] for k, v in comps.items()} for c, comps in tickets.items()},
            {c: d.double() for c, d in inputs.pair_distances(metric, pairs).items()})


def with_rescore_vectors(problem: TrainingInputs, cfg: TuneConfig, base_model: str | Path | None = None) -> TrainingInputs:
    """Every pair's query and ticket vectors of every channel the space weighs, from one model of the final variant.

    The model is the siamese stage's (`base_model`: its folder, trained on train pairs, early-stopped on dev) or,
    without one, trained here for tune.epochs.
    """
    metric = space_metric(cfg, problem.final)
    if base_model is None:
        model = train_variant(problem, problem.final, problem.params.seed, problem.siamese.hidden, cfg.epochs).model
        inputs = space_inputs(problem, metric)
    else:
        base_model = Path(base_model)
        try:
            scales, words = read_inputs(base_model)
            model = load_model(base_model, problem.final, problem.siamese.encoder, scales)
        except ValueError as error:
            raise ValueError(f"{error}; point it at models/<dataset>/siamese/<siamese.final> or drop it to train one here") from None
        cached = [v for v in problem.channels if v.channel in reads(metric)]
        index, (needs_q, needs_t) = vocabulary_index(words), metric.needs()
        inputs = Inputs(encode_side(problem.tokens.queries, "query_id", sorted(needs_q.get("h", ())), index, problem.siamese.max_tokens,
                                    cached, "queries"),
                        encode_side(problem.tokens.tickets, "ticket_id", sorted(needs_t.get("h", ())), index, problem.siamese.max_tokens,
                                    cached, "tickets"), words,
                        lexical_distances(problem.tokens, problem.params.bm25) if metric.channels.get("L") else None)
    return replace(problem, rescore_vectors=model_vectors(model, inputs, problem.pairs, metric))


def rescore(problem: TrainingInputs, variant: VariantConfig) -> np.ndarray:
    """g of every pair with new weights on the rescore vectors: no training."""
    queries, tickets, pair = problem.rescore_vectors
    return FusedScore.of(metric_of(variant)).similarity(queries, tickets, pair=pair).numpy()


@dataclass(frozen=True, eq=False)
class Pool:
    """One fold's held-out queries against every ticket of the knowledge base: their vectors and the tickets' as the
    fold's model computes them, the pair channels' distances between them, and the queries' judged pairs."""

    query_ids: tuple[str, ...]
    ticket_ids: tuple[str, ...]
    queries: dict
    tickets: dict
    pair: dict
    judged: pl.DataFrame

    def matrix(self, variant: VariantConfig) -> ScoreMatrix:
        """g of every held-out query to every ticket under the variant's W and V."""
        values = FusedScore.of(metric_of(variant)).similarity(self.queries, self.tickets, pool=True, pair=self.pair).numpy()
        return ScoreMatrix(self.query_ids, self.ticket_ids, values)


@dataclass(frozen=True, eq=False)
class FoldModels:
    """The CV objectives' rescore vectors: every train + dev pair once (`held_out.pairs`, grouped by fold, column `fold`), its
    vectors from the model of its fold (`held_out.rescore_vectors`), for cv_retrieve each fold's Pool
    (`held_out.rescore_pools`), and the W and V those models learned."""

    held_out: TrainingInputs
    learned: VariantConfig      # the final variant with the fold models' mean learned W and V (their own when fixed)


def fold_pool(model: SiameseLSTM, inputs: Inputs, held_out: pl.DataFrame, metric: MetricConfig) -> Pool:
    """The Pool of one fold's held-out pairs: every ticket's vectors once (a frozen encoder's tickets vary with the fold's
    adapter only), its queries' rows of the pool's pair distances."""
    needs_q, needs_t = metric.needs()
    ids = tuple(held_out["query_id"].unique(maintain_order=True))
    rows = inputs.queries.row(ids)
    queries = side_channels(model, inputs.queries, needs_q)
    return Pool(ids, inputs.tickets.ids, {c: {k: v[rows] for k, v in comps.items()} for c, comps in queries.items()},
                side_channels(model, inputs.tickets, needs_t, tickets=True),
                {c: d[rows].double() for c, d in inputs.pair_distances(metric).items()}, held_out)


def fold_models(problem: TrainingInputs, cfg: TuneConfig) -> FoldModels:
    """tune.folds folds of the train + dev queries (training.selection's, drawn by seed); per fold one model of the final
    variant trained once for tune.epochs on the other folds (the next fold early-stopping it), its rescore vectors of
    the fold's pairs and, for cv_retrieve, its Pool. The channel scales stay the train split's: vectors only, no label of
    a held-out query."""
    metric, seed = space_metric(cfg, problem.final), problem.params.seed
    try:
        folds = query_folds(problem.pairs["query_id"], cfg.folds, seed)
    except ConfigError as error:
        raise ConfigError(f"tune.folds: {error}") from None
    inputs = space_inputs(problem, metric)
    parts, blocks, pools, learned = [], [], [], []
    for fold in range(cfg.folds):
        pairs = fold_pairs(problem.pairs, folds, fold)
        model = train_variant(replace(problem, pairs=pairs), problem.final, seed, epochs=cfg.epochs).model
        held_out = pairs.filter(pl.col("split") == "test").with_columns(fold=pl.lit(fold))
        parts.append(held_out)
        blocks.append(model_vectors(model, inputs, held_out, metric))
        if cfg.objective == "cv_retrieve":
            pools.append(fold_pool(model, inputs, held_out, metric))
        with torch.no_grad():
            learned.append(model.metric(metric_of(problem.final)))
    mean = lambda weights, names: {n: float(np.mean([float(w.get(n, 0.0)) for w in weights])) for n in names}  # noqa: E731
    final = problem.final
    return FoldModels(replace(problem, pairs=pl.concat(parts), rescore_vectors=concatenated(blocks), rescore_pools=tuple(pools)),
                      replace(final, channels=mean([m.channels for m in learned], final.channels),
                              levels=mean([m.levels for m in learned], final.levels)))


def concatenated(blocks: list[tuple[dict, dict, dict]]) -> tuple[dict, dict, dict]:
    """The rescore vectors of consecutive blocks of pairs as those of all of them, in the same order."""
    queries, tickets, pair = zip(*blocks)
    side = lambda parts: {c: {k: torch.cat([p[c][k] for p in parts]) for k in comps} for c, comps in parts[0].items()}  # noqa: E731
    return side(queries), side(tickets), {c: torch.cat([p[c] for p in pair]) for c in pair[0]}


def cv_map(held_out: TrainingInputs, variant: VariantConfig) -> float:
    """Rerank MAP over every held-out query, each scored with the variant's W and V on its fold model's vectors."""
    return query_means(per_query(held_out.pairs, rescore(held_out, variant), held_out.params.evaluation.depth))["map"]


def cv_retrieve(held_out: TrainingInputs, variant: VariantConfig) -> dict[str, float]:
    """Retrieve MRR, MAP and nDCG at depth over every held-out query, each searching every ticket with the variant's W
    and V on its fold model's vectors (a ticket the query does not judge counts as not relevant), keys cv_retrieve
    (MRR: the objective), cv_retrieve_map, cv_retrieve_ndcg; and the rerank cv_map beside them."""
    depth = held_out.params.evaluation.depth
    means = query_means(pl.concat([retrieve_by_query(pool.matrix(variant), pool.judged, depth) for pool in held_out.rescore_pools]))
    return {"cv_retrieve": means["mrr"], "cv_retrieve_map": means["map"], "cv_retrieve_ndcg": means["ndcg"],
            "cv_map": cv_map(held_out, variant)}
