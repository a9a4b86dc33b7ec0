"""One comparator on one dataset (ticketsim.training.comparators): it learns more than the mean, is seeded, resumes, reads content words."""
from dataclasses import replace
from itertools import product
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from test_comparators import one_thread  # noqa: F401  (autouse: tiny matrices, one torch thread)

from ticketsim.config import ComparatorsConfig, ConfigError, EvaluationConfig, TextConfig, TrainConfig, load_params
from ticketsim.data.tables import Corpus
from ticketsim.model.comparators import REGISTRY, build_comparator, training_texts
from ticketsim.text.tokenize import make_tokenizer, tokenize_corpus
from ticketsim.training.comparators import compare, title, vocabulary

EQUIPMENT = ("pump", "valve", "motor", "fan", "boiler")
FAULTS = ("leak", "noise", "overheat", "trip")
TINY = ComparatorsConfig(train=TrainConfig(epochs=20, batch_size=12, patience=20),
                         models={"dssm": {"hidden": [16], "out": 8, "shared": True},
                                 "mvlstm": {"hidden": 4, "mlp": 4, "top_k": 3, "dropout": 0.3}})


@pytest.fixture(scope="module")
def dataset():
    """A ticket per (equipment, fault); a query asks for one: its ticket is YES, the same equipment's other fault REL,
    another equipment's other fault NO. Learnable: the more words a ticket shares with the query, the better."""
    combos = list(product(EQUIPMENT, FAULTS))
    tickets = pl.DataFrame({"ticket_id": [f"t{e}-{f}" for e, f in combos],
                            "subject": [f"The {e} shows {f}." for e, f in combos],
                            "description": [f"During the shift the {e} had a {f} again." for e, f in combos],
                            "solution": [f"Fixed the {f} of the {e}." for e, f in combos]})
    queries = pl.DataFrame({"query_id": [f"q{e}-{f}" for e, f in combos], "subject": [f"{e} {f}" for e, f in combos],
                            "description": [f"my {e} has a {f}" for e, f in combos]})
    rows = []
    for i, (e, f) in enumerate(combos):
        split = "dev" if i % 4 == 1 else "train"
        other_fault, other_equipment = FAULTS[(FAULTS.index(f) + 1) % 4], EQUIPMENT[(EQUIPMENT.index(e) + 1) % 5]
        rows += [(f"q{e}-{f}", f"t{e}-{f}", 5, split), (f"q{e}-{f}", f"t{e}-{other_fault}", 3, split),
                 (f"q{e}-{f}", f"t{other_equipment}-{other_fault}", 1, split)]
    pairs = pl.DataFrame(rows, schema={"query_id": pl.String, "ticket_id": pl.String, "label": pl.Int8, "split": pl.String},
                         orient="row")
    corpus = Corpus(tickets, queries, pairs)
    return corpus, tokenize_corpus(corpus, make_tokenizer(TextConfig(), corpus), progress=False)


def random_vectors(words):
    return np.random.default_rng(len(words)).normal(size=(len(words), 6)).astype(np.float32)


def test_a_tiny_comparator_learns_more_than_the_mean_and_is_evaluated_with_both_protocols(dataset):
    corpus, tokens = dataset
    done = compare("dssm", TINY, corpus, tokens, random_vectors, seed=0, evaluation=EvaluationConfig())
    training = done.training(seconds=1.23)
    assert set(training) == {"epochs", "best_epoch", "best_dev_loss", "label_variance", "learns", "seconds", "parameters"}
    dev_targets = (corpus.split("dev")["label"].to_numpy() - 1) / 4
    assert training["label_variance"] == pytest.approx(dev_targets.var()) == pytest.approx(done.mean_loss)   # MSE of the mean
    assert training["learns"] and training["best_dev_loss"] < training["label_variance"] / 2
    assert set(done.results) == {"dev"} and set(done.results["dev"]) == {"rerank", "retrieve", "similarity"}
    assert done.results["dev"]["rerank"]["map"] == 1.0          # the YES ticket first for every dev query
    assert done.results["dev"]["retrieve"]["map@10"] > 0.5      # and high in the whole pool of 20 tickets
    assert done.scores.shape == (corpus.pairs.height,) and 1 <= done.calibrator(done.scores).min() <= 5
    assert training["parameters"]["trainable"] > 0 and title("dssm") == "DSSM" and title("dssm-wide") == "dssm-wide"


def test_same_seed_same_scores_and_a_checkpoint_of_the_same_run_is_resumed(dataset, tmp_path):
    corpus, tokens = dataset
    cfg = replace(TINY, train=TrainConfig(epochs=3, batch_size=12, patience=3))
    first = compare("mvlstm", cfg, corpus, tokens, random_vectors, 5, EvaluationConfig(), tmp_path / "checkpoint.pt")
    again = compare("mvlstm", cfg, corpus, tokens, random_vectors, 5, EvaluationConfig())
    assert np.array_equal(first.scores, again.scores) and first.results == again.results
    epochs = []
    resumed = compare("mvlstm", cfg, corpus, tokens, random_vectors, 5, EvaluationConfig(), tmp_path / "checkpoint.pt",
                      on_epoch=lambda epoch, train, dev: epochs.append(epoch))
    assert epochs == [] and np.array_equal(resumed.scores, first.scores)   # all 3 epochs were done: nothing to train
    other = compare("mvlstm", cfg, corpus, tokens, random_vectors, 6, EvaluationConfig(), tmp_path / "checkpoint.pt")
    assert len(other.history.dev_loss) == 3 and not np.array_equal(other.scores, first.scores)   # another seed starts over


def test_the_models_read_content_words_only(dataset):
    corpus, tokens = dataset
    words = vocabulary(tokens, stopwords=True)
    assert {"pump", "leak", "shift"} <= set(words) and not {".", "the", "my", "a"} & set(words)
    assert {".", "the"} <= set(vocabulary(tokens, stopwords=False))


def test_a_model_takes_the_shared_text_lengths_and_its_own_training_values():
    cfg = ComparatorsConfig(models={"hrde": {"hidden": 8, "train": {"lr": 3}}, "rde": {"ticket_tokens": 50}})
    assert cfg.settings("hrde") == {"query_tokens": 40, "ticket_tokens": 200, "hidden": 8}
    assert cfg.settings("rde")["ticket_tokens"] == 50 and cfg.training("rde") == cfg.train
    assert cfg.training("hrde") == replace(cfg.train, lr=3.0)
    with pytest.raises(ConfigError, match=r"comparators.models.bad.train: unknown key\(s\) \['lr_'\]"):
        ComparatorsConfig(models={"bad": {"train": {"lr_": 3}}}).training("bad")


def test_every_comparator_of_params_yaml_builds(dataset):
    corpus, tokens = dataset
    cfg = load_params(Path(__file__).parents[1] / "params.yaml").comparators
    assert {cfg.models[name].get("model", name) for name in cfg.models} == set(REGISTRY)
    words = vocabulary(tokens, cfg.stopwords)
    for name in cfg.models:
        cfg.training(name)
        build_comparator(name, cfg.settings(name), words, random_vectors(words), training_texts(tokens, corpus.split("train")))
