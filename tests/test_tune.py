"""The Optuna study: rescoring, resuming a killed study, two workers on one storage, pruning, no test pair, MLflow runs;
the default objective cv_map (no query scored by a model that saw it, trial 0 the learned weights)."""
import os
import warnings
from dataclasses import replace

import mlflow
import numpy as np
import optuna
import polars as pl
import pytest
import torch
from conftest import REPO, random_channel, tiny_corpus

from ticketsim.config import (
    ConfigError,
    DatasetConfig,
    Params,
    PrunerConfig,
    SiameseParams,
    TrackingConfig,
    TrainConfig,
    TuneConfig,
    TuningSpace,
    VariantConfig,
    load_tuned,
)
from ticketsim.lifecycle.tracking import sanitize
from ticketsim.threads import torch_threads
from ticketsim.training.variant import CHOICE_SPLITS, train_variant, training_inputs
from ticketsim.tuning import rescore as rescore_module
from ticketsim.tuning import tuner as tuner_module
from ticketsim.tuning.output import write_tuned
from ticketsim.tuning.rescore import fold_models, rescore, with_rescore_vectors
from ticketsim.tuning.study import open_study
from ticketsim.tuning.tuner import default_measures, dev_measures, run, run_study, trial_params

# Around the paper's #22 (FINAL), which the tuned variant of these tests is.
RANGES = TuningSpace(channels={"h": (0.5, 1.0), "E": (0.0, 0.4), "T": (0.0, 0.4)},
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
                  tune=TuneConfig(**{"storage": f"sqlite:///{tmp_path / 'optuna.db'}", "epochs": 3, "objective": "map",
                                     "n_trials": 6, "timeout": None, "ranges": RANGES, **tune}))


def make_problem(params: Params, corpus, tokens, pairs: pl.DataFrame | None = None):
    table = lambda words: np.random.default_rng(1).normal(size=(len(words), 12))  # noqa: E731
    return training_inputs(params, tokens, [random_channel("E", corpus, 2), random_channel("T", corpus, 3)], table, 4,
                   [params.siamese.variant(params.siamese.final)], corpus, corpus.pairs if pairs is None else pairs,
                   splits=CHOICE_SPLITS)


def tuned_variant(params: dict[str, float]) -> VariantConfig:
    """A trial's weights as a variant, read from its Optuna params (W_<channel>, V_<level>) without the tuner's help."""
    return replace(FINAL, channels={k[2:]: v for k, v in params.items() if k.startswith("W_")},
                   levels={k[2:]: v for k, v in params.items() if k.startswith("V_")})


@pytest.mark.slow
def test_rescore_finds_better_weights_than_the_final_variants_and_reports_their_own_figures(tmp_path, corpus_and_tokens):
    params = make_params(tmp_path, n_trials=12)
    problem = with_rescore_vectors(make_problem(params, *corpus_and_tokens), params.tune)
    study = run_study(problem, params.tune, "rescore")
    default = default_measures(study, problem, params.tune)
    assert study.trials[0].user_attrs["final"] and study.trials[0].params == trial_params(FINAL, 8, params.tune)
    assert len(study.trials) == 12
    # the figures are what the weights score when rescored afresh, not values carried along
    assert default == pytest.approx(dev_measures(problem, rescore(problem, FINAL)))
    assert dev_measures(problem, rescore(problem, tuned_variant(study.best_params)))["map"] == pytest.approx(study.best_value)
    # the seeded study on this data finds weights that rank dev better than the final variant's (trial 0)
    assert study.best_trial.number != 0 and study.best_value > default["map"]


