"""A SelectReport (ticketsim.training.select_report) written out: its Markdown tables (the configurations' figures, the
paired tests, the judgement against the reference), its JSON, and each configuration's figures as nested metrics for
its MLflow run. Text in, nothing printed: the workflow (ticketsim.workflows.select) says it."""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from ticketsim.training.select_report import RETRIEVAL, SelectReport
from ticketsim.training.selection import OWN


def as_json(report: SelectReport) -> dict:
    """The report's JSON object, its fields in order (no workspace where the report predates its record)."""
    return {key: value for key, value in asdict(report).items() if key != "workspace" or value is not None}


def write(report: SelectReport, out: Path | None) -> None:
    """The report as JSON to `out`, where one is given."""
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(as_json(report), indent=2) + "\n")


def method_figures(report: SelectReport) -> dict[str, dict]:
    """Each configuration's figures as nested metrics (`cv.retrieve.mrr@10`, ..., `cv.rerank.map`, `dev.rerank.map`,
    `<shift>.rerank.map`: means over folds x seeds) for one MLflow run per configuration."""
    depth = 10
    figures = {}
    for name, r in report.configurations.items():
        cv = {"rerank": {"map": r["cv_map"]["mean"]}} if r.get("cv_map") else {}
        if r.get("cv_retrieve"):
            cv["retrieve"] = {f"{m}@{depth}": r["cv_retrieve"][m]["mean"] for m in RETRIEVAL}
        figures[name] = {"cv": cv, **({"dev": {"rerank": {"map": r["dev_map"]["mean"]}}} if r.get("dev_map") else {}),
                         **{shift: {"rerank": {"map": f["map"]["mean"]}} for shift, f in r.get("shifts", {}).items() if f["map"]}}
    return figures


def markdown(report: SelectReport) -> str:
    pct = lambda figure: "–" if figure is None else f"{100 * figure['mean']:.2f} ± {100 * figure['std']:.2f}"  # noqa: E731
    seeds = lambda values: " ".join(map(str, values))  # noqa: E731
    shifts = list(dict.fromkeys(s for r in report.configurations.values() for s in r.get("shifts", {})))
    decides = report.decides
    retrieved = lambda r, m: pct((r.get("cv_retrieve") or {}).get(m))  # noqa: E731
    lines = [f"{report.dataset}: {report.queries} train + dev queries, {report.folds} folds x {len(report.cv_seeds)} "
             f"seeds (CV seeds {seeds(report.cv_seeds)}; dev seeds {seeds(report.seeds)}), {report.epochs or 'their own'} "
             "epochs at most; %, mean ± std over folds x seeds; CV retrieve: each held-out query searches every ticket (a "
             "ticket it does not judge counts as not relevant); rerank MAP: it orders its judged candidates"
             + ("; under each shift (ticketsim.training.shift, rerank) mean ± std over seeds" if shifts else "")
             + f". Deciding: {'CV retrieve MRR@10' if decides == 'retrieve' else 'CV rerank MAP'}.", "",
             "| configuration | CV retrieve MRR@10 | CV retrieve MAP@10 | CV retrieve nDCG@10 | CV rerank MAP | "
             "dev rerank MAP (over seeds) | " + "".join(f"{shift} MAP | " for shift in shifts) + "seconds |",
             "| --- | ---: | ---: | ---: | ---: | ---: | " + "---: | " * len(shifts) + "---: |"]
    lines += [f"| {name} | " + "".join(f"{retrieved(r, m)} | " for m in RETRIEVAL) + f"{pct(r['cv_map'])} | {pct(r['dev_map'])} | "
              + "".join(f"{pct(r.get('shifts', {}).get(shift, {}).get('map'))} | " for shift in shifts)
              + f"{r['seconds']:.0f} |" for name, r in report.configurations.items()]
    lines += ["", f"{report.compared} trained configurations compared (and {len(report.configurations) - report.compared} "
              f"untrained baselines; dev MAP of an untrained one: one run, std 0).", "",
              f"Paired tests over queries (each query's CV {'retrieve RR@10' if decides == 'retrieve' else 'rerank AP'} "
              "averaged over the seeds; queries with a relevant candidate):", "",
              "| a | b | queries | mean difference a - b (points) | 95% bootstrap interval | p (sign-flip) |",
              "| --- | --- | ---: | ---: | --- | ---: |"]
    lines += [f"| {t['a']} | {t['b']} | {t['queries']} | {100 * t['mean_difference']:+.2f} | "
              f"[{100 * t['interval'][0]:+.2f}, {100 * t['interval'][1]:+.2f}] | {t['p']:.4f} |" for t in report.tests]
    return "\n".join(lines + judgement_lines(report.judgement, shifts))


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
