"""Results for people: a Markdown table and a bar plot (PNG, so DVC and MLflow show it offline), from results files
(method -> split -> protocol -> measure, with their block and, for a method trained over seeds, its spread) merged
into one table."""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ticketsim.evaluate.measures import RELEVANT

Results = dict[str, dict[str, dict[str, dict[str, float]]]]  # method -> split -> protocol -> measure -> value


def markdown_table(results: Results, split: str, blocks: Mapping[str, str] | None = None,
                   sd: Mapping[str, Mapping] | None = None, marked: str | None = None) -> str:
    """One row per method, one column per protocol.measure, values in percent except MSE and correlations; a heading
    row starts each block (`blocks`: method -> its block) when the table has more than one; a method trained over
    seeds (`sd`: method -> its figures' standard deviation) shows mean ± sd; the `marked` method (the registered one)
    in bold."""
    columns = sorted({(p, m) for by_split in results.values() for p, ms in by_split.get(split, {}).items() for m in ms},
                     key=lambda c: (c[0] != "rerank", c[0], c[1]))
    header = "| method | " + " | ".join(f"{p} {m}" for p, m in columns) + " |"
    lines = [header, "|" + " --- |" * (len(columns) + 1)]
    blocks = [(blocks or {}).get(method, "") for method in results]
    for i, (method, by_split) in enumerate(results.items()):
        if len(set(blocks)) > 1 and (i == 0 or blocks[i] != blocks[i - 1]):
            lines.append(f"| **{blocks[i]}** |" + " |" * len(columns))
        spread = (sd or {}).get(method, {}).get(split, {})
        cells = [format_value(m, by_split.get(split, {}).get(p, {}).get(m))
                 + (f" ± {format_value(m, spread[p][m])}" if m in spread.get(p, {}) else "") for p, m in columns]
        lines.append(f"| {f'**{method}** (registered)' if method == marked else method} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def format_value(measure: str, value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.3f}" if measure in ("pearson", "spearman", "mse") else f"{100 * value:.2f}"


def bar_plot(results: Results, split: str, path: str | Path, title: str,
             bars: tuple[tuple[str, str], ...] = (("rerank", "map"), ("retrieve", "map@10"), ("retrieve", "acc@10"))) -> None:
    from matplotlib.figure import Figure  # a second of imports: only where a plot is drawn; no pyplot, no global state

    methods = list(results)
    fig = Figure(figsize=(1.5 + 1.2 * len(methods) * len(bars) / 2, 3.5))
    ax = fig.subplots()
    width = 0.8 / len(bars)
    for i, (protocol, measure) in enumerate(bars):
        values = [results[m].get(split, {}).get(protocol, {}).get(measure, float("nan")) for m in methods]
        ax.bar([x + i * width for x in range(len(methods))], values, width, label=f"{protocol} {measure}")
    ax.set_xticks([x + width * (len(bars) - 1) / 2 for x in range(len(methods))], methods)
    ax.set_ylim(0, 1)
    ax.set_title(title)
    ax.legend(fontsize="small")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


def write_metrics(metrics: Mapping[str, Any], path: str | Path) -> None:
    """A stage's metrics JSON, the file `dvc metrics show` reads."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(metrics, indent=2) + "\n")


def registered_note(registered: str, protocol: str) -> str:
    """The tables' note under Table 5: the registered row and the figure that chose it."""
    figure = ("CV retrieve MRR@10 (each held-out train + dev query searching every ticket)" if protocol == "retrieve"
              else "CV rerank MAP (each held-out train + dev query ordering its judged candidates)")
    return (f"Registered: `{registered}` (siamese.final), chosen by {figure} with `ticketsim select`'s rule "
            "(docs/model.md). Retrieve columns: each query searches every ticket and a ticket its split does not judge "
            "counts as not relevant, so they are the user's figures where a split judges every relevant ticket (the "
            "test split's end-user queries); dev and lay judge three candidates per query: read their rerank columns.")


def write_results(results: Results, metrics: str | Path, reports: str | Path, plots: str | Path, title: str,
                  blocks: str | Mapping[str, str], sd: Mapping[str, Mapping] | None = None,
                  extra: Mapping[str, Any] | None = None, marked: str | None = None, note: str = "") -> None:
    """The metrics JSON (for `dvc metrics`), a Markdown table and a bar plot per evaluated split. `blocks`: the results
    table's block of every method (one name, which the metrics file records for table5) or of each (method -> block);
    `sd`: the standard deviation over seeds of the methods trained over several (under SD in the metrics file, ± in the
    tables); `extra`: more keys of the metrics file; `marked`: the registered method, in bold; `note`: a paragraph
    under each table (what decided)."""
    reports, plots = Path(reports), Path(plots)
    write_metrics({**results, **({BLOCK: blocks} if isinstance(blocks, str) else {}), **({SD: sd} if sd else {}),
                   **(extra or {})}, metrics)
    reports.mkdir(parents=True, exist_ok=True)
    by_method = dict.fromkeys(results, blocks) if isinstance(blocks, str) else blocks
    for split in sorted({s for by_split in results.values() for s in by_split}):
        (reports / f"{split}.md").write_text(markdown_table(results, split, by_method, sd, marked) + (f"\n{note}\n" if note else ""))
        bar_plot(results, split, plots / f"{split}.png", f"{title}, {split} split")


def reliability_plot(calibrated: np.ndarray, gold: np.ndarray, path: str | Path, title: str, bins: int = 8) -> None:
    """Mean gold label per bin of calibrated score, against the diagonal of perfect calibration."""
    edges = np.linspace(1, 5, bins + 1)
    which = np.clip(np.digitize(calibrated, edges) - 1, 0, bins - 1)
    centres, means, counts = [], [], []
    for b in range(bins):
        if (which == b).any():
            centres.append(calibrated[which == b].mean())
            means.append(gold[which == b].mean())
            counts.append(int((which == b).sum()))
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4, 4))
    ax = fig.subplots()
    ax.plot([1, 5], [1, 5], color="grey", linestyle="--", label="perfect")
    ax.scatter(centres, means, s=[10 + 3 * c for c in counts], label="bins (size = pairs)")
    ax.set(xlim=(1, 5), ylim=(1, 5), xlabel="calibrated score", ylabel="mean gold label", title=title)
    ax.legend(fontsize="small")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