def test_rescore_reads_the_siamese_stages_model_as_well_as_its_own(tmp_path, corpus_and_tokens):
    params = make_params(tmp_path)
    problem = make_problem(params, *corpus_and_tokens)
    train_variant(problem, FINAL, params.seed, 8, params.tune.epochs).save(tmp_path)
    loaded, trained = with_rescore_vectors(problem, params.tune, tmp_path), with_rescore_vectors(problem, params.tune)
    other = VariantConfig(channels={"h": 0.9, "E": 0.3, "T": 0.0}, levels={"sub-sub": 0.1, "desc-sol": 0.4})
    assert np.allclose(rescore(loaded, other), rescore(trained, other))
    with pytest.raises(ValueError, match="not as"):
        with_rescore_vectors(replace(problem, params=replace(params, siamese=replace(params.siamese, variants={"22": other}))),
                           params.tune, tmp_path)


def test_a_lone_worker_runs_its_trials_on_the_threads_of_a_model_trained_alone(tmp_path, corpus_and_tokens, monkeypatch):
    """In tune.mode retrain each trial trains a model: a worker alone in the tune stage's process trains it as the final
    stage would (training.variant.threads_alone: the encoder's threads for F), where workers side by side take one
    share each (siamese.threads)."""
    params = make_params(tmp_path, n_trials=2)
    problem = with_rescore_vectors(make_problem(params, *corpus_and_tokens), params.tune)
    threads = []
    monkeypatch.setattr(tuner_module, "threads_alone", lambda siamese, variant: 3 if variant == problem.final else 0)
    monkeypatch.setattr(tuner_module.torch, "set_num_threads", threads.append)
    assert len(run_study(problem, params.tune, "lone").trials) == 2 and threads == [3]


def test_a_killed_study_resumes_where_it_stopped(tmp_path, corpus_and_tokens):
    params = make_params(tmp_path, n_trials=3)
    problem = with_rescore_vectors(make_problem(params, *corpus_and_tokens), params.tune)
    first = run_study(problem, params.tune, "resumed")
    before = [t.params for t in first.trials]
    del first  # the process that ran it is gone; only the storage remains
    resumed = run_study(problem, replace(params.tune, n_trials=5), "resumed")
    assert len(resumed.trials) == 5 and [t.params for t in resumed.trials[:3]] == before
    assert len(optuna.get_all_study_names(params.tune.storage)) == 1


@pytest.mark.slow
def test_two_worker_processes_share_one_sqlite_study(tmp_path, corpus_and_tokens):
    # How the trials divide between the workers depends on the machine's load: `python -m benchmarks.pipeline_time repro
    # --goals` measures it.
    params = make_params(tmp_path, n_trials=30)
    problem = with_rescore_vectors(make_problem(params, *corpus_and_tokens), params.tune)
    study = run_study(problem, params.tune, "shared", workers=2)
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
    study = run_study(problem, params.tune, "pruned")
    good, bad = study.trials
    epochs = params.siamese.train.epochs      # 3: tune.epochs (4) caps a trial's own epochs, never raises them
    assert good.state == optuna.trial.TrialState.COMPLETE and len(good.intermediate_values) >= 2
    assert bad.state == optuna.trial.TrialState.PRUNED and len(bad.intermediate_values) < epochs < params.tune.epochs
    pruning = tuner_module.summary(study, problem, params.tune, {"map": 0.0}, 0.0)["pruning"]
    assert pruning == {"epochs_saved": epochs - len(bad.intermediate_values), "epoch_budget": 2 * epochs,
                       "share_saved": round((epochs - len(bad.intermediate_values)) / (2 * epochs), 3)}


