"""The learning curve: judged queries sampled from each fold's train pool (seeded, nested), no scored query trained on,
sizes above the pool skipped, and `ticketsim curve`'s table, JSON and PNG."""
import json
import sys
from dataclasses import replace
from pathlib import Path

import mlflow
import numpy as np
import polars as pl
import pytest

from ticketsim.config import ConfigError
from ticketsim.evaluate.protocols import ScoreMatrix
from ticketsim.training import learning_curve as lc
from ticketsim.training.curve_report import log, write
from ticketsim.training.selection import query_folds
from ticketsim.training.variant import training_inputs

sys.path.insert(0, str(Path(__file__).parent))
from conftest import random_channel  # noqa: E402
from test_tune import FINAL, corpus_and_tokens, make_params  # noqa: E402, F401 (a fixture)

LABEL_FREE = replace(FINAL, labels=False)


@pytest.fixture(scope="module")
def problem(tmp_path_factory, corpus_and_tokens):  # noqa: F811
    """The tiny corpus's train + dev pairs, and its test split as an extra scored set (standing in for a shift split)."""
    corpus, tokens = corpus_and_tokens
    table = lambda words: np.random.default_rng(1).normal(size=(len(words), 12))  # noqa: E731
    return training_inputs(make_params(tmp_path_factory.mktemp("curve")), tokens,
                   [random_channel("E", corpus, 2), random_channel("T", corpus, 3)], table, 4, [FINAL], corpus,
                   corpus.pairs.with_columns(split=pl.col("split").replace("test", "shift")), splits=("train", "dev", "shift"))


def test_sizes_parse_and_bad_ones_are_refused_in_one_line():
    assert [lc.parse_size(s) for s in ("25", "all")] == [25, None]
    for bad in ("0", "-3", "many"):
        with pytest.raises(ConfigError, match="1 or more"):
            lc.parse_size(bad)
    assert lc.runnable(["5", "10", "100", "all"], 12) == (["5", "10", "all"], ["100"])


def test_samples_are_seeded_nested_and_drawn_from_the_pool_only():
    pool = [f"Q{i:02d}" for i in range(30)]
    small, large = lc.sample_queries(pool, 5, 0, 1), lc.sample_queries(pool, 12, 0, 1)
    assert len(small) == 5 and set(small) <= set(large) <= set(pool)       # nested: the 5 are among the 12
    assert lc.sample_queries(reversed(pool), 5, 0, 1) == small                # the pool's order does not matter
    assert lc.sample_queries(pool, 5, 1, 1) != small and lc.sample_queries(pool, 5, 0, 2) != small
    assert lc.sample_queries(pool, None, 0, 1) == pool


def random_matrix(data) -> ScoreMatrix:
    """Random scores of every query against every ticket of `data`."""
    queries, tickets = tuple(data.tokens.queries["query_id"]), tuple(data.tokens.tickets["ticket_id"])
    return ScoreMatrix(queries, tickets, np.random.default_rng(0).random((len(queries), len(tickets))))


class Scored:
    """What a trained variant gives the curve: pair scores (random here) of the pairs it was trained with, and of every
    query against every ticket."""

    def __init__(self, data, variant, seed, hidden=None, epochs=None):
        self.pairs, self.data = data.pairs, data

    def pair_scores(self) -> np.ndarray:
        return np.random.default_rng(0).random(self.pairs.height)

    def pool_scores(self) -> ScoreMatrix:
        return random_matrix(self.data)

    def scores_on(self, other) -> np.ndarray:
        """Another view's pairs: right (by label) on the queries this model held out, upside down on every other."""
        held_out = self.pairs.filter(pl.col("split") == "test")["query_id"]
        return np.where(other.pairs["query_id"].is_in(held_out.implode()), 1, -1) * other.pairs["label"].to_numpy()


@pytest.fixture
def trained_on(monkeypatch) -> list[pl.DataFrame]:
    """No training: each model's pairs recorded, random scores."""
    seen = []
    monkeypatch.setattr(lc, "train_variant", lambda data, *args, **kwargs: seen.append(data.pairs) or Scored(data, *args))
    return seen


def test_no_scored_query_is_trained_on_and_each_model_learns_from_n_of_its_pool(problem, trained_on):
    by_query, retrieved, extra = lc.trained_point(problem, FINAL, 6, seed=3, k=4, extra=["shift"])
    choice_pairs = problem.pairs.filter(pl.col("split").is_in(["train", "dev"]))
    folds = query_folds(choice_pairs["query_id"], 4, 3)
    assert sorted(by_query["query_id"]) == sorted(choice_pairs["query_id"].unique())     # every train + dev query once
    assert sorted(retrieved["query_id"]) == sorted(by_query["query_id"])              # each also searching the base
    assert 0 <= extra["shift"] <= 1 and len(trained_on) == 4
    for held_out, pairs in enumerate(trained_on):
        train = set(pairs.filter(pl.col("split") == "train")["query_id"])
        scored = {q for q, f in folds.items() if f == held_out}
        assert len(train) == 6 and not train & scored                           # n judged queries, none of them scored
        assert train <= set(lc.pools(problem, 4, 3)[held_out])
        assert set(by_query.filter(pl.col("fold") == held_out)["query_id"]) == scored
        shift = pairs.filter(pl.col("split").str.starts_with(lc.EXTRA))
        assert shift.height == problem.pairs.filter(pl.col("split") == "shift").height and not set(shift["query_id"]) & train
    for bad, why in ((["lay"], "no pair has that split"), (["dev"], "the folds' own")):
        with pytest.raises(ConfigError, match=why):
            lc.trained_point(problem, FINAL, 6, seed=3, k=4, extra=bad)


