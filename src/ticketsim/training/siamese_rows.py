"""The Siamese network's rows of one dataset: each variant trained (training.variant.train_variant), saved, calibrated
and evaluated from one dataset's `TrainingInputs`, on the lay split too where it has one and, for a threaded source, as a
later year's candidates come (training.shift): a row's shift figures beside its dev and test ones.

What the siamese stage runs for every variant and seed of evaluation.seeds (side by side, ticketsim.side_by_side; a
row's figures are their mean, with their spread: evaluate.report.over_seeds) and the final stage for the tuned one. A
row's folder is a trained model's folder (ticketsim.model.saved names its files) with its resumable checkpoints and its
calibrator beside it.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from ticketsim.config import Params, VariantConfig
from ticketsim.evaluate.calibrate import CALIBRATOR, UNCALIBRATED, Calibrator, fit_calibrator
from ticketsim.evaluate.report import BLOCK, QUERY_AP, block_of, headline, over_seeds, reliability_plot
from ticketsim.evaluate.suite import evaluate_method, query_ap
from ticketsim.model.branches import TOWERS
from ticketsim.model.saved import SCALES, write_variant
from ticketsim.training.shift import THREADED, later_year_results
from ticketsim.training.trainer import History, seed_folder
from ticketsim.training.variant import TrainedVariant, TrainingInputs, train_variant


def loss_prefix(phase: str) -> str:
    """MLflow keys of a phase's losses: train_loss, dev_loss for the labels (as every stage), <phase>_* for the others
    (selfsup_ for phase 1, fuse_ for L fused after a contrastive phase)."""
    return "" if phase == "labels" else f"{phase}_"


@dataclass(frozen=True)
class Row:
    """One row to train with one seed: its name in the results table ("22", "A+L-tuned"), its weights, where its files go."""

    name: str
    variant: VariantConfig
    dataset: str
    out: Path
    plots: Path | None          # None: no reliability plot (a row's other seeds)
    seed: int
    final: bool = False         # the final model: writes variant.json for the bundle

    @property
    def cost(self) -> int:
        """Rough training cost, to start the longest first: a fine-tuned encoder (F, Fq), then the LSTM, by its level pairs."""
        weighed = self.variant.weighed
        return 1000 * bool(weighed & set(TOWERS)) + 100 * ("h" in weighed) + len(self.variant.levels)


def rows_of(params: Params, dataset: str, out: Path, plots: Path) -> list[Row]:
    """The siamese stage's rows of `dataset`, each once per seed of evaluation.seeds: siamese.variants, and
    siamese.finetuned's when finetune.datasets names it; the costliest first, so that two workers end together. The
    first seed's row has its reliability plot; each seed's model has its folder (trainer.seed_folder)."""
    cfg, seeds = params.siamese, params.evaluation.seeds
    names = [*cfg.variants, *(cfg.finetuned if dataset in params.finetune.datasets else ())]
    return sorted((Row(name, cfg.variant(name), dataset, seed_folder(out / name, seed, seeds),
                       plots / name if seed == seeds[0] else None, seed) for name in names for seed in seeds),
                  key=lambda row: -row.cost)


@dataclass(frozen=True)
class Trained:
    results: dict                   # the row's metrics file: method -> split -> protocol -> measure, "training", BLOCK
    histories: dict[str, History]   # per training phase (selfsup, labels): each epoch's losses


def over_row_seeds(runs: Sequence[tuple[Row, Trained]], seeds: Sequence[int]) -> tuple[Row, Trained]:
    """A row trained once per seed as one: the first seed's Row and epoch losses, over_seeds of the results."""
    by_seed = {row.seed: (row, trained) for row, trained in runs}
    row, trained = by_seed[seeds[0]]
    return row, Trained(over_seeds({seed: by_seed[seed][1].results for seed in seeds}), trained.histories)


