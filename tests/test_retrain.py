"""`ticketsim retrain` end to end in a throwaway repo: good labels -> the gate passes and the champion moves; shuffled
labels -> the gate fails and the champion stays; rollback restores the earlier champion.

The loop runs against a stand-in for the Siamese stage (tests/retrain_standin.py: the same seam, seconds instead of
minutes); the real pipeline's register stage is exercised by tests/test_pipeline.py, and the real model's response to
the labels, what makes the gate useful, is checked here in-process: more true labels pass the gate, shuffled ones fail it.
(The loop on the real pipeline, three full retrains, took 8.5 minutes on 2 cores: reports/studies/retrain_loop.md.)
"""
import random

import mlflow
import numpy as np
import polars as pl
import pytest
from retrain_workspace import Workspace, make_workspace

from ticketsim.config import DatasetConfig, GateRule, Params, SiameseParams, SyntheticConfig, TextConfig, TrainConfig, VariantConfig
from ticketsim.data.synthetic import generate
from ticketsim.evaluate.suite import evaluate_method
from ticketsim.lifecycle.gate import compare
from ticketsim.lifecycle.registry import CHAMPION, PREVIOUS
from ticketsim.lifecycle.tracking import URI_VARIABLE
from ticketsim.text.tokenize import make_tokenizer, tokenize_corpus
from ticketsim.training.variant import CHOICE_SPLITS, train_variant, training_inputs

pytestmark = pytest.mark.slow   # `ticketsim retrain` end to end in throwaway repos (minutes)

LEVELS = {"sub-sub": 0.3, "desc-desc": 0.3, "sub-desc": 0.2, "sub-sol": 0.1, "desc-sol": 0.1}   # the paper's #20-22


def registry(ws: Workspace) -> tuple[mlflow.MlflowClient, str]:
    params = ws.params()
    uri = ws.env.get(URI_VARIABLE) or f"sqlite:///{ws.root / 'mlflow.db'}"
    return mlflow.MlflowClient(uri, uri), f"{params['siamese']['registered_model']}-{params['retrain']['dataset']}"


def aliases(ws: Workspace) -> dict[str, str]:
    client, model = registry(ws)
    return {alias: str(version) for alias, version in client.get_registered_model(model).aliases.items()}


def retrain(ws: Workspace, expect: int) -> str:
    done = ws.ticketsim("retrain", "--summary", "summary.md", "--outputs", "outputs.txt")
    assert done.returncode == expect, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def run_the_loop(ws: Workspace) -> None:
    first = retrain(ws, 0)      # its registration made v1 the champion: nothing for the gate to judge
    assert "is the champion since its registration" in first and "==> dvc repro" in first and aliases(ws) == {CHAMPION: "1"}

    added = ws.ticketsim("pairs", "add", str(ws.good))
    assert added.returncode == 0 and "added from" in added.stdout, added.stderr
    second = retrain(ws, 0)
    assert "### Quality gate passed" in second and "vs champion" in second
    assert aliases(ws) == {CHAMPION: "2", PREVIOUS: "1"}
    assert "mlflow_run_id: " in second and "model_version: 2" in second
    outputs = (ws.root / "outputs.txt").read_text()
    assert "model_version=2\n" in outputs and "gate=passed\n" in outputs
    assert (ws.root / "summary.md").read_text().count("### Quality gate") == 2     # one per gate: nothing new, passed

    assert ws.ticketsim("pairs", "add", str(ws.shuffled)).returncode == 0
    third = retrain(ws, 1)
    assert "### Quality gate FAILED" in third and "**worse**" in third
    assert aliases(ws) == {CHAMPION: "2", PREVIOUS: "1"}                  # the champion stays
    client, model = registry(ws)
    assert client.get_model_version(model, "3").tags["gate"] == "failed"

    back = ws.ticketsim("rollback")
    assert back.returncode == 0 and "champion is v1 again" in back.stdout
    assert aliases(ws) == {CHAMPION: "1", PREVIOUS: "2"}
    assert any(ws.remote.rglob("*")), "dvc push sent nothing to the remote"


def test_retrain_loop_with_the_standin_stage(tmp_path):
    run_the_loop(make_workspace(tmp_path / "repo"))


def test_the_real_model_learns_from_true_labels_and_unlearns_from_shuffled_ones_so_the_gate_tells_them_apart():
    """The retraining loop's premise on the Replicated Siamese LSTM itself (channel h, the cross-level weights of #20-22):
    60 labelled queries, then 70 more with true labels (the gate must pass), then 104 more with shuffled labels (it must
    fail). The gate watches what shuffled labels break: the correlation of the calibrated scores with the gold labels."""
    corpus = generate(SyntheticConfig(n_tickets=150, n_labeled_queries=300, pairs_per_query=6, n_enduser_queries=4,
                                      n_lay_queries=0), seed=13)
    tokens = tokenize_corpus(corpus, make_tokenizer(TextConfig(), corpus))
    train, dev = (corpus.pairs.filter(pl.col("split") == split) for split in ("train", "dev"))
    queries = train["query_id"].unique(maintain_order=True).to_list()
    batches = [train.filter(pl.col("query_id").is_in(ids)) for ids in (queries[:60], queries[60:130], queries[130:])]
    labels = batches[2]["label"].to_list()
    random.Random(7).shuffle(labels)
    batches[2] = batches[2].with_columns(label=pl.Series(labels, dtype=batches[2]["label"].dtype))
    variant = VariantConfig(channels={"h": 1.0}, levels=LEVELS)
    params = Params(seed=0, datasets={"tiny": DatasetConfig("tiny", "synthetic")},
                    siamese=SiameseParams(hidden=20, max_tokens=60, variants={"22": variant}, final="22",
                                          train=TrainConfig(epochs=12, batch_size=32, patience=4)))
    words = lambda vocabulary: np.random.default_rng(1).normal(size=(len(vocabulary), 24))  # noqa: E731

    def dev_figures(labelled: list[pl.DataFrame]) -> dict[str, float]:
        problem = training_inputs(params, tokens, [], words, 4, [variant], pairs=pl.concat([*labelled, dev]), splits=CHOICE_SPLITS)
        scores = train_variant(problem, variant, params.seed, hidden=20, epochs=12).pair_scores()
        figures = evaluate_method(problem.pairs, scores, None, params.evaluation)["dev"]
        return {"dev.rerank.map": figures["rerank"]["map"], "dev.similarity.pearson": figures["similarity"]["pearson"],
                "dev.similarity.mse": figures["similarity"]["mse"]}

    rules = {"dev.similarity.pearson": GateRule("max", 0.03), "dev.similarity.mse": GateRule("min", 0.05)}
    champion, good = dev_figures(batches[:1]), dev_figures(batches[:2])
    shuffled = dev_figures(batches)
    assert compare(champion, good, rules).passed, (champion, good)
    assert not compare(good, shuffled, rules).passed, (good, shuffled)
    assert good["dev.similarity.pearson"] - shuffled["dev.similarity.pearson"] > 0.05
