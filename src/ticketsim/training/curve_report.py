"""The report of `ticketsim curve` (ticketsim.workflows.curve): what agents' clicks buy. The learning curve of
ticketsim.training.learning_curve rendered as a Markdown table (which the workflow prints), written as JSON and as a
PNG (the deciding CV figure, retrieve MRR@10 or rerank MAP, against judged queries, a band over the seeds, the untrained
methods as horizontal lines), and logged to MLflow (a `curve` run: the table, the JSON and the PNG).
"""
from __future__ import annotations

import json
from pathlib import Path

from ticketsim.training.learning_curve import ALL


def pct(figure: dict | float | None) -> str:
    if figure is None:
        return "–"
    return f"{100 * figure:.2f}" if isinstance(figure, float) else f"{100 * figure['mean']:.2f} ± {100 * figure['std']:.2f}"


def versus(test: dict | None) -> str:
    if test is None:
        return ""
    low, high = test["interval"]
    return f"{100 * test['mean_difference']:+.2f} [{100 * low:+.2f}, {100 * high:+.2f}], p {test['p']:.4f}"


def deciding(report: dict) -> tuple[str, str]:
    """The report's deciding CV figure: its key and its name."""
    return ("cv_retrieve", "retrieve MRR@10") if report.get("decides") == "retrieve" else ("cv_map", "rerank MAP")


def markdown(report: dict) -> str:
    """The curves, one row per configuration and size, then the untrained lines (0 judged queries)."""
    extra = report["extra"]
    skipped = (f"; skipped, above the smallest pool: {', '.join(report['skipped'])}" if report["skipped"] else "")
    low, high = report["pool"]
    _, figure = deciding(report)
    lines = [f"{report['dataset']}: CV retrieve MRR@10 (each held-out query searching every ticket) and rerank MAP (%) by "
             f"{report['folds']}-fold CV over {report['queries']} train + dev queries, seeds "
             f"{' '.join(map(str, report['seeds']))}; each fold's model trains on n judged queries of its pool of "
             f"{low if low == high else f'{low}-{high}'} (`all`: the whole pool){skipped}. The paired test reads "
             f"{figure}.", "",
             "| configuration | judged queries | CV retrieve MRR@10 (mean ± std over seeds) | CV rerank MAP | "
             + "".join(f"{name} MAP | " for name in extra) + f"vs {report['reference']} (paired, points) |",
             "| --- | ---: | ---: | ---: | " + "---: | " * len(extra) + "--- |"]
    for name, points in report["curves"].items():
        lines += [f"| {name} | {p['size']} | {pct(p.get('cv_retrieve'))} | {pct(p['cv_map'])} | "
                  + "".join(f"{pct(p['extra'][x])} | " for x in extra) + f"{versus(p['vs_reference'])} |" for p in points]
    lines += [f"| {name} (untrained) | 0 | {pct(line.get('cv_retrieve'))} | {pct(line['cv_map'])} | "
              + "".join(f"{pct(line['extra'].get(x))} | " for x in extra) + " |" for name, line in report["lines"].items()]
    return "\n".join(lines)


def plot(report: dict, path: Path) -> None:
    """The deciding CV figure against judged queries: each curve with a band of ± one std over the seeds, each untrained
    line flat."""
    from matplotlib.figure import Figure  # no pyplot, no global state (as ticketsim.evaluate.report)

    key, figure = deciding(report)
    fig = Figure(figsize=(6.5, 4))
    ax = fig.subplots()
    for name, points in report["curves"].items():
        x = [p["queries"] for p in points]
        mean = [100 * p[key]["mean"] for p in points]
        std = [100 * p[key]["std"] for p in points]
        ax.plot(x, mean, marker="o", label=name)
        ax.fill_between(x, [m - s for m, s in zip(mean, std)], [m + s for m, s in zip(mean, std)], alpha=0.2)
    for i, (name, line) in enumerate(report["lines"].items()):
        ax.axhline(100 * line[key], linestyle=("--", ":", "-.")[i % 3], color=f"C{i + len(report['curves'])}",
                   label=f"{name} (no judged query)")
    points = next(iter(report["curves"].values()))    # every curve has the same sizes
    ax.set_xticks([p["queries"] for p in points], [f"all ({p['queries']:.0f})" if p["size"] == ALL else p["size"] for p in points])
    ax.set_xlabel("judged queries a model trains on")
    ax.set_ylabel(f"{figure}, {report['folds']}-fold CV (%)")
    ax.set_title(f"{report['dataset']}: what judged queries buy (seeds {' '.join(map(str, report['seeds']))})")
    ax.legend(fontsize="small")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


def write(report: dict, out: Path | None, png: Path | None) -> str:
    """Write the JSON and the PNG where asked. Returns the table (for the workflow to print)."""
    table = markdown(report)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2) + "\n")
    if png:
        plot(report, png)
    return table


def log(params, report: dict, table: str, files: list[Path]) -> None:
    """A `curve` run in the configured experiment: what was run as params, the table and the files as artifacts."""
    import mlflow

    from ticketsim.lifecycle.tracking import log_artifacts, stage_run

    logged = {key: " ".join(map(str, report[key])) for key in ("sizes", "seeds")} | {
        "folds": report["folds"], "variants": " ".join(report["curves"]), "reference": report["reference"]}
    with stage_run(params.tracking, "curve", report["dataset"], logged):
        mlflow.log_text(table, "curve.md")
        log_artifacts(*files)
