"""The quality gate of `ticketsim gate | retrain` and promotion in the MLflow registry: the newest model version judged
against the champion, tagged, and promoted when it passes. Each step is said as it starts (`==> ...`, to the `say` the
workflow passes).

The seam with the training pipeline (stage register@<dataset>): each model it trains becomes a new version of
`siamese.registered_name(dataset)`, from a run that logged the final variant's results (tracking.log_metrics of
{"dev": {"rerank": {"map": ...}}, ...}). The newest version is the candidate; once judged it carries the tag `gate`
(passed / failed), so it is judged once. The first version registered with quality figures has nothing to compare it
with: the register stage makes it the champion at once (`crown_first`: tag `gate: first`, its dev pairs frozen), so
the feedback checks have a champion from the first build. The champion and the candidate are both loaded and scored in
the gate's own run (ticketsim.lifecycle.gate_pairs) on the trusted pairs (ticketsim.lifecycle.trusted: the dev pairs
frozen with the champion at its promotion, which no later feedback changes), the dev pairs added since shown beside
them; a promoted version has the dev pairs of that moment frozen with it. A candidate is compared with a registry
champion only: without one (a registry from before `crown_first`) it is the first model, and passes. A dry run
(`record` False) writes nothing to the registry.
How a new version comes to be registered (two roads) is ticketsim.workflows.retrain's.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from ticketsim.config import GateRule, Params
from ticketsim.errors import StepError
from ticketsim.lifecycle.gate import GateResult, compare
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
FIRST = "first"     # GATE_TAG of the version made champion at its registration, with nothing to compare it with


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


def run_gate(params: Params, version: str | None = None, record: bool = True,
             say: Callable[[str], None] = lambda line: None) -> GateOutcome:
    """Judge `version` (default: the newest, unless already judged) against the champion; if it passes, promote it and
    freeze the dev pairs with it. `record` False (a dry run): judge only, no tag, no promotion, nothing frozen. `say`
    gets each step's line before the step runs (the scoring takes minutes)."""
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
        if judged == FIRST:
            state += " since its registration (the first version: nothing to compare it with)"
        return GateOutcome(f"### Quality gate: nothing new\n\n{label(candidate)} is {state}; no newer version was registered.\n",
                           candidate)
    rules, scored, aside, baseline, figures, basis = gate_rules(params), None, "", None, candidate.metrics, None
    if champion is not None:   # both models scored here, on the same trusted pairs: like with like
        scored = gate_basis(params, champion)
        sets = [scored.decide, *([scored.new] if scored.new else [])]
        say(f"==> scoring {label(champion)} and {label(candidate)} on {'; and '.join(p.describe() for p in sets)}")
        (baseline, *new_baseline), (figures, *new_figures) = (version_figures(cfg, v, sets, params.evaluation)
                                                              for v in (champion, candidate))
        basis = scored.basis()
        if scored.new:
            aside = (f"\n#### New dev pairs: shown, not deciding\n\n{scored.new.describe()}.\n\n"
                     + compare(new_baseline[0], new_figures[0], rules).table())
    result = compare(baseline, figures, rules)   # no champion: the first model, nothing to compare it with
    markdown = result.markdown(label(candidate), label(champion) if champion else None, basis) + aside
    if not record:
        return GateOutcome(markdown + "\nDry run: nothing was written to the registry (no tag, no promotion).\n", candidate,
                           result)
    tag_version(cfg, model, candidate.version, {GATE_TAG: "passed" if result.passed else "failed"})
    if result.passed:
        promote(cfg, model, candidate.version)
        markdown += "\n" + freeze(params, candidate, scored.current if scored else None)
    return GateOutcome(markdown, candidate, result, result.passed)


def crown_first(params: Params, dataset: str, version: str) -> str | None:
    """Make `version` of `dataset`'s registered model, just registered with quality figures, the champion when the model
    has none: the first registration, with nothing to compare it with (tag `gate: first`), its dev pairs frozen with it
    as a promotion freezes them. A line saying so; None when there is a champion (the gate judges the version)."""
    cfg, model = params.tracking, params.siamese.registered_name(dataset)
    if version_by_alias(cfg, model, CHAMPION) is not None:
        return None
    own = replace(params, retrain=replace(params.retrain, dataset=dataset))    # the dev pairs of the model's own dataset
    frozen = freeze(own, model_version(cfg, model, version), None)
    tag_version(cfg, model, version, {GATE_TAG: FIRST})
    promote(cfg, model, version)    # last: a champion is never seen without its frozen pairs
    return (f"{model} v{version} is the champion: the first version registered, nothing to compare it with "
            f"(tag {GATE_TAG}: {FIRST}). {frozen.strip()}")


def label(version: ModelVersion) -> str:
    return f"{version.model} v{version.version} (run {version.run_id})"


def write_github(summary: Path | None, outputs: Path | None, outcome: GateOutcome) -> None:
    """Append the gate table to a job summary file and run_id / model_version / gate to an outputs file (GitHub's)."""
    if summary:
        with summary.open("a", encoding="utf-8") as out:
            out.write(outcome.markdown + "\n")
    if outputs:
        with outputs.open("a", encoding="utf-8") as out:
            out.write(f"run_id={outcome.candidate.run_id}\nmodel_version={outcome.candidate.version}\n"
                      f"gate={'passed' if outcome.passed else 'failed'}\n")
