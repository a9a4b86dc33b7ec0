"""`ticketsim select`: choose a configuration honestly. Cross-validated rerank MAP over the train + dev queries beside
the dev MAP, and paired tests over queries (ticketsim.training.selection); printed as a Markdown table, written as JSON.

Per configuration (a name of siamese.variants): k-fold cross-validation by query for every seed (fold f scored, the
next one early-stops, the rest train), and a model trained on train and early-stopped on dev per seed (the dev figure).
--baselines adds BM25, channel S's zero-shot row #14 (cosine) and, where the source ships one, its candidate order:
untrained, scored on the same queries and folds. Paired tests: every configuration against the first, and with
--baselines every trained one against each baseline, on each query's CV AP averaged over the seeds. Seeds run side by
side (one process per core, each with its --seeds and --out) make one report with --merge.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
import torch
from tqdm import tqdm

from ticketsim.config import Params, load_params, stage_paths
from ticketsim.errors import StepError
from ticketsim.evaluate.baselines import bm25_matrix, channel_matrix, source_order_scores
from ticketsim.evaluate.protocols import rerank_means
from ticketsim.model.branches import reads
from ticketsim.model.metric import metric_of
from ticketsim.training.selection import cross_validate, fold_maps, mean_ap, paired_test, per_query, with_folds
from ticketsim.training.variant import SEARCH_SPLITS, Prepared, prepare_files, train_variant

S_ROW, S_LEVEL = "S#14 zero-shot (cosine)", "sub+desc-sub+desc+sol"


def spread(values: list[float]) -> dict | None:
    if not values:      # --cv-seeds 0: dev figures only
        return None
    return {"mean": float(np.mean(values)), "std": float(np.std(values, ddof=1)) if len(values) > 1 else 0.0,
            "values": [float(v) for v in values]}


def summary(cv_runs: list[pl.DataFrame], dev_runs: list[pl.DataFrame], kind: str, seconds: float) -> dict:
    """CV MAP over folds x seeds, dev MAP over seeds, and each query's CV AP averaged over the seeds (for the tests)."""
    return {"kind": kind, "cv_map": spread([m for run in cv_runs for m in fold_maps(run)]),
            "dev_map": spread([rerank_means(run)["map"] for run in dev_runs]),
            # None: JSON has no nan
            "query_ap": {q: None if np.isnan(ap) else ap for q, ap in (mean_ap(cv_runs) if cv_runs else {}).items()},
            "seconds": round(seconds, 1)}


def dev_run(problem: Prepared, scores: np.ndarray) -> pl.DataFrame:
    """per_query of the dev pairs, from the scores of every pair of the problem."""
    dev = problem.pairs["split"] == "dev"
    return per_query(problem.pairs.filter(dev), scores[dev.to_numpy()], problem.params.evaluation.depth)


def trained(problem: Prepared, name: str, folds: int, seeds: list[int], cv_seeds: int, epochs: int, bar: tqdm) -> dict:
    """Cross-validated for the first cv_seeds seeds, trained on train and early-stopped on dev for every seed."""
    variant, started = problem.siamese.variant(name), time.perf_counter()
    if not variant.labels:
        return label_free(problem, variant, folds, seeds, cv_seeds, epochs, bar, started)
    cv_runs, dev_runs = [], []
    for seed in seeds[:cv_seeds]:
        bar.set_postfix(configuration=name, seed=seed)
        cv_runs.append(cross_validate(problem, variant, folds, seed, epochs=epochs))
        bar.update(folds)
    for seed in seeds:
        bar.set_postfix(configuration=name, seed=seed)
        scores = train_variant(problem, variant, seed, problem.siamese.hidden, epochs).pair_scores()
        dev_runs.append(dev_run(problem, scores))
        bar.update(1)
    return summary(cv_runs, dev_runs, "trained", time.perf_counter() - started)


def label_free(problem: Prepared, variant, folds: int, seeds: list[int], cv_seeds: int, epochs: int, bar: tqdm,
               started: float) -> dict:
    """A configuration that learns from no label (labels: false): its k models of a seed's cross-validation would be
    the same model, so one per seed scores every query, each counted in the fold that seed draws for it."""
    cv_runs, dev_runs = [], []
    for i, seed in enumerate(seeds):
        scores = train_variant(problem, variant, seed, problem.siamese.hidden, epochs).pair_scores()
        dev_runs.append(dev_run(problem, scores))
        if i < cv_seeds:
            cv_runs.append(with_folds(per_query(problem.pairs, scores, problem.params.evaluation.depth), folds, seed))
        bar.update(1 + folds * (i < cv_seeds))
    return summary(cv_runs, dev_runs, "trained", time.perf_counter() - started)


