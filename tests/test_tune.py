"""The Optuna search: rescoring, resuming a killed study, two workers on one storage, pruning, no test pair, MLflow runs."""
import os
from dataclasses import replace

import mlflow
import numpy as np
import optuna
import polars as pl
import pytest
from conftest import random_channel, tiny_corpus

from ticketsim.config import (
    DatasetConfig,
    Params,
    PrunerConfig,
    SearchSpace,
    SiameseParams,
    TrackingConfig,
    TrainConfig,
    TuneConfig,
    VariantConfig,
    load_tuned,
)
from ticketsim.threads import torch_threads
from ticketsim.training.variant import SEARCH_SPLITS, prepare, train_variant
from ticketsim.tuning.output import write_tuned
from ticketsim.tuning.search import (
    default_measures,
    dev_measures,
    rescore,
    run,
    search,
    trial_params,
    with_rescore_cache,
)
from ticketsim.tuning.study import open_study

# Around the paper's #22 (FINAL), which the searched variant of these tests is.
RANGES = SearchSpace(channels={"h": (0.5, 1.0), "E": (0.0, 0.4), "T": (0.0, 0.4)},
                     levels={"sub-sub": (0.0, 0.4), "desc-desc": (0.0, 0.4), "sub-desc": (0.0, 0.4), "sub-sol": (0.0, 0.4),
                             "desc-sol": (0.0, 0.4)})
FINAL = VariantConfig(channels={"h": 0.7, "E": 0.1, "T": 0.2},
                      levels={"sub-sub": 0.3, "desc-desc": 0.3, "sub-desc": 0.2, "sub-sol": 0.1, "desc-sol": 0.1})


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """As the tune stage runs (siamese.threads: 1), whichever test comes first: with two threads on a busy 2-core box
    one small training took 90 s instead of 1."""
    with torch_threads(1):
        yield


@pytest.fixture(scope="module")
def corpus_and_tokens():
    return tiny_corpus(n_tickets=80, n_labeled_queries=40, n_enduser_queries=6)


def make_params(tmp_path, **tune) -> Params:
    return Params(seed=0, datasets={"tiny": DatasetConfig("tiny", "synthetic", "unused")},
                  tracking=TrackingConfig(uri=f"sqlite:///{tmp_path / 'mlflow.db'}", experiment="tune-test",
                                          artifact_location=str(tmp_path / "art")),
                  siamese=SiameseParams(hidden=8, max_tokens=20, variants={"22": FINAL}, final="22",
                                        train=TrainConfig(epochs=3, batch_size=16, patience=3)),
                  tune=TuneConfig(**{"enabled": True, "storage": f"sqlite:///{tmp_path / 'optuna.db'}", "epochs": 3,
                                     "n_trials": 6, "timeout": None, "ranges": RANGES, **tune}))


def make_problem(params: Params, corpus, tokens, pairs: pl.DataFrame | None = None):
    table = lambda words: np.random.default_rng(1).normal(size=(len(words), 12))  # noqa: E731
    return prepare(params, tokens, [random_channel("E", corpus, 2), random_channel("T", corpus, 3)], table, 4,
                   [params.siamese.variant(params.siamese.final)], corpus, corpus.pairs if pairs is None else pairs,
                   splits=SEARCH_SPLITS)


def searched_variant(params: dict[str, float]) -> VariantConfig:
    """A trial's weights as a variant, read from its Optuna params (W_<channel>, V_<level>) without the tuner's help."""
    return replace(FINAL, channels={k[2:]: v for k, v in params.items() if k.startswith("W_")},
                   levels={k[2:]: v for k, v in params.items() if k.startswith("V_")})


@pytest.mark.slow
def test_rescore_finds_better_weights_than_the_final_variants_and_reports_their_own_figures(tmp_path, corpus_and_tokens):
    params = make_params(tmp_path, n_trials=12)
    problem = with_rescore_cache(make_problem(params, *corpus_and_tokens), params.tune)
    study = search(problem, params.tune, "rescore")
    default = default_measures(study, problem, params.tune)
    assert study.trials[0].user_attrs["final"] and study.trials[0].params == trial_params(FINAL, 8, params.tune)
    assert len(study.trials) == 12
    # the figures are what the weights score when rescored afresh, not values carried along
    assert default == pytest.approx(dev_measures(problem, rescore(problem, FINAL)))
    assert dev_measures(problem, rescore(problem, searched_variant(study.best_params)))["map"] == pytest.approx(study.best_value)
    # the seeded search on this data finds weights that rank dev better than the final variant's (trial 0)
    assert study.best_trial.number != 0 and study.best_value > default["map"]