def test_the_study_never_reads_the_test_split(tmp_path, corpus_and_tokens):
    corpus, tokens = corpus_and_tokens
    params = make_params(tmp_path, n_trials=4)
    problem = make_problem(params, corpus, tokens)
    assert set(problem.pairs["split"]) == {"train", "dev"}
    # Test pairs with other labels and unknown ids: a study that read them would change or fail.
    is_test = pl.col("split") == "test"
    garbage = corpus.pairs.with_columns(label=pl.when(is_test).then(6 - pl.col("label")).otherwise(pl.col("label")),
                                        query_id=pl.when(is_test).then(pl.lit("no such query")).otherwise(pl.col("query_id")))
    other = make_problem(params, corpus, tokens, garbage)
    results = []
    for name, each in (("a", problem), ("b", other)):
        study = run_study(with_rescore_vectors(each, params.tune), params.tune, name)
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
    assert result["best"] == {"value": max(values), "trial": values.index(max(values)),
                              "measures": study.best_trial.user_attrs["measures"]}
    assert study.trials[0].user_attrs["final"] and result["default"]["value"] == values[0]
    tuned = load_tuned(tmp_path / "tuned.yaml")   # the best trial's weights, as the final stage reads them
    best = tuned_variant(study.best_params)
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

    skipped = run(replace(params, tune=replace(params.tune, enabled=False)), "tiny", lambda: pytest.fail("tuned"),
                  tmp_path / "skipped.yaml", tmp_path / "skipped.json", tmp_path / "plots2")
    assert skipped == {"enabled": False} and load_tuned(tmp_path / "skipped.yaml") == replace(FINAL, hidden=8)
    assert (tmp_path / "plots2").is_dir()     # the stage's declared output exists even without a study


def test_a_tuned_file_reads_back_as_the_variant_written_small_learning_rates_included(tmp_path):
    # JSON writes 3e-05 without a dot, which YAML 1.1 (load_tuned) reads as a string: the final stage failed on F+L
    variant = replace(FINAL, train={"optimizer": "adamw", "lr": 3e-05, "epochs": 4}, hidden=8)
    write_tuned(variant, tmp_path / "tuned.yaml", "a note")
    assert load_tuned(tmp_path / "tuned.yaml") == variant


# ---------------------------------------------------------------- the default objective: CV MAP over train + dev queries

# As siamese.final's A+L: an adapter over cached S and BM25, W and V learned (over random S: seconds a fold model).
MULTI = {"sub-sub": 0.2, "desc-desc": 0.2, "sub+desc-sub+desc": 0.3, "sub+desc-sub+desc+sol": 0.3, "sub-sub+desc+sol": 0.2}
ADAPTED = VariantConfig(channels={"A": 1.0, "L": 0.5}, levels=MULTI, learn=True, loss="pairwise",
                        train={"optimizer": "adamw", "lr": 0.01})


def cv_params(tmp_path, **tune) -> Params:
    params = make_params(tmp_path, **{"objective": "cv_map", "folds": 4, "n_trials": 4, "ranges": TuningSpace(
        channels={"A": (0.5, 3.0), "L": (0.0, 2.0)}, levels=dict.fromkeys(MULTI, (0.0, 1.0))), **tune})
    return replace(params, siamese=replace(params.siamese, variants={"A+L": ADAPTED}, final="A+L"))


def cv_problem(params: Params, corpus, tokens):
    table = lambda words: np.random.default_rng(1).normal(size=(len(words), 12))  # noqa: E731
    return training_inputs(params, tokens, [random_channel("S", corpus, 4, dim=8)], table, 4, [ADAPTED], corpus, splits=CHOICE_SPLITS)


def learned_mean(models) -> dict[str, float]:
    """The models' learned W and V averaged, as Optuna params (W_<channel>, V_<level>)."""
    with torch.no_grad():
        learned = [m.metric(None) for m in models]
    return ({f"W_{c}": np.mean([float(w.channels[c]) for w in learned]) for c in ADAPTED.channels}
            | {f"V_{k}": np.mean([float(w.levels[k]) for w in learned]) for k in ADAPTED.levels})


