"""Running `ticketsim select` (ticketsim.workflows.select): each configuration cross-validated, trained per seed and
scored under the dataset's shifts, beside untrained baselines, into one SelectReport (ticketsim.training.select_report).

Per configuration (a name of siamese.variants): k-fold cross-validation by query for every seed (fold f scored, the
next one early-stops, the rest train), and a model trained on train and early-stopped on dev per seed (the dev figure).
--baselines adds BM25, channel S's zero-shot row #14 (cosine) and, where the source ships one, its candidate order:
untrained, scored on the same queries and folds. Paired tests: every configuration against the first, and with
--baselines every trained one against each baseline, on each query's CV AP averaged over the seeds. Beside CV, each
configuration's figures under the dataset's shifts (ticketsim.training.shift: the lay split, the later-year view of the
same folds, one train part to the other), and the judgement against the reference (siamese.unlabelled).
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import polars as pl
from tqdm import tqdm

from ticketsim.channels.registry import CHANNELS, cache_path, dvc_stage, word_files
from ticketsim.config import Params, Workspace
from ticketsim.data.tables import LAY
from ticketsim.errors import StepError
from ticketsim.evaluate.baselines import bm25_matrix, channel_matrix, source_order_scores
from ticketsim.evaluate.protocols import ScoreMatrix
from ticketsim.model.branches import reads
from ticketsim.scoring.weights import metric_of
from ticketsim.training.select_report import SelectReport, costing, judged, summary, tests
from ticketsim.training.selection import OWN, RETRIEVED, cross_validate_under, retrieval_run, split_run, with_folds
from ticketsim.training.shift import CROSS_PART, LATER_YEAR, Shifts, cross_part, part_runs
from ticketsim.training.variant import CHOICE_SPLITS, TrainingInputs, train_variant, training_inputs_from_files

S_ROW, S_LEVEL = "S#14 zero-shot (cosine)", "sub+desc-sub+desc+sol"


def choice_run(problem: TrainingInputs, scores: np.ndarray, folds: int, seed: int) -> pl.DataFrame:
    """An untrained model's per_query of the train + dev queries, with the folds cross_validate draws for `seed`."""
    return with_folds(split_run(problem, scores, *CHOICE_SPLITS), folds, seed)


def trained(problem: TrainingInputs, name: str, folds: int, seeds: list[int], cv_seeds: int, epochs: int, bar: tqdm,
            shifts: Shifts) -> dict:
    """Cross-validated for the first cv_seeds seeds (the later-year view of the same folds, the cross-part models),
    trained on train and early-stopped on dev for every seed (the lay split scored by the same models)."""
    variant, started = problem.siamese.variant(name), time.perf_counter()
    if not variant.labels:
        return label_free(problem, variant, folds, seeds, cv_seeds, epochs, bar, started, shifts)
    cv_runs, retrieve_runs, dev_runs, shift_runs = [], [], [], {shift: [] for shift in shifts.names}
    for seed in seeds[:cv_seeds]:
        bar.set_postfix(configuration=name, seed=seed)
        runs = cross_validate_under(problem, variant, shifts.views, folds, seed, epochs=epochs)
        cv_runs.append(runs.pop(OWN))
        retrieve_runs.append(runs.pop(RETRIEVED))
        for shift, run in runs.items():
            shift_runs[shift].append(run)
        if CROSS_PART in shift_runs:
            shift_runs[CROSS_PART].append(cross_part(problem, variant, shifts.parts, seed, epochs=epochs))
        bar.update(folds)
    for seed in seeds:
        bar.set_postfix(configuration=name, seed=seed)
        model = train_variant(problem, variant, seed, problem.siamese.hidden, epochs)
        scores = model.pair_scores()
        dev_runs.append(split_run(problem, scores, "dev"))
        for shift, run in shifts.scored(problem, model, scores).items():
            shift_runs[shift].append(run)
        bar.update(1)
    return (summary(cv_runs, dev_runs, "trained", time.perf_counter() - started, shift_runs, retrieve_runs)
            | costing(variant, problem.params))


def label_free(problem: TrainingInputs, variant, folds: int, seeds: list[int], cv_seeds: int, epochs: int, bar: tqdm,
               started: float, shifts: Shifts) -> dict:
    """A configuration that learns from no label (labels: false): its k models of a seed's cross-validation would be
    the same model, so one per seed scores every query, each counted in the fold that seed draws for it (and under
    each shift: a train part's queries are scored by a model that saw no label of the other part either)."""
    cv_runs, retrieve_runs, dev_runs, shift_runs = [], [], [], {shift: [] for shift in shifts.names}
    for i, seed in enumerate(seeds):
        model = train_variant(problem, variant, seed, problem.siamese.hidden, epochs)
        scores = model.pair_scores()
        dev_runs.append(split_run(problem, scores, "dev"))
        for shift, run in shifts.scored(problem, model, scores).items():
            shift_runs[shift].append(run)
        if i < cv_seeds:
            cv_runs.append(choice_run(problem, scores, folds, seed))
            retrieve_runs.append(with_folds(retrieval_run(model.pool_scores(), problem), folds, seed))
            if shifts.later is not None:
                shift_runs[LATER_YEAR].append(choice_run(shifts.later, model.scores_on(shifts.later), folds, seed))
            if CROSS_PART in shift_runs:
                shift_runs[CROSS_PART].append(part_runs(cv_runs[-1], shifts.parts))
        bar.update(1 + folds * (i < cv_seeds))
    return (summary(cv_runs, dev_runs, "trained", time.perf_counter() - started, shift_runs, retrieve_runs)
            | costing(variant, problem.params))


