"""Every check of bad input, in one place: each source and every later intake hands its raw tables here.

Raw tables carry an `origin` column ("file:line") per record, so each problem names the file, the record
and what is wrong. All problems are collected and raised together; anything deliberately skipped
(identical duplicate pairs), tolerated (one empty text component) or removed (control characters) is counted in the
IntakeReport.

Bad input is always a DataError, never another exception: each problem starts with 'file:line: ' (line 1 for a
header), or 'file: ' when the file cannot be read at all. Read through a column mapping (ticketsim.data.columns), a
problem names the export's column beside the field ("ticket_id (column 'Issue key')"). `ticketsim` exits 65 on it (see ticketsim.cli).
"""
from __future__ import annotations

import codecs
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from ticketsim.data.tables import (
    LABELS,
    PAIR_SCHEMA,
    QUERY_FIELDS,
    QUERY_SCHEMA,
    SPLITS,
    TICKET_FIELDS,
    TICKET_SCHEMA,
    Corpus,
    conform,
    stable_split,
)

MAX_LISTED = 50
ORIGIN = "origin"
MAX_RANK = 2**31 - 1    # source_rank is stored as Int32
# Characters kept of each text field (a log of some 10,000 lines; the longest SemEval text has 7,439): a pasted log of
# 50 MB would cost every stage time and memory in proportion (tokens, passages, BM25 postings, the index's texts) for
# words no channel weighs (the LSTM reads 100 tokens of a component, the encoder its first passage). Cut fields are counted.
MAX_TEXT_CHARS = 1_000_000
# Control characters a page or a terminal would act on or choke on (NUL, ESC, C1's CSI): removed from every field and
# counted. Tab and line breaks are text.
CONTROL = r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]"
# An id is one line of printable characters: one with a line break would split a table's row, one with a control
# character print otherwise than it compares. Refused with its file:line, never changed (it would name another record).
ID_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
IDS = ("ticket_id", "query_id")
LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"    # what str.splitlines breaks at
ALTERED = ("cut to its first", "control characters removed from")    # report keys of what intake changed in a record


class DataError(ValueError):
    """Bad input. Lists every problem found, each as 'file:line: record: what is wrong'."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        listed = "\n  ".join(problems[:MAX_LISTED])
        more = f"\n  ... and {len(problems) - MAX_LISTED} more" if len(problems) > MAX_LISTED else ""
        super().__init__(f"{len(problems)} problem(s) in the input; nothing was written:\n  {listed}{more}")


@dataclass
class IntakeReport:
    """What came in, what was tolerated and what was skipped, as counts a person can read."""

    counts: Counter = field(default_factory=Counter)

    def add(self, key: str, n: int = 1) -> None:
        if n:
            self.counts[key] += n

    def as_dict(self) -> dict[str, int]:
        return dict(sorted(self.counts.items()))

    def altered(self, since: IntakeReport | None = None) -> list[str]:
        """What intake changed in the records, one line each (fields cut to MAX_TEXT_CHARS, control characters removed):
        what a command that prints no report says. `since`: only beyond that report's counts (a batch beside its folder)."""
        before = since.counts if since is not None else Counter()
        return [f"{key}: {n - before[key]:,}" for key, n in sorted(self.counts.items())
                if any(a in key for a in ALTERED) and n > before[key]]


def parse_label(value: object) -> int | None:
    """YES/REL/NO or 5/3/1 (any case, surrounding blanks allowed) -> 5/3/1; None when unknown."""
    text = str(value).strip().upper() if value is not None else ""
    if text in LABELS:
        return LABELS[text]
    return int(text) if text in {str(v) for v in LABELS.values()} else None


def shorten(text: str, width: int = 60) -> str:
    """A value for a message: quoted like repr, cut to about `width` characters (a pasted log can be megabytes)."""
    if len(text) <= width:
        return repr(text)
    return f"{text[:width - 3] + '...'!r} ({len(text)} characters)"


