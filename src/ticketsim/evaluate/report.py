"""Results for people: a Markdown table and a bar plot (PNG, so DVC and MLflow show it offline)."""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ticketsim.evaluate.measures import RELEVANT

Results = dict[str, dict[str, dict[str, dict[str, float]]]]  # method -> split -> protocol -> measure -> value


def markdown_table(results: Results, split: str, blocks: Mapping[str, str] | None = None) -> str:
    """One row per method, one column per protocol.measure, values in percent except MSE and correlations; a heading
    row starts each block (`blocks`: method -> its block) when the table has more than one."""
    columns = sorted({(p, m) for by_split in results.values() for p, ms in by_split.get(split, {}).items() for m in ms},
                     key=lambda c: (c[0] != "rerank", c[0], c[1]))
    header = "| method | " + " | ".join(f"{p} {m}" for p, m in columns) + " |"
    lines = [header, "|" + " --- |" * (len(columns) + 1)]
    blocks = [(blocks or {}).get(method, "") for method in results]
    for i, (method, by_split) in enumerate(results.items()):
        if len(set(blocks)) > 1 and (i == 0 or blocks[i] != blocks[i - 1]):
            lines.append(f"| **{blocks[i]}** |" + " |" * len(columns))
        cells = [format_value(m, by_split.get(split, {}).get(p, {}).get(m)) for p, m in columns]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
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


def write_results(results: Results, metrics: str | Path, reports: str | Path, plots: str | Path, title: str,
                  blocks: str | Mapping[str, str]) -> None:
    """The metrics JSON (for `dvc metrics`), a Markdown table and a bar plot per evaluated split. `blocks`: the results
    table's block of every method (one name, which the metrics file records for table5) or of each (method -> block)."""
    reports, plots = Path(reports), Path(plots)
    write_metrics({**results, BLOCK: blocks} if isinstance(blocks, str) else results, metrics)
    reports.mkdir(parents=True, exist_ok=True)
    by_method = dict.fromkeys(results, blocks) if isinstance(blocks, str) else blocks
    for split in sorted({s for by_split in results.values() for s in by_split}):
        (reports / f"{split}.md").write_text(markdown_table(results, split, by_method))
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
NOT_METHODS = ("training", BLOCK, "unevaluated")   # the other keys of a results file
PAPER_CHANNELS = frozenset("hET")   # the paper's own: the LSTM's h, SumEMB's E, DocNADE's T


def block_of(channels: Iterable[str]) -> str:
    """The results table's block of a row that weighs `channels`: the paper's when it weighs only the paper's."""
    return "the paper" if set(channels) <= PAPER_CHANNELS else "beyond the paper"


def table5(parts: list[dict]) -> tuple[Results, dict[str, str]]:
    """Every method of the results files `parts` in one table, and each method's block (its file's BLOCK): the
    paper's Table 5 rows by row number '#n', then the baselines, the rows beyond the paper and the comparators, each
    block in the order its parts list it."""
    if missing := [sorted(part)[:3] for part in parts if BLOCK not in part]:
        raise ValueError(f"a results file names no {BLOCK!r} (methods {missing[0]}): write it with write_results or add it")
    merged = {method: by_split for part in parts for method, by_split in part.items() if method not in NOT_METHODS}
    blocks = {method: part[BLOCK] for part in parts for method in part if method not in NOT_METHODS}

    def order(method: str) -> tuple[int, int]:
        row = method.split("#", 1)[1].split()[0].split("-")[0] if "#" in method else ""
        return BLOCKS.index(blocks[method]), int(row) if row.isdigit() else 1000

    ordered = sorted(merged, key=order)   # stable: equal keys keep their order
    return {method: merged[method] for method in ordered}, {method: blocks[method] for method in ordered}


def semeval_predictions(scored: pl.DataFrame) -> str:
    """The official SemEval scorer's format: 'qid relqid 0 score true|false', tab-separated, one line per pair.

    `scored` has query_id, ticket_id, score (higher = more similar) and calibrated (1-5): a pair is predicted
    relevant (true) when its calibrated score reaches REL. Scores keep 9 significant digits, not 6 decimals: g = exp(-d)
    of a far pair is below 1e-6, and six decimals made such pairs tie at 0 for the scorer's ranking.
    """
    return "".join(f"{q}\t{t}\t0\t{score:.9g}\t{'true' if calibrated >= RELEVANT else 'false'}\n"
                   for q, t, score, calibrated in scored.select("query_id", "ticket_id", "score", "calibrated").iter_rows())
