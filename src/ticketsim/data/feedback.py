"""The feedback journal: what people judged on the search page, its JSON API or the served model, kept as a batch of new
labelled pairs in the JSONL layout of `ticketsim pairs add`, appended atomically, and handed to a csv dataset by export.

A judgment is a query's text, the id of a ticket it was shown and a label (YES/REL/NO). It is checked by
ticketsim.data.validate against that ticket, as every intake is; its query gets the text id of ticketsim.data.intake
(`q-` + hash), so one query judged twice is one query. One line per judgment:
    {"query_id", "subject", "description", "ticket_id", "label", "judged_at", "via"}
The same label for a pair judged before is not written again. Another label is kept apart in `conflicts.jsonl` beside
the journal, with where the first one is, and reported: never written over the first, a person decides.

Appending: each writer (any thread of any gunicorn worker) holds an exclusive flock on the journal, reads what others
appended since its last look, writes its line with one write() and fsyncs before it returns, so a judgment that was
answered survives a killed server. A line cut short by a crash was never answered: it is dropped before the next append.
A line that is no judgment (an edit by hand gone wrong) is skipped, and every answer of this process names it until it is
fixed or removed: `ticketsim feedback export` refuses the journal while it is there.

Exporting: `pending` gives the judgments not handed over yet with their judge and the labels others gave the same pairs
(what ticketsim.lifecycle.feedback_check checks); `export` hands over those its `take` accepts (ticketsim.data.review's
passed and accepted batches), the rest held back. A judgment on a ticket or query the dataset lacks (a ticket added to
the index alone, with `ticketsim index add`) is set aside and named, not exported and not refusing the others: it stays
in the journal, and a later export hands it over once the dataset has its ticket (`ticketsim pairs add --tickets`).
"""
from __future__ import annotations

import fcntl
import json
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal, NamedTuple

import polars as pl

from ticketsim.data.csvsource import read_table, table_file
from ticketsim.data.intake import IntakeResult, add_batch, read_batch, text_query_id
from ticketsim.data.locks import fsync
from ticketsim.data.tables import LABELS, QUERY_FIELDS, TICKET_FIELDS
from ticketsim.data.validate import ORIGIN, DataError, IntakeReport, parse_label, validate

LABEL_NAMES = {value: name for name, value in LABELS.items()}     # 5 -> YES: the journal says what the person clicked
CONFLICTS = "conflicts.jsonl"


@dataclass(frozen=True)
class Judgment:
    subject: str
    description: str
    ticket_id: str
    label: str
    via: str            # page | api | model: where the click came from

    def query_id(self) -> str:
        return text_query_id(self.subject, self.description)


@dataclass(frozen=True)
class Recorded:
    """What became of one judgment: `recorded` (a new line), `repeated` (that pair had that label already: nothing
    written) or `conflict` (another label was given before: kept apart in conflicts.jsonl)."""

    status: Literal["recorded", "repeated", "conflict"]
    query_id: str
    where: str          # file:line of the line written, or of the earlier judgment it repeats
    message: str
    skipped: tuple[str, ...] = ()   # journal lines that are no judgment, each 'file:line: why'

    def as_dict(self) -> dict[str, str | list[str]]:
        found = {"status": self.status, "query_id": self.query_id, "where": self.where, "message": self.message}
        return {**found, "skipped": list(self.skipped)} if self.skipped else found


def checked(judgment: Judgment, ticket: dict | None) -> str:
    """The judgment's label as YES/REL/NO, or a DataError with every problem, by the rules of every intake.

    `ticket`: the judged ticket's record (ticket_id, subject, description, solution) as the search showed it; None when
    the knowledge base has no such ticket."""
    origin = {ORIGIN: f"judgment of ticket {judgment.ticket_id!r}"}
    query_id = judgment.query_id()
    tickets = pl.DataFrame([{**{c: ticket[c] for c in ("ticket_id", *TICKET_FIELDS)}, **origin}] if ticket else [],
                           schema={c: pl.String for c in ("ticket_id", *TICKET_FIELDS, ORIGIN)})
    queries = pl.DataFrame([{"query_id": query_id, "subject": judgment.subject, "description": judgment.description, **origin}])
    pairs = pl.DataFrame([{"query_id": query_id, "ticket_id": judgment.ticket_id, "label": judgment.label, **origin}],
                         schema={c: pl.String for c in ("query_id", "ticket_id", "label", ORIGIN)})
    validate(tickets, queries, pairs, {"train": 1.0}, IntakeReport())
    return LABEL_NAMES[parse_label(judgment.label)]


