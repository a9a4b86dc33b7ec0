"""Choosing by the user's job: a constructed case where rerank and retrieval disagree, and the choice follows retrieval in
select, tune and the gate; the tuner's retrieval CV equals a direct exhaustive search of every ticket.

Two cached channels over the same judged pairs. Under S each query's judged candidates come in label order (rerank AP 1)
but three unjudged tickets lie nearer than its YES (retrieve RR 1/4); under E a NO comes before the YES (rerank AP 1/2)
and every unjudged ticket lies far (retrieve RR 1/2). Rerank prefers S, a user searching the base prefers E.
"""
from dataclasses import replace

import numpy as np
import polars as pl
import pytest
from conftest import random_channel, tiny_corpus

from ticketsim.channels.cache import ChannelVectors
from ticketsim.config import DatasetConfig, Params, SiameseParams, TrackingConfig, TuneConfig, TuningSpace, VariantConfig
from ticketsim.evaluate.measures import RELEVANT
from ticketsim.evaluate.suite import evaluate_method
from ticketsim.lifecycle.gate import compare
from ticketsim.lifecycle.promotion import gate_rules
from ticketsim.lifecycle.tracking import metric_values
from ticketsim.model.scores import side_channels
from ticketsim.threads import torch_threads
from ticketsim.training.select_render import method_figures
from ticketsim.training.select_run import select
from ticketsim.training.shift import Shifts
from ticketsim.training.variant import CHOICE_SPLITS, train_variant, training_inputs
from ticketsim.tuning.rescore import cv_retrieve, fold_models
from ticketsim.tuning.tuner import run_study

LEVEL = {"sub+desc-sub+desc+sol": 1.0}
N_QUERIES, DECOYS = 24, 3
# distance of each judged candidate (YES, NO, NO) and of the query's decoys (unjudged) to the query, per channel
LAYOUT = {"S": ((1.0, 2.0, 3.0), 0.5), "E": ((1.0, 0.9, 3.0), 5.0)}
VARIANTS = {"S-only": VariantConfig(channels={"S": 1.0}, levels=LEVEL, labels=False),
            "E-only": VariantConfig(channels={"E": 1.0}, levels=LEVEL, labels=False),
            "T-only": VariantConfig(channels={"T": 1.0}, levels=LEVEL, labels=False)}   # random: the reference


@pytest.fixture(scope="module")
def case():
    corpus, tokens = tiny_corpus(n_tickets=N_QUERIES * (3 + DECOYS), n_labeled_queries=N_QUERIES, n_enduser_queries=2)
    queries = sorted(corpus.pairs["query_id"].unique())[:N_QUERIES]
    tickets = list(corpus.tickets["ticket_id"])
    rows = []
    for i, query in enumerate(queries):
        own = tickets[i * (3 + DECOYS):(i + 1) * (3 + DECOYS)]
        split = "train" if i % 3 else "dev"
        rows += [(query, own[0], 5, split), (query, own[1], 1, split), (query, own[2], 1, split)]
    pairs = pl.DataFrame(rows, schema={"query_id": pl.String, "ticket_id": pl.String, "label": pl.Int8, "split": pl.String},
                         orient="row").with_columns(source_rank=pl.lit(None, pl.Int32))
    channels = [layout_channel("E", corpus, queries, tickets), random_channel("T", corpus, 3, dim=len(queries)),
                layout_channel("S", corpus, queries, tickets)]
    return corpus, tokens, pairs, channels


def layout_channel(name: str, corpus, queries: list[str], tickets: list[str]) -> ChannelVectors:
    """Query i is 10 on axis i; its own tickets lie on that axis at LAYOUT's distances, so every other query's are >= 15
    away."""
    judged, decoy = LAYOUT[name]
    ids_q, ids_t = tuple(corpus.queries["query_id"]), tuple(corpus.tickets["ticket_id"])
    q = np.zeros((len(ids_q), len(queries)))
    t = np.zeros((len(ids_t), len(queries)))
    for i, query in enumerate(queries):
        q[ids_q.index(query), i] = 10.0
        for j, ticket in enumerate(tickets[i * (3 + DECOYS):(i + 1) * (3 + DECOYS)]):
            t[ids_t.index(ticket), i] = 10.0 - (judged[j] if j < 3 else decoy)
    return ChannelVectors(name, ids_q, ids_t, {c: q for c in ("sub", "desc", "sub+desc")},
                          {c: t for c in ("sub", "desc", "sol", "sub+desc", "sub+desc+sol")})


def params_of(tmp_path, variants: dict, final: str, **tune) -> Params:
    return Params(seed=0, datasets={"case": DatasetConfig("case", "synthetic", "unused")},
                  tracking=TrackingConfig(uri=f"sqlite:///{tmp_path / 'mlflow.db'}", experiment="case"),
                  siamese=SiameseParams(hidden=8, max_tokens=20, variants=variants, final=final, unlabelled="T-only"),
                  tune=TuneConfig(**{"storage": f"sqlite:///{tmp_path / 'optuna.db'}", "folds": 3, "n_trials": 8,
                                     "timeout": None, **tune}))


def problem_of(params: Params, case):
    corpus, tokens, pairs, channels = case
    table = lambda words: np.random.default_rng(1).normal(size=(len(words), 12))  # noqa: E731
    return training_inputs(params, tokens, channels, table, 4, list(params.siamese.variants.values()), corpus, pairs,
                   splits=CHOICE_SPLITS)


