"""What judged queries buy: a learning curve. A configuration trained on n judged queries (n = 25, 50, ..., all),
scored by cross-validation over queries, beside what needs no judged query (zero-shot, BM25).

How it scores, and why: the k-fold cross-validation of ticketsim.training.selection (folds by query over the train +
dev queries; fold f scored, fold f + 1 early-stops, the other folds are the pool of judged queries), except that each
fold's model trains on n queries sampled from its pool. Every train + dev query is scored once per seed by a model
that never trained on it, and each point is over the same queries as the untrained lines. Each held-out query is scored
twice: rerank (its judged candidates) and retrieve (it searches every ticket; MRR@10); the dataset's protocol decides
which figure the paired test against the reference reads. Training on the sample and
scoring the dev split instead would cost one model a point, not k, but its ~50 queries have an interval of several
points and they would also have early-stopped the model. The channel scales stay those of the data's train split, as
in cross_validate (vectors only, no label). A fold's pool holds k - 2 folds' queries (90 of synthetic's 150 at k = 5,
112-114 at k = 8): a size above the smallest pool is skipped, and `all` is each fold's whole pool. The sample is the
first n of the pool in an order seeded by (seed, fold), so for one seed and fold the 25 are among the 50: the curve
shows queries added, not another draw.

Extra scored sets (`extra`, e.g. a shift split of queries phrased unlike train and dev): their pairs are never
trained on; each fold's model scores them too and a seed's figure is the mean over its k models. Shift views (`views`,
e.g. SemEval's later year: the same pairs, the tickets without their comment threads): each fold's model scores its
own held-out queries in the view, a seed's figure the mean over its k models.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import numpy as np
import polars as pl

from ticketsim.config import ConfigError, VariantConfig
from ticketsim.evaluate.protocols import ScoreMatrix, query_means, retrieve_by_query
from ticketsim.training.select_report import spread
from ticketsim.training.selection import (
    fold_pairs,
    mean_ap,
    paired_test,
    per_query,
    query_folds,
    retrieval_run,
    scored_under,
)
from ticketsim.training.variant import CHOICE_SPLITS, TrainingInputs, train_variant

SIZES = ("25", "50", "100", "200", "all")   # judged queries per model; `all`: each fold's whole pool
ALL = "all"
EXTRA = "extra:"                            # an extra set's pairs while folds relabel train, dev and test


def parse_size(size: str) -> int | None:
    """A size as given ("25", "all"): its count, None for all; a one-line error for anything else."""
    if size == ALL:
        return None
    if not size.isdigit() or int(size) < 1:
        raise ConfigError(f"size {size!r}: a number of judged queries, 1 or more, or {ALL!r}")
    return int(size)


def sample_queries(pool: Sequence[str], n: int | None, seed: int, fold: int) -> list[str]:
    """The first n of the pool's ids (sorted) in an order seeded by (seed, fold): nested over n; all of them for None."""
    ids = sorted(set(pool))
    order = np.random.default_rng([seed, fold]).permutation(len(ids))
    return sorted(ids[i] for i in order[:n])


def extra_pairs(data: TrainingInputs, extra: Sequence[str]) -> pl.DataFrame:
    """The pairs of the extra splits, relabelled EXTRA + name; a one-line error for a split that is not extra or absent."""
    overlap = set(extra) & {*CHOICE_SPLITS, "test"}
    missing = set(extra) - set(data.pairs["split"].unique())
    if overlap or missing:
        raise ConfigError(f"extra scored splits {sorted(overlap | missing)}: "
                          + ("train, dev and test are the folds' own" if overlap else "no pair has that split"))
    chosen = data.pairs.filter(pl.col("split").is_in(list(extra)))
    return chosen.with_columns(split=pl.lit(EXTRA) + pl.col("split"))


def pools(data: TrainingInputs, k: int, seed: int) -> list[list[str]]:
    """Each fold's pool of judged queries: those of the k - 2 folds neither scored nor early-stopping."""
    pairs = data.choice_pairs
    folds = query_folds(pairs["query_id"], k, seed)
    return [sorted({q for q, f in folds.items() if f not in (held_out, (held_out + 1) % k)}) for held_out in range(k)]


def pool_sizes(data: TrainingInputs, k: int, seeds: Sequence[int]) -> list[int]:
    """The size of every fold's pool for every seed."""
    return [len(pool) for seed in seeds for pool in pools(data, k, seed)]


def runnable(sizes: Sequence[str], smallest_pool: int) -> tuple[list[str], list[str]]:
    """The sizes that fit every fold's pool (in the order given), and those skipped for being above the smallest."""
    fits = [s for s in sizes if (parse_size(s) or 0) <= smallest_pool]
    return fits, [s for s in sizes if s not in fits]


def trained_point(data: TrainingInputs, variant: VariantConfig, n: int | None, seed: int, k: int, extra: Sequence[str] = (),
                  hidden: int | None = None, epochs: int | None = None, on_model: Callable[[], None] = lambda: None,
                  views: Mapping[str, TrainingInputs] = {}) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, float]]:
    """One seed at one size: per_query of every train + dev query (column fold) from the model of its fold, trained on
    n queries of that fold's pool, the same queries retrieving from every ticket, and each extra split's and each view's
    MAP averaged over the k models."""
    pairs, others = data.choice_pairs, extra_pairs(data, extra)
    folds, depth = query_folds(pairs["query_id"], k, seed), data.params.evaluation.depth
    scored, retrieved, extra_maps = [], [], {name: [] for name in [*extra, *views]}
    for held_out, pool in enumerate(pools(data, k, seed)):
        chosen = sample_queries(pool, n, seed, held_out)
        relabelled = fold_pairs(pairs, folds, held_out)
        fold = pl.concat([relabelled.filter((pl.col("split") != "train") | pl.col("query_id").is_in(chosen)), others])
        model = train_variant(replace(data, pairs=fold), variant, seed, hidden, epochs)
        scores = model.pair_scores()
        on_model()
        is_test = (fold["split"] == "test").to_numpy()
        scored.append(per_query(fold.filter(is_test), scores[is_test], depth).with_columns(fold=pl.lit(held_out)))
        retrieved.append(retrieve_by_query(model.pool_scores(), fold.filter(is_test), depth))
        for name in extra:
            mask = (fold["split"] == EXTRA + name).to_numpy()
            extra_maps[name].append(query_means(per_query(fold.filter(mask), scores[mask], depth))["map"])
        for name, view in views.items():
            extra_maps[name].append(query_means(scored_under(view, model, [q for q, f in folds.items() if f == held_out]))["map"])
    return pl.concat(scored), pl.concat(retrieved), {name: float(np.mean(maps)) for name, maps in extra_maps.items()}