def test_rescore_reads_the_siamese_stages_model_as_well_as_its_own(tmp_path, corpus_and_tokens):
    params = make_params(tmp_path)
    problem = make_problem(params, *corpus_and_tokens)
    train_variant(problem, FINAL, params.seed, 8, params.tune.epochs).save(tmp_path)
    loaded, trained = with_rescore_cache(problem, params.tune, tmp_path), with_rescore_cache(problem, params.tune)
    other = VariantConfig(channels={"h": 0.9, "E": 0.3, "T": 0.0}, levels={"sub-sub": 0.1, "desc-sol": 0.4})
    assert np.allclose(rescore(loaded, other), rescore(trained, other))
    with pytest.raises(ValueError, match="not as"):
        with_rescore_cache(replace(problem, params=replace(params, siamese=replace(params.siamese, variants={"22": other}))),
                           params.tune, tmp_path)


def test_a_killed_study_resumes_where_it_stopped(tmp_path, corpus_and_tokens):
    params = make_params(tmp_path, n_trials=3)
    problem = with_rescore_cache(make_problem(params, *corpus_and_tokens), params.tune)
    first = search(problem, params.tune, "resumed")
    before = [t.params for t in first.trials]
    del first  # the process that ran it is gone; only the storage remains
    resumed = search(problem, replace(params.tune, n_trials=5), "resumed")
    assert len(resumed.trials) == 5 and [t.params for t in resumed.trials[:3]] == before
    assert len(optuna.get_all_study_names(params.tune.storage)) == 1


@pytest.mark.slow
def test_two_worker_processes_share_one_sqlite_study(tmp_path, corpus_and_tokens):
    # How the trials divide between the workers depends on the machine's load: benchmarks/speed_goals.py measures it.
    params = make_params(tmp_path, n_trials=30)
    problem = with_rescore_cache(make_problem(params, *corpus_and_tokens), params.tune)
    study = search(problem, params.tune, "shared", workers=2)
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert sorted(t.number for t in complete) == list(range(30))    # the first 30 numbers, each finished once
    # a trial a worker started when the 30 places were taken is failed as surplus, never run
    assert all(t.state == optuna.trial.TrialState.FAIL and not t.params for t in study.trials if t.number >= 30)
    workers = {t.user_attrs["worker"] for t in complete}
    assert 1 <= len(workers) <= 2 and not any(w.endswith(f":{os.getpid()}") for w in workers), workers   # in the workers
    assert len({tuple(sorted(t.params.items())) for t in complete}) == 30      # no point run twice


def test_a_bad_trial_is_pruned_before_its_last_epoch(tmp_path, corpus_and_tokens):
    params = make_params(tmp_path, mode="retrain", n_trials=2, epochs=4, hidden=(8,),
                         pruner=PrunerConfig(n_startup_trials=1, n_warmup_steps=0))
    problem = make_problem(params, *corpus_and_tokens)
    study = open_study(params.tune, "pruned", 0)
    study.enqueue_trial(trial_params(FINAL, 8, params.tune))
    # No h, E, or T to speak of: every pair scores nearly the same, the ranking is arbitrary.
    nearly_flat = VariantConfig(channels={"h": 0.5, "E": 0.0, "T": 0.0}, levels=dict.fromkeys(FINAL.levels, 1e-6))
    study.enqueue_trial(trial_params(nearly_flat, 8, params.tune))
    study = search(problem, params.tune, "pruned")
    good, bad = study.trials
    assert good.state == optuna.trial.TrialState.COMPLETE and len(good.intermediate_values) >= 2
    assert bad.state == optuna.trial.TrialState.PRUNED and len(bad.intermediate_values) < params.tune.epochs