def read_bytes(path: Path) -> bytes:
    """The bytes of a file, or a DataError naming it when it is missing or cannot be read."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise DataError([f"{path}: file not found"]) from None
    except OSError as error:
        raise DataError([f"{path}: cannot be read ({error.strerror or error})"]) from None


def read_text(path: Path, encoding: str | None = None, fix: str = "re-export the file as UTF-8") -> str:
    """The text of a file in `encoding` (None: UTF-8; a byte order mark allowed), or a DataError naming the line and
    byte of the first bytes that are not, what they look like, and `fix`: what to do about it ({encoding}: the
    encoding they look like). UTF-16 of ASCII text is valid UTF-8 with a NUL after each letter: refused so too."""
    data = read_bytes(path)
    guess, why = looks_like(data)
    try:
        text = data.decode(encoding or "utf-8").removeprefix("\ufeff")     # a BOM of UTF-8, given as utf-8 or not
    except UnicodeDecodeError as error:
        line = data[: error.start].decode(encoding or "utf-8", errors="replace").count("\n") + 1
        raise DataError([f"{path}:{line}: not {encoding or 'UTF-8'} (byte 0x{data[error.start]:02x} at offset "
                         f"{error.start}{f'; {why}' if why else ''}); {fix.format(encoding=guess)}"]) from None
    if encoding is None and why:
        raise DataError([f"{path}:1: not UTF-8 ({why}); {fix.format(encoding=guess)}"])
    return text


def looks_like(data: bytes) -> tuple[str, str | None]:
    """(the encoding bytes that are not UTF-8 look like, what shows it): UTF-32 or UTF-16 by a byte order mark, UTF-16
    by NUL bytes beside ASCII ones, else cp1252 (None: only that a help desk's export of Windows is so, most often)."""
    for name, marks in (("utf-32", (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)), ("utf-16", (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE))):
        if data.startswith(marks):      # UTF-32's little-endian mark begins with UTF-16's: it is looked for first
            return name, f"the file begins with {name.upper()}'s byte order mark"
    sample = data[:4096]
    if len(sample) > 1 and sample.count(0) * 3 > len(sample):
        return "utf-16", "a NUL byte beside every letter, as UTF-16 writes text"
    return "cp1252", None


def require_columns(columns: list[str], required: tuple[str, ...], file: str | Path) -> None:
    """The header (line 1) names every required column."""
    missing = [c for c in required if c not in columns]
    if missing:
        found = ", ".join(shorten(c, 40) for c in columns[:20]) + (", ..." if len(columns) > 20 else "")
        raise DataError([f"{file}:1: missing column(s) {missing}; found {found or 'no header'}"])


def validate(tickets: pl.DataFrame, queries: pl.DataFrame, pairs: pl.DataFrame, split_fractions: dict[str, float],
             report: IntakeReport, read_from: dict[str, dict[str, str]] | None = None) -> Corpus:
    """Check raw tables (with `origin` columns) and return the clean Corpus, or raise DataError with every problem.

    read_from: per table, field -> the export's column(s) it was read from, for the messages (columns.described)."""
    problems: list[str] = []
    read_from = read_from or {}
    tickets, queries, pairs = (without_control(frame, table, report)
                               for frame, table in ((tickets, "tickets"), (queries, "queries"), (pairs, "pairs")))
    tickets = _check_records(tickets, "ticket_id", TICKET_FIELDS, "tickets", problems, report, read_from.get("tickets", {}))
    queries = _check_records(queries, "query_id", QUERY_FIELDS, "queries", problems, report, read_from.get("queries", {}))
    pairs = _check_pairs(pairs, set(tickets["ticket_id"]), set(queries["query_id"]), split_fractions, problems, report,
                         read_from.get("pairs", {}))
    if problems:
        raise DataError(problems)
    report.add("tickets", tickets.height)
    report.add("queries", queries.height)
    for (split, label), n in Counter(zip(pairs["split"], pairs["label"])).items():
        report.add(f"pairs {split} label={label}", n)
    report.add("queries without labelled pairs", queries.height - pairs["query_id"].n_unique())
    return Corpus(conform(tickets, TICKET_SCHEMA), conform(queries, QUERY_SCHEMA), conform(pairs, PAIR_SCHEMA))


def without_control(frame: pl.DataFrame, table: str, report: IntakeReport) -> pl.DataFrame:
    """The table without CONTROL characters in any text column but the ids (refused: ID_CONTROL), how many were removed
    from how many records counted."""
    columns = [c for c, kind in frame.schema.items() if kind == pl.String and c not in (ORIGIN, *IDS)]
    if not columns or frame.is_empty():
        return frame
    found = frame.select(pl.sum_horizontal(pl.col(c).str.count_matches(CONTROL) for c in columns)).to_series()
    report.add(f"control characters removed from {table}", int(found.sum()))
    report.add(f"{table} with control characters removed", int((found > 0).sum()))
    return frame.with_columns(pl.col(c).str.replace_all(CONTROL, "") for c in columns)


def id_problem(value: str, id_name: str) -> str | None:
    """Why an id is refused for the characters it holds (a line break, a control character), or None."""
    found = ID_CONTROL.search(value)
    if found is None:
        return None
    what = "a line break" if found[0] in LINE_BREAKS else "a control character"
    return f"{id_name} {shorten(value)} holds {what} (U+{ord(found[0]):04X}); an id is one line of printable characters"


def named(field: str, read_from: dict[str, str]) -> str:
    """A field as a message names it: with the export's column when a mapping read it from another one."""
    return f"{field} (column {read_from[field]})" if field in read_from else field


def _check_records(frame: pl.DataFrame, id_column: str, fields: tuple[str, ...], table: str,
                   problems: list[str], report: IntakeReport, read_from: dict[str, str]) -> pl.DataFrame:
    frame = frame.with_columns(pl.col(id_column).cast(pl.String).str.strip_chars(),
                               *(pl.col(f).cast(pl.String).fill_null("") for f in fields))
    first_seen: dict[str, str] = {}
    id_name = named(id_column, read_from)
    for row in frame.iter_rows(named=True):
        record, origin = row[id_column], row[ORIGIN]
        if not record:
            problems.append(f"{origin}: {table} record has an empty {id_name}")
            continue
        if controlled := id_problem(record, id_name):
            problems.append(f"{origin}: {controlled}")
            continue
        if record in first_seen:
            problems.append(f"{origin}: {id_name} {record!r} is a duplicate (first at {first_seen[record]})")
        first_seen.setdefault(record, origin)
        empty = [f for f in fields if not row[f].strip()]
        if len(empty) == len(fields):
            problems.append(f"{origin}: {id_name} {record!r}: every text field is empty "
                            f"({', '.join(named(f, read_from) for f in fields)})")
        for f in empty if len(empty) < len(fields) else ():
            report.add(f"{table} with empty {f}")
    for f in fields:
        report.add(f"{table} {f} cut to its first {MAX_TEXT_CHARS:,} characters",
                   int((frame[f].str.len_chars() > MAX_TEXT_CHARS).sum()))
    return frame.with_columns(pl.col(f).str.slice(0, MAX_TEXT_CHARS) for f in fields)


def _check_pairs(pairs: pl.DataFrame, ticket_ids: set[str], query_ids: set[str], split_fractions: dict[str, float],
                 problems: list[str], report: IntakeReport, read_from: dict[str, str]) -> pl.DataFrame:
    rows, seen, split_of = [], {}, {}
    for row in pairs.iter_rows(named=True):
        origin = row[ORIGIN]
        query_id, ticket_id = str(row["query_id"] or "").strip(), str(row["ticket_id"] or "").strip()
        where = f"{origin}: pair ({query_id}, {ticket_id})"
        label = parse_label(row["label"])
        split = row.get("split") or None
        rank = str(row.get("source_rank") or "").strip()
        ok = True
        for column, value, known in (("query_id", query_id, query_ids), ("ticket_id", ticket_id, ticket_ids)):
            if value not in known:
                name = named(column, read_from)
                problems.append(f"{where}: {id_problem(value, name) or f'unknown {name} {value!r}'}")
                ok = False
        if label is None:
            problems.append(f"{where}: unknown {named('label', read_from)} {shorten(str(row['label']))}; "
                            f"expected one of {list(LABELS)} or {list(LABELS.values())}")
            ok = False
        if split is not None and split not in SPLITS:
            problems.append(f"{where}: unknown {named('split', read_from)} {shorten(str(split))}; expected one of {list(SPLITS)}")
            ok = False
        if rank and not (rank.isascii() and rank.isdigit() and len(rank) <= 10 and int(rank) <= MAX_RANK):
            problems.append(f"{where}: {named('source_rank', read_from)} {shorten(rank)} is not a whole number from 0 to {MAX_RANK}")
            ok = False
        if not ok:
            continue
        if split is None:
            split = stable_split(query_id, split_fractions)
            report.add("pairs given a split by query-id hash")
        if split_of.setdefault(query_id, (split, origin))[0] != split:
            problems.append(f"{where}: query is in split {split!r} here but {split_of[query_id][0]!r} at {split_of[query_id][1]}")
            continue
        key = (query_id, ticket_id)
        if key in seen:
            first_origin, first_label = seen[key]
            if first_label != label:
                problems.append(f"{where}: label {label} contradicts label {first_label} at {first_origin}")
            else:
                report.add("identical duplicate pairs skipped")
            continue
        seen[key] = (origin, label)
        rows.append({"query_id": query_id, "ticket_id": ticket_id, "label": label, "split": split,
                     "source_rank": int(rank) if rank else None, ORIGIN: origin})
    return pl.DataFrame(rows, schema={**PAIR_SCHEMA, ORIGIN: pl.String}) if rows else pl.DataFrame(schema=PAIR_SCHEMA)