BLOCKS = ("the paper", "baselines", "beyond the paper", "comparators")
BLOCK = "block"                     # the key of a results file that names its block (beside its methods and "training")
SD = "sd"                           # method -> each figure's standard deviation over the seeds it was trained with
SEEDS = "seeds"                     # each seed's own results file, with its "seed": a list, which `dvc metrics` skips
QUERY_AP = "query_ap"               # a trained run's split -> [[query_id, AP], ...] (rerank): what a paired test reads
NOT_METHODS = ("training", BLOCK, "unevaluated", SD, SEEDS, QUERY_AP)   # the other keys of a results file
PAPER_CHANNELS = frozenset("hET")   # the paper's own: the LSTM's h, SumEMB's E, DocNADE's T


def block_of(channels: Iterable[str]) -> str:
    """The results table's block of a row that weighs `channels`: the paper's when it weighs only the paper's."""
    return "the paper" if set(channels) <= PAPER_CHANNELS else "beyond the paper"


def over_seeds(runs: Mapping[int, Mapping[str, Any]]) -> dict:
    """One results file of a method trained once per seed (seed -> that run's results file, as a row or comparator
    writes it): each figure's mean over the seeds (the table's figure), its sample standard deviation under SD (0 for
    one seed), every run under SEEDS with its seed, the block, and the seconds of all the runs."""
    first = next(iter(runs.values()))
    methods = [key for key in first if key not in NOT_METHODS]
    spread = lambda values: float(np.std(values, ddof=1)) if len(values) > 1 else 0.0  # noqa: E731
    return {**{m: combine([run[m] for run in runs.values()], lambda values: float(np.mean(values))) for m in methods},
            SD: {m: combine([run[m] for run in runs.values()], spread) for m in methods},
            SEEDS: [{"seed": seed, **run} for seed, run in runs.items()], BLOCK: first[BLOCK],
            "training": {"seconds": round(sum(run["training"]["seconds"] for run in runs.values()), 1)}}


def run_figures(results: Mapping[str, Any], method: str) -> dict:
    """What the MLflow run of a results file logs: its method's figures, its training and, over seeds, SD: the
    figures' standard deviation."""
    return {**results.get(method, {}), "training": results["training"], **({SD: results[SD][method]} if SD in results else {})}


