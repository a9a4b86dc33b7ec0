"""The report of `ticketsim select` as one typed value (SelectReport): each configuration's figures (CV retrieval:
MRR@10, MAP@10, nDCG@10 of each held-out query searching every ticket; CV rerank MAP over the train + dev queries; dev
MAP; each query's AP and RR averaged over the seeds; each shift's figures), the paired tests over queries, and the
judgement against the reference (siamese.unlabelled) by CV and under each shift that says what siamese.final should be
(ticketsim.training.shift: choose, cheapest). The dataset's protocol (datasets.<name>.decides: retrieve, or rerank for
SemEval) decides: its CV figure ranks the configurations and its per-query figure (RR@10, or rerank AP) is what the
paired tests compare.

Reports of seeds run side by side (one process per core, each with its --seeds and --out) merge into one
(SelectReport.merge); so do runs of other configurations on the same seeds and folds. select_run makes a report,
select_render writes it as Markdown and JSON.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import polars as pl

from ticketsim.channels.encoder_files import encoder_size
from ticketsim.config import Params
from ticketsim.errors import StepError
from ticketsim.evaluate.protocols import query_means
from ticketsim.model.branches import ticket_cost
from ticketsim.scoring.weights import metric_of
from ticketsim.training.selection import OWN, fold_maps, mean_ap, paired_test
from ticketsim.training.shift import cheapest, choose, verdict

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


@dataclass(frozen=True)
class SelectReport:
    """One `ticketsim select` report: how it ran (the command, the dataset and its train + dev queries, folds, seeds,
    epochs), each configuration's figures by name (`summary`'s, with `costing`'s for a trained one), the paired tests
    and the judgement (None without CV seeds). Its JSON (select_render.as_json) keeps the fields in this order."""

    command: str
    queries: int
    folds: int
    seeds: list[int]
    cv_seeds: list[int]
    epochs: int | None
    compared: int           # trained configurations; the rest of `configurations` are untrained baselines
    decides: str
    configurations: dict[str, dict]
    tests: list[dict]
    judgement: dict | None
    dataset: str
    workspace: str | None   # None: a report that predates its record
    seconds: float

    @classmethod
    def read(cls, path: Path) -> SelectReport:
        """An --out report, or a StepError naming the file and what is wrong with it; a report that predates a figure
        (decides, workspace) reads with its default."""
        try:
            raw = json.loads(path.read_text())
        except (OSError, ValueError) as error:
            raise StepError(f"--merge: {path}: not a readable JSON report ({error})") from None
        missing = [key for key in REQUIRED if key not in raw] if isinstance(raw, dict) else list(REQUIRED)
        if missing:
            raise StepError(f"--merge: {path}: not a `ticketsim select` report (missing {', '.join(missing)})")
        return cls(**{f.name: raw.get(f.name, OPTIONAL.get(f.name)) for f in fields(cls)})

    @classmethod
    def merge(cls, paths: list[Path], resamples: int, params: Params | None = None) -> SelectReport:
        """One report of several runs on the same data and folds: of the same configurations with different seeds
        (stacked), or of different configurations with the same seeds (joined); the paired tests and the choice again,
        over them all. A configuration of a report that predates its cost or encoder's record takes them from `params`
        (the merging workspace's), where they name it."""
        reports = [cls.read(path) for path in paths]
        first = reports[0]
        for path, report in zip(paths[1:], reports[1:]):
            if (report.dataset, report.queries, report.folds) != (first.dataset, first.queries, first.folds):
                raise StepError(f"--merge: {path} and {paths[0]} differ in dataset, queries or folds")
        if all(list(r.configurations) == list(first.configurations) for r in reports):
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
        judgement = first.judgement
        decides = "retrieve" if {r.decides for r in reports} == {"retrieve"} else "rerank"
        return cls(command=" | ".join(r.command for r in reports), queries=first.queries, folds=first.folds, seeds=seeds,
                   cv_seeds=cv_seeds, epochs=first.epochs, compared=first.compared, decides=decides,
                   configurations=configurations,
                   tests=tests(configurations, trained_names, baselines, resamples, decides) if cv_seeds else [],
                   judgement=judged(configurations, trained_names, judgement["reference"], judgement["final"], resamples,
                                    decides) if cv_seeds and judgement else None,
                   dataset=first.dataset, workspace=first.workspace, seconds=sum(r.seconds for r in reports))


REQUIRED = ("dataset", "command", "queries", "folds", "seeds", "cv_seeds", "configurations", "seconds")
# What a report that predates a field reads: rerank decided before retrieval's figures were recorded.
OPTIONAL = {"epochs": None, "compared": 0, "decides": "rerank", "tests": [], "judgement": None, "workspace": None}


def stacked(reports: list[SelectReport]) -> tuple[dict, list[int], list[int]]:
    """The same configurations over every report's seeds: figures over every fold and seed, each query's CV AP averaged
    over all the seeds."""
    seeds = [seed for report in reports for seed in report.cv_seeds]
    if len(set(seeds)) < len(seeds):
        raise StepError(f"--merge: a seed is in more than one report (CV seeds {seeds})")
    names = list(reports[0].configurations)

    def values(name: str, key: str) -> list[float]:
        return [v for report in reports if report.configurations[name][key] for v in report.configurations[name][key]["values"]]

    def averaged(aps: list[dict], counts: list[int]) -> dict:   # a report's APs are already a mean over its runs
        return {q: None if any(ap[q] is None for ap in aps) else
                float(np.average([ap[q] for ap in aps], weights=counts)) for q in (aps[0] if aps else {})}

    def query_ap(name: str, key: str = "query_ap") -> dict | None:
        cv = [r for r in reports if r.cv_seeds]
        if not all(r.configurations[name].get(key) is not None for r in cv):
            return None     # a report that predates the figure
        return averaged([r.configurations[name][key] for r in cv], [len(r.cv_seeds) for r in cv])

    def retrieved(name: str) -> dict | None:
        each = [r.configurations[name].get("cv_retrieve") for r in reports if r.cv_seeds]
        return {m: spread([v for e in each for v in e[m]["values"]]) for m in RETRIEVAL} if each and all(each) else None

    def shifts(name: str) -> dict:
        each = [r.configurations[name].get("shifts", {}) for r in reports]
        return {shift: {"map": spread([v for f in each if shift in f for v in f[shift]["map"]["values"]]),
                        "runs": sum(f[shift]["runs"] for f in each if shift in f),
                        "query_ap": averaged([f[shift]["query_ap"] for f in each if shift in f],
                                             [f[shift]["runs"] for f in each if shift in f])}
                for shift in dict.fromkeys(s for f in each for s in f)}

    first = reports[0].configurations
    configurations = {name: {"kind": first[name]["kind"], "cv_map": spread(values(name, "cv_map")),
                             "cv_retrieve": retrieved(name), "dev_map": spread(values(name, "dev_map")),
                             "query_ap": query_ap(name), "query_rr": query_ap(name, "query_rr"), "shifts": shifts(name),
                             "seconds": sum(r.configurations[name]["seconds"] for r in reports),
                             **{key: first[name][key] for key in ("cost", "encoder") if key in first[name]}} for name in names}
    return configurations, [s for r in reports for s in r.seeds], seeds


def joined(paths: list[Path], reports: list[SelectReport]) -> tuple[dict, list[int], list[int]]:
    """Every report's configurations side by side, on the first report's seeds. A configuration in several reports (the
    reference, the baselines) must have the same CV AP on every query in each, as the same folds and seeds give: else the
    runs are not comparable. It is taken from the report that scored it under the most shifts."""
    first = reports[0]
    for path, report in zip(paths[1:], reports[1:]):
        if sorted(report.cv_seeds) != sorted(first.cv_seeds) or sorted(report.seeds) != sorted(first.seeds):
            raise StepError(f"--merge: {path} and {paths[0]} differ in configurations and in seeds: --merge stacks "
                             f"other seeds of the same configurations, or joins other configurations on the same seeds")
    configurations: dict[str, dict] = {}
    for path, report in zip(paths, reports):
        for name, figures in report.configurations.items():
            kept = configurations.setdefault(name, figures)
            differ = [q for q, ap in figures["query_ap"].items() if not np.isclose(ap or 0.0, kept["query_ap"].get(q) or 0.0)]
            if differ or len(figures["query_ap"]) != len(kept["query_ap"]):
                raise StepError(f"--merge: {path}: {name} differs from its figures in an earlier report (CV AP of "
                                 f"{len(differ)} queries): not the same folds and seeds")
            if len(figures.get("shifts", {})) > len(kept.get("shifts", {})):
                configurations[name] = figures
    return configurations, first.seeds, first.cv_seeds