def untrained(problem: TrainingInputs, scores: np.ndarray, later: np.ndarray | None, folds: int, seeds: list[int],
              shifts: Shifts, matrix: ScoreMatrix | None = None) -> dict:
    """The same figures for pair scores that need no training (`later`: under the later-year view, where it has any;
    `matrix`: every query against every ticket, where the method can search, as the source's order cannot): the folds of
    each seed, one dev run, one run of each shift."""
    started, cv_runs = time.perf_counter(), [choice_run(problem, scores, folds, seed) for seed in seeds]
    retrieve_runs = [with_folds(retrieval_run(matrix, problem), folds, seed) for seed in seeds] if matrix is not None else []
    shift_runs = {LAY: [split_run(problem, scores, LAY)] if LAY in shifts.names else [],
                  LATER_YEAR: [split_run(shifts.later, later, *CHOICE_SPLITS)] if later is not None else [],
                  CROSS_PART: [part_runs(cv_runs[0], shifts.parts)] if CROSS_PART in shifts.names and cv_runs else []}
    return summary(cv_runs, [split_run(problem, scores, "dev")], "untrained", time.perf_counter() - started, shift_runs,
                   retrieve_runs)


def baseline_matrices(problem: TrainingInputs, params) -> dict[str, ScoreMatrix]:
    """Every query against every ticket under the untrained methods that search: BM25 and S's row #14."""
    matrices = {"BM25": bm25_matrix(problem.tokens, params.bm25)}
    for vectors in problem.channels:
        if vectors.channel == "S":     # divided by its scale in the problem: cosine and ranks do not change
            matrices[S_ROW] = channel_matrix(vectors, S_LEVEL, "cosine")
    return matrices


def baseline_scores(problem: TrainingInputs, params) -> dict[str, np.ndarray]:
    """Pair scores of the untrained methods: baseline_matrices' and the source's order (when it ships one)."""
    scores = {name: matrix.pair_scores(problem.pairs) for name, matrix in baseline_matrices(problem, params).items()}
    order = source_order_scores(problem.pairs)
    if order is not None:
        scores["source order"] = order
    return scores


def load_problem(params: Params, workspace: Path, dataset: str, names: list[str], channels: set[str] = frozenset(),
                 splits: tuple[str, ...] = CHOICE_SPLITS) -> TrainingInputs:
    """The TrainingInputs of `dataset` from the workspace's tuner files (the same inputs: config.workspace), with the
    cached channels the named variants read and `channels`; one-line errors for an unknown name or a missing cache."""
    params.dataset(dataset)
    every = {**params.siamese.variants, **params.siamese.finetuned}
    unknown = [name for name in names if name not in every]
    if unknown:
        raise StepError(f"--variants {' '.join(unknown)}: not in siamese.variants or siamese.finetuned (have: {', '.join(every)})")
    files = Workspace(dataset, workspace)
    needed = set().union(channels, *(reads(metric_of(every[name])) for name in names)) & set(CHANNELS)
    missing = [str(cache_path(files.channels, c)) for c in sorted(needed) if not cache_path(files.channels, c).is_file()]
    missing += [str(path) for path in (files.corpus, files.tokens, *word_files(files.channels)) if not Path(path).exists()]
    if missing:
        stages = " ".join(dvc_stage(dataset, c) for c in sorted(needed | {"E"}))    # E: the word table
        raise StepError(f"{', '.join(missing)} missing: run `dvc repro {stages}` in {workspace} first")
    return training_inputs_from_files(params, str(files.corpus), str(files.tokens), str(files.channels), [every[name] for name in names],
                         splits=splits, also=CHANNELS)


def select(problem: TrainingInputs, variants: list[str], shifts: Shifts, folds: int, seeds: list[int], cv_seeds: int,
           epochs: int | None, baselines: bool, resamples: int, decides: str = "retrieve", *, dataset: str,
           command: str = "", workspace: str | None = None, started: float | None = None) -> SelectReport:
    """The report of `ticketsim select` on the TrainingInputs of `dataset`: every configuration cross-validated for the first
    cv_seeds seeds and trained per seed, scored under `shifts`, the baselines beside them, the paired tests and the
    judgement against the zero-shot reference (siamese.unlabelled); its seconds since `started` (a perf_counter; default:
    now), `command` and `workspace` as the caller ran it."""
    started = time.perf_counter() if started is None else started
    params = problem.params
    results = {}
    with tqdm(total=len(variants) * (cv_seeds * folds + len(seeds)), desc="select", unit="model") as bar:
        for name in variants:
            results[name] = trained(problem, name, folds, seeds, cv_seeds, epochs, bar, shifts)
    scores = baseline_scores(problem, params) if baselines else {}
    matrices = baseline_matrices(problem, params) if baselines else {}
    later = baseline_scores(shifts.later, params) if baselines and shifts.later is not None else {}
    for name, pair_scores in scores.items():
        results[name] = untrained(problem, pair_scores, later.get(name), folds, seeds[:cv_seeds], shifts, matrices.get(name))
    return SelectReport(
        command=command, queries=problem.choice_pairs["query_id"].n_unique(),
        folds=folds, seeds=seeds, cv_seeds=seeds[:cv_seeds], epochs=epochs, compared=len(variants), decides=decides,
        configurations=results, tests=tests(results, variants, list(scores), resamples, decides) if cv_seeds else [],
        judgement=judged(results, variants, params.siamese.unlabelled, params.siamese.final, resamples, decides)
        if cv_seeds else None, dataset=dataset, workspace=workspace, seconds=round(time.perf_counter() - started, 1))