def untrained(problem: Prepared, scores: np.ndarray, folds: int, seeds: list[int]) -> dict:
    """The same figures for pair scores that need no training: the folds of each seed, one dev run."""
    started, by_query = time.perf_counter(), per_query(problem.pairs, scores, problem.params.evaluation.depth)
    return summary([with_folds(by_query, folds, seed) for seed in seeds], [dev_run(problem, scores)], "untrained",
                   time.perf_counter() - started)


def baseline_scores(problem: Prepared, params) -> dict[str, np.ndarray]:
    """Pair scores of the untrained methods: BM25, S's row #14 and the source's order (when it ships one)."""
    scores = {"BM25": bm25_matrix(problem.tokens, params.bm25).pair_scores(problem.pairs)}
    for vectors in problem.channels:
        if vectors.channel == "S":     # divided by its scale in the problem: cosine and ranks do not change
            scores[S_ROW] = channel_matrix(vectors, S_LEVEL, "cosine").pair_scores(problem.pairs)
    order = source_order_scores(problem.pairs)
    if order is not None:
        scores["source order"] = order
    return scores


def tests(results: dict, variants: list[str], baselines: list[str], n: int) -> list[dict]:
    """Each trained configuration against the first, and against each baseline."""
    pairs = [(name, variants[0]) for name in variants[1:]] + [(name, base) for name in variants for base in baselines]
    return [{"a": a, "b": b, **paired_test(results[a]["query_ap"], results[b]["query_ap"], n=n, seed=0)} for a, b in pairs]


REPORT_KEYS = ("dataset", "command", "queries", "folds", "seeds", "cv_seeds", "configurations", "seconds")


def read_report(path: Path) -> dict:
    """An --out report, or a one-line exit naming the file and what is wrong with it."""
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise SystemExit(f"--merge: {path}: not a readable JSON report ({error})")
    missing = [key for key in REPORT_KEYS if key not in report] if isinstance(report, dict) else list(REPORT_KEYS)
    if missing:
        raise SystemExit(f"--merge: {path}: not a select_config report (missing {', '.join(missing)})")
    return report


def merged(paths: list[Path], resamples: int) -> dict:
    """One report of several runs of the same configurations on the same data with different seeds: figures over
    every fold and seed, each query's CV AP averaged over all the seeds, the paired tests again."""
    reports = [read_report(path) for path in paths]
    first, names = reports[0], list(reports[0]["configurations"])
    for path, report in zip(paths[1:], reports[1:]):
        if (report["dataset"], report["queries"], report["folds"], list(report["configurations"])) != \
                (first["dataset"], first["queries"], first["folds"], names):
            raise SystemExit(f"--merge: {path} and {paths[0]} differ in dataset, queries, folds or configurations")
    seeds = [seed for report in reports for seed in report["cv_seeds"]]
    if len(set(seeds)) < len(seeds):
        raise SystemExit(f"--merge: a seed is in more than one report (CV seeds {seeds})")

    def values(name: str, key: str) -> list[float]:
        return [v for report in reports if report["configurations"][name][key] for v in report["configurations"][name][key]["values"]]

    def query_ap(name: str) -> dict:
        runs = [r["configurations"][name]["query_ap"] for r in reports if r["cv_seeds"]]
        counts = [len(r["cv_seeds"]) for r in reports if r["cv_seeds"]]   # a report's APs are already a mean over its seeds
        return {q: None if any(ap[q] is None for ap in runs) else
                float(np.average([ap[q] for ap in runs], weights=counts)) for q in (runs[0] if runs else {})}

    configurations = {name: {"kind": first["configurations"][name]["kind"], "cv_map": spread(values(name, "cv_map")),
                             "dev_map": spread(values(name, "dev_map")), "query_ap": query_ap(name),
                             "seconds": sum(r["configurations"][name]["seconds"] for r in reports)} for name in names}
    trained_names = [n for n in names if configurations[n]["kind"] == "trained"]
    baselines = [n for n in names if n not in trained_names]
    return {**first, "command": " | ".join(r["command"] for r in reports), "seeds": [s for r in reports for s in r["seeds"]],
            "cv_seeds": seeds, "configurations": configurations,
            "tests": tests(configurations, trained_names, baselines, resamples) if seeds else [],
            "seconds": sum(r["seconds"] for r in reports)}


