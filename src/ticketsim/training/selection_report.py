"""The report of `ticketsim select` (ticketsim.workflows.select): choose a configuration honestly. Cross-validated
retrieval (each held-out query searching every ticket: MRR@10, MAP@10, nDCG@10) and rerank MAP over the train + dev
queries beside the dev MAP, and paired tests over queries (ticketsim.training.selection); rendered as a Markdown table
(which the workflow prints), written as JSON. The dataset's protocol (datasets.<name>.decides: retrieve, or rerank for
SemEval) decides: its CV figure ranks the configurations and its per-query figure (RR@10, or rerank AP) is what the
paired tests compare.

Per configuration (a name of siamese.variants): k-fold cross-validation by query for every seed (fold f scored, the
next one early-stops, the rest train), and a model trained on train and early-stopped on dev per seed (the dev figure).
--baselines adds BM25, channel S's zero-shot row #14 (cosine) and, where the source ships one, its candidate order:
untrained, scored on the same queries and folds. Paired tests: every configuration against the first, and with
--baselines every trained one against each baseline, on each query's CV AP averaged over the seeds. Seeds run side by
side (one process per core, each with its --seeds and --out) make one report with --merge; so do runs of other
configurations on the same seeds and folds.

Beside CV, each configuration's figures under the dataset's shifts (ticketsim.training.shift: the lay split, the
later-year view of the same folds, one train part to the other), its paired tests against the reference (siamese.unlabelled,
compared always) by CV and under each shift, and the choice by shift.choose and shift.cheapest: what siamese.final should be.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import polars as pl
from tqdm import tqdm

from ticketsim.channels.encoder_files import encoder_size
from ticketsim.channels.registry import CHANNELS, cache_path, dvc_stage, word_files
from ticketsim.config import Params, stage_paths
from ticketsim.data.tables import LAY
from ticketsim.errors import StepError
from ticketsim.evaluate.baselines import bm25_matrix, channel_matrix, source_order_scores
from ticketsim.evaluate.protocols import ScoreMatrix, query_means
from ticketsim.model.branches import reads, ticket_cost
from ticketsim.scoring.weights import metric_of
from ticketsim.training.selection import (
    OWN,
    RETRIEVED,
    cross_validate_under,
    fold_maps,
    mean_ap,
    paired_test,
    retrieval_run,
    split_run,
    with_folds,
)
from ticketsim.training.shift import CROSS_PART, LATER_YEAR, Shifts, cheapest, choose, cross_part, part_runs, verdict
from ticketsim.training.variant import CHOICE_SPLITS, Prepared, prepare_files, train_variant

S_ROW, S_LEVEL = "S#14 zero-shot (cosine)", "sub+desc-sub+desc+sol"
RETRIEVAL = ("mrr", "map", "ndcg")      # the CV retrieval figures reported; the first decides where retrieval does
# What decides, per protocol: the CV figure that ranks configurations, and the per-query figure the paired tests read.
DECIDING = {"retrieve": ("cv_retrieve", "query_rr"), "rerank": ("cv_map", "query_ap")}


def spread(values: list[float]) -> dict | None:
    if not values:      # --cv-seeds 0: dev figures only
        return None
    return {"mean": float(np.mean(values)), "std": float(np.std(values, ddof=1)) if len(values) > 1 else 0.0,
            "values": [float(v) for v in values]}


def shift_figures(runs: list[pl.DataFrame]) -> dict:
    """One shift's MAP over its runs (one a seed), each query's AP averaged over them, and how many they are."""
    return {"map": spread([query_means(run)["map"] for run in runs]), "runs": len(runs), "query_ap": json_ap(mean_ap(runs))}


def json_ap(ap: dict[str, float]) -> dict[str, float | None]:
    return {q: None if np.isnan(value) else value for q, value in ap.items()}   # None: JSON has no nan


def summary(cv_runs: list[pl.DataFrame], dev_runs: list[pl.DataFrame], kind: str, seconds: float,
            shift_runs: dict[str, list[pl.DataFrame]] | None = None, retrieve_runs: list[pl.DataFrame] = ()) -> dict:
    """CV rerank MAP and CV retrieval (MRR, MAP, nDCG at depth) over folds x seeds, dev MAP over seeds, each query's CV
    AP and retrieval RR averaged over the seeds (for the tests), and each shift's figures."""
    retrieved = {m: spread([v for run in retrieve_runs for v in fold_maps(run, m)]) for m in RETRIEVAL} if retrieve_runs else None
    return {"kind": kind, "cv_map": spread([m for run in cv_runs for m in fold_maps(run)]),
            "cv_retrieve": retrieved,
            "dev_map": spread([query_means(run)["map"] for run in dev_runs]),
            "query_ap": json_ap(mean_ap(cv_runs) if cv_runs else {}),
            "query_rr": json_ap(mean_ap(retrieve_runs, "rr")) if retrieve_runs else None,
            "shifts": {name: shift_figures(runs) for name, runs in (shift_runs or {}).items() if runs},
            "seconds": round(seconds, 1)}


