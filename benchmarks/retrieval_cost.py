"""What the retrieval objective costs beside rerank's, side by side in one run on a workspace's tune files (after `dvc
repro`): the fold models trained once (with a pool of every ticket kept per fold, for cv_retrieve, or not), then the
same trials scored by each objective.

    python -m benchmarks.retrieval_cost [--dataset default] [--variant Ac+L-relpos] [--trials 20]

Prints seconds per fold (training and vectors, the pools' share apart) and per trial, and the ratio retrieve / rerank.
"""
from __future__ import annotations

import argparse
import time
from dataclasses import replace

import numpy as np
import torch

from ticketsim.config import Workspace, load_params
from ticketsim.training.variant import TrainingInputs, threads_alone
from ticketsim.tuning.rescore import cv_map, cv_retrieve, fold_models
from ticketsim.tuning.tuner import tuning_inputs


def trial_weights(problem: TrainingInputs, n: int, seed: int = 0) -> list:
    """n weightings of the final variant around its own weights (what TPE's trials look like), seeded."""
    rng = np.random.default_rng(seed)
    final = problem.final
    return [replace(final, channels={c: w * rng.uniform(0.5, 1.5) for c, w in final.channels.items()},
                    levels={v: w * rng.uniform(0.5, 1.5) for v, w in final.levels.items()}) for _ in range(n)]


def measure(problem: TrainingInputs, trials: int) -> dict[str, dict[str, float]]:
    """Seconds per fold (fold models trained and their vectors kept; cv_retrieve keeps each fold's pool too) and per
    trial (the objective over every held-out query), for cv_map and cv_retrieve on the same weightings."""
    cfg, weights, figures = problem.params.tune, trial_weights(problem, trials), {}
    for objective, score in (("cv_map", cv_map), ("cv_retrieve", cv_retrieve)):
        started = time.perf_counter()
        folds = fold_models(problem, replace(cfg, objective=objective))
        per_fold = (time.perf_counter() - started) / cfg.folds
        started = time.perf_counter()
        for variant in weights:
            score(folds.held_out, variant)
        figures[objective] = {"fold": per_fold, "trial": (time.perf_counter() - started) / trials}
    return figures


def table(figures: dict[str, dict[str, float]], described: str) -> str:
    rerank, retrieve = figures["cv_map"], figures["cv_retrieve"]
    rows = [f"{described}", "", "| seconds | rerank (cv_map) | retrieve (cv_retrieve) | retrieve / rerank |",
            "| --- | ---: | ---: | ---: |"]
    rows += [f"| per {key} | {rerank[key]:.3f} | {retrieve[key]:.3f} | {retrieve[key] / rerank[key]:.1f}x |"
             for key in ("fold", "trial")]
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="default")
    parser.add_argument("--variant", help="the final variant tuned (default: the dataset's siamese.final)")
    parser.add_argument("--trials", type=int, default=20)
    args = parser.parse_args()
    params = load_params("params.yaml").for_dataset(args.dataset)
    if args.variant:
        params = replace(params, siamese=replace(params.siamese, final=args.variant))
    files = Workspace(args.dataset)
    torch.set_num_threads(threads_alone(params.siamese, params.siamese.variant(params.siamese.final)))
    problem = tuning_inputs(params, str(files.corpus), str(files.tokens), str(files.channels))
    queries, tickets = problem.pairs["query_id"].n_unique(), len(problem.tokens.tickets)
    print(table(measure(problem, args.trials),
                f"{args.dataset}: #{params.siamese.final}, {params.tune.folds} folds, {queries} train + dev queries, "
                f"{tickets} tickets, {args.trials} trials, {torch.get_num_threads()} torch threads"))


if __name__ == "__main__":
    main()
