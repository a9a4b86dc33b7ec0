"""Results for people: a Markdown table and a bar plot (PNG, so DVC and MLflow show it offline)."""
from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ticketsim.evaluate.measures import RELEVANT

Results = dict[str, dict[str, dict[str, dict[str, float]]]]  # method -> split -> protocol -> measure -> value


def markdown_table(results: Results, split: str) -> str:
    """One row per method, one column per protocol.measure, values in percent except MSE and correlations; a heading
    row starts each block (block_of) when the table has more than one."""
    columns = sorted({(p, m) for by_split in results.values() for p, ms in by_split.get(split, {}).items() for m in ms},
                     key=lambda c: (c[0] != "rerank", c[0], c[1]))
    header = "| method | " + " | ".join(f"{p} {m}" for p, m in columns) + " |"
    lines = [header, "|" + " --- |" * (len(columns) + 1)]
    blocks = [block_of(method) for method in results]
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


def write_results(results: Results, metrics: str | Path, reports: str | Path, plots: str | Path, title: str) -> None:
    """The metrics JSON (for `dvc metrics`), a Markdown table and a bar plot per evaluated split."""
    reports, plots = Path(reports), Path(plots)
    write_metrics(results, metrics)
    reports.mkdir(parents=True, exist_ok=True)
    for split in sorted({s for by_split in results.values() for s in by_split}):
        (reports / f"{split}.md").write_text(markdown_table(results, split))
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
BASELINES = ("bm25", "source_order")


def block_of(method: str) -> str:
    """The results table's block of a method, from its name: 'E#11 sub-sub l1' and '#22-tuned' are the paper's rows,
    'S#14 ...' and named variants ('#22+S+L', '#best-tuned') go beyond it, names without '#' are comparator models."""
    if method in BASELINES:
        return "baselines"
    if "#" not in method:
        return "comparators"
    row = method.split("#", 1)[1].split()[0].split("-")[0]
    return "the paper" if row.isdigit() and not method.startswith("S#") else "beyond the paper"


def table5(parts: list[Results]) -> Results:
    """Every method's results in one table: the paper's Table 5 rows by row number '#n', then the baselines, the rows
    beyond the paper and the comparators, each block in the order its parts list it."""
    merged = {method: by_split for part in parts for method, by_split in part.items() if method != "training"}

    def order(method: str) -> tuple[int, int]:
        row = method.split("#", 1)[1].split()[0].split("-")[0] if "#" in method else ""
        return BLOCKS.index(block_of(method)), int(row) if row.isdigit() else 1000

    return {method: merged[method] for method in sorted(merged, key=order)}   # stable: equal keys keep their order


def semeval_predictions(scored: pl.DataFrame) -> str:
    """The official SemEval scorer's format: 'qid relqid 0 score true|false', tab-separated, one line per pair.

    `scored` has query_id, ticket_id, score (higher = more similar) and calibrated (1-5): a pair is predicted
    relevant (true) when its calibrated score reaches REL.
    """
    return "".join(f"{q}\t{t}\t0\t{score:.6f}\t{'true' if calibrated >= RELEVANT else 'false'}\n"
                   for q, t, score, calibrated in scored.select("query_id", "ticket_id", "score", "calibrated").iter_rows())