class Journal:
    """The journal file and what this process has read of it: (query_id, ticket_id) -> (label, file:line)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.conflicts = self.path.with_name(CONFLICTS)
        self.seen: dict[tuple[str, str], tuple[str, str]] = {}
        self.read_to, self.lines = 0, 0     # bytes and lines of the journal already in `seen`
        self.skipped: list[str] = []        # lines read that are no judgment, 'file:line: why'
        self.threads = threading.Lock()     # flock excludes other processes; threads of this one share `seen`

    def record(self, judgment: Judgment, ticket: dict | None, now: datetime) -> Recorded:
        """Check the judgment and append it (or keep it apart, or note the repeat); DataError when it is bad input."""
        label = checked(judgment, ticket)
        query_id = judgment.query_id()
        row = {"query_id": query_id, "subject": judgment.subject, "description": judgment.description,
               "ticket_id": judgment.ticket_id.strip(), "label": label, "judged_at": now.isoformat(timespec="seconds"),
               "via": judgment.via}
        key = (query_id, row["ticket_id"])
        with self.threads, locked(self.path) as journal:
            self.catch_up(journal)

            def outcome(status: str, where: str, message: str) -> Recorded:
                # The page shows only the message: it names the first skipped line, the JSON lists every one.
                note = f" (the journal has {len(self.skipped)} line(s) that are no judgment; the first: " \
                       f"{self.skipped[0]})" if self.skipped else ""
                return Recorded(status, query_id, where, message + note, tuple(self.skipped))

            if key in self.seen:
                earlier, where = self.seen[key]
                if earlier == label:
                    return outcome("repeated", where, f"already recorded: {label} for ticket {key[1]} at {where}")
                line = append(self.conflicts, {**row, "contradicts": f"{earlier} at {where}"})
                return outcome("conflict", f"{self.conflicts}:{line}",
                               f"{label} for ticket {key[1]} contradicts {earlier} at {where}: kept apart in "
                               f"{self.conflicts}:{line}, not applied; the first judgment stands until a person decides")
            self.read_to += write_line(journal, row)
            self.lines += 1
            where = f"{self.path}:{self.lines}"
            self.seen[key] = (label, where)
            return outcome("recorded", where, f"recorded: {label} for ticket {key[1]}")

    def catch_up(self, journal: int) -> None:
        """Read the lines other writers appended since this process last looked (the caller holds the lock)."""
        size = drop_torn_line(journal)
        if size < self.read_to:     # replaced or cut by hand: read it again from the start
            self.seen.clear()
            self.skipped.clear()
            self.read_to, self.lines = 0, 0
        # Split on newlines only, as the export reads it: a JSON string may hold U+2028, where str.splitlines breaks.
        for line in os.pread(journal, size - self.read_to, self.read_to).split(b"\n")[:-1]:
            self.lines += 1
            where = f"{self.path}:{self.lines}"
            record = judgment_line(line)
            if isinstance(record, str):
                self.skipped.append(f"{where}: skipped, {record}; `ticketsim feedback export` refuses the journal until "
                                    "this line is fixed or removed")
            elif record is not None:
                self.seen.setdefault((record["query_id"], record["ticket_id"]), (record["label"], where))
        self.read_to = size


def judgment_line(line: bytes) -> dict | str | None:
    """A journal line's judgment; None for a blank line (the export passes over it too); else why it is none."""
    if not line.strip():
        return None
    try:
        record = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError:
        return "bytes that are not UTF-8"
    except (ValueError, RecursionError) as error:   # not JSON; a number of over 4300 digits; arrays nested too deep
        return f"not valid JSON ({getattr(error, 'msg', None) or type(error).__name__})"
    if not isinstance(record, dict) or not all(isinstance(record.get(key), str) for key in ("query_id", "ticket_id", "label")):
        return "not a judgment (a JSON object with query_id, ticket_id and label)"
    return record


@contextmanager
def locked(path: Path) -> Iterator[int]:
    """The file opened for appending (created with its folder if missing) under an exclusive flock."""
    new = not path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        if new:     # the file's directory entry must survive a crash too
            fsync(path.parent)
        yield handle
    finally:
        os.close(handle)    # closing releases the flock