def test_the_cv_objective_never_scores_a_query_with_a_model_that_saw_it_and_starts_from_the_learned_weights(
        tmp_path, corpus_and_tokens, monkeypatch):
    far = TuningSpace(channels={"A": (5.0, 8.0), "L": (3.0, 4.0)}, levels=dict.fromkeys(MULTI, (0.9, 1.0)))   # from trial 0
    params = cv_params(tmp_path, ranges=far)
    problem = cv_problem(params, *corpus_and_tokens)
    queries = sorted(set(problem.pairs["query_id"]))
    seen, scored, vectors, per_trial, built = {}, {}, {}, [], []   # keyed by the fold model itself

    def train(data, *args, **kwargs):     # which queries each fold model trained or early-stopped on
        trained = train_variant(data, *args, **kwargs)
        seen[trained.model] = set(data.pairs.filter(pl.col("split") != "test")["query_id"])
        return trained

    def kept(model, inputs, pairs, metric):   # which queries each fold model's vectors are kept for
        scored[model], vectors[model] = pairs, model_vectors(model, inputs, pairs, metric)
        return vectors[model]

    def per_query(pairs, scores, depth):  # which queries a trial scores
        per_trial.append(list(pairs["query_id"].unique()))
        return selection_per_query(pairs, scores, depth)

    model_vectors, selection_per_query = rescore_module.model_vectors, rescore_module.per_query
    for name, wrapper in (("train_variant", train), ("model_vectors", kept), ("per_query", per_query)):
        monkeypatch.setattr(rescore_module, name, wrapper)
    monkeypatch.setattr(tuner_module, "fold_models", lambda *args: built.append(fold_models(*args)) or built[-1])
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        study = run_study(problem, params.tune, "cv")

    assert len(seen) == len(scored) == params.tune.folds    # one model per fold, trained once for all the trials
    for model, pairs in scored.items():
        assert not set(pairs["query_id"]) & seen[model]
        assert set(pairs["query_id"]) | seen[model] == set(queries)
    folds = [sorted(set(pairs["query_id"])) for pairs in scored.values()]
    assert sorted(q for fold in folds for q in fold) == queries   # the folds' scored queries: disjoint, all of them
    assert len(per_trial) == len(study.trials) == params.tune.n_trials
    assert all(sorted(trial) == queries for trial in per_trial)   # each trial: every query once

    # each pair is scored on the vectors of the model of its own fold
    held_out, = (folds.held_out for folds in built)
    other = VariantConfig(channels={"A": 2.0, "L": 1.0}, levels=dict.fromkeys(MULTI, 0.5))
    for model, pairs in scored.items():
        rows = held_out.pairs.with_row_index().join(pairs.select("query_id", "ticket_id"), on=["query_id", "ticket_id"])["index"]
        alone = rescore(replace(held_out, pairs=pairs, rescore_vectors=vectors[model]), other)
        assert np.allclose(rescore(held_out, other)[rows.to_numpy()], alone)

    # trial 0: the W and V the fold models learned (their mean), not the variant's starting values
    first = study.trials[0]
    assert first.user_attrs["final"] and first.params == pytest.approx(learned_mean(seen))
    assert first.params != pytest.approx(trial_params(ADAPTED, 8, params.tune))
    # it lies outside the ranges: each is widened to take it in, so Optuna fixes it as it is and TPE samples there too
    ranges = far.channels | far.levels
    assert not any(ranges[name[2:]][0] <= value <= ranges[name[2:]][1] for name, value in first.params.items())
    assert all(trial.distributions[name].low <= value <= trial.distributions[name].high
               for trial in study.trials for name, value in first.params.items())
    assert not [w for w in warned if "out of range" in str(w.message)]


