"""One comparator (ticketsim.model.comparators) on one dataset: its texts and word vectors, training with the one trainer,
pair and pool scores, calibration on train, both evaluation protocols, and whether it learnt more than the mean; and
the comparators stage's job per model and seed (compare_saved: its files, side by side with the others)."""
from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import torch

from ticketsim.config import ComparatorsConfig, EvaluationConfig
from ticketsim.data.tables import Corpus
from ticketsim.evaluate.calibrate import CALIBRATOR, Calibrator, fit_calibrator
from ticketsim.evaluate.protocols import ScoreMatrix
from ticketsim.evaluate.report import BLOCK, QUERY_AP, reliability_plot
from ticketsim.evaluate.suite import EVALUATION_SPLITS, evaluate_method, query_ap
from ticketsim.model.comparators import (
    TITLES,
    Comparator,
    build_comparator,
    pair_predictor,
    parameter_count,
    query_groups,
    reads_word_vectors,
    score_pairs,
    score_pool,
    training_texts,
)
from ticketsim.model.losses import loss_of
from ticketsim.text.stopwords import is_topical
from ticketsim.text.tokenize import Tokens
from ticketsim.training.trainer import History, fit, rescale, seed_folder
from ticketsim.training.variant import pairs_digest

WordVectors = Callable[[Sequence[str]], np.ndarray]   # words -> their (len(words), dim) pretrained vectors
POINTWISE = ("mse", "bce")                           # the other losses rank each query's candidates


def title(name: str) -> str:
    """The comparator's method name in the results table and MLflow: 'MV-LSTM' for mvlstm."""
    return TITLES.get(name, name)


def vocabulary(tokens: Tokens, stopwords: bool) -> tuple[str, ...]:
    """The words the models read (rows 1.. of a word embedding), most frequent first; a text's other tokens are dropped.

    Without stopwords and punctuation: every query and ticket shares 'the', 'on' and '.', so their exact matches fill an
    interaction model's k largest matches for every pair alike (MV-LSTM's dev loss stayed at the label variance).
    """
    words = tokens.vocabulary()["token"]
    return tuple(w for w in words if is_topical(w)) if stopwords else tuple(words)


@dataclass(frozen=True)
class Comparison:
    name: str
    model: Comparator
    history: History
    scores: np.ndarray               # the raw score of every labelled pair, in the corpus's order
    calibrator: Calibrator
    results: dict[str, dict[str, dict[str, float]]]   # evaluate_method's: split -> protocol -> measure
    label_variance: float            # of the rescaled dev targets: the MSE of always predicting their mean
    mean_loss: float                 # the configured loss of always predicting that mean (under MSE: label_variance)

    def training(self, seconds: float) -> dict[str, Any]:
        """The metrics file's "training" record; `learns`: the best dev loss beats always predicting the mean."""
        return {"epochs": len(self.history.dev_loss), "best_epoch": self.history.best_epoch,
                "best_dev_loss": self.history.best_dev_loss, "label_variance": self.label_variance,
                "learns": self.history.best_dev_loss < self.mean_loss, "seconds": round(seconds, 1),
                "parameters": parameter_count(self.model)}


