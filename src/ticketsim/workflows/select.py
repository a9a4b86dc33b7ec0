"""`ticketsim select`: configurations chosen honestly on a workspace's pipeline files, the report of
ticketsim.training.select_run (a SelectReport) printed, written and logged to MLflow; or several such reports merged
into one (SelectReport.merge)."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import mlflow
import torch

from ticketsim.config import Params, load_params
from ticketsim.data.tables import LAY
from ticketsim.errors import OK, StepError
from ticketsim.lifecycle.tracking import log_methods, stage_run
from ticketsim.model.branches import reads
from ticketsim.scoring.weights import metric_of
from ticketsim.training.select_render import as_json, markdown, method_figures, write
from ticketsim.training.select_report import SelectReport
from ticketsim.training.select_run import load_problem, select
from ticketsim.training.shift import THREADED, shifts_of
from ticketsim.training.variant import CHOICE_SPLITS, threads_alone


def told(report: SelectReport, out: Path | None, params: Params | None) -> None:
    """The report's table and its seconds printed, its JSON written to `out` where one is given, and (with `params`) a
    `select` run in their tracking experiment: the table and the JSON, one child run per configuration with its CV
    figures (retrieve and rerank) and each shift's, the choice as a tag."""
    table = markdown(report)
    print(table)
    print(f"\n{report.seconds:.0f} s")
    write(report, out)
    if params is not None:
        judgement = report.judgement or {}
        logged = {"configurations": " ".join(report.configurations), "folds": report.folds,
                  "seeds": " ".join(map(str, report.cv_seeds)), "decides": report.decides}
        with stage_run(params.tracking, "select", report.dataset, logged,
                       tags={"choice": judgement.get("choice") or judgement.get("reference", "")}):
            mlflow.log_text(table, "select.md")
            mlflow.log_dict(as_json(report), "select.json")
            log_methods(method_figures(report))


def select_command(workspace: Path, dataset: str | None, variants: list[str] | None, folds: int | None,
                   seeds: list[int] | None, cv_seeds: int | None, epochs: int | None, baselines: bool, resamples: int,
                   out: Path | None, cross: list[str] | None, merge: list[Path] | None, no_mlflow: bool = False) -> int:
    """Every configuration of `variants` (and siamese.unlabelled, the reference) cross-validated in `folds` folds
    (default: tune.folds) on the first `cv_seeds` of `seeds` (default: evaluation.seeds), trained per seed, scored under
    the dataset's shifts (and `cross`: another workspace's dataset); or, with `merge`, no training: one report of those
    reports."""
    if merge:     # a configuration of a report that predates its cost's record: priced by the workspace's params, if any
        params = load_params(workspace / "params.yaml") if (workspace / "params.yaml").is_file() else None
        told(SelectReport.merge(merge, resamples, params), out, None)   # the runs merged were logged as they ran
        return OK
    if not dataset or not variants:
        raise StepError("--dataset and --variants are required (or --merge)")
    started = time.perf_counter()
    params = load_params(workspace / "params.yaml").for_dataset(dataset)    # siamese.final: the dataset's
    variants = list(dict.fromkeys([*variants, params.siamese.unlabelled]))    # the reference is always compared
    folds = params.tune.folds if folds is None else folds
    seeds = list(params.evaluation.seeds) if seeds is None else seeds
    # one model at a time in this process: F on the encoder's threads, the rows' small matrices on siamese.threads
    torch.set_num_threads(threads_alone(params.siamese, *map(params.siamese.variant, variants)))
    # The lay split too: scored by the models trained on train (the tuner and the folds never read it).
    problem = load_problem(params, workspace, dataset, variants, {"S"} if baselines else set(), splits=(*CHOICE_SPLITS, LAY))
    cfg = params.dataset(dataset)
    if cfg.source in THREADED:
        from ticketsim.data.semeval import train_parts  # lxml: only for SemEval

    other = None
    if cross:      # another dataset's train + dev queries, scored by each seed's model of this one: its channels only
        other_workspace, name = Path(cross[0]), cross[1]     # (no branch start, no mining: nothing trains there)
        read = set().union(*(reads(metric_of(params.siamese.variant(v))) for v in variants))
        other = load_problem(load_params(other_workspace / "params.yaml"), other_workspace, name, [], read)
    shifts = shifts_of(problem, cfg.source, train_parts(cfg) if cfg.source in THREADED else {}, other)
    cv_seeds = len(seeds) if cv_seeds is None else cv_seeds
    report = select(problem, variants, shifts, folds, seeds, cv_seeds, epochs, baselines, resamples, cfg.protocol,
                    dataset=dataset, command=" ".join(sys.argv), workspace=str(workspace.resolve()), started=started)
    told(report, out, None if no_mlflow else params)
    return OK
