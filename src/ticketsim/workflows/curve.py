"""`ticketsim curve`: the learning curve of ticketsim.training.learning_curve on a workspace's pipeline files, its
table printed, its JSON and PNG written and logged to MLflow (ticketsim.training.curve_report)."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm

from ticketsim.config import load_params
from ticketsim.errors import OK, StepError
from ticketsim.training.curve_report import log, write
from ticketsim.training.learning_curve import SIZES, learning_curve, parse_size, pool_sizes, runnable
from ticketsim.training.select_run import S_ROW, baseline_matrices, load_problem
from ticketsim.training.shift import shifts_of
from ticketsim.training.variant import CHOICE_SPLITS, threads_alone


def curve_command(workspace: Path, dataset: str, variants: list[str], sizes: list[str] | None, seeds: list[int],
                  folds: int | None, extra: list[str], reference: str | None, epochs: int | None, out: Path | None,
                  plot: Path | None, no_mlflow: bool) -> int:
    """CV retrieve MRR@10 and rerank MAP of the trained `variants` on `sizes` judged queries (default SIZES) in `folds`
    folds (default: tune.folds), beside BM25, S's zero-shot row and the label-free variants, with the `extra` splits' MAP
    and the dataset's shift views' (SemEval's later year); each point tested against `reference` (default: the first
    label-free variant, else S's row)."""
    started = time.perf_counter()
    sizes = sizes or SIZES
    for size in sizes:
        parse_size(size)
    params = load_params(workspace / "params.yaml")
    folds = params.tune.folds if folds is None else folds
    problem = load_problem(params, workspace, dataset, variants, {"S"}, splits=(*CHOICE_SPLITS, *extra))
    configurations = {name: params.siamese.variant(name) for name in variants}
    # one model at a time in this process: F on the encoder's threads, the rows' small matrices on siamese.threads
    torch.set_num_threads(threads_alone(params.siamese, *configurations.values()))
    if not any(v.labels for v in configurations.values()):
        raise StepError(f"--variants {' '.join(variants)}: none learns from labels, so there is no curve to draw")
    baselines = {name: matrix for name, matrix in baseline_matrices(problem, params).items() if name in ("BM25", S_ROW)}
    reference = reference or next((n for n, v in configurations.items() if not v.labels), S_ROW)
    run = runnable(sizes, min(pool_sizes(problem, folds, seeds)))[0]
    models = sum(v.labels for v in configurations.values()) * len(run) * len(seeds) * folds
    with tqdm(total=models, desc="curve", unit="model") as bar:
        report = learning_curve(problem, configurations, baselines, sizes, seeds, folds, extra, reference, epochs=epochs,
                                on_model=lambda: bar.update(1), views=shifts_of(problem, params.dataset(dataset).source).views,
                                decides=params.dataset(dataset).protocol)
    report = {"dataset": dataset, "command": " ".join(sys.argv), **report, "seconds": round(time.perf_counter() - started, 1)}
    table = write(report, out, plot)
    print(f"{table}\n\n{report['seconds']:.0f} s")
    if not no_mlflow:
        log(params, report, table, [path for path in (out, plot) if path])
    return OK