def test_the_search_never_reads_the_test_split(tmp_path, corpus_and_tokens):
    corpus, tokens = corpus_and_tokens
    params = make_params(tmp_path, n_trials=4)
    problem = make_problem(params, corpus, tokens)
    assert set(problem.pairs["split"]) == {"train", "dev"}
    # Test pairs with other labels and unknown ids: a search that read them would change or fail.
    is_test = pl.col("split") == "test"
    garbage = corpus.pairs.with_columns(label=pl.when(is_test).then(6 - pl.col("label")).otherwise(pl.col("label")),
                                        query_id=pl.when(is_test).then(pl.lit("no such query")).otherwise(pl.col("query_id")))
    other = make_problem(params, corpus, tokens, garbage)
    results = []
    for name, each in (("a", problem), ("b", other)):
        study = search(with_rescore_cache(each, params.tune), params.tune, name)
        results.append(([t.params for t in study.trials], [t.value for t in study.trials]))
    assert results[0] == results[1]


@pytest.mark.slow
def test_the_study_is_a_parent_run_with_one_nested_run_per_trial(tmp_path, corpus_and_tokens, monkeypatch):
    for variable in ("TICKETSIM_TRACKING_URI", "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(variable, raising=False)
    params = make_params(tmp_path, n_trials=3)
    result = run(params, "tiny", lambda: make_problem(params, *corpus_and_tokens), tmp_path / "tuned.yaml",
                 tmp_path / "tune.json", tmp_path / "plots")
    assert result["trials"] == {"complete": 3}
    study = optuna.load_study(study_name=result["study"], storage=params.tune.storage)
    values = [t.value for t in study.trials]
    assert result["best"] == {"value": max(values), "trial": values.index(max(values)), "dev": study.best_trial.user_attrs["dev"]}
    assert study.trials[0].user_attrs["final"] and result["default"]["value"] == values[0]
    tuned = load_tuned(tmp_path / "tuned.yaml")   # the best trial's weights, as the final stage reads them
    best = searched_variant(study.best_params)
    assert tuned.channels == pytest.approx(best.channels, abs=1e-4) and tuned.levels == pytest.approx(best.levels, abs=1e-4)
    assert tuned.hidden == 8
    assert (tmp_path / "plots" / "optimization_history.png").is_file()

    client = mlflow.MlflowClient(tracking_uri=params.tracking.uri)
    experiment = client.get_experiment_by_name("tune-test")
    parent, = client.search_runs([experiment.experiment_id], "tags.stage = 'tune' and attributes.run_name = 'tune@tiny'")
    children = client.search_runs([experiment.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    assert sorted(c.info.run_name for c in children) == ["trial 0", "trial 1", "trial 2"]
    # the keys of the siamese runs (dev.rerank.map, ...), so a trial compares with a variant in one column
    assert all({"W_h", "W_E", "W_T", "V_sub-desc"} <= set(c.data.params) and {"dev.rerank.map", "dev.similarity.mse"} <= set(c.data.metrics)
               and c.data.tags["stage"] == "tune" and c.data.tags["trial"] == c.info.run_name.split()[1] for c in children)
    assert "best_params.json" in {a.path for a in client.list_artifacts(parent.info.run_id)}

    skipped = run(replace(params, tune=replace(params.tune, enabled=False)), "tiny", lambda: pytest.fail("searched"),
                  tmp_path / "skipped.yaml", tmp_path / "skipped.json", tmp_path / "plots2")
    assert skipped == {"enabled": False} and load_tuned(tmp_path / "skipped.yaml") == replace(FINAL, hidden=8)
    assert (tmp_path / "plots2").is_dir()     # the stage's declared output exists even without a study


def test_a_tuned_file_reads_back_as_the_variant_written_small_learning_rates_included(tmp_path):
    # JSON writes 3e-05 without a dot, which YAML 1.1 (load_tuned) reads as a string: the final stage failed on F+L
    variant = replace(FINAL, train={"optimizer": "adamw", "lr": 3e-05, "epochs": 4}, hidden=8)
    write_tuned(variant, tmp_path / "tuned.yaml", "a note")
    assert load_tuned(tmp_path / "tuned.yaml") == variant
