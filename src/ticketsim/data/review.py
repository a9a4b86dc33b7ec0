"""The review log beside a feedback journal (review.jsonl): each batch of judgments `ticketsim feedback export` checked
before it could train, one judge's at a time, with its figures and what became of it: `passed` (exported at once),
`held` (waits for a person: `ticketsim feedback review`), then `accepted` (exported then) or `rejected` (never
exported). A judgment is checked once: later exports check only those no batch holds yet.

One JSON line per event, appended under a flock as the journal is (ticketsim.data.feedback), which an export holds from
its check to its intake and an acceptance from its intake to its line, so no judgment is checked twice; a batch's last
line says its status:
    {"batch": 3, "status": "held", "judge": "api", "at": ..., "reasons": [...], "figures": {...}, "pairs": [[query_id, ticket_id], ...]}
    {"batch": 3, "status": "accepted", "at": ...}
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from ticketsim.data.feedback import Export, Key, drop_torn_line, export, locked, require, write_line
from ticketsim.data.validate import DataError

REVIEW = "review.jsonl"
CLEARED = ("passed", "accepted")     # statuses whose judgments may train


@dataclass(frozen=True)
class Batch:
    number: int
    judge: str
    status: str
    at: str
    pairs: frozenset[Key]
    figures: dict[str, float | int | None]
    reasons: tuple[str, ...]

    def render(self) -> str:
        figures = ", ".join(f"{name} {'–' if value is None else f'{value:.2f}' if isinstance(value, float) else value}"
                            for name, value in self.figures.items())
        lines = [f"batch {self.number}: {len(self.pairs)} judgment(s) by {self.judge}, {self.status} ({self.at}): {figures}"]
        return "\n".join(lines + [f"  {reason}" for reason in self.reasons])


@dataclass(frozen=True)
class Log:
    """The review log, held under its lock: one export's check and record, or one person's decision, at a time."""

    path: Path
    handle: int

    def batches(self) -> dict[int, Batch]:
        """Every batch by number, each with its latest status."""
        return read(self.path, os.pread(self.handle, drop_torn_line(self.handle), 0))

    def cleared(self) -> set[Key]:
        """The judgments of batches that passed the check or were accepted: those an export may hand over."""
        return {key for batch in self.batches().values() if batch.status in CLEARED for key in batch.pairs}

    def record(self, judge: str, pairs: set[Key], figures: dict, reasons: list[str], now: datetime) -> Batch:
        """Log a checked batch: held when there are `reasons`, else passed."""
        batch = Batch(1 + max(self.batches(), default=0), judge, "held" if reasons else "passed", stamp(now),
                      frozenset(pairs), figures, tuple(reasons))
        write_line(self.handle, {"batch": batch.number, "status": batch.status, "judge": judge, "at": batch.at,
                                 "reasons": reasons, "figures": figures, "pairs": sorted(map(list, pairs))})
        return batch

    def decide(self, number: int, status: str, now: datetime) -> Batch:
        """A held batch `accepted` or `rejected` by a person."""
        batch = self.held(number)
        write_line(self.handle, {"batch": number, "status": status, "at": stamp(now)})
        return replace(batch, status=status, at=stamp(now))

    def held(self, number: int) -> Batch:
        """Batch `number`, or a DataError when it is not held (none such, or decided)."""
        batch = self.batches().get(number)
        if batch is None or batch.status != "held":
            state = f"is {batch.status}" if batch else "does not exist"
            raise DataError([f"{self.path}: batch {number} {state}; only a held batch is accepted or rejected "
                             "(`ticketsim feedback review` lists them)"])
        return batch


@contextmanager
def review_log(journal: str | Path) -> Iterator[Log]:
    """The review log beside `journal` (created empty if missing), under its lock; a DataError without a journal."""
    require(Path(journal))
    path = Path(journal).with_name(REVIEW)
    with locked(path) as handle:
        yield Log(path, handle)


def accept(journal: Path, number: int, folder: Path, fractions: dict[str, float], now: datetime) -> tuple[Export, Batch | None]:
    """Hand a held batch's judgments to the folder as `ticketsim feedback export` does, and log it accepted once they
    are in (None: the intake refused them, the batch stays held)."""
    with review_log(journal) as log:
        done = export(journal, folder, fractions, now, log.held(number).pairs.__contains__)
        return done, log.decide(number, "accepted", now) if done.intake.ok else None


def read(path: Path, data: bytes) -> dict[int, Batch]:
    found: dict[int, Batch] = {}
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
            batch = found.get(event["batch"]) or Batch(event["batch"], event["judge"], "", "", frozenset(map(tuple, event["pairs"])),
                                                       event["figures"], tuple(event["reasons"]))
            found[batch.number] = replace(batch, status=event["status"], at=event["at"])
        except (ValueError, KeyError, TypeError) as error:
            raise DataError([f"{path}:{number}: not an event of the review log ({type(error).__name__}: {error}); "
                             "fix or remove the line"]) from None
    return found


def stamp(now: datetime) -> str:
    return now.isoformat(timespec="seconds")
