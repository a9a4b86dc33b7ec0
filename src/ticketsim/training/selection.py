"""Honest model selection: k-fold cross-validation by query over the train + dev pairs, and a paired test over queries.

One dev MAP over 50 queries has a 95 % interval of several points, and a configuration chosen by it overfits it.
Cross-validation scores every train + dev query once per seed with a model that never saw it (folds by query, so no
query's candidates are split between training and scoring); a paired test then compares two configurations query by
query, which sees a consistent difference that the spread between queries hides from a comparison of means.
Each held-out query is scored twice by its fold's model: rerank (its judged candidates ordered) and retrieve (it searches
every ticket of the knowledge base, as a user does; a ticket it does not judge counts as not relevant).
Unsupervised methods (BM25, a cached channel's row, the source's order) join through `per_query` on their pair scores.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import replace

import numpy as np
import polars as pl

from ticketsim.config import ConfigError, VariantConfig
from ticketsim.evaluate.protocols import ScoreMatrix, query_means, rerank_by_query, retrieve_by_query
from ticketsim.training.variant import TrainedVariant, TrainingInputs, train_variant


def query_folds(query_ids: Iterable[str], k: int, seed: int) -> dict[str, int]:
    """Each query's fold, 0..k-1: the sorted ids in a seeded random order, dealt in turn (sizes differ by at most one).

    Depends on the set of ids, k and seed only, not on the order the ids come in.
    """
    ids = sorted(set(query_ids))
    if not 3 <= k <= len(ids):
        raise ConfigError(f"k = {k} folds: need 3 <= k <= {len(ids)} (the queries): one fold scored, one for early "
                          f"stopping, the rest to train on")
    order = np.random.default_rng(seed).permutation(len(ids))
    return {ids[i]: position % k for position, i in enumerate(order)}


def fold_pairs(pairs: pl.DataFrame, folds: Mapping[str, int], held_out: int) -> pl.DataFrame:
    """`pairs` with split relabelled: fold `held_out` is "test", the next fold "dev" (early stopping), the rest "train"."""
    fold = pl.col("query_id").replace_strict(dict(folds), return_dtype=pl.Int64)
    dev = (held_out + 1) % (max(folds.values()) + 1)
    return pairs.with_columns(split=pl.when(fold == held_out).then(pl.lit("test"))
                              .when(fold == dev).then(pl.lit("dev")).otherwise(pl.lit("train")))


def per_query(pairs: pl.DataFrame, scores: np.ndarray, depth: int) -> pl.DataFrame:
    """rerank_by_query of pair scores (query_id, ap, rr, acc@1; null where a query has no relevant candidate)."""
    return rerank_by_query(pairs.with_columns(score=pl.Series(np.asarray(scores, dtype=np.float64))), depth)


def split_run(data: TrainingInputs, scores: np.ndarray, *splits: str) -> pl.DataFrame:
    """per_query of the pairs of these splits, from the scores of every pair of `data`."""
    rows = data.pairs["split"].is_in(splits)
    return per_query(data.pairs.filter(rows), scores[rows.to_numpy()], data.params.evaluation.depth)


def cross_validate(data: TrainingInputs, variant: VariantConfig, k: int = 5, seed: int = 0, hidden: int | None = None,
                   epochs: int | None = None) -> pl.DataFrame:
    """per_query of every train + dev query of data.pairs exactly once, scored by the model trained without its fold,
    and a column fold. `seed` draws the folds and seeds each model; hidden and epochs as train_variant's."""
    return cross_validate_under(data, variant, {}, k, seed, hidden, epochs)[OWN]


OWN = "cv"              # cross_validate_under's key of the folds scored as `data` itself has them (rerank)
RETRIEVED = "retrieve"  # its key of the same held-out queries searching every ticket of the pool


def cross_validate_under(data: TrainingInputs, variant: VariantConfig, views: Mapping[str, TrainingInputs], k: int = 5, seed: int = 0,
                         hidden: int | None = None, epochs: int | None = None) -> dict[str, pl.DataFrame]:
    """cross_validate's frame (key OWN), the same held-out queries retrieving from the whole pool (key RETRIEVED) and,
    from the same k models, each held-out fold scored under each of `views` (name -> the same queries seen otherwise,
    e.g. training.shift.later_year(data)). Only the train and dev queries are dealt into folds: a shift split or the test split
    is never trained or chosen on."""
    choice = data.choice_pairs
    folds = query_folds(choice["query_id"], k, seed)
    depth, runs = data.params.evaluation.depth, {name: [] for name in (OWN, RETRIEVED, *views)}
    for held_out in range(k):
        pairs = fold_pairs(choice, folds, held_out)
        # The channel scales stay those of the data's own train split: vectors only, no label of a held-out query.
        trained = train_variant(replace(data, pairs=pairs), variant, seed, hidden, epochs)
        scored = (pairs["split"] == "test").to_numpy()
        judged = pairs.filter(scored)
        runs[OWN].append(per_query(judged, trained.pair_scores()[scored], depth))
        runs[RETRIEVED].append(retrieve_by_query(trained.pool_scores(), judged, depth))
        held = judged["query_id"].unique().to_list()
        for name, view in views.items():
            runs[name].append(scored_under(view, trained, held))
    return {name: pl.concat([run.with_columns(fold=pl.lit(f)) for f, run in enumerate(parts)]) for name, parts in runs.items()}


