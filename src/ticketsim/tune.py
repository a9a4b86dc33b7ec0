"""The Optuna search of the final variant's channel weights W, level weights V and LSTM size, on train and dev pairs only.

Two modes. `retrain` trains a model per trial (W and V shape what h learns) and reports the dev objective every
epoch, so the pruner stops bad trials early. `rescore` trains one model with the final variant's weights, caches
every component's h (and E, T), and a trial only recomputes g with new W and V: seconds per trial, exact as an
evaluation of those weights on that h, an approximation of what retraining with them would give.
A study lives in an RDB storage (SQLite by default, PostgreSQL to share it between machines): it resumes after a
kill, and several workers can run its trials at once (ticketsim.study); the tuned variant's file and the study's plots
are ticketsim.tuned's.
"""
from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import random
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import optuna
import polars as pl
import torch

from ticketsim.channels.cache import ChannelVectors
from ticketsim.config import BM25Config, EvaluationConfig, Params, SiameseParams, TuneConfig, VariantConfig
from ticketsim.data.tables import Corpus
from ticketsim.evaluate.suite import evaluate_method
from ticketsim.experiment import (
    WEIGHTS,
    Inputs,
    build_inputs,
    build_model,
    fingerprint,
    fit_variant,
    inputs_digest,
    lexical_distances,
    load_model,
    metric_of,
    pair_predictor,
    predict_all,
    prepare,
    reads,
    side_channels,
)
from ticketsim.mining import Mined
from ticketsim.model.branches import BranchStart
from ticketsim.model.inputs import encode_side, vocabulary_index
from ticketsim.model.metric import MetricConfig, similarity
from ticketsim.study import CLAIMED, FINISHED, Surplus, create_or_load, fail_stale_trials, finished, open_study, surplus
from ticketsim.text.tokenize import Tokens
from ticketsim.tracking import child_run, log_artifacts, log_dict, log_metrics, set_tags, stage_run
from ticketsim.tuned import write_plots, write_tuned

SEARCH_SPLITS = ("train", "dev")
POLL_SECONDS = 0.5          # how often a worker waiting for the others' last trials looks again


def search_pairs(pairs: pl.DataFrame) -> pl.DataFrame:
    """The labelled pairs a search may read: train and dev. The test split is dropped before anything else sees it."""
    return pairs.filter(pl.col("split").is_in(SEARCH_SPLITS))


@dataclass(frozen=True, eq=False)
class Problem:
    """Everything a trial reads, built once and picklable (spawned workers get a copy). No test pair is in it."""

    pairs: pl.DataFrame                     # train and dev only
    tokens: Tokens                          # the tickets and the queries of those pairs
    channels: tuple[ChannelVectors, ...]    # cached E, T, ... divided by their train-pair scale
    word_table: np.ndarray                  # rows for tuple(tokens.vocabulary()["token"]), char-BLSTM part last
    char_dim: int
    siamese: SiameseParams
    final: VariantConfig                    # the paper's weights: siamese.variants[siamese.final]
    evaluation: EvaluationConfig
    seed: int
    bm25: BM25Config = BM25Config()         # channel L
    cached: tuple[dict, dict, dict] | None = None  # rescore: query side, ticket side (channel -> component -> (n_pairs,
                                                   # dim)) and the pair channels (channel -> (n_pairs,))
    corpus: Corpus | None = None            # the prepared texts channel F reads
    start: BranchStart | None = None        # where branches F and A start
    mined: Mined | None = None              # the self-supervised pairs of variants with selfsup: true


def build_problem(params: Params, pairs: pl.DataFrame, tokens: Tokens, channels: list[ChannelVectors],
                  word_table: Callable[[list[str]], np.ndarray], char_dim: int, corpus: Corpus | None = None,
                  variants: Sequence[VariantConfig] = ()) -> Problem:
    """`word_table(words)` gives the input vectors of those words (sumemb.word_vectors in the stage); `variants`: those
    the problem will train beside the final one (experiment.prepare prepares their F and A branches and mined pairs once)."""
    pairs = search_pairs(pairs)
    asked = pairs["query_id"].unique().implode()
    tokens = Tokens(tokens.tickets, tokens.queries.filter(pl.col("query_id").is_in(asked)))
    variants = [params.siamese.variant(params.siamese.final), *variants]
    data = prepare(params, tokens, channels, word_table, char_dim, variants, corpus, pairs)
    return Problem(data.pairs, data.tokens, data.channels, data.word_table, char_dim, params.siamese, variants[0],
                   params.evaluation, params.seed, params.bm25, corpus=corpus, start=data.start, mined=data.mined)


