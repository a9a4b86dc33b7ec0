"""The tuner: an Optuna study of the final variant's channel weights W, level weights V and LSTM size, on train and dev
pairs only.

The default objective, `cv`, is honest about the choice and about the user's job: the train + dev queries are dealt into
tune.folds folds, a model per fold is trained once on the others, and a trial re-weights each fold model's cached vectors
of its own fold's queries (ticketsim.tuning.rescore): with `cv_retrieve` (the dataset's protocol retrieve) each held-out
query searches every ticket of the knowledge base and the trial scores MRR@10 over all of them, with `cv_map` (protocol
rerank: SemEval) the rerank MAP of their judged candidates; each query scored by a model that never saw it. Trial 0 is
the W and V those models learned. The dev objectives (`map`, `mse`) score one model on the ~50 dev queries a choice overfits.

Two modes for the dev objectives. `retrain` trains a model per trial (W and V shape what h learns) and reports the dev
objective every epoch, so the pruner stops bad trials early. `rescore` trains one model with the final variant's weights, keeps
every component's h (and E, T) as rescore vectors, and a trial only recomputes g with new W and V: seconds per trial, exact as an
evaluation of those weights on that h, an approximation of what retraining with them would give.
A study lives in an RDB storage (SQLite by default, PostgreSQL to share it between machines): it resumes after a
kill, and several workers can run its trials at once (ticketsim.tuning.study); the tuned variant's file and the study's plots
are ticketsim.tuning.output's.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import socket
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import optuna
import torch

from ticketsim.config import Params, TuneConfig, VariantConfig
from ticketsim.evaluate.suite import evaluate_method
from ticketsim.lifecycle.tracking import child_run, log_artifacts, log_dict, log_metrics, set_tags, stage_run
from ticketsim.model.saved import WEIGHTS
from ticketsim.side_by_side import reaped, spawn
from ticketsim.training.variant import (
    CHOICE_SPLITS,
    TrainingInputs,
    inputs_digest,
    pairs_digest,
    threads_alone,
    train_variant,
    training_inputs_from_files,
)
from ticketsim.tuning.output import write_plots, write_tuned
from ticketsim.tuning.rescore import cv_map, cv_retrieve, fold_models, rescore, space_metric, with_rescore_vectors
from ticketsim.tuning.study import CLAIMED, FINISHED, Surplus, create_or_load, fail_stale_trials, finished, open_study, surplus

POLL_SECONDS = 0.5          # how often a worker waiting for the others' last trials looks again


def tuning_inputs(params: Params, corpus: str, tokens: str, channels: str) -> TrainingInputs:
    """What every trial reads, from the pipeline's files: the final variant's inputs over train and dev pairs only (no
    test pair, no test query's tokens), with the cached channels the study's space weighs."""
    final = params.siamese.variant(params.siamese.final)
    return training_inputs_from_files(params, corpus, tokens, channels, [final], splits=CHOICE_SPLITS,
                         also=space_metric(params.tune, final).channels)


# A trial's metric keys: dev figures as every siamese and final run logs them (a trial and a variant compare in one
# column), the CV figures under their own keys (no variant run has one).
LOGGED = {"map": "dev.rerank.map", "mse": "dev.similarity.mse", "cv_map": "cv.rerank.map", "cv_retrieve": "cv.retrieve.mrr@10",
          "cv_retrieve_map": "cv.retrieve.map@10", "cv_retrieve_ndcg": "cv.retrieve.ndcg@10"}


def dev_measures(problem: TrainingInputs, scores: np.ndarray) -> dict[str, float]:
    """Dev rerank MAP and the dev MSE of scores calibrated on train (the retrieve protocol is left to the stages)."""
    dev = evaluate_method(problem.pairs, scores, None, problem.params.evaluation)["dev"]
    return {"map": dev["rerank"]["map"], "mse": dev["similarity"]["mse"]}


def suggest(trial: optuna.Trial, cfg: TuneConfig, final: VariantConfig, default_hidden: int) -> tuple[VariantConfig, int]:
    """One value per param, named W_<channel>, V_<level>, hidden: the columns of the MLflow and Optuna comparisons."""
    space = cfg.space(final)

    def pick(name: str, values: tuple[float, ...]) -> float:
        if cfg.sampler == "grid":
            return trial.suggest_categorical(name, list(values))
        return trial.suggest_float(name, *values)

    channels = {c: pick(f"W_{c}", values) for c, values in space.channels.items()}
    levels = {level: pick(f"V_{level}", values) for level, values in space.levels.items()}
    hidden = trial.suggest_categorical("hidden", list(cfg.hidden)) if cfg.mode == "retrain" else default_hidden
    return replace(final, channels=channels, levels=levels), hidden


def trial_params(variant: VariantConfig, hidden: int, cfg: TuneConfig) -> dict[str, float]:
    names = {f"W_{c}": w for c, w in variant.channels.items()} | {f"V_{k}": w for k, w in variant.levels.items()}
    return names | ({"hidden": hidden} if cfg.mode == "retrain" else {})


def tuned_from(params: dict[str, float], problem: TrainingInputs) -> VariantConfig:
    """The final variant with a trial's weights and LSTM size."""
    return replace(problem.final, channels={k[2:]: v for k, v in params.items() if k.startswith("W_")},
                   levels={k[2:]: v for k, v in params.items() if k.startswith("V_")},
                   hidden=int(params.get("hidden", problem.siamese.hidden)))


def evaluate_trial(problem: TrainingInputs, cfg: TuneConfig, variant: VariantConfig, hidden: int,
                   report: Callable[[int, float], None] | None = None) -> dict[str, float]:
    """The measures of one weighting: its CV retrieval (and rerank MAP beside it) or CV MAP on the fold models (`problem`
    from trial_problem), or dev MAP and MSE rescored on the rescore vectors or of a model trained with it."""
    if cfg.objective == "cv_retrieve":
        return cv_retrieve(problem, variant)
    if cfg.objective == "cv_map":
        return {"cv_map": cv_map(problem, variant)}
    if cfg.mode == "rescore":
        return dev_measures(problem, rescore(problem, variant))
    def on_epoch(phase: str, epoch: int, scores: Callable[[], np.ndarray]) -> None:
        if phase == "labels":
            report(epoch, dev_measures(problem, scores())[cfg.objective])

    trained = train_variant(problem, variant, problem.params.seed, hidden, cfg.epochs, on_epoch=on_epoch if report else None)
    return dev_measures(problem, trained.pair_scores())


def objective(problem: TrainingInputs, cfg: TuneConfig, tracking, parent_run_id: str | None) -> Callable[[optuna.Trial], float]:
    def run_trial(trial: optuna.Trial) -> float:
        trial.set_user_attr("worker", f"{socket.gethostname()}:{os.getpid()}")   # also while running: who holds it
        if surplus(trial, cfg.n_trials):
            raise Surplus(f"trial {trial.number}: {cfg.n_trials} earlier trials are finished, running or queued")
        variant, hidden = suggest(trial, cfg, problem.final, problem.siamese.hidden)

        def report(epoch: int, value: float) -> None:
            trial.report(value, epoch)
            if parent_run_id:
                log_metrics({"dev_objective": value}, step=epoch)
            if trial.should_prune():
                raise optuna.TrialPruned(f"epoch {epoch}: dev {cfg.objective} {value:.4f}")

        if not parent_run_id:
            measures = evaluate_trial(problem, cfg, variant, hidden, report)
        else:
            with child_run(tracking, parent_run_id, f"trial {trial.number}", trial.params, {"trial": str(trial.number)}):
                try:
                    measures = evaluate_trial(problem, cfg, variant, hidden, report)
                except optuna.TrialPruned:
                    set_tags({"trial_state": "pruned"})
                    raise
                set_tags({"trial_state": "complete"})
                log_metrics({LOGGED[k]: v for k, v in measures.items()})
        trial.set_user_attr("measures", measures)
        return measures[cfg.objective]

    return run_trial


def study_name(cfg: TuneConfig, dataset: str, problem: TrainingInputs, base_model: str | Path | None = None) -> str:
    """Same space, same inputs -> same study (so a killed one resumes); any change of either -> a new study."""
    whole = replace(cfg, ranges=cfg.full_ranges)      # a channel's declared range is part of the space
    space = {k: v for k, v in asdict(whole).items() if k not in ("enabled", "storage", "study", "n_trials", "timeout", "workers")}
    digest = hashlib.sha1(json.dumps({"tune": space, "siamese": asdict(problem.siamese), "seed": problem.params.seed,
                                      "evaluation": asdict(problem.params.evaluation)}, sort_keys=True).encode())
    digest.update(pairs_digest(problem.pairs).encode())
    digest.update(inputs_digest(problem.tokens, problem.word_table, problem.channels).encode())
    if cfg.mode == "rescore" and not cfg.cross_validated and base_model is not None:   # a CV objective trains its own
        digest.update((Path(base_model) / WEIGHTS).read_bytes())
    return f"{cfg.study}-{dataset}-{digest.hexdigest()[:8]}"


def run_worker(problem: TrainingInputs, cfg: TuneConfig, name: str, worker: int, threads: int, tracking=None,
               parent_run_id: str | None = None) -> None:
    """One process's share, on `threads` torch threads: the study's next trial, one at a time, until it has cfg.n_trials
    finished ones or cfg.timeout passes. When the other workers' running trials take the last places, it waits for them:
    they finish, or their worker died and they go stale, come back to the queue, and this worker runs them."""
    torch.set_num_threads(threads)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = open_study(cfg, name, problem.params.seed + worker)   # its own sampler seed: workers do not propose the same points
    run_trial = objective(problem, cfg, tracking, parent_run_id)
    started = time.monotonic()
    while cfg.timeout is None or time.monotonic() - started < cfg.timeout:
        claimed = study.get_trials(deepcopy=False, states=CLAIMED)
        if sum(t.state in FINISHED for t in claimed) >= cfg.n_trials:
            break
        if len(claimed) >= cfg.n_trials:
            time.sleep(POLL_SECONDS)
            fail_stale_trials(study)
        else:
            study.optimize(run_trial, n_trials=1, catch=(Surplus,))   # fails stale trials first, runs a queued one first


def run_study(problem: TrainingInputs, cfg: TuneConfig, name: str, workers: int = 1, tracking=None,
           parent_run_id: str | None = None, base_model: str | Path | None = None) -> optuna.Study:
    """Run the study with `workers` processes on its storage (1: in this process); trial_problem's default point first."""
    study, created = create_or_load(cfg, name, problem.params.seed)
    if finished(study) >= cfg.n_trials:
        return study
    queue = lambda variant, **options: study.enqueue_trial(  # noqa: E731
        trial_params(variant, problem.siamese.hidden, cfg), user_attrs={"final": True}, **options)
    if cfg.sampler == "tpe" and created and not cfg.cross_validated:  # at once: workers of other launches may be taking trials
        queue(problem.final)
    problem, default = trial_problem(problem, cfg, base_model)
    if cfg.sampler == "tpe":    # the fold models may learn weights beyond the ranges: TPE samples where trial 0 lies too
        cfg = replace(cfg, ranges=cfg.full_ranges.covering(default))
    if cfg.sampler == "tpe" and cfg.cross_validated:
        # Known once the fold models are trained, by every launch alike: a launch resuming a study whose first launch
        # died while they trained queues it then; Optuna skips it where it is queued or run already.
        queue(default, skip_if_exists=True)
    # Sampler seeds seed + i: reproducible for the launch that creates the study. A launch joining it (another machine,
    # or a resumed run) starts from its own random offset, or its workers would propose the points the others propose.
    first = 0 if created else random.SystemRandom().randrange(1, 2**30)
    if workers <= 1:    # alone: a retrain trial of F trains as the final stage does
        run_worker(problem, cfg, name, first, threads_alone(problem.siamese, problem.final), tracking, parent_run_id)
    else:
        processes = [spawn(run_worker, problem, cfg, name, first + i, problem.siamese.threads, tracking, parent_run_id)
                     for i in range(workers)]
        with reaped():
            for process in processes:
                process.start()
            for process in processes:
                process.join()
        failed = [p.exitcode for p in processes if p.exitcode]
        if failed:
            raise RuntimeError(f"study {name}: {len(failed)} of {workers} workers failed (exit codes {failed})")
    return open_study(cfg, name, problem.params.seed)


def trial_problem(problem: TrainingInputs, cfg: TuneConfig, base_model: str | Path | None = None) -> tuple[TrainingInputs, VariantConfig]:
    """What the trials read, and trial 0's weights: with a CV objective the fold models' held-out pairs (and pools) and
    the W and V they learned (their mean); in rescore mode one model's rescore vectors, in retrain mode `problem` itself,
    and siamese.final's weights."""
    if cfg.cross_validated:
        folds = fold_models(problem, cfg)
        return folds.held_out, folds.learned
    if cfg.mode == "rescore" and problem.rescore_vectors is None:
        return with_rescore_vectors(problem, cfg, base_model), problem.final
    return problem, problem.final


def summary(study: optuna.Study, problem: TrainingInputs, cfg: TuneConfig, default: dict[str, float], seconds: float) -> dict:
    """Best vs trial 0's weights (the objective's measures), trials by state, and the epochs pruning saved."""
    trials = study.get_trials(deepcopy=False)
    states = {state.name.lower(): sum(t.state == state for t in trials) for state in optuna.trial.TrialState}
    pruned = [t for t in trials if t.state == optuna.trial.TrialState.PRUNED]
    epochs = min(cfg.epochs, problem.siamese.training(problem.final).epochs)   # a trial's, as train_variant caps them
    budget = epochs * len([t for t in trials if t.state in FINISHED]) if cfg.mode == "retrain" else 0   # rescore: no epochs
    saved = sum(epochs - len(t.intermediate_values) for t in pruned)
    best = study.best_trial
    return {"objective": cfg.objective, "mode": cfg.mode, "sampler": cfg.sampler, "study": study.study_name,
            "best": {"value": best.value, "trial": best.number, "measures": best.user_attrs.get("measures", {})},
            "default": {"value": default[cfg.objective], "measures": default},
            "trials": {k: v for k, v in states.items() if v},
            "pruning": {"epochs_saved": saved, "epoch_budget": budget, "share_saved": round(saved / budget, 3) if budget else 0.0},
            "seconds": round(seconds, 1)}


def default_measures(study: optuna.Study, problem: TrainingInputs, cfg: TuneConfig,
                     base_model: str | Path | None = None) -> dict[str, float]:
    """Trial 0's measures: its trial's when it finished, else evaluated here."""
    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        if trial.user_attrs.get("final"):
            return trial.user_attrs["measures"]
    problem, default = trial_problem(problem, cfg, base_model)
    return evaluate_trial(problem, cfg, default, problem.siamese.hidden)


def not_tuned(params: Params, dataset: str) -> str | None:
    """Why the tune stage tunes nothing on `dataset` (no labelled pairs, tune.enabled false, a final variant that
    reads no label), or None."""
    name = params.siamese.final_of(params.dataset(dataset))
    if not params.dataset(dataset).labels:
        return f"datasets.{dataset} has no labelled pairs"
    if not params.tune.enabled:
        return "tune.enabled is false"
    return None if params.siamese.variant(name).labels else f"#{name} learns from no labelled pair (labels: false)"


def untuned_line(params: Params, dataset: str, out: str | Path) -> str | None:
    """The line that says a tune tuned nothing, why, and what `out` holds instead (for the caller to print); None
    when it tunes."""
    why = not_tuned(params, dataset)
    return why and f"tune@{dataset}: {why}: {out} holds #{params.siamese.final_of(params.dataset(dataset))}'s weights, not tuned"


def run(params: Params, dataset: str, problem: TrainingInputs | Callable[[], TrainingInputs], out: str | Path, metrics: str | Path,
        plots: str | Path, workers: int | None = None, base_model: str | Path | None = None) -> dict:
    """The tune stage: the study (unless tune.enabled is false), write the tuned variant, metrics and plots; one MLflow
    parent run. Where it tunes nothing, untuned_line says so."""
    cfg = params.tune.for_protocol(params.dataset(dataset).protocol)
    workers = workers or cfg.workers
    logged = {"tune": {k: v for k, v in asdict(cfg).items() if k not in ("ranges", "grid")}, "workers": workers}
    with stage_run(params.tracking, "tune", dataset, logged, raw=getattr(params.datasets.get(dataset), "raw", None)) as parent:
        started = time.perf_counter()
        labelled = params.dataset(dataset).labels
        name = params.siamese.final_of(params.dataset(dataset))
        final = params.siamese.variant(name)
        torch.set_num_threads(threads_alone(params.siamese, final))   # the fold models train here
        why = not_tuned(params, dataset)
        if why:     # nothing to tune by: no labelled pairs, or a final variant that reads none
            write_tuned(replace(final, hidden=final.hidden or params.siamese.hidden), out, f"{why}: #{name}'s weights, not tuned")
            result = {"enabled": False} if labelled and not cfg.enabled else {"skipped": why}
            Path(plots).mkdir(parents=True, exist_ok=True)     # no study, no plots; the folder is still the stage's output
        else:
            problem = problem if isinstance(problem, TrainingInputs) else problem()
            name = study_name(cfg, dataset, problem, base_model)   # a finished study of the same space and data returns at once
            study = run_study(problem, cfg, name, workers, params.tracking, parent.info.run_id, base_model)
            result = summary(study, problem, cfg, default_measures(study, problem, cfg, base_model), time.perf_counter() - started)
            tuned = tuned_from(study.best_params, problem)
            write_tuned(tuned, out, f"best of Optuna study {name} ({cfg.objective} {study.best_value:.4f}); "
                                    f"written by the tune stage")
            log_dict(asdict(tuned) | {"study": name, "value": study.best_value}, "best_params.json")
            result["skipped_plots"] = write_plots(study, plots)
            log_artifacts(plots)
        Path(metrics).parent.mkdir(parents=True, exist_ok=True)
        Path(metrics).write_text(json.dumps(result, indent=2) + "\n")
        log_metrics({k: result[k] for k in ("best", "default", "trials", "pruning", "seconds") if k in result})
        log_artifacts(out, metrics)
    return result