def compare(name: str, cfg: ComparatorsConfig, corpus: Corpus, tokens: Tokens, word_vectors: WordVectors, seed: int,
            evaluation: EvaluationConfig, checkpoint: Path | None = None,
            on_epoch: Callable[[int, float, float], None] | None = None) -> Comparison:
    """Train comparator `name` (a key of cfg.models) on the train pairs, early-stopped on dev, and evaluate it.

    word_vectors is called only for a model that embeds words, so the letter-trigram models never load word2vec.
    checkpoint: resumed by the trainer when its model, training and data are the same (see ticketsim.training.trainer.fit).
    """
    pairs, words, settings = corpus.pairs, vocabulary(tokens, cfg.stopwords), cfg.settings(name)
    torch.manual_seed(seed)
    model = build_comparator(name, settings, words, word_vectors(words) if reads_word_vectors(name, settings) else None,
                             training_texts(tokens, corpus.split("train")))
    predict = pair_predictor(model, tokens, pairs, words)
    targets = rescale(torch.tensor(pairs["label"].to_list()))
    split = pairs["split"].to_numpy()
    train_rows, dev_rows = (torch.from_numpy(np.flatnonzero(split == part)) for part in ("train", "dev"))
    loss = loss_of(cfg.loss, **({"margin": cfg.margin} if cfg.loss == "pairwise" else {}))
    groups = None if cfg.loss in POINTWISE else query_groups(pairs)
    train = cfg.training(name)
    meta = {"model_config": asdict(model.cfg), "train_config": asdict(train), "loss": cfg.loss, "margin": cfg.margin,
            "words": hashlib.sha256("\n".join(words).encode()).hexdigest(), "seed": seed, "data": pairs_digest(pairs)}
    history = fit(model, predict, targets, train_rows, dev_rows, train, seed, checkpoint, meta, on_epoch, loss=loss, groups=groups)

    scores = score_pairs(model, tokens, words, pairs)
    is_train = split == "train"
    calibrator = fit_calibrator(scores[is_train], pairs["label"].to_numpy()[is_train])
    # the retrieve protocol ranks the pool for the evaluation splits' queries only
    queries = tuple(pairs.filter(pl.col("split").is_in(EVALUATION_SPLITS))["query_id"].unique(maintain_order=True))
    tickets = tuple(tokens.tickets["ticket_id"])
    matrix = ScoreMatrix(queries, tickets, score_pool(model, tokens, words, queries, tickets))
    dev = targets[dev_rows]
    mean = torch.full_like(dev, dev.mean().item())
    return Comparison(name, model, history, scores, calibrator, evaluate_method(pairs, scores, matrix, evaluation, calibrator),
                      dev.var(unbiased=False).item(), loss(mean, dev, None if groups is None else groups[dev_rows]).item())


@dataclass(frozen=True, eq=False)
class Comparators:
    """What every comparator of one dataset reads, and where their files go (a worker's shared copy)."""

    dataset: str
    cfg: ComparatorsConfig
    corpus: Corpus
    tokens: Tokens
    word2vec: str                   # the embedding stage's word vectors and char-BLSTM checkpoint: loaded by
    char_blstm: str                 # the word-level models only
    evaluation: EvaluationConfig    # its seeds: each model is trained once per seed
    out: Path                       # <out>/<model>/: checkpoint.pt, calibrator.json (other seeds: in seed-<n>/ there)
    plots: Path                     # <plots>/<model>/reliability_<model>.png (of the first seed)


@dataclass(frozen=True)
class Compared:
    results: dict                   # the model's metrics file: {title: split -> protocol -> measure, "training", BLOCK,
                                    # QUERY_AP}
    history: History


def pretrained_vectors(word2vec: str, char_blstm: str, words: Sequence[str]) -> np.ndarray:
    from ticketsim.channels.char_blstm import load_checkpoint
    from ticketsim.channels.sumemb import word_vectors
    from ticketsim.channels.word2vec import load_vectors

    return word_vectors(list(words), load_vectors(word2vec), load_checkpoint(char_blstm))


def compare_saved(shared: Comparators, job: tuple[str, int]) -> Compared:
    """compare() of model `name` with `seed` (job), resuming its checkpoint; its calibrator and (first seed) its
    reliability plot written."""
    (name, seed), seeds, pairs = job, shared.evaluation.seeds, shared.corpus.pairs
    started, out, method = time.perf_counter(), seed_folder(shared.out / name, seed, seeds), title(name)
    out.mkdir(parents=True, exist_ok=True)
    done = compare(name, shared.cfg, shared.corpus, shared.tokens, partial(pretrained_vectors, shared.word2vec, shared.char_blstm),
                   seed, shared.evaluation, out / "checkpoint.pt")
    done.calibrator.save(out / CALIBRATOR)
    if seed == seeds[0]:
        held_out = (pairs["split"] != "train").to_numpy()
        reliability_plot(done.calibrator(done.scores[held_out]), pairs["label"].to_numpy()[held_out],
                         shared.plots / name / f"reliability_{name}.png", f"{shared.dataset} {method}: calibrated vs gold")
    return Compared({method: done.results, QUERY_AP: query_ap(pairs, done.scores, shared.evaluation.depth),
                     "training": done.training(time.perf_counter() - started), BLOCK: "comparators"}, done.history)