def scored_under(view: TrainingInputs, trained: TrainedVariant, queries: list[str]) -> pl.DataFrame:
    """per_query of `queries` seen in a shift's view (e.g. training.shift.later_year(data)), scored by a trained model:
    only their pairs are scored."""
    seen = replace(view, pairs=view.pairs.filter(pl.col("query_id").is_in(queries)))
    return per_query(seen.pairs, trained.scores_on(seen), view.params.evaluation.depth)


def retrieval_run(matrix: ScoreMatrix, data: TrainingInputs) -> pl.DataFrame:
    """retrieve_by_query of the train + dev queries from every ticket of `matrix` (an untrained method's, or one model's
    that learned no label)."""
    return retrieve_by_query(matrix, data.choice_pairs, data.params.evaluation.depth)


def with_folds(by_query: pl.DataFrame, k: int, seed: int) -> pl.DataFrame:
    """An untrained method's per_query rows with the folds cross_validate draws for `seed`: its figures by fold."""
    folds = query_folds(by_query["query_id"], k, seed)
    return by_query.with_columns(fold=pl.col("query_id").replace_strict(folds, return_dtype=pl.Int32))


def fold_maps(by_query: pl.DataFrame, measure: str = "map") -> list[float]:
    """Each fold's MAP (or another of query_means' measures; fold ascending), by the official rule: query_means."""
    return [query_means(part)[measure] for _, part in sorted(by_query.group_by("fold"), key=lambda group: group[0])]


def mean_ap(runs: Iterable[pl.DataFrame], column: str = "ap") -> dict[str, float]:
    """Each query's AP (or another column of a per-query run: rr, ndcg) averaged over runs (e.g. the seeds of a
    cross-validation); nan where it has no relevant candidate."""
    means = pl.concat([run.select("query_id", column) for run in runs]).group_by("query_id").agg(pl.col(column).mean())
    return {query_id: math.nan if ap is None else ap for query_id, ap in means.iter_rows()}


def paired_test(ap_a: Mapping[str, float], ap_b: Mapping[str, float], n: int = 10_000, seed: int = 0) -> dict:
    """Method a against b over the queries both have an AP for (nan or None: no relevant candidate, left out).

    Gives the mean of the per-query differences a - b, its 95 % percentile-bootstrap interval (queries resampled with
    replacement, Efron & Tibshirani 1993) and the two-sided p-value of a paired sign-flip permutation (randomization)
    test: under "no difference" each query's difference is as likely negative, so flipping signs at random draws the
    null distribution of the mean (Fisher 1935; recommended for IR measures by Smucker, Allan & Carterette, CIKM 2007).
    The p-value counts the observed statistic among the draws, (1 + #{|null| >= |observed|}) / (n + 1), so it is
    never 0 (Phipson & Smyth 2010).
    """
    has = lambda ap, q: ap.get(q) is not None and not math.isnan(ap[q])  # noqa: E731
    common = sorted(q for q in ap_a.keys() & ap_b.keys() if has(ap_a, q) and has(ap_b, q))
    if not common:
        raise ValueError("paired_test: no query has an AP under both methods")
    differences = np.array([ap_a[q] - ap_b[q] for q in common])
    rng = np.random.default_rng(seed)
    observed = float(differences.mean())
    null = rng.choice((-1.0, 1.0), size=(n, differences.size)) @ differences / differences.size
    # A draw that equals the observed mean up to float rounding is as extreme as it.
    extreme = np.count_nonzero(np.abs(null) >= abs(observed) - 1e-12)
    bootstrap = differences[rng.integers(0, differences.size, size=(n, differences.size))].mean(axis=1)
    low, high = np.percentile(bootstrap, (2.5, 97.5))
    return {"queries": len(common), "mean_difference": observed, "interval": [float(low), float(high)],
            "p": (1 + extreme) / (n + 1)}