def drop_torn_line(journal: int) -> int:
    """Cut a last line without its newline (a crash mid-write, never answered); returns the size after."""
    size = os.fstat(journal).st_size
    if size and os.pread(journal, 1, size - 1) != b"\n":
        tail = os.pread(journal, min(size, 1 << 20), max(0, size - (1 << 20)))
        size = max(0, size - len(tail)) + tail.rfind(b"\n") + 1
        os.ftruncate(journal, size)
    return size


def write_line(handle: int, record: dict) -> int:
    """One JSON line written whole and on disk before this returns; its length in bytes."""
    data = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
    view = memoryview(data)
    while view:
        view = view[os.write(handle, view):]
    os.fsync(handle)
    return len(data)


def append(path: Path, record: dict) -> int:
    """Append one line to a side file (the caller holds the journal's lock); returns its line number."""
    with locked(path) as handle:
        drop_torn_line(handle)
        write_line(handle, record)
        return os.pread(handle, os.fstat(handle).st_size, 0).count(b"\n")


@dataclass(frozen=True)
class Export:
    """What `ticketsim feedback export` did: the intake of the new judgments, those the folder has already, those it
    left out because the folder labels the pair otherwise, those it held back (`take` said no: held for review), and
    those it set aside because the dataset lacks their ticket or query (each 'journal:line: why')."""

    intake: IntakeResult
    present: int
    contradicting: tuple[str, ...]
    held_back: int = 0
    set_aside: tuple[str, ...] = ()

    def render(self) -> str:
        lines = [self.intake.render(), f"already in the folder: {self.present} judgment(s)"]
        if self.contradicting:
            lines.append(f"left out {len(self.contradicting)} judgment(s) that contradict the folder's labels "
                         "(change the folder's label, or leave the pair as labelled):")
            lines += [f"  {problem}" for problem in self.contradicting]
        if self.held_back:
            lines.append(f"held back {self.held_back} judgment(s): held or rejected in review, or not checked yet "
                         "(`ticketsim feedback review`)")
        if self.set_aside:
            lines.append(f"set aside {len(self.set_aside)} judgment(s) on tickets or queries the dataset lacks, kept in the "
                         "journal: a later export hands them over once the dataset has them (`ticketsim pairs add --tickets`):")
            lines += [f"  {reason}" for reason in self.set_aside]
        return "\n".join(lines)


class Known(NamedTuple):
    """A pair the folder labels: its label, where (file:line), and the file it was added from (None: there from the start)."""

    label: int | None
    origin: str
    source: str | None


Key = tuple[str, str]   # (query_id, ticket_id)


def export(journal: str | Path, folder: str | Path, fractions: dict[str, float], now: datetime,
           take: Callable[[Key], bool] | None = None) -> Export:
    """Hand the journal's judgments to a csv dataset's folder through the intake of `ticketsim pairs add`.

    Judgments the folder already holds with the same label are passed over, those it labels otherwise are left out and
    listed, those `take` refuses are held back, those on a ticket or query the dataset lacks are set aside and listed,
    the rest goes in as one batch (all or nothing, each problem as journal:line). Run it again at any time: it adds
    only what is new."""
    journal, folder = Path(journal), Path(folder)
    batch, _ = read_journal(journal, now)
    labelled, lacking = folder_labels(folder), absent(folder, batch)
    keep, present, contradicting, held_back, set_aside = [], 0, [], 0, []
    for query_id, ticket_id, label, origin in batch["pairs"].select("query_id", "ticket_id", "label", ORIGIN).iter_rows():
        key = (query_id, ticket_id.strip())
        known = labelled.get(key)
        taken = known is None and (take is None or take(key))
        if known is not None and known.label == parse_label(label):
            present += 1
        elif known is not None:
            contradicting.append(f"{origin}: pair ({query_id}, {ticket_id}): label {label} contradicts label {known.label} "
                                 f"at {known.origin}")
        elif not taken:
            held_back += 1
        elif why := lacking(key):
            set_aside.append(f"{origin}: pair ({query_id}, {ticket_id}): {why}")
            taken = False
        keep.append(taken)
    pairs = batch["pairs"].filter(pl.Series(keep, dtype=pl.Boolean))
    queries = batch["queries"].filter(pl.col("query_id").is_in(pairs["query_id"].implode()))
    intake = add_batch(folder, journal, {**batch, "pairs": pairs, "queries": queries}, fractions) if pairs.height else \
        IntakeResult(journal, {})
    return Export(intake, present, tuple(contradicting), held_back, tuple(set_aside))