def markdown(report: dict) -> str:
    pct = lambda figure: "–" if figure is None else f"{100 * figure['mean']:.2f} ± {100 * figure['std']:.2f}"  # noqa: E731
    seeds = lambda key: " ".join(map(str, report[key]))  # noqa: E731
    lines = [f"{report['dataset']}: {report['queries']} train + dev queries, {report['folds']} folds x {len(report['cv_seeds'])} "
             f"seeds (CV seeds {seeds('cv_seeds')}; dev seeds {seeds('seeds')}), {report['epochs'] or 'their own'} epochs at most; "
             "rerank MAP, %", "",
             "| configuration | CV MAP (mean ± std over folds x seeds) | dev MAP (mean ± std over seeds) | seconds |",
             "| --- | ---: | ---: | ---: |"]
    lines += [f"| {name} | {pct(r['cv_map'])} | {pct(r['dev_map'])} | {r['seconds']:.0f} |" for name, r in report["configurations"].items()]
    lines += ["", f"{report['compared']} trained configurations compared (and {len(report['configurations']) - report['compared']} "
              f"untrained baselines; dev MAP of an untrained one: one run, std 0).", "",
              "Paired tests over queries (each query's CV AP averaged over the seeds; queries with a relevant candidate):", "",
              "| a | b | queries | mean difference a - b (points) | 95% bootstrap interval | p (sign-flip) |",
              "| --- | --- | ---: | ---: | --- | ---: |"]
    lines += [f"| {t['a']} | {t['b']} | {t['queries']} | {100 * t['mean_difference']:+.2f} | "
              f"[{100 * t['interval'][0]:+.2f}, {100 * t['interval'][1]:+.2f}] | {t['p']:.4f} |" for t in report["tests"]]
    return "\n".join(lines)


def load_problem(workspace: Path, dataset: str, names: list[str], channels: set[str] = frozenset(),
                 splits: tuple[str, ...] = SEARCH_SPLITS) -> tuple[Params, Prepared]:
    """The workspace's params and the Prepared of `dataset` from the tuner's files (the same inputs), with the cached
    channels the named variants read and `channels`; one-line errors for an unknown name or a missing cache."""
    params = load_params(workspace / "params.yaml")
    params.dataset(dataset)
    every = {**params.siamese.variants, **params.siamese.finetuned}
    unknown = [name for name in names if name not in every]
    if unknown:
        raise StepError(f"--variants {' '.join(unknown)}: not in siamese.variants or siamese.finetuned (have: {', '.join(every)})")
    files = stage_paths("tune", dataset, workspace)
    cached = {Path(path).stem: path for path in files["channels"]}   # E, T, S -> data/<dataset>/channels/<c>.npz
    needed = {c for name in names for c in reads(metric_of(every[name])) if c in cached} | set(channels)
    missing = [cached[c] for c in sorted(needed) if not Path(cached[c]).is_file()]
    missing += [files[key] for key in ("corpus", "tokens", "word2vec", "char_blstm") if not Path(files[key]).exists()]
    if missing:
        raise StepError(f"{', '.join(missing)} missing: run `dvc repro sentence_encoder@{dataset} embedding@{dataset}` in "
                        f"{workspace} first")
    present = [path for path in cached.values() if Path(path).is_file()]
    return params, prepare_files(params, files["corpus"], files["tokens"], files["word2vec"], files["char_blstm"], present,
                                 [every[name] for name in names], splits=splits, also=cached)


def command(args: argparse.Namespace) -> None:
    """`ticketsim select` (its arguments: ticketsim.cli)."""
    if args.merge:
        write(merged(args.merge, args.resamples), args.out)
        return
    if not args.dataset or not args.variants:
        raise StepError("--dataset and --variants are required (or --merge)")
    started = time.perf_counter()
    torch.set_num_threads(1)   # small matrices: a second thread on a busy 2-core box is far slower (docs/model.md)

    params, problem = load_problem(args.workspace, args.dataset, args.variants, {"S"} if args.baselines else set())
    epochs, cv_seeds = args.epochs, len(args.seeds) if args.cv_seeds is None else args.cv_seeds

    results = {}
    with tqdm(total=len(args.variants) * (cv_seeds * args.folds + len(args.seeds)), desc="select", unit="model") as bar:
        for name in args.variants:
            results[name] = trained(problem, name, args.folds, args.seeds, cv_seeds, epochs, bar)
    baselines = baseline_scores(problem, params) if args.baselines else {}
    for name, scores in baselines.items():
        results[name] = untrained(problem, scores, args.folds, args.seeds[:cv_seeds])
    report = {"dataset": args.dataset, "workspace": str(args.workspace.resolve()), "command": " ".join(sys.argv),
              "queries": problem.pairs["query_id"].n_unique(), "folds": args.folds, "seeds": args.seeds,
              "cv_seeds": args.seeds[:cv_seeds], "epochs": epochs,
              "compared": len(args.variants), "configurations": results,
              "tests": tests(results, args.variants, list(baselines), args.resamples) if cv_seeds else []}
    report["seconds"] = round(time.perf_counter() - started, 1)
    write(report, args.out)


def write(report: dict, out: Path | None) -> None:
    print(markdown(report))
    print(f"\n{report['seconds']:.0f} s")
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2) + "\n")