def test_select_chooses_by_retrieval_where_rerank_would_choose_the_other(tmp_path, case):
    problem = problem_of(params_of(tmp_path, VARIANTS, "S-only"), case)
    shifts = Shifts(lay=False, later=None, parts={})
    by = {decides: select(problem, ["S-only", "E-only", "T-only"], shifts, 3, [0], 1, None, False, 1000, decides,
                         dataset="tiny")
          for decides in ("retrieve", "rerank")}
    figures = by["retrieve"].configurations
    assert figures["S-only"]["cv_map"]["mean"] == pytest.approx(1.0)            # rerank: S orders the judged perfectly
    assert figures["E-only"]["cv_map"]["mean"] == pytest.approx(0.5)
    assert figures["S-only"]["cv_retrieve"]["mrr"]["mean"] == pytest.approx(0.25)   # retrieval: S's decoys come first
    assert figures["E-only"]["cv_retrieve"]["mrr"]["mean"] == pytest.approx(0.5)
    assert by["rerank"].judgement["choice"] == "S-only"
    assert by["retrieve"].judgement["choice"] == "E-only"
    logged = method_figures(by["retrieve"])     # what the select run logs per configuration
    assert logged["E-only"]["cv"]["retrieve"]["mrr@10"] == pytest.approx(0.5)
    assert logged["S-only"]["cv"]["rerank"]["map"] == pytest.approx(1.0)


def test_the_gate_passes_the_better_retriever_and_fails_the_better_reranker(tmp_path, case):
    params = params_of(tmp_path, VARIANTS, "S-only")
    problem = problem_of(params, case)
    dev = replace(problem, pairs=problem.pairs.filter(pl.col("split") == "dev"))
    figures = {}
    for name in ("S-only", "E-only"):
        trained = train_variant(dev, VARIANTS[name], 0)
        figures[name] = metric_values(evaluate_method(dev.pairs, trained.pair_scores(), trained.pool_scores(),
                                                      params.evaluation))
    assert figures["S-only"]["dev.rerank.map"] > figures["E-only"]["dev.rerank.map"]
    rules = {key: rule for key, rule in gate_rules(params).items() if ".similarity." not in key}   # the ranking rules
    assert compare(figures["S-only"], figures["E-only"], rules).passed          # the better retriever replaces it
    assert not compare(figures["E-only"], figures["S-only"], rules).passed      # the better reranker does not


def fused(tmp_path, **tune) -> tuple[Params, VariantConfig]:
    """A final that fuses S and E, its weights learned by the fold models and then tuned."""
    final = VariantConfig(channels={"S": 1.0, "E": 1.0}, levels=LEVEL, learn=True, loss="mse")
    return params_of(tmp_path, {"S+E": final, **VARIANTS}, "S+E", **tune), final


def test_tune_picks_the_weights_that_retrieve_best_where_rerank_would_pick_the_others(tmp_path, case):
    # S twenty times E (its decoys come first: rerank's pick) or E twenty times S (a NO comes first: retrieval's pick)
    grid = TuningSpace(channels={"S": (2.0, 0.005), "E": (0.1,)}, levels={"sub+desc-sub+desc+sol": (1.0,)})
    picked = {}
    for objective in ("cv_retrieve", "cv_map"):
        params, _ = fused(tmp_path, objective=objective, sampler="grid", grid=grid)
        problem = problem_of(params, case)
        with torch_threads(1):
            study = run_study(problem, params.tune, f"case-{objective}")
        assert {t.params["W_S"] for t in study.trials} == {2.0, 0.005}     # both weightings were tried
        picked[objective] = study.best_params["W_S"]
    assert picked == {"cv_retrieve": 0.005, "cv_map": 2.0}


def test_the_retrieval_cv_equals_an_exhaustive_search_of_every_ticket_by_each_fold_model(tmp_path, case, monkeypatch):
    ranges = TuningSpace(channels={"S": (0.0, 1.0), "E": (0.0, 1.0)}, levels={"sub+desc-sub+desc+sol": (1.0, 1.0)})
    params, final = fused(tmp_path, objective="cv_retrieve", ranges=ranges)
    problem = problem_of(params, case)
    from ticketsim.tuning import rescore as rescore_module

    models = []
    original = rescore_module.train_variant
    monkeypatch.setattr(rescore_module, "train_variant",
                        lambda data, *a, **k: models.append((data.pairs, original(data, *a, **k))) or models[-1][1])
    with torch_threads(1):
        folds = fold_models(problem, params.tune)
    weights = replace(final, channels={"S": 2.0, "E": 0.1})   # decoys first: the YES at rank 4 of 144
    measured = cv_retrieve(folds.held_out, weights)

    reciprocal = []
    for pairs, trained in models:     # every held-out query against every ticket: the weighted L1 distance, sorted by hand
        needs_q, needs_t = trained.metric.needs()
        queries = side_channels(trained.model, trained.inputs.queries, needs_q)
        tickets = side_channels(trained.model, trained.inputs.tickets, needs_t, tickets=True)
        held_out = pairs.filter(pl.col("split") == "test")
        for query in held_out["query_id"].unique():
            row = trained.inputs.queries.ids.index(query)
            distance = sum(w * np.abs(queries[c]["sub+desc"][row].numpy() - tickets[c]["sub+desc+sol"].numpy()).sum(axis=1)
                           for c, w in weights.channels.items())
            order = sorted(zip(distance, trained.inputs.tickets.ids))[:10]
            relevant = set(held_out.filter((pl.col("query_id") == query) & (pl.col("label") >= RELEVANT))["ticket_id"])
            reciprocal.append(next((1 / rank for rank, (_, t) in enumerate(order, 1) if t in relevant), 0.0))
    assert measured["cv_retrieve"] == pytest.approx(float(np.mean(reciprocal)))
    assert len(reciprocal) == N_QUERIES and 0 < measured["cv_retrieve"] < 1
