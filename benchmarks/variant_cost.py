"""What one model of each named row costs to train on this machine, side by side in one run: the seconds of
train_variant (every phase, the row's own epochs) on the dataset's train pairs, early-stopped on dev, as the siamese
and final stages train it, and their ratio to the first row's. The tuner's cv_map objective trains tune.folds such
models of siamese.final before its trials, so a row's cost times (folds + 1) bounds what it adds to register@<dataset>.

Usage, in a workspace where `dvc repro` has built the dataset's prepared pairs, tokens and channels:
  python benchmarks/variant_cost.py --dataset default --variants A+L Fq+L Fqc+L F+L Fc+L
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from ticketsim.config import load_params
from ticketsim.training.selection_report import load_problem
from ticketsim.training.variant import train_variant


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workspace", type=Path, default=Path("."), help="the folder holding params.yaml and data/")
    parser.add_argument("--dataset", default="default")
    parser.add_argument("--variants", nargs="+", required=True, help="names in siamese.variants or siamese.finetuned")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (the final stage's F runs alone on the machine)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    params = load_params(args.workspace / "params.yaml")
    problem = load_problem(params, args.workspace, args.dataset, args.variants)
    seconds = {}
    for name in args.variants:
        started = time.perf_counter()
        train_variant(problem, params.siamese.variant(name), params.seed)
        seconds[name] = time.perf_counter() - started
    first = seconds[args.variants[0]]
    print(f"\n{args.dataset}: {problem.pairs.height} train + dev pairs, {args.threads} torch threads")
    print(f"| row | seconds to train one model | / {args.variants[0]} |\n| --- | ---: | ---: |")
    for name, value in seconds.items():
        print(f"| {name} | {value:.1f} | {value / first:.1f} |")


if __name__ == "__main__":
    main()
