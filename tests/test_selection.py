"""Model selection: folds by query, per-query AP as rerank scores it, the paired test, cross-validation of a tiny model."""
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from ticketsim.evaluate.measures import RELEVANT
from ticketsim.evaluate.protocols import rerank
from ticketsim.threads import torch_threads
from ticketsim.training.selection import cross_validate, fold_maps, fold_pairs, mean_ap, paired_test, per_query, query_folds, with_folds

sys.path.insert(0, str(Path(__file__).parent))
from test_tune import FINAL, corpus_and_tokens, make_params, make_problem  # noqa: E402, F401 (a fixture)

IDS = [f"Q{i:03d}" for i in range(23)]


def test_folds_partition_the_queries_evenly_and_stably():
    folds = query_folds(IDS, 5, seed=13)
    assert set(folds) == set(IDS) and set(folds.values()) == set(range(5))
    sizes = np.bincount(list(folds.values()))
    assert sizes.max() - sizes.min() <= 1
    assert query_folds(reversed(IDS + IDS[:4]), 5, seed=13) == folds      # order and repeats of the ids do not matter
    assert query_folds(IDS, 5, seed=14) != folds
    with pytest.raises(ValueError, match="3 <= k"):
        query_folds(IDS, 2, seed=13)


def test_each_fold_is_scored_once_another_stops_training_and_the_rest_train():
    pairs = pl.DataFrame({"query_id": [q for q in IDS for _ in range(2)], "label": [5, 1] * len(IDS)})
    folds = query_folds(IDS, 4, seed=0)
    scored = []
    for held_out in range(4):
        split = dict(fold_pairs(pairs, folds, held_out).select("query_id", "split").unique().iter_rows())
        assert {q for q, s in split.items() if s == "test"} == {q for q, f in folds.items() if f == held_out}
        assert {q for q, s in split.items() if s == "dev"} == {q for q, f in folds.items() if f == (held_out + 1) % 4}
        scored += [q for q, s in split.items() if s == "test"]
    assert sorted(scored) == IDS


def official_ap(labels_by_rank: list[int], depth: int = 10) -> float:
    """SemEval's ev.py: precision at each relevant candidate of the top `depth`, averaged over those found."""
    found = [i for i, label in enumerate(labels_by_rank[:depth], start=1) if label >= RELEVANT]
    return float(np.mean([n / rank for n, rank in enumerate(found, start=1)])) if found else 0.0


def test_per_query_ap_is_the_official_ap_and_rerank_map_is_its_mean():
    rng = np.random.default_rng(3)
    rows = [(q, f"{q}-t{j}", int(rng.integers(1, 6)) if q != "Q003" else 1, float(rng.random()))
            for q in IDS[:12] for j in range(10)]                       # Q003: no relevant candidate
    pairs = pl.DataFrame(rows, schema=["query_id", "ticket_id", "label", "score"], orient="row")
    by_query = per_query(pairs.drop("score"), pairs["score"].to_numpy(), depth=10)
    assert by_query["query_id"].to_list() == IDS[:12]
    for query_id, ap in by_query.select("query_id", "ap").iter_rows():
        ranked = pairs.filter(pl.col("query_id") == query_id).sort("score", descending=True)["label"].to_list()
        assert ap is None if query_id == "Q003" else ap == pytest.approx(official_ap(ranked))
    # The official MAP counts a query without a relevant candidate as 0; its AP is missing, not 0.
    assert by_query["ap"].fill_null(0).mean() == pytest.approx(rerank(pairs)["map"])
    assert fold_maps(by_query.with_columns(fold=pl.lit(0))) == pytest.approx([rerank(pairs)["map"]])
    assert np.isnan(mean_ap([by_query])["Q003"])


def test_a_clearly_better_method_is_significant_and_equal_ones_are_not():
    rng = np.random.default_rng(0)
    base = {f"q{i}": float(rng.random()) for i in range(60)}
    better = {q: min(1.0, ap + 0.08 + 0.05 * rng.standard_normal()) for q, ap in base.items()}
    result = paired_test(better, base | {"only in base": 0.5, "q0": np.nan}, seed=1)
    assert result["queries"] == 59                                  # common queries with an AP under both
    assert result["p"] < 0.05 and result["mean_difference"] > 0.05
    low, high = result["interval"]
    assert low < result["mean_difference"] < high and low > 0
    same = paired_test(base, dict(base), seed=1)
    assert same["p"] == 1.0 and same["mean_difference"] == 0.0 and same["interval"] == [0.0, 0.0]
    # The same APs dealt to other queries: no method is better, only the queries differ.
    shuffled = dict(zip(base, rng.permutation(list(base.values()))))
    result = paired_test(shuffled, base, seed=1)
    assert result["p"] > 0.3 and result["interval"][0] < result["mean_difference"] < result["interval"][1]
    assert result["interval"][0] < 0 < result["interval"][1]


def test_cross_validation_scores_every_query_once_with_a_model_that_never_saw_it(tmp_path, corpus_and_tokens):  # noqa: F811
    problem = make_problem(make_params(tmp_path), *corpus_and_tokens)
    with torch_threads(1):     # tiny matrices: a second thread on a shared 2-core box only waits (docs/model.md)
        result = cross_validate(problem, FINAL, k=3, seed=5, epochs=2)
    queries = problem.pairs["query_id"].unique().sort().to_list()
    assert sorted(result["query_id"].to_list()) == queries
    assert dict(result.select("query_id", "fold").iter_rows()) == query_folds(queries, 3, seed=5)
    assert result["ap"].drop_nulls().is_between(0, 1).all() and result["ap"].null_count() < len(queries)
    assert len(fold_maps(result)) == 3
    untrained = with_folds(result.drop("fold"), 3, seed=5)        # an untrained method's rows get the same folds
    assert fold_maps(untrained) == fold_maps(result)