def train_row(data: TrainingInputs, row: Row) -> Trained:
    """Train `row` on the dataset (resuming its checkpoints), save it and, with labels, calibrate and evaluate it."""
    started = time.perf_counter()
    trained = train_variant(data, row.variant, row.seed, checkpoints=row.out)
    trained.save(row.out)
    if data.labelled:
        calibrator, results = evaluated(trained, data.params, f"#{row.name}",
                                        row.plots and row.plots / f"reliability_{row.name}.png", row.dataset)
        if data.params.dataset(row.dataset).source in THREADED:    # beside dev: as a later year's candidates come
            results[f"#{row.name}"] |= later_year_results(trained, data)
    else:
        calibrator, results = UNCALIBRATED, {"unevaluated": f"datasets.{row.dataset} has no labelled pairs: no "
                                                            f"figure, no calibration: a search shows the raw similarity g"}
        if row.plots:   # no reliability to plot; the folder is the stage's output
            row.plots.mkdir(parents=True, exist_ok=True)
    calibrator.save(row.out / CALIBRATOR)
    if row.final:   # the bundle is built from these weights, not from siamese.variants
        write_variant(row.out, row.variant)
    phases = {phase: {"epochs": len(h.dev_loss), "best_epoch": h.best_epoch, "best_dev_loss": h.best_dev_loss}
              for phase, h in trained.histories.items()}
    training = {**phases.pop("labels", {}), **phases, "seconds": round(time.perf_counter() - started, 1)}
    if row.variant.learn:   # the W and V it ended with
        with torch.no_grad():
            learned = trained.model.metric(trained.metric)
        training["weights"] = {"channels": {c: round(float(w), 4) for c, w in learned.channels.items()},
                               "levels": {k: round(float(w), 4) for k, w in learned.levels.items()}}
    return Trained({**results, "training": training, BLOCK: block_of(row.variant.weighed)}, trained.histories)


def evaluated(trained: TrainedVariant, params: Params, method: str, plot: Path | None, dataset: str) -> tuple[Calibrator, dict]:
    """The calibrator fitted on the train pairs, the method's every measure and each query's AP on every split, and
    its reliability plot (unless `plot` is None)."""
    pairs, scores = trained.pairs, trained.pair_scores()
    is_train = (pairs["split"] == "train").to_numpy()
    labels = pairs["label"].to_numpy()
    calibrator = fit_calibrator(scores[is_train], labels[is_train])
    results = {method: evaluate_method(pairs, scores, trained.pool_scores(), params.evaluation, calibrator),
               QUERY_AP: query_ap(pairs, scores, params.evaluation.depth)}
    if plot:
        reliability_plot(calibrator(scores[~is_train]), np.asarray(labels[~is_train]), plot,
                         f"{dataset} {method}: calibrated vs gold")
    return calibrator, results


def log_row(stage, row: Row, trained: Trained, metrics: Path, progress: str = "") -> str:
    """The row's MLflow run (stage.run of a ticketsim.stage.StageRun: the variant as a tag and params, each epoch's
    losses (of its first seed), its figures (over seeds: their mean, `sd.*` their standard deviation, `seed.*` each
    seed's at step = the seed) and files) and its metrics file. Returns the line saying what it reached, for the stage
    script to print."""
    from ticketsim.lifecycle.tracking import log_metrics  # MLflow: in the stage's process, never in a worker

    tag, cfg = stage.stage.name, stage.params.siamese
    logged = {"variant": row.name, "weights": row.variant,
              "model": {k: v for k, v in asdict(cfg).items() if k not in ("variants", "finetuned")}}
    with stage.run(logged, stage=tag, name=f"{tag}#{row.name}@{stage.dataset}",
                   tags={"variant": row.name, "method": f"#{row.name}"},
                   artifacts=(metrics, row.out / CALIBRATOR, row.out / SCALES, row.plots)):
        for phase, history in trained.histories.items():
            for epoch, losses in enumerate(zip(history.train_loss, history.dev_loss)):
                log_metrics(dict(zip((f"{loss_prefix(phase)}train_loss", f"{loss_prefix(phase)}dev_loss"), losses)), step=epoch)
        stage.method_metrics(trained.results, f"#{row.name}", metrics)   # dev.rerank.map, ...: the same keys in every row
    return (f"{tag}@{stage.dataset}-{row.name}: {headline(trained.results, f'#{row.name}')}, "
            f"{trained.results['training']['seconds']} s{f' ({progress})' if progress else ''}")
