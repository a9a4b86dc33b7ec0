"""`ticketsim gate | rollback`: the quality gate run on the registry, a champion restored; and the verdict of a gated
version as people and GitHub Actions read it (also `ticketsim retrain`'s)."""
from __future__ import annotations

import sys
from pathlib import Path

from ticketsim.config import load_params
from ticketsim.errors import ERROR, FAILED, OK
from ticketsim.lifecycle.promotion import GateOutcome, run_gate, write_github
from ticketsim.lifecycle.registry import rollback
from ticketsim.lifecycle.tracking import check_reachable


def gate_command(params: str, version: str | None, dry_run: bool, summary: Path | None, outputs: Path | None) -> int:
    """Judge the newest (or `version`) model version against the champion; promote it if it passes (unless `dry_run`)."""
    loaded = load_params(params)
    check_reachable(loaded.tracking)
    return reported(run_gate(loaded, version=version, record=not dry_run, say=step), summary, outputs)


def step(line: str) -> None:
    """A step of the gate said as it starts (`==> ...`), before the minutes it may take."""
    print(line, flush=True)


def reported(outcome: GateOutcome, summary: Path | None, outputs: Path | None) -> int:
    """Print the gate's verdict and write it for GitHub Actions (`summary`, `outputs`); the exit code it means."""
    print(outcome.markdown)
    if outcome.promoted:
        print(f"promoted {outcome.candidate.model} v{outcome.candidate.version} to champion")
    print(f"mlflow_run_id: {outcome.candidate.run_id}\nmodel_version: {outcome.candidate.version}")
    write_github(summary, outputs, outcome)
    return OK if outcome.passed else FAILED


def rollback_command(params: str) -> int:
    """Make the previous champion of retrain.dataset's registered model the champion again."""
    loaded = load_params(params)
    check_reachable(loaded.tracking)
    model = loaded.siamese.registered_name(loaded.retrain.dataset)
    try:
        restored, demoted = rollback(loaded.tracking, model)
    except LookupError as error:
        print(error, file=sys.stderr)
        return ERROR
    print(f"{model}: champion is v{restored} again; v{demoted} is now 'previous'")
    return OK