def untrained_point(data: TrainingInputs, matrix: ScoreMatrix,
                    extra: Sequence[str] = ()) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, float]]:
    """The same figures for a method that no label trained (`matrix`: every query against every ticket): per_query of
    the train + dev queries, their retrieval, each extra split's MAP (one model scores every query: no fold, no seed,
    no n)."""
    depth, split, scores = data.params.evaluation.depth, data.pairs["split"], matrix.pair_scores(data.pairs)
    by_query = per_query(data.pairs.filter(split.is_in(CHOICE_SPLITS)), scores[split.is_in(CHOICE_SPLITS).to_numpy()], depth)
    return by_query, retrieval_run(matrix, data), {
        name: query_means(per_query(data.pairs.filter(split == name), scores[(split == name).to_numpy()], depth))["map"]
        for name in extra}



def learning_curve(data: TrainingInputs, variants: Mapping[str, VariantConfig], baselines: Mapping[str, ScoreMatrix],
                   sizes: Sequence[str], seeds: Sequence[int], k: int, extra: Sequence[str] = (),
                   reference: str | None = None, hidden: int | None = None, epochs: int | None = None,
                   resamples: int = 10_000, on_model: Callable[[], None] = lambda: None,
                   views: Mapping[str, TrainingInputs] = {}, decides: str = "retrieve") -> dict:
    """The curve of each trained variant and the lines of the untrained methods (`baselines`: every query against every
    ticket; a variant with labels: false joins them, trained once), as a JSON-ready report: CV retrieve MRR@10 and CV
    rerank MAP (and each extra split's and each view's MAP; a baseline has no view figure) at each size as mean, std and
    values over the seeds; each point's paired test against `reference` (a line's name) on each query's figure of the
    deciding protocol (`decides`: retrieve RR@10, or rerank AP) averaged over the seeds."""
    frame, column = (1, "rr") if decides == "retrieve" else (0, "ap")    # the per-query run and column the test reads
    for size in sizes:
        parse_size(size)
    pooled = pool_sizes(data, k, seeds)
    run, skipped = runnable(sizes, min(pooled))
    lines = {name: untrained_point(data, matrix, extra) for name, matrix in baselines.items()}
    everyone = data.choice_pairs["query_id"].unique().to_list()
    for name, variant in ((n, v) for n, v in variants.items() if not v.labels):
        model = train_variant(data, variant, seeds[0], hidden, epochs)
        by_query, retrieved, maps = untrained_point(data, model.pool_scores(), extra)
        lines[name] = by_query, retrieved, maps | {v: query_means(scored_under(view, model, everyone))["map"]
                                                   for v, view in views.items()}
    if reference is not None and reference not in lines:
        raise ConfigError(f"reference {reference!r}: not an untrained line (have: {', '.join(lines)})")
    curves = {}
    for name, variant in ((n, v) for n, v in variants.items() if v.labels):
        points = []
        for size in run:
            runs = [trained_point(data, variant, parse_size(size), seed, k, extra, hidden, epochs, on_model, views)
                    for seed in seeds]
            deciding = mean_ap([r[frame] for r in runs], column)
            reference_figures = mean_ap([lines[reference][frame]], column) if reference else None
            points.append({"size": size, "queries": parse_size(size) or float(np.mean(pooled)),
                           "cv_retrieve": spread([query_means(retrieved)["mrr"] for _, retrieved, _ in runs]),
                           "cv_map": spread([query_means(by_query)["map"] for by_query, _, _ in runs]),
                           "extra": {split: spread([maps[split] for _, _, maps in runs]) for split in [*extra, *views]},
                           "query_ap": none_for_nan(mean_ap([by_query for by_query, _, _ in runs])),
                           "query_rr": none_for_nan(mean_ap([retrieved for _, retrieved, _ in runs], "rr")),
                           "vs_reference": paired_test(deciding, reference_figures, n=resamples) if reference else None})
        curves[name] = points
    return {"folds": k, "seeds": list(seeds), "queries": data.choice_pairs["query_id"].n_unique(), "pool": [min(pooled), max(pooled)],
            "sizes": run, "skipped": skipped, "extra": [*extra, *views], "reference": reference, "decides": decides,
            "curves": curves,
            "lines": {name: {"cv_retrieve": query_means(retrieved)["mrr"], "cv_map": query_means(by_query)["map"], "extra": maps,
                             "query_ap": none_for_nan(mean_ap([by_query])), "query_rr": none_for_nan(mean_ap([retrieved], "rr"))}
                      for name, (by_query, retrieved, maps) in lines.items()}}


def none_for_nan(ap: Mapping[str, float]) -> dict[str, float | None]:
    """None where a query has no relevant candidate: JSON has no nan."""
    return {q: None if np.isnan(value) else value for q, value in ap.items()}
