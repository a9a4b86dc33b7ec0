"""The quality gate of `ticketsim gate | retrain` and promotion in the MLflow registry: the newest model version judged
against the champion, tagged, and promoted when it passes. Steps are printed as they run (`==> ...`).

The seam with the training pipeline (stage register@<dataset>): each model it trains becomes a new version of
`siamese.registered_name(dataset)`, from a run that logged the final variant's results (tracking.log_metrics of
{"dev": {"rerank": {"map": ...}}, ...}). The newest version is the candidate; once judged it carries the tag `gate`
(passed / failed), so it is judged once. The champion and the candidate are both loaded and scored in the gate's own
run (ticketsim.lifecycle.gate_pairs) on the trusted pairs (ticketsim.lifecycle.trusted: the dev pairs frozen with the
champion at its promotion, which no later feedback changes), the dev pairs added since shown beside them; a promoted
version has the dev pairs of that moment frozen with it. Without a registry champion there is no model to score: the
champion's figures are the final variant's metrics file (BASELINE_FILE, as dvc.yaml's final stage writes it) on
`gate.baseline_rev`, against the candidate's stored ones. A dry run (`record` False) writes nothing to the registry.
How a new version comes to be registered (two roads) is ticketsim.workflows.retrain's.
"""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ticketsim.config import GateRule, Params
from ticketsim.errors import StepError
from ticketsim.lifecycle.gate import GateResult, compare, dvc_baseline
from ticketsim.lifecycle.gate_pairs import version_figures
from ticketsim.lifecycle.registry import (
    CHAMPION,
    ModelVersion,
    latest_version,
    model_version,
    promote,
    tag_version,
    version_by_alias,
)
from ticketsim.lifecycle.tracking import sanitize
from ticketsim.lifecycle.trusted import freeze, gate_basis

GATE_TAG = "gate"
BASELINE_FILE = "metrics/{dataset}/final.json"     # the final stage's: {"#<final>-tuned": results, ...}


class RetrainError(StepError):
    """A step of the retraining loop failed; the message names the step and what to do."""


@dataclass(frozen=True)
class GateOutcome:
    markdown: str
    candidate: ModelVersion
    result: GateResult | None = None    # None: nothing new to decide (the candidate is the champion or was judged)
    promoted: bool = False

    @property
    def passed(self) -> bool:
        """False also when the newest version failed the gate before: it is still not fit to be champion."""
        return self.result.passed if self.result else self.candidate.tags.get(GATE_TAG) != "failed"


def gate_rules(params: Params) -> dict[str, GateRule]:
    """Gate params name metrics as in the final variant's results; MLflow holds them sanitized ('map@10' -> 'map_at_10')."""
    return {sanitize(name): rule for name, rule in params.gate.metrics.items()}


def run_gate(params: Params, version: str | None = None, record: bool = True) -> GateOutcome:
    """Judge `version` (default: the newest, unless already judged) against the champion; if it passes, promote it and
    freeze the dev pairs with it. `record` False (a dry run): judge only, no tag, no promotion, nothing frozen."""
    cfg, model = params.tracking, params.siamese.registered_name(params.retrain.dataset)
    if not getattr(params.datasets.get(params.retrain.dataset), "labels", True):
        raise RetrainError(f"retrain.dataset = {params.retrain.dataset!r} has no labelled pairs (labels: false): its model "
                           f"has no quality figure for the gate to judge; add labelled pairs, or gate a labelled dataset")
    candidate = model_version(cfg, model, version) if version else latest_version(cfg, model)
    if candidate is None:
        raise RetrainError(f"no version of model {model!r} is registered: the training stage registers one "
                           f"(targets: {' '.join(params.retrain.targets)})")
    champion = version_by_alias(cfg, model, CHAMPION)
    judged = candidate.tags.get(GATE_TAG)
    if version is None and (judged or (champion and champion.version == candidate.version)):
        state = "the champion" if champion and champion.version == candidate.version else f"judged before (gate: {judged})"
        return GateOutcome(f"### Quality gate: nothing new\n\n{label(candidate)} is {state}; no newer version was registered.\n",
                           candidate)
    rules, scored, aside = gate_rules(params), None, ""
    if champion is not None:   # both models scored here, on the same trusted pairs: like with like
        scored = gate_basis(params, champion)
        sets = [scored.decide, *([scored.new] if scored.new else [])]
        print(f"==> scoring {label(champion)} and {label(candidate)} on {'; and '.join(p.describe() for p in sets)}", flush=True)
        (baseline, *new_baseline), (figures, *new_figures) = (version_figures(cfg, v, sets, params.evaluation)
                                                              for v in (champion, candidate))
        baseline_label, basis = label(champion), scored.basis()
        if scored.new:
            aside = (f"\n#### New dev pairs: shown, not deciding\n\n{scored.new.describe()}.\n\n"
                     + compare(new_baseline[0], new_figures[0], rules).table())
    else:
        row = params.siamese.final_row(params.dataset(params.retrain.dataset))
        diff = dvc_metrics_diff(params.gate.baseline_rev)
        path = BASELINE_FILE.format(dataset=params.retrain.dataset)
        baseline = {sanitize(key): value for key, value in dvc_baseline(diff, path, f"#{row}.").items()}
        baseline_label, figures = f"`{params.gate.baseline_rev}` (dvc metrics diff)", candidate.metrics
        basis = ("No champion model to score: the figures are those stored with each (the candidate's registration run, "
                 f"{path} on `{params.gate.baseline_rev}`), each measured on the dev pairs of its own run.") if baseline else None
    result = compare(baseline or None, figures, rules)
    markdown = result.markdown(label(candidate), baseline_label if baseline else None, basis) + aside
    if not record:
        return GateOutcome(markdown + "\nDry run: nothing was written to the registry (no tag, no promotion).\n", candidate,
                           result)
    tag_version(cfg, model, candidate.version, {GATE_TAG: "passed" if result.passed else "failed"})
    if result.passed:
        promote(cfg, model, candidate.version)
        markdown += "\n" + freeze(params, candidate, scored.current if scored else None)
    return GateOutcome(markdown, candidate, result, result.passed)


def label(version: ModelVersion) -> str:
    return f"{version.model} v{version.version} (run {version.run_id})"


def dvc_metrics_diff(rev: str) -> dict:
    """`dvc metrics diff <rev> --all --json`, or {} when there is nothing to diff against (no git, no such revision)."""
    known = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], capture_output=True, check=False)
    if known.returncode:  # asking git first is instant; DVC would take seconds to say the same
        return {}
    done = subprocess.run([sys.executable, "-m", "dvc", "metrics", "diff", rev, "--all", "--json"],
                          capture_output=True, text=True, check=False)
    try:
        return json.loads(done.stdout) if done.returncode == 0 and done.stdout.strip() else {}
    except json.JSONDecodeError:
        return {}


def write_github(summary: Path | None, outputs: Path | None, outcome: GateOutcome) -> None:
    """Append the gate table to a job summary file and run_id / model_version / gate to an outputs file (GitHub's)."""
    if summary:
        with summary.open("a", encoding="utf-8") as out:
            out.write(outcome.markdown + "\n")
    if outputs:
        with outputs.open("a", encoding="utf-8") as out:
            out.write(f"run_id={outcome.candidate.run_id}\nmodel_version={outcome.candidate.version}\n"
                      f"gate={'passed' if outcome.passed else 'failed'}\n")