def absent(folder: Path, batch: dict[str, pl.DataFrame]) -> Callable[[Key], str | None]:
    """Why the folder cannot take a judgment: its ticket is not in the dataset, or its query is neither there nor
    given by its text in the journal; None when it can."""
    tickets = {str(t or "").strip() for t in read_table(table_file(folder, "tickets"), "tickets")["ticket_id"]}
    queries = {str(q or "").strip() for q in read_table(table_file(folder, "queries"), "queries")["query_id"]}
    queries |= set(batch["queries"]["query_id"])

    def why(key: Key) -> str | None:
        query_id, ticket_id = key
        if ticket_id not in tickets:
            return f"ticket {ticket_id!r} is not in the dataset"
        return None if query_id in queries else f"query {query_id!r} is not in the dataset and has no text in the journal"
    return why


def pending(journal: str | Path, folder: str | Path, now: datetime) -> pl.DataFrame:
    """The journal's judgments it has not handed to the folder yet, one row each: query_id, subject, description,
    ticket_id, label (5/3/1), judge (where the click came from: the line's `via`) and others, the labels the pair got
    elsewhere (the folder's from other files, and the contradicting judgments kept apart in conflicts.jsonl)."""
    journal = Path(journal)
    batch, judges = read_journal(journal, now)
    labelled = folder_labels(folder)
    apart: dict[Key, list[int]] = {}
    conflicts = journal.with_name(CONFLICTS)
    for line in conflicts.read_bytes().split(b"\n") if conflicts.is_file() else []:
        record = judgment_line(line)
        if isinstance(record, dict) and parse_label(record["label"]) is not None:
            apart.setdefault((record["query_id"], record["ticket_id"].strip()), []).append(parse_label(record["label"]))
    rows = []
    for query_id, ticket_id, label, origin in batch["pairs"].select("query_id", "ticket_id", "label", ORIGIN).iter_rows():
        key = (query_id, ticket_id.strip())
        known = labelled.get(key)
        if known is not None and known.source == journal.name:     # handed over before
            continue
        rows.append({"query_id": query_id, "ticket_id": key[1], "label": parse_label(label), "judge": judges.get(origin) or "unknown",
                     "others": ([known.label] if known and known.label else []) + apart.get(key, [])})
    frame = pl.DataFrame(rows, schema={"query_id": pl.String, "ticket_id": pl.String, "label": pl.Int8, "judge": pl.String,
                                       "others": pl.List(pl.Int8)})
    texts = batch["queries"].select("query_id", *QUERY_FIELDS).unique("query_id", keep="first")
    return frame.join(texts, on="query_id", how="left").select("query_id", *QUERY_FIELDS, "ticket_id", "label", "judge", "others")


def read_journal(journal: Path, now: datetime) -> tuple[dict[str, pl.DataFrame], dict[str, str]]:
    """The journal as a batch of `ticketsim pairs add`, read under its lock (no half-written line), and the judge (`via`)
    of each of its lines by origin (journal:line)."""
    require(journal)
    with locked(journal) as handle:
        drop_torn_line(handle)
        batch = read_batch(journal, None, None, now.isoformat(timespec="seconds"))
        lines = read_table(journal, "new_pairs")
    judges = dict(zip(lines[ORIGIN], lines["via"])) if "via" in lines.columns else {}
    return batch, judges


def require(journal: Path) -> None:
    if not journal.is_file():
        raise DataError([f"{journal}: no feedback journal here (`ticketsim serve` writes it: params serve.feedback)"])


def folder_labels(folder: str | Path) -> dict[Key, Known]:
    pairs = read_table(table_file(Path(folder), "pairs"), "pairs")
    sources = pairs["source_file"] if "source_file" in pairs.columns else [None] * pairs.height
    return {(str(q or "").strip(), str(t or "").strip()): Known(parse_label(label), origin, source)
            for (q, t, label, origin), source in zip(pairs.select("query_id", "ticket_id", "label", ORIGIN).iter_rows(), sources)}
