"""The Siamese network's rows of one dataset: each variant trained, saved and evaluated from one `Prepared` dataset.

What the siamese stage runs for every variant (side by side, ticketsim.side_by_side) and the final stage for the tuned
one. A row's folder holds its trained model (experiment.save_model: weights.pt, F's encoder/), its resumable
checkpoints, calibrator.json, scales.json (each channel it reads divided by), words.json (the embedding rows) and, for
the final model, variant.json (the weights it was trained with, which the bundle reads).
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch

from ticketsim.calibrate import UNCALIBRATED, Calibrator, fit_calibrator
from ticketsim.channels.cache import ChannelVectors
from ticketsim.config import Params, VariantConfig
from ticketsim.data.tables import Corpus
from ticketsim.evaluate.report import BLOCK, block_of, reliability_plot
from ticketsim.evaluate.suite import evaluate_method
from ticketsim.experiment import (
    Prepared,
    build_inputs,
    build_model,
    fit_variant,
    metric_of,
    pair_predictor,
    pool_scores,
    predict_all,
    prepare,
    reads,
    save_model,
)
from ticketsim.text.tokenize import Tokens
from ticketsim.train import History

LOSS_PREFIX = {"labels": "", "selfsup": "selfsup_"}   # MLflow keys: train_loss, dev_loss as every stage; selfsup_* for phase 1


@dataclass(frozen=True, eq=False)
class Dataset:
    """What every row of one dataset reads (a worker's shared copy)."""

    name: str
    params: Params
    data: Prepared

    @property
    def labelled(self) -> bool:     # else tickets only: the final stage trains on mined pairs and evaluates nothing
        return self.params.dataset(self.name).labels


@dataclass(frozen=True)
class Row:
    """One row to train: its name in the results table ("22", "A+L-tuned"), its weights, where its files go."""

    name: str
    variant: VariantConfig
    out: Path
    plots: Path
    final: bool = False         # the final model: writes variant.json for the bundle

    @property
    def cost(self) -> int:
        """Rough training cost, to start the longest first: a fine-tuned encoder, then the LSTM, by its level pairs."""
        weighed = self.variant.weighed
        return 1000 * ("F" in weighed) + 100 * ("h" in weighed) + len(self.variant.levels)


def rows_of(params: Params, dataset: str, out: Path, plots: Path) -> list[Row]:
    """The siamese stage's rows of `dataset`: siamese.variants, and siamese.finetuned's when finetune.datasets names it;
    the costliest first, so that two workers end together."""
    cfg = params.siamese
    names = [*cfg.variants, *(cfg.finetuned if dataset in params.finetune.datasets else ())]
    return sorted((Row(name, cfg.variant(name), out / name, plots / name) for name in names), key=lambda row: -row.cost)


@dataclass(frozen=True)
class Trained:
    results: dict                   # the row's metrics file: method -> split -> protocol -> measure, "training", BLOCK
    histories: dict[str, History]   # per training phase (selfsup, labels): each epoch's losses

    @property
    def figures(self) -> dict:
        """The row's own measures and its training: what its MLflow run logs."""
        return {**next((v for k, v in self.results.items() if k.startswith("#")), {}), "training": self.results["training"]}


def read_prepared(params: Params, corpus: str, tokens: str, word2vec: str, char_blstm: str, channels: list[str],
                  variants: list[VariantConfig], labelled: bool = True) -> Prepared:
    """experiment.prepare over the pipeline's files, with the cached channels the variants read."""
    from ticketsim.channels.char_blstm import load_checkpoint
    from ticketsim.channels.sumemb import word_vectors
    from ticketsim.channels.word2vec import load_vectors

    chars, vectors = load_checkpoint(char_blstm), load_vectors(word2vec)
    wanted = set().union(*(reads(metric_of(v)) for v in variants))
    cached = [v for v in map(ChannelVectors.load, channels) if v.channel in wanted]
    return prepare(params, Tokens.read(tokens), cached, lambda words: word_vectors(words, vectors, chars), chars.dim,
                   variants, Corpus.read(corpus), labelled=labelled)


def train_row(dataset: Dataset, row: Row) -> Trained:
    """Train `row` on the dataset (resuming its checkpoints), save it and, with labels, calibrate and evaluate it."""
    params, data = dataset.params, dataset.data
    cfg = replace(params.siamese, hidden=row.variant.hidden or params.siamese.hidden)
    metric = metric_of(row.variant)
    started = time.perf_counter()
    inputs = build_inputs(data.tokens, [v for v in data.channels if v.channel in reads(metric)], metric, cfg.max_tokens,
                          params.bm25, data.corpus)
    torch.manual_seed(params.seed)
    model = build_model(cfg, data.word_table, data.char_dim, row.variant, data.start)
    row.out.mkdir(parents=True, exist_ok=True)
    histories = fit_variant(model, inputs, data.pairs, row.variant, cfg, params.seed, data.mined, checkpoints=row.out,
                            inputs_digest=data.digest)
    save_model(model, row.variant, row.out)
    model.eval()
    if dataset.labelled:
        calibrator, results = evaluated(model, inputs, data.pairs, metric, params, f"#{row.name}",
                                        row.plots / f"reliability_{row.name}.png", dataset.name)
    else:
        calibrator, results = UNCALIBRATED, {"unevaluated": f"datasets.{dataset.name} has no labelled pairs: no "
                                                            f"figure, no calibration: a search shows the raw similarity g"}
        row.plots.mkdir(parents=True, exist_ok=True)    # no reliability to plot; the folder is the stage's output
    calibrator.save(row.out / "calibrator.json")
    scales = {c: s for c, s in data.scales.items() if c in reads(metric)}
    (row.out / "scales.json").write_text(json.dumps(scales, indent=2) + "\n")
    (row.out / "words.json").write_text(json.dumps(inputs.words) + "\n")  # the embedding rows, for the bundle
    if row.final:   # the bundle is built from these weights, not from siamese.variants
        (row.out / "variant.json").write_text(json.dumps(asdict(row.variant), indent=2) + "\n")
    phases = {phase: {"epochs": len(h.dev_loss), "best_epoch": h.best_epoch, "best_dev_loss": h.best_dev_loss}
              for phase, h in histories.items()}
    training = {**phases.pop("labels", {}), **phases, "seconds": round(time.perf_counter() - started, 1)}
    if row.variant.learn:   # the W and V it ended with
        with torch.no_grad():
            learned = model.metric(metric)
        training["weights"] = {"channels": {c: round(float(w), 4) for c, w in learned.channels.items()},
                               "levels": {k: round(float(w), 4) for k, w in learned.levels.items()}}
    return Trained({**results, "training": training, BLOCK: block_of(row.variant.weighed)}, histories)


def evaluated(model, inputs, pairs, metric, params: Params, method: str, plot: Path, dataset: str) -> tuple[Calibrator, dict]:
    """The calibrator fitted on the train pairs, the method's every measure on every split, and its reliability plot."""
    scores = predict_all(pair_predictor(model, inputs, pairs, metric), pairs.height)
    is_train = (pairs["split"] == "train").to_numpy()
    labels = pairs["label"].to_numpy()
    calibrator = fit_calibrator(scores[is_train], labels[is_train])
    results = {method: evaluate_method(pairs, scores, pool_scores(model, inputs, metric), params.evaluation, calibrator)}
    reliability_plot(calibrator(scores[~is_train]), np.asarray(labels[~is_train]), plot, f"{dataset} {method}: calibrated vs gold")
    return calibrator, results


def log_row(stage, row: Row, trained: Trained, metrics: Path, progress: str = "") -> None:
    """The row's MLflow run (stage.run of a ticketsim.stage.StageRun: the variant as a tag and params, each epoch's
    losses, its figures and files) and its metrics file; one line says what it reached."""
    from ticketsim.tracking import log_metrics  # MLflow: in the stage's process, never in a worker

    tag, cfg = stage.stage.name, stage.params.siamese
    logged = {"variant": row.name, "weights": row.variant,
              "model": {k: v for k, v in asdict(cfg).items() if k not in ("variants", "finetuned")}}
    with stage.run(logged, stage=tag, name=f"{tag}#{row.name}@{stage.dataset}",
                   tags={"variant": row.name, "method": f"#{row.name}"},
                   artifacts=(metrics, row.out / "calibrator.json", row.out / "scales.json", row.plots)):
        for phase, history in trained.histories.items():
            for epoch, losses in enumerate(zip(history.train_loss, history.dev_loss)):
                log_metrics(dict(zip((f"{LOSS_PREFIX[phase]}train_loss", f"{LOSS_PREFIX[phase]}dev_loss"), losses)), step=epoch)
        stage.metrics(trained.results, logged=trained.figures, path=metrics)   # dev.rerank.map, ...: the same keys in every row
    dev_map = trained.figures.get("dev", {}).get("rerank", {}).get("map")
    reached = f"dev rerank MAP {100 * dev_map:.2f}" if dev_map is not None else "not evaluated (no labelled pairs)"
    print(f"{tag}@{stage.dataset}-{row.name}: {reached}, {trained.results['training']['seconds']} s"
          f"{f' ({progress})' if progress else ''}", flush=True)