def headline(results: Mapping[str, Any], method: str) -> str:
    """What a results file's method reached: its dev rerank MAP (± its sd over the seeds), then each split's but test's."""
    maps = {split: by["rerank"]["map"] for split, by in results.get(method, {}).items() if "rerank" in by}
    if "dev" not in maps:
        return "not evaluated (no labelled pairs)"
    spread = f" ± {100 * results[SD][method]['dev']['rerank']['map']:.2f} over {len(results[SEEDS])} seeds" if SEEDS in results else ""
    return f"dev rerank MAP {100 * maps['dev']:.2f}{spread}" + "".join(
        f", {split} {100 * value:.2f}" for split, value in maps.items() if split not in ("dev", "test"))


def combine(figures: list[Any], reduce: Any) -> Any:
    """The nested figures of several runs (dicts alike down to numbers) as one, `reduce` applied to each number's list."""
    if isinstance(figures[0], Mapping):
        return {key: combine([f[key] for f in figures], reduce) for key in figures[0]}
    return reduce(figures)


@dataclass(frozen=True)
class Table:
    """Every method of a dataset's results files in one table (table5)."""

    results: Results                    # method -> split -> protocol -> measure; a method trained over seeds: the mean
    blocks: dict[str, str]              # method -> its block
    sd: dict[str, dict]                 # method trained over seeds -> its figures' standard deviation
    seeds: dict[str, list[dict]]        # method trained over seeds -> each seed's results file (SEEDS)

    @property
    def seed_numbers(self) -> list[int]:
        """Every seed a method of the table was trained with, in order."""
        return sorted({run["seed"] for runs in self.seeds.values() for run in runs})


def table5(parts: list[dict]) -> Table:
    """Every method of the results files `parts` in one table, each method in its file's BLOCK: the paper's Table 5
    rows by row number '#n', then the baselines, the rows beyond the paper and the comparators, each block in the
    order its parts list it; a method trained over seeds with their spread and each seed's results."""
    if missing := [sorted(part)[:3] for part in parts if BLOCK not in part]:
        raise ValueError(f"a results file names no {BLOCK!r} (methods {missing[0]}): write it with write_results or add it")
    merged = {method: by_split for part in parts for method, by_split in part.items() if method not in NOT_METHODS}
    blocks = {method: part[BLOCK] for part in parts for method in part if method not in NOT_METHODS}

    def order(method: str) -> tuple[int, int]:
        row = method.split("#", 1)[1].split()[0].split("-")[0] if "#" in method else ""
        return BLOCKS.index(blocks[method]), int(row) if row.isdigit() else 1000

    ordered = sorted(merged, key=order)   # stable: equal keys keep their order
    seeded = [part for part in parts if SEEDS in part]
    return Table({method: merged[method] for method in ordered}, {method: blocks[method] for method in ordered},
                 {method: sd for part in seeded for method, sd in part[SD].items()},
                 {method: part[SEEDS] for part in seeded for method in part[SD]})


def seeds_table(table: Table, split: str, protocol: str = "rerank", measure: str = "map") -> str:
    """Each seed's figure of every method trained over seeds, and their mean ± sd, as a Markdown table in the table's
    order."""
    seeds = table.seed_numbers
    lines = [f"| method | {' | '.join(f'seed {s}' for s in seeds)} | mean ± sd |", "|" + " --- |" * (len(seeds) + 2)]
    for method in (m for m in table.results if m in table.seeds):
        by_seed = {run["seed"]: run[method].get(split, {}).get(protocol, {}).get(measure) for run in table.seeds[method]}
        mean, sd = (figures.get(split, {}).get(protocol, {}).get(measure) for figures in (table.results[method], table.sd[method]))
        lines.append(f"| {method} | {' | '.join(format_value(measure, by_seed.get(s)) for s in seeds)} | "
                     f"{format_value(measure, mean)} ± {format_value(measure, sd)} |")
    return "\n".join(lines) + "\n"


def semeval_predictions(scored: pl.DataFrame) -> str:
    """The official SemEval scorer's format: 'qid relqid 0 score true|false', tab-separated, one line per pair.

    `scored` has query_id, ticket_id, score (higher = more similar) and calibrated (1-5): a pair is predicted
    relevant (true) when its calibrated score reaches REL. Scores keep 9 significant digits, not 6 decimals: g = exp(-d)
    of a far pair is below 1e-6, and six decimals made such pairs tie at 0 for the scorer's ranking.
    """
    return "".join(f"{q}\t{t}\t0\t{score:.9g}\t{'true' if calibrated >= RELEVANT else 'false'}\n"
                   for q, t, score, calibrated in scored.select("query_id", "ticket_id", "score", "calibrated").iter_rows())