def problem_from_files(params: Params, corpus: str, tokens: str, word2vec: str, char_blstm: str, channels: list[str],
                       variants: Sequence[VariantConfig] = ()) -> Problem:
    """A Problem from the pipeline's files: the prepared corpus, tokens, channel E's word models, cached channels."""
    from ticketsim.channels.char_blstm import load_checkpoint
    from ticketsim.channels.sumemb import word_vectors
    from ticketsim.channels.word2vec import load_vectors

    chars, vectors = load_checkpoint(char_blstm), load_vectors(word2vec)
    prepared = Corpus.read(corpus)
    return build_problem(params, search_pairs(prepared.pairs), Tokens.read(tokens), [ChannelVectors.load(p) for p in channels],
                         lambda words: word_vectors(words, vectors, chars), chars.dim, prepared, variants)


def dev_measures(problem: Problem, scores: np.ndarray) -> dict[str, float]:
    """Dev rerank MAP and the dev MSE of scores calibrated on train (the retrieve protocol is left to the stages)."""
    dev = evaluate_method(problem.pairs, scores, None, problem.evaluation)["dev"]
    return {"map": dev["rerank"]["map"], "mse": dev["similarity"]["mse"]}


def space_metric(cfg: TuneConfig) -> MetricConfig:
    """Every channel and level the search can weigh: what a rescore cache must hold."""
    return MetricConfig(channels=dict.fromkeys(cfg.ranges.channels, 1.0), levels=dict.fromkeys(cfg.ranges.levels, 1.0))


def train_variant(problem: Problem, variant: VariantConfig, hidden: int, epochs: int,
                  report: Callable[[int, float], None] | None = None, objective: str = "map"):
    """Train one model of `variant` on the train pairs (early stopping on dev); report(epoch, dev objective) each epoch."""
    metric = metric_of(variant)
    inputs = build_inputs(problem.tokens, [v for v in problem.channels if v.channel in reads(metric)], metric,
                          problem.siamese.max_tokens, problem.bm25, problem.corpus)
    torch.manual_seed(problem.seed)
    model = build_model(replace(problem.siamese, hidden=hidden), problem.word_table, problem.char_dim, variant, problem.start)
    predict = pair_predictor(model, inputs, problem.pairs, metric)

    def scores() -> np.ndarray:
        model.eval()   # fit puts it back in training mode at the next epoch
        return predict_all(predict, problem.pairs.height)

    def on_epoch(phase: str, epoch: int, train_loss: float, dev_loss: float) -> None:
        if report is not None and phase == "labels":
            report(epoch, dev_measures(problem, scores())[objective])

    fit_variant(model, inputs, problem.pairs, variant, problem.siamese, problem.seed, problem.mined, on_epoch=on_epoch,
                **({"epochs": epochs} if epochs else {}))
    return model, inputs, scores()


def with_rescore_cache(problem: Problem, cfg: TuneConfig, base_model: str | Path | None = None) -> Problem:
    """Every pair's query and ticket vectors of every channel the space weighs, from one model of the final variant.

    The model is the siamese stage's (`base_model`: its folder, trained on train pairs, early-stopped on dev) or,
    without one, trained here for tune.epochs.
    """
    metric = space_metric(cfg)
    cached = [v for v in problem.channels if v.channel in metric.channels]
    if base_model is None:
        model, _, _ = train_variant(problem, problem.final, problem.siamese.hidden, cfg.epochs)
        inputs = build_inputs(problem.tokens, cached, metric, problem.siamese.max_tokens, problem.bm25)
    else:
        base_model = Path(base_model)
        try:
            model = load_model(base_model, problem.final, problem.siamese.encoder, json.loads((base_model / "scales.json").read_text()))
        except ValueError as error:
            raise ValueError(f"{error}; point it at models/<dataset>/siamese/<siamese.final> or drop it to train one here") from None
        words = tuple(json.loads((base_model / "words.json").read_text()))
        index, (needs_q, needs_t) = vocabulary_index(words), metric.needs()
        inputs = Inputs(encode_side(problem.tokens.queries, "query_id", sorted(needs_q.get("h", ())), index, problem.siamese.max_tokens,
                                    cached, "queries"),
                        encode_side(problem.tokens.tickets, "ticket_id", sorted(needs_t.get("h", ())), index, problem.siamese.max_tokens,
                                    cached, "tickets"), words,
                        lexical_distances(problem.tokens, problem.bm25) if metric.channels.get("L") else None)
    needs_q, needs_t = metric.needs()
    q_rows, t_rows = inputs.queries.row(problem.pairs["query_id"]), inputs.tickets.row(problem.pairs["ticket_id"])
    queries, tickets = side_channels(model, inputs.queries, needs_q), side_channels(model, inputs.tickets, needs_t)
    cached = ({c: {k: v[q_rows] for k, v in comps.items()} for c, comps in queries.items()},
              {c: {k: v[t_rows] for k, v in comps.items()} for c, comps in tickets.items()},
              {c: d.double() for c, d in inputs.pair_distances(metric, problem.pairs).items()})
    return replace(problem, cached=cached)