@pytest.mark.slow
def test_the_cv_study_is_a_parent_run_with_a_child_run_per_trial_and_its_best_weights_are_tuned(
        tmp_path, corpus_and_tokens, monkeypatch):
    for variable in ("TICKETSIM_TRACKING_URI", "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(variable, raising=False)
    params = cv_params(tmp_path)
    result = run(params, "tiny", lambda: cv_problem(params, *corpus_and_tokens), tmp_path / "tuned.yaml",
                 tmp_path / "tune.json", tmp_path / "plots")

    study = optuna.load_study(study_name=result["study"], storage=params.tune.storage)
    assert result["objective"] == "cv_map" and result["default"]["value"] == study.trials[0].value
    assert result["best"]["value"] == study.best_value >= study.trials[0].value
    tuned = load_tuned(tmp_path / "tuned.yaml")       # what the final stage trains: the best trial's weights
    assert tuned.channels == pytest.approx({k[2:]: v for k, v in study.best_params.items() if k.startswith("W_")}, abs=1e-4)

    client = mlflow.MlflowClient(tracking_uri=params.tracking.uri)
    experiment = client.get_experiment_by_name("tune-test")
    parent, = client.search_runs([experiment.experiment_id], "attributes.run_name = 'tune@tiny'")
    children = {c.info.run_name: c for c in client.search_runs([experiment.experiment_id],
                                                               f"tags.mlflow.parentRunId = '{parent.info.run_id}'")}
    assert sorted(children) == [f"trial {t.number}" for t in study.trials]
    for trial in study.trials:
        child = children[f"trial {trial.number}"]
        assert {k: float(v) for k, v in child.data.params.items()} == pytest.approx({sanitize(k): v for k, v in trial.params.items()})
        assert child.data.metrics["cv.rerank.map"] == pytest.approx(trial.value)


def test_more_folds_than_queries_is_a_config_error_and_cv_needs_rescore_mode(tmp_path, corpus_and_tokens):
    params = cv_params(tmp_path, folds=1000)
    with pytest.raises(ConfigError, match="tune.folds: k = 1000 folds: need 3 <= k <= "):
        fold_models(cv_problem(params, *corpus_and_tokens), params.tune)
    with pytest.raises(ConfigError, match="tune.objective: cv re-scores fold models trained once; set tune.mode: rescore"):
        TuneConfig(mode="retrain")


def test_the_default_study_is_on_and_cross_validated():
    from ticketsim.config import load_params

    for tune in (TuneConfig(), load_params(REPO / "params.yaml").tune):
        assert tune.enabled and tune.objective == "cv" and tune.mode == "rescore" and tune.folds == 5
        assert tune.for_protocol("retrieve").objective == "cv_retrieve" and tune.for_protocol("rerank").objective == "cv_map"


def test_every_learned_deployable_row_of_the_adapter_or_the_encoder_can_be_the_final_the_tuner_tunes():
    """siamese.final may name any learned row over A, F or Fq without R (where a GPU trains F, the rule picks
    Fc+L-relpos): the default ranges cover what each weighs, and trial 0 (its own weights) lies inside them."""
    from ticketsim.config import load_params

    siamese = load_params(REPO / "params.yaml").siamese
    names = [n for n, v in {**siamese.variants, **siamese.finetuned}.items()
             if v.labels and {"A", "F", "Fq"} & set(v.channels) and "R" not in v.channels]
    assert {"Ac+L-relpos", "Fc+L-relpos", "Fq+L"} <= set(names)
    for name in names:
        variant = siamese.variant(name)
        space = TuneConfig().space(variant)
        assert all(low <= variant.channels[c] <= high for c, (low, high) in space.channels.items()), name


def test_the_tuners_epochs_cap_a_variants_own_and_never_raise_them(tmp_path, corpus_and_tokens):
    """tune.epochs (3 here, 10 by default) is a cap: a fold model of a variant that trains 2 epochs (as F trains 4 where
    the default allows 10) trains 2, as the final stage will train it; one that trains 5 trains 3."""
    params = cv_params(tmp_path)
    problem = cv_problem(params, *corpus_and_tokens)
    epochs = lambda variant, cap: len(train_variant(problem, variant, 0, epochs=cap).histories["labels"].train_loss)  # noqa: E731
    short = replace(ADAPTED, train={**ADAPTED.train, "epochs": 2, "patience": 9})
    long = replace(ADAPTED, train={**ADAPTED.train, "epochs": 5, "patience": 9})
    assert params.tune.epochs == 3
    assert (epochs(short, params.tune.epochs), epochs(short, 1), epochs(long, params.tune.epochs)) == (2, 1, 3)