def test_a_shift_view_is_scored_by_each_folds_model_on_that_folds_held_out_queries_only(problem, trained_on):
    view = replace(problem, pairs=problem.pairs.with_columns(source_rank=pl.lit(None, dtype=pl.Int32)))
    _, _, figures = lc.trained_point(problem, FINAL, 6, seed=3, k=4, views={"later-year": view})
    assert figures["later-year"] == 1.0     # each model is right on its own held-out queries, wrong on all the others
    report = curve(problem, ["4"], seeds=[0], views={"later-year": view})
    assert report["extra"] == ["shift", "later-year"] and report["curves"]["22"][0]["extra"]["later-year"]["mean"] == 1.0
    assert "later-year" in report["lines"]["zero"]["extra"] and "later-year" not in report["lines"]["random"]["extra"]


def curve(problem, sizes, **options) -> dict:
    """A curve of FINAL beside the same variant untrained ("zero") and random scores, 3 folds, the shift split scored."""
    return lc.learning_curve(problem, {"22": FINAL, "zero": LABEL_FREE}, {"random": random_matrix(problem)},
                             sizes, k=3, extra=["shift"], reference="zero", resamples=200, **options)


def test_sizes_above_the_pool_are_skipped_and_the_cli_writes_its_table_json_and_png(problem, trained_on, tmp_path):
    pool = min(len(p) for p in lc.pools(problem, 3, 0))
    report = curve(problem, ["4", str(pool + 1), "all"], seeds=[0, 1])
    assert report["sizes"] == ["4", "all"] and report["skipped"] == [str(pool + 1)]
    assert len(trained_on) == 1 + 2 * 2 * 3             # the label-free variant once; 2 sizes x 2 seeds x 3 folds
    assert list(report["curves"]) == ["22"] and set(report["lines"]) == {"random", "zero"}
    four, every = report["curves"]["22"]
    assert four["queries"] == 4 and every["queries"] >= pool and every["vs_reference"]["queries"] > 0
    assert len(four["cv_map"]["values"]) == 2 and 0 <= four["extra"]["shift"]["mean"] <= 1
    assert len(four["cv_retrieve"]["values"]) == 2 and report["decides"] == "retrieve"
    assert set(four["vs_reference"]) >= {"p", "mean_difference"} and set(four["query_rr"]) == set(four["query_ap"])
    assert set(report["lines"]["zero"]["query_ap"]) == set(four["query_ap"])   # the lines are over the same queries
    with pytest.raises(ConfigError, match="not an untrained line"):
        lc.learning_curve(problem, {"22": FINAL}, {}, ["4"], [0], 3, reference="BM25")

    printed = write(report | {"dataset": "tiny", "seconds": 1.0}, tmp_path / "curve.json", tmp_path / "img" / "curve.png")
    assert "| 22 | 4 |" in printed and "| zero (untrained) | 0 |" in printed and "shift MAP" in printed
    assert f"skipped, above the smallest pool: {pool + 1}" in printed
    assert json.loads((tmp_path / "curve.json").read_text())["curves"]["22"][0]["size"] == "4"
    assert (tmp_path / "img" / "curve.png").read_bytes()[:4] == b"\x89PNG"



def test_the_curve_run_logs_what_was_run_the_table_and_the_files(tmp_path):
    files = [tmp_path / "curve.json", tmp_path / "curve.png"]
    for path in files:
        path.write_text("{}")
    params = make_params(tmp_path)
    report = {"dataset": "tiny", "sizes": ["4", "all"], "seeds": [0], "folds": 3, "curves": {"22": []}, "reference": "zero"}
    log(params, report, "the table", files)
    client = mlflow.MlflowClient(params.tracking.uri)
    [run] = client.search_runs([client.get_experiment_by_name(params.tracking.experiment).experiment_id])
    assert run.data.tags["stage"] == "curve" and run.data.params["sizes"] == "4 all" and run.data.params["reference"] == "zero"
    assert {a.path for a in client.list_artifacts(run.info.run_id)} == {"curve.md", "curve.json", "curve.png"}


@pytest.mark.slow     # 6 small trainings: 1.5-2 minutes under load
def test_a_trained_curve_gives_maps_for_every_size(problem):
    report = curve(problem, ["4", "all"], seeds=[0], epochs=1)
    for point in report["curves"]["22"]:
        assert 0 < point["cv_map"]["mean"] <= 1 and point["cv_map"]["std"] == 0 and 0 <= point["extra"]["shift"]["mean"] <= 1