def rescore(problem: Problem, variant: VariantConfig) -> np.ndarray:
    """g of every pair with new weights on the cached vectors: no training."""
    queries, tickets, pair = problem.cached
    return similarity(queries, tickets, metric_of(variant), pair=pair).numpy()


def suggest(trial: optuna.Trial, cfg: TuneConfig, final: VariantConfig, default_hidden: int) -> tuple[VariantConfig, int]:
    """One value per param, named W_<channel>, V_<level>, hidden: the columns of the MLflow and Optuna comparisons."""
    space = cfg.grid if cfg.sampler == "grid" else cfg.ranges

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


def tuned_from(params: dict[str, float], problem: Problem) -> VariantConfig:
    """The final variant with a trial's weights and LSTM size."""
    return replace(problem.final, channels={k[2:]: v for k, v in params.items() if k.startswith("W_")},
                   levels={k[2:]: v for k, v in params.items() if k.startswith("V_")},
                   hidden=int(params.get("hidden", problem.siamese.hidden)))


def evaluate_trial(problem: Problem, cfg: TuneConfig, variant: VariantConfig, hidden: int,
                   report: Callable[[int, float], None] | None = None) -> dict[str, float]:
    """Dev MAP and MSE of one weighting: rescored on the cache, or a model trained with it."""
    if cfg.mode == "rescore":
        return dev_measures(problem, rescore(problem, variant))
    _, _, scores = train_variant(problem, variant, hidden, cfg.epochs, report, cfg.objective)
    return dev_measures(problem, scores)


def objective(problem: Problem, cfg: TuneConfig, tracking, parent_run_id: str | None) -> Callable[[optuna.Trial], float]:
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
                # the keys of every siamese and final run: trials and variants compare in one column
                log_metrics({"dev": {"rerank": {"map": measures["map"]}, "similarity": {"mse": measures["mse"]}}})
        trial.set_user_attr("dev", measures)
        return measures[cfg.objective]

    return run_trial


def study_name(cfg: TuneConfig, dataset: str, problem: Problem, base_model: str | Path | None = None) -> str:
    """Same search, same inputs -> same study (so a killed one resumes); any change of either -> a new study."""
    searched = {k: v for k, v in asdict(cfg).items() if k not in ("enabled", "storage", "study", "n_trials", "timeout", "workers")}
    digest = hashlib.sha1(json.dumps({"tune": searched, "siamese": asdict(problem.siamese), "seed": problem.seed,
                                      "evaluation": asdict(problem.evaluation)}, sort_keys=True).encode())
    digest.update(fingerprint(problem.pairs).encode())
    digest.update(inputs_digest(problem.tokens, problem.word_table, problem.channels).encode())
    if cfg.mode == "rescore" and base_model is not None:
        digest.update((Path(base_model) / WEIGHTS).read_bytes())
    return f"{cfg.study}-{dataset}-{digest.hexdigest()[:8]}"


def run_worker(problem: Problem, cfg: TuneConfig, name: str, worker: int, tracking=None, parent_run_id: str | None = None) -> None:
    """One process's share: the study's next trial, one at a time, until it has cfg.n_trials finished ones or
    cfg.timeout passes. When the other workers' running trials take the last places, it waits for them: they finish,
    or their worker died and they go stale, come back to the queue, and this worker runs them."""
    torch.set_num_threads(problem.siamese.threads)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = open_study(cfg, name, problem.seed + worker)   # its own sampler seed: workers do not propose the same points
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


def search(problem: Problem, cfg: TuneConfig, name: str, workers: int = 1, tracking=None,
           parent_run_id: str | None = None, base_model: str | Path | None = None) -> optuna.Study:
    """Run the study with `workers` processes on its storage (1: in this process); the final variant's point first."""
    study, created = create_or_load(cfg, name, problem.seed)
    if finished(study) >= cfg.n_trials:
        return study
    if cfg.sampler == "tpe" and created:   # at once: workers of other launches may be taking trials already
        study.enqueue_trial(trial_params(problem.final, problem.siamese.hidden, cfg), user_attrs={"final": True})
    if cfg.mode == "rescore" and problem.cached is None:
        problem = with_rescore_cache(problem, cfg, base_model)
    # Sampler seeds seed + i: reproducible for the launch that creates the study. A launch joining it (another machine,
    # or a resumed run) starts from its own random offset, or its workers would propose the points the others propose.
    first = 0 if created else random.SystemRandom().randrange(1, 2**30)
    if workers <= 1:
        run_worker(problem, cfg, name, first, tracking, parent_run_id)
    else:
        context = multiprocessing.get_context("spawn")
        processes = [context.Process(target=run_worker, args=(problem, cfg, name, first + i, tracking, parent_run_id))
                     for i in range(workers)]
        for process in processes:
            process.start()
        for process in processes:
            process.join()
        failed = [p.exitcode for p in processes if p.exitcode]
        if failed:
            raise RuntimeError(f"study {name}: {len(failed)} of {workers} workers failed (exit codes {failed})")
    return open_study(cfg, name, problem.seed)