def choice_run(problem: Prepared, scores: np.ndarray, folds: int, seed: int) -> pl.DataFrame:
    """An untrained model's per_query of the train + dev queries, with the folds cross_validate draws for `seed`."""
    return with_folds(split_run(problem, scores, *CHOICE_SPLITS), folds, seed)


def trained(problem: Prepared, name: str, folds: int, seeds: list[int], cv_seeds: int, epochs: int, bar: tqdm,
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


def costing(variant, params: Params) -> dict:
    """What indexing a ticket costs under the configuration: encoder passes and level blocks (model.branches.ticket_cost)
    and the encoder that makes each pass (channel S's, F's start: encoder_files.encoder_size). judged prices them."""
    return {"cost": list(ticket_cost(metric_of(variant))), "encoder": encoder_size(params.sentence.model, params.sentence.cache)}


def prices(results: dict, names: list[str]) -> dict[str, tuple | None]:
    """What indexing a ticket costs under each configuration, for shift.cheapest: (transformer weights a ticket's word
    pieces go through, index dimensions): passes times the encoder's weights, level blocks times its width. Where an
    encoder is unknown (a hub name not on disk, a report that predates its record), every configuration is priced by
    (passes, blocks) alone, as when they share one encoder."""
    costs = {name: results[name].get("cost") for name in names}
    sizes = {name: results[name].get("encoder") for name in names}
    if any(size is None for name, size in sizes.items() if costs[name]):
        return {name: cost and tuple(cost) for name, cost in costs.items()}
    return {name: cost and (cost[0] * sizes[name]["weights"], cost[1] * sizes[name]["width"]) for name, cost in costs.items()}


def label_free(problem: Prepared, variant, folds: int, seeds: list[int], cv_seeds: int, epochs: int, bar: tqdm,
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


def untrained(problem: Prepared, scores: np.ndarray, later: np.ndarray | None, folds: int, seeds: list[int],
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


def baseline_matrices(problem: Prepared, params) -> dict[str, ScoreMatrix]:
    """Every query against every ticket under the untrained methods that search: BM25 and S's row #14."""
    matrices = {"BM25": bm25_matrix(problem.tokens, params.bm25)}
    for vectors in problem.channels:
        if vectors.channel == "S":     # divided by its scale in the problem: cosine and ranks do not change
            matrices[S_ROW] = channel_matrix(vectors, S_LEVEL, "cosine")
    return matrices


def baseline_scores(problem: Prepared, params) -> dict[str, np.ndarray]:
    """Pair scores of the untrained methods: baseline_matrices' and the source's order (when it ships one)."""
    scores = {name: matrix.pair_scores(problem.pairs) for name, matrix in baseline_matrices(problem, params).items()}
    order = source_order_scores(problem.pairs)
    if order is not None:
        scores["source order"] = order
    return scores


def tests(results: dict, variants: list[str], baselines: list[str], n: int, decides: str = "rerank") -> list[dict]:
    """Each trained configuration against the first, and against each baseline, on the deciding per-query figure
    (DECIDING; baselines without it, as the source's order under retrieval, are left out)."""
    key = DECIDING[decides][1]
    pairs = [(name, variants[0]) for name in variants[1:]] + [(name, base) for name in variants for base in baselines]
    return [{"a": a, "b": b, **paired_test(results[a][key], results[b][key], n=n, seed=0)} for a, b in pairs
            if results[a].get(key) and results[b].get(key)]


def deciding_figure(figures: dict, decides: str) -> float:
    """A configuration's CV figure that ranks it: retrieval MRR@depth, or rerank MAP."""
    cv = figures[DECIDING[decides][0]]
    return cv[RETRIEVAL[0]]["mean"] if decides == "retrieve" else cv["mean"]


def judged(results: dict, variants: list[str], reference: str, final: str, n: int, decides: str = "rerank") -> dict:
    """Each trained configuration against the reference by CV (the deciding protocol's per-query figure) and under each
    shift (rerank AP: a shift's split judges a few candidates per query), shift.verdict of each, the best (shift.choose,
    by the deciding CV figure), those that pass against the best, the choice (shift.cheapest, at `prices`), and
    siamese.final (its verdict is in verdicts when it was compared)."""
    own = DECIDING[decides][1]

    def against(figures: dict, ref: dict) -> dict:
        by_shift = {OWN: paired_test(figures[own], ref[own], n=n, seed=0)}
        return by_shift | {shift: paired_test(f["query_ap"], ref["shifts"][shift]["query_ap"], n=n, seed=0)
                           for shift, f in figures["shifts"].items() if shift in ref["shifts"]}

    tested = {name: against(results[name], results[reference]) for name in variants if name != reference}
    verdicts = {name: verdict(t) for name, t in tested.items()}
    cv_map = {name: deciding_figure(results[name], decides) for name in tested}
    best = choose(cv_map, tested)
    against_best = {name: against(results[name], results[best]) for name in tested if verdicts[name] is None and name != best}
    choice = best and cheapest(best, cv_map, against_best, prices(results, list(tested)))
    return {"reference": reference, "decides": decides, "against_reference": tested, "verdicts": verdicts, "final": final,
            "best": best, "against_best": against_best, "choice": choice}


def method_figures(report: dict) -> dict[str, dict]:
    """Each configuration's figures as nested metrics (`cv.retrieve.mrr@10`, ..., `cv.rerank.map`, `dev.rerank.map`,
    `<shift>.rerank.map`: means over folds x seeds) for one MLflow run per configuration."""
    depth = 10
    figures = {}
    for name, r in report["configurations"].items():
        cv = {"rerank": {"map": r["cv_map"]["mean"]}} if r.get("cv_map") else {}
        if r.get("cv_retrieve"):
            cv["retrieve"] = {f"{m}@{depth}": r["cv_retrieve"][m]["mean"] for m in RETRIEVAL}
        figures[name] = {"cv": cv, **({"dev": {"rerank": {"map": r["dev_map"]["mean"]}}} if r.get("dev_map") else {}),
                         **{shift: {"rerank": {"map": f["map"]["mean"]}} for shift, f in r.get("shifts", {}).items() if f["map"]}}
    return figures


REPORT_KEYS = ("dataset", "command", "queries", "folds", "seeds", "cv_seeds", "configurations", "seconds")


def read_report(path: Path) -> dict:
    """An --out report, or a StepError naming the file and what is wrong with it."""
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise StepError(f"--merge: {path}: not a readable JSON report ({error})") from None
    missing = [key for key in REPORT_KEYS if key not in report] if isinstance(report, dict) else list(REPORT_KEYS)
    if missing:
        raise StepError(f"--merge: {path}: not a `ticketsim select` report (missing {', '.join(missing)})")
    return report


def merged(paths: list[Path], resamples: int, params: Params | None = None) -> dict:
    """One report of several runs on the same data and folds: of the same configurations with different seeds (stacked),
    or of different configurations with the same seeds (joined); the paired tests and the choice again, over them all.
    A configuration of a report that predates its cost or encoder's record takes them from `params` (the merging
    workspace's), where they name it."""
    reports = [read_report(path) for path in paths]
    first = reports[0]
    for path, report in zip(paths[1:], reports[1:]):
        if (report["dataset"], report["queries"], report["folds"]) != (first["dataset"], first["queries"], first["folds"]):
            raise StepError(f"--merge: {path} and {paths[0]} differ in dataset, queries or folds")
    if all(list(r["configurations"]) == list(first["configurations"]) for r in reports):
        configurations, seeds, cv_seeds = stacked(reports)
    else:
        configurations, seeds, cv_seeds = joined(paths, reports)
    names = list(configurations)
    trained_names = [n for n in names if configurations[n]["kind"] == "trained"]
    known = {**params.siamese.variants, **params.siamese.finetuned} if params else {}
    for name in trained_names:
        figures = configurations[name]
        if name in known and (figures.get("cost") is None or figures.get("encoder") is None):
            figures |= {k: v for k, v in costing(known[name], params).items() if figures.get(k) is None}
    baselines = [n for n in names if n not in trained_names]
    judgement, decides = first.get("judgement"), protocol_of(reports)
    return {**first, "command": " | ".join(r["command"] for r in reports), "seeds": seeds, "cv_seeds": cv_seeds,
            "decides": decides, "configurations": configurations,
            "tests": tests(configurations, trained_names, baselines, resamples, decides) if cv_seeds else [],
            "judgement": judged(configurations, trained_names, judgement["reference"], judgement["final"], resamples,
                                decides) if cv_seeds and judgement else None,
            "seconds": sum(r["seconds"] for r in reports)}


def protocol_of(reports: list[dict]) -> str:
    """What decides the merged report: the reports' protocol, rerank where one predates retrieval's figures."""
    every = {r.get("decides", "rerank") for r in reports}
    return "retrieve" if every == {"retrieve"} else "rerank"


def stacked(reports: list[dict]) -> tuple[dict, list[int], list[int]]:
    """The same configurations over every report's seeds: figures over every fold and seed, each query's CV AP averaged
    over all the seeds."""
    seeds = [seed for report in reports for seed in report["cv_seeds"]]
    if len(set(seeds)) < len(seeds):
        raise StepError(f"--merge: a seed is in more than one report (CV seeds {seeds})")
    names = list(reports[0]["configurations"])

    def values(name: str, key: str) -> list[float]:
        return [v for report in reports if report["configurations"][name][key] for v in report["configurations"][name][key]["values"]]

    def averaged(aps: list[dict], counts: list[int]) -> dict:   # a report's APs are already a mean over its runs
        return {q: None if any(ap[q] is None for ap in aps) else
                float(np.average([ap[q] for ap in aps], weights=counts)) for q in (aps[0] if aps else {})}

    def query_ap(name: str, key: str = "query_ap") -> dict | None:
        cv = [r for r in reports if r["cv_seeds"]]
        if not all(r["configurations"][name].get(key) is not None for r in cv):
            return None     # a report that predates the figure
        return averaged([r["configurations"][name][key] for r in cv], [len(r["cv_seeds"]) for r in cv])

    def retrieved(name: str) -> dict | None:
        each = [r["configurations"][name].get("cv_retrieve") for r in reports if r["cv_seeds"]]
        return {m: spread([v for e in each for v in e[m]["values"]]) for m in RETRIEVAL} if each and all(each) else None

    def shifts(name: str) -> dict:
        each = [r["configurations"][name].get("shifts", {}) for r in reports]
        return {shift: {"map": spread([v for f in each if shift in f for v in f[shift]["map"]["values"]]),
                        "runs": sum(f[shift]["runs"] for f in each if shift in f),
                        "query_ap": averaged([f[shift]["query_ap"] for f in each if shift in f],
                                             [f[shift]["runs"] for f in each if shift in f])}
                for shift in dict.fromkeys(s for f in each for s in f)}

    configurations = {name: {"kind": reports[0]["configurations"][name]["kind"], "cv_map": spread(values(name, "cv_map")),
                             "cv_retrieve": retrieved(name), "dev_map": spread(values(name, "dev_map")),
                             "query_ap": query_ap(name), "query_rr": query_ap(name, "query_rr"), "shifts": shifts(name),
                             "seconds": sum(r["configurations"][name]["seconds"] for r in reports),
                             **{key: reports[0]["configurations"][name][key] for key in ("cost", "encoder")
                                if key in reports[0]["configurations"][name]}} for name in names}
    return configurations, [s for r in reports for s in r["seeds"]], seeds


def joined(paths: list[Path], reports: list[dict]) -> tuple[dict, list[int], list[int]]:
    """Every report's configurations side by side, on the first report's seeds. A configuration in several reports (the
    reference, the baselines) must have the same CV AP on every query in each, as the same folds and seeds give: else the
    runs are not comparable. It is taken from the report that scored it under the most shifts."""
    first = reports[0]
    for path, report in zip(paths[1:], reports[1:]):
        if sorted(report["cv_seeds"]) != sorted(first["cv_seeds"]) or sorted(report["seeds"]) != sorted(first["seeds"]):
            raise StepError(f"--merge: {path} and {paths[0]} differ in configurations and in seeds: --merge stacks "
                             f"other seeds of the same configurations, or joins other configurations on the same seeds")
    configurations: dict[str, dict] = {}
    for path, report in zip(paths, reports):
        for name, figures in report["configurations"].items():
            kept = configurations.setdefault(name, figures)
            differ = [q for q, ap in figures["query_ap"].items() if not np.isclose(ap or 0.0, kept["query_ap"].get(q) or 0.0)]
            if differ or len(figures["query_ap"]) != len(kept["query_ap"]):
                raise StepError(f"--merge: {path}: {name} differs from its figures in an earlier report (CV AP of "
                                 f"{len(differ)} queries): not the same folds and seeds")
            if len(figures.get("shifts", {})) > len(kept.get("shifts", {})):
                configurations[name] = figures
    return configurations, first["seeds"], first["cv_seeds"]


def markdown(report: dict) -> str:
    pct = lambda figure: "–" if figure is None else f"{100 * figure['mean']:.2f} ± {100 * figure['std']:.2f}"  # noqa: E731
    seeds = lambda key: " ".join(map(str, report[key]))  # noqa: E731
    shifts = list(dict.fromkeys(s for r in report["configurations"].values() for s in r.get("shifts", {})))
    decides = report.get("decides", "rerank")
    retrieved = lambda r, m: pct((r.get("cv_retrieve") or {}).get(m))  # noqa: E731
    lines = [f"{report['dataset']}: {report['queries']} train + dev queries, {report['folds']} folds x {len(report['cv_seeds'])} "
             f"seeds (CV seeds {seeds('cv_seeds')}; dev seeds {seeds('seeds')}), {report['epochs'] or 'their own'} epochs at most; "
             "%, mean ± std over folds x seeds; CV retrieve: each held-out query searches every ticket (a ticket it does "
             "not judge counts as not relevant); rerank MAP: it orders its judged candidates"
             + ("; under each shift (ticketsim.training.shift, rerank) mean ± std over seeds" if shifts else "")
             + f". Deciding: {'CV retrieve MRR@10' if decides == 'retrieve' else 'CV rerank MAP'}.", "",
             "| configuration | CV retrieve MRR@10 | CV retrieve MAP@10 | CV retrieve nDCG@10 | CV rerank MAP | "
             "dev rerank MAP (over seeds) | " + "".join(f"{shift} MAP | " for shift in shifts) + "seconds |",
             "| --- | ---: | ---: | ---: | ---: | ---: | " + "---: | " * len(shifts) + "---: |"]
    lines += [f"| {name} | " + "".join(f"{retrieved(r, m)} | " for m in RETRIEVAL) + f"{pct(r['cv_map'])} | {pct(r['dev_map'])} | "
              + "".join(f"{pct(r.get('shifts', {}).get(shift, {}).get('map'))} | " for shift in shifts)
              + f"{r['seconds']:.0f} |" for name, r in report["configurations"].items()]
    lines += ["", f"{report['compared']} trained configurations compared (and {len(report['configurations']) - report['compared']} "
              f"untrained baselines; dev MAP of an untrained one: one run, std 0).", "",
              f"Paired tests over queries (each query's CV {'retrieve RR@10' if decides == 'retrieve' else 'rerank AP'} "
              "averaged over the seeds; queries with a relevant candidate):", "",
              "| a | b | queries | mean difference a - b (points) | 95% bootstrap interval | p (sign-flip) |",
              "| --- | --- | ---: | ---: | --- | ---: |"]
    lines += [f"| {t['a']} | {t['b']} | {t['queries']} | {100 * t['mean_difference']:+.2f} | "
              f"[{100 * t['interval'][0]:+.2f}, {100 * t['interval'][1]:+.2f}] | {t['p']:.4f} |" for t in report["tests"]]
    return "\n".join(lines + judgement_lines(report.get("judgement"), shifts))


def judgement_lines(judgement: dict | None, shifts: list[str]) -> list[str]:
    """The paired tests against the reference by CV and under each shift, each verdict, the choice (shift.cheapest)."""
    if not judgement:
        return []
    cell = lambda t: "–" if t is None else f"{100 * t['mean_difference']:+.2f}, p {t['p']:.4f}"  # noqa: E731
    reference, final = judgement["reference"], judgement["final"]
    lines = ["", f"Against the reference {reference} (siamese.unlabelled), paired over queries (mean difference in points, p; "
             f"CV: {'retrieve RR@10' if judgement.get('decides') == 'retrieve' else 'rerank AP'}, shifts: rerank AP):",
             "", "| configuration | CV | " + "".join(f"{shift} | " for shift in shifts) + "verdict |",
             "| --- | --- | " + "--- | " * len(shifts) + "--- |"]
    lines += [f"| {name} | {cell(by_shift[OWN])} | " + "".join(f"{cell(by_shift.get(shift))} | " for shift in shifts)
              + f"{judgement['verdicts'][name] or 'may be registered'} |" for name, by_shift in judgement["against_reference"].items()]
    choice, best = judgement["choice"], judgement.get("best", judgement["choice"])
    lines += ["", f"Choice (above {reference} by CV at p < .05, significantly below it under no shift; of those not "
              "significantly below the best such by CV anywhere, the one whose encoder passes weigh least per ticket, then "
              "the fewest index dimensions): " + (choice or f"none: register {reference}")
              + ("" if choice == best else f" (the best by CV: {best})")]
    lines += [f"- {name} against {best}: " + ", ".join(f"{shift} {cell(t)}" for shift, t in by_shift.items())
              for name, by_shift in judgement.get("against_best", {}).items()]
    if final in judgement["verdicts"]:
        lines.append(f"siamese.final = {final}: {judgement['verdicts'][final] or 'may be registered'}"
                     + ("" if final == choice else f"; the choice is {choice or reference}"))
    return lines


def load_problem(params: Params, workspace: Path, dataset: str, names: list[str], channels: set[str] = frozenset(),
                 splits: tuple[str, ...] = CHOICE_SPLITS) -> Prepared:
    """The Prepared of `dataset` from the workspace's tuner files (the same inputs), with the cached channels the named
    variants read and `channels`; one-line errors for an unknown name or a missing cache."""
    params.dataset(dataset)
    every = {**params.siamese.variants, **params.siamese.finetuned}
    unknown = [name for name in names if name not in every]
    if unknown:
        raise StepError(f"--variants {' '.join(unknown)}: not in siamese.variants or siamese.finetuned (have: {', '.join(every)})")
    files = stage_paths("tune", dataset, workspace)
    needed = set().union(channels, *(reads(metric_of(every[name])) for name in names)) & set(CHANNELS)
    missing = [str(cache_path(files["channels"], c)) for c in sorted(needed) if not cache_path(files["channels"], c).is_file()]
    missing += [path for path in (files["corpus"], files["tokens"], *word_files(files["channels"])) if not Path(path).exists()]
    if missing:
        stages = " ".join(dvc_stage(dataset, c) for c in sorted(needed | {"E"}))    # E: the word table
        raise StepError(f"{', '.join(missing)} missing: run `dvc repro {stages}` in {workspace} first")
    return prepare_files(params, files["corpus"], files["tokens"], files["channels"], [every[name] for name in names],
                         splits=splits, also=CHANNELS)


def select(problem: Prepared, variants: list[str], shifts: Shifts, folds: int, seeds: list[int], cv_seeds: int,
           epochs: int | None, baselines: bool, resamples: int, decides: str = "retrieve") -> dict:
    """The report of `ticketsim select` on a Prepared (less its command, dataset, workspace and seconds): every configuration
    cross-validated for the first cv_seeds seeds and trained per seed, scored under `shifts`, the baselines beside them,
    the paired tests and the judgement against the zero-shot reference (siamese.unlabelled)."""
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
    return {"queries": problem.pairs.filter(pl.col("split").is_in(CHOICE_SPLITS))["query_id"].n_unique(),
            "folds": folds, "seeds": seeds, "cv_seeds": seeds[:cv_seeds], "epochs": epochs, "compared": len(variants),
            "decides": decides, "configurations": results,
            "tests": tests(results, variants, list(scores), resamples, decides) if cv_seeds else [],
            "judgement": judged(results, variants, params.siamese.unlabelled, params.siamese.final, resamples, decides)
            if cv_seeds else None}


def write(report: dict, out: Path | None) -> None:
    """The report as JSON to `out`, where one is given."""
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2) + "\n")