def summary(study: optuna.Study, problem: Problem, cfg: TuneConfig, default: dict[str, float], seconds: float) -> dict:
    """Best vs the final variant's weights (dev MAP and MSE), trials by state, and the epochs pruning saved."""
    trials = study.get_trials(deepcopy=False)
    states = {state.name.lower(): sum(t.state == state for t in trials) for state in optuna.trial.TrialState}
    pruned = [t for t in trials if t.state == optuna.trial.TrialState.PRUNED]
    budget = cfg.epochs * len([t for t in trials if t.state in FINISHED]) if cfg.mode == "retrain" else 0   # rescore: no epochs
    saved = sum(cfg.epochs - len(t.intermediate_values) for t in pruned)
    best = study.best_trial
    return {"objective": cfg.objective, "mode": cfg.mode, "sampler": cfg.sampler, "study": study.study_name,
            "best": {"value": best.value, "trial": best.number, "dev": best.user_attrs.get("dev", {})},
            "default": {"value": default[cfg.objective], "dev": default},
            "trials": {k: v for k, v in states.items() if v},
            "pruning": {"epochs_saved": saved, "epoch_budget": budget, "share_saved": round(saved / budget, 3) if budget else 0.0},
            "seconds": round(seconds, 1)}


def default_measures(study: optuna.Study, problem: Problem, cfg: TuneConfig, base_model: str | Path | None = None) -> dict[str, float]:
    """The final variant's own dev figures: its enqueued trial when it finished, else evaluated here."""
    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        if trial.user_attrs.get("final"):
            return trial.user_attrs["dev"]
    if cfg.mode == "rescore" and problem.cached is None:
        problem = with_rescore_cache(problem, cfg, base_model)
    return evaluate_trial(problem, cfg, problem.final, problem.siamese.hidden)


def run(params: Params, dataset: str, problem: Problem | Callable[[], Problem], out: str | Path, metrics: str | Path,
        plots: str | Path, workers: int | None = None, base_model: str | Path | None = None) -> dict:
    """The tune stage: search (unless tune.enabled is false), write the tuned variant, metrics and plots; one MLflow parent run."""
    cfg = params.tune
    workers = workers or cfg.workers
    logged = {"tune": {k: v for k, v in asdict(cfg).items() if k not in ("ranges", "grid")}, "workers": workers}
    torch.set_num_threads(params.siamese.threads)   # small matrices: a second thread on a busy box is far slower
    with stage_run(params.tracking, "tune", dataset, logged, raw=getattr(params.datasets.get(dataset), "raw", None)) as parent:
        started = time.perf_counter()
        labelled = params.dataset(dataset).labels
        name = params.siamese.final_of(params.dataset(dataset))
        final = params.siamese.variant(name)
        if not cfg.enabled or not labelled:     # nothing to search by without labelled pairs
            why = "tune.enabled is false" if labelled else f"datasets.{dataset} has no labelled pairs"
            write_tuned(replace(final, hidden=final.hidden or params.siamese.hidden), out,
                        f"{why}: siamese.{'final' if labelled else 'unlabelled'} (#{name}) weights, not searched")
            result = {"enabled": False} if labelled else {"skipped": why}
            print(f"tune@{dataset}: {why}: {out} holds #{name}'s weights, not searched")
            Path(plots).mkdir(parents=True, exist_ok=True)     # no study, no plots; the folder is still the stage's output
        else:
            problem = problem if isinstance(problem, Problem) else problem()
            name = study_name(cfg, dataset, problem, base_model)   # a finished study of the same search and data returns at once
            study = search(problem, cfg, name, workers, params.tracking, parent.info.run_id, base_model)
            result = summary(study, problem, cfg, default_measures(study, problem, cfg, base_model), time.perf_counter() - started)
            tuned = tuned_from(study.best_params, problem)
            write_tuned(tuned, out, f"best of Optuna study {name} (dev {cfg.objective} {study.best_value:.4f}); "
                                    f"written by the tune stage")
            log_dict(asdict(tuned) | {"study": name, "value": study.best_value}, "best_params.json")
            result["skipped_plots"] = write_plots(study, plots)
            log_artifacts(plots)
        Path(metrics).parent.mkdir(parents=True, exist_ok=True)
        Path(metrics).write_text(json.dumps(result, indent=2) + "\n")
        log_metrics({k: result[k] for k in ("best", "default", "trials", "pruning", "seconds") if k in result})
        log_artifacts(out, metrics)
    return result
