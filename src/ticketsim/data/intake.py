"""Appending a batch of new labelled pairs (and the queries and tickets that come with it) to a CSV-layout folder.

`ticketsim pairs add` calls add_pairs. The batch is checked together with everything already in the folder by
ticketsim.data.validate, the one set of checks, so a pair that contradicts an existing label is refused like any
other problem and never applied. All or nothing: a batch with any problem writes nothing. Rows already in the folder
are never changed or dropped; new rows carry their provenance (`source_file`, `added_at`).

Queries: a batch row names its query by `query_id` (an existing query; or a new one when the row also gives its
subject/description), or by `subject`/`description` alone. Such a query gets the id `q-` + 12 hex digits of BLAKE2b
over "subject\\ndescription" (each stripped), so the same text in a later batch names the same query again.

Splits: a new pair takes the split of its query's existing pairs, else stable_split(query_id): by query, so a
query's pairs never straddle train and dev, and a pair never moves when data is added.

One writer at a time: every intake (`pairs add`, `feedback export`, `feedback review --accept`) holds an flock on the
folder's hidden LOCK file from its first read to its last rename, so two at once both land; without it the second
rename would drop the first one's rows. The holder first removes the staged files a killed writer left.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import polars as pl

from ticketsim.data.csvsource import TABLES, Dialect, read_table, table_file, table_text
from ticketsim.data.locks import take
from ticketsim.data.tables import QUERY_FIELDS, TICKET_FIELDS, stable_split
from ticketsim.data.validate import ORIGIN, DataError, IntakeReport, parse_label, validate
from ticketsim.errors import StepError

ID_COLUMN = {"tickets": "ticket_id", "queries": "query_id"}
TEXT_FIELDS = {"tickets": TICKET_FIELDS, "queries": QUERY_FIELDS}
LOCK = ".ticketsim.lock"    # hidden and in .dvcignore: no reader takes it for a table, `dvc add` leaves it out


@dataclass(frozen=True)
class IntakeResult:
    """What one batch did: rows appended per table, rows skipped and why, or every problem that refused it."""

    file: Path
    added: dict[str, int]
    skipped: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()       # when any, nothing was written
    written: tuple[Path, ...] = ()
    altered: tuple[str, ...] = ()       # what intake changes in the new records when they are read (a field cut)

    @property
    def ok(self) -> bool:
        return not self.refused

    def render(self) -> str:
        if self.refused:
            return f"refused {self.file}: {DataError(list(self.refused))}"
        added = ", ".join(f"{what} {n}" for what, n in self.added.items()) or "nothing"
        lines = [f"added from {self.file}: {added}", *(f"noted: {line}" for line in self.altered),
                 f"skipped {len(self.skipped)}" + (":" if self.skipped else "")]
        lines += [f"  {reason}" for reason in self.skipped]
        lines += [f"wrote {path}" for path in self.written]
        return "\n".join(lines)


def text_query_id(subject: str, description: str) -> str:
    """The id of a query given by its text alone: the same text always gets the same id."""
    text = f"{(subject or '').strip()}\n{(description or '').strip()}"
    return "q-" + hashlib.blake2b(text.encode(), digest_size=6).hexdigest()


def add_pairs(folder: str | Path, file: str | Path, fractions: dict[str, float], now: datetime,
              tickets: str | Path | None = None, queries: str | Path | None = None, dialect: Dialect = Dialect()) -> IntakeResult:
    """Append the pairs of `file` (plus new tickets/queries from the optional files, all three written in `dialect`) to
    `folder`, or refuse them all."""
    file = Path(file)
    try:
        batch = read_batch(file, Path(tickets) if tickets else None, Path(queries) if queries else None,
                           now.isoformat(timespec="seconds"), dialect)
    except DataError as error:
        return IntakeResult(file, {}, refused=tuple(error.problems))
    return add_batch(folder, file, batch, fractions)


def add_batch(folder: str | Path, file: Path, batch: dict[str, pl.DataFrame], fractions: dict[str, float]) -> IntakeResult:
    """Append a batch as read_batch returns it (raw tables with origins and provenance) to `folder`, or refuse it all;
    under the folder's lock (another writer holding it is waited for)."""
    folder = Path(folder)
    try:
        paths = {table: table_file(folder, table) for table in TABLES}    # a dataset's folder before a lock file in it
        lock = open(folder / LOCK, "a")
    except DataError as error:
        return IntakeResult(file, {}, refused=tuple(error.problems))
    except OSError as error:
        raise StepError(f"{folder}: cannot add pairs there ({error.strerror}); make the folder writable") from None
    with lock:
        take(lock, f"{folder}: another writer is adding pairs; waiting for it")
        for leftover in (path for table in TABLES for path in folder.glob(f".{table}.*.tmp")):
            leftover.unlink(missing_ok=True)    # staged by a writer killed before its rename (replace_all)
        return appended(folder, file, batch, fractions, paths)


def appended(folder: Path, file: Path, batch: dict[str, pl.DataFrame], fractions: dict[str, float],
             paths: dict[str, Path]) -> IntakeResult:
    """add_batch's read, checks and write, the folder's lock held."""
    try:
        existing, before, after = {table: read_table(path, table) for table, path in paths.items()}, IntakeReport(), IntakeReport()
        # The folder must pass on its own first: its resolved splits are what new pairs of its queries inherit.
        resolved = validate(*existing.values(), fractions, before).pairs
    except DataError as error:
        return IntakeResult(file, {}, refused=tuple(error.problems))

    skipped: list[str] = []
    new = {table: known_records_skipped(batch[table], existing[table], table, skipped) for table in ("tickets", "queries")}
    split_of = dict(zip(resolved["query_id"], resolved["split"]))
    new["pairs"] = batch["pairs"].with_columns(
        split=pl.col("query_id").map_elements(lambda q: split_of.get(q) or stable_split(q, fractions), return_dtype=pl.String))
    combined = {table: pl.concat([existing[table], new[table]], how="diagonal_relaxed") for table in TABLES}
    try:
        validate(*combined.values(), fractions, after)
    except DataError as error:
        return IntakeResult(file, {}, refused=tuple(error.problems))

    new["pairs"] = known_pairs_skipped(new["pairs"], existing["pairs"], skipped)
    changed = {paths[table]: pl.concat([existing[table], new[table]], how="diagonal_relaxed")
               for table in TABLES if new[table].height}
    # Tickets and queries are replaced before pairs: a crash between two renames leaves only unreferenced new
    # records, which the same batch, added again, skips as already present.
    replace_all({path: table_text(frame, path.suffix) for path, frame in changed.items()})
    added = {table: new[table].height for table in ("tickets", "queries")}
    added.update({f"{split} pairs": n for split, n in sorted(Counter(new["pairs"]["split"]).items())})
    return IntakeResult(file, {k: n for k, n in added.items() if n}, tuple(skipped), written=tuple(changed),
                        altered=tuple(after.altered(since=before)))


def read_batch(file: Path, tickets: Path | None, queries: Path | None, stamp: str,
               dialect: Dialect = Dialect()) -> dict[str, pl.DataFrame]:
    """The batch as raw tables (strings with origins and provenance); queries given by text get their ids here."""
    rows = read_table(file, "new_pairs", dialect=dialect).with_columns(
        pl.col(c).fill_null("").str.strip_chars() for c in ("query_id", *QUERY_FIELDS))
    rows = rows.with_columns(query_id=pl.struct("query_id", *QUERY_FIELDS).map_elements(query_id_of, return_dtype=pl.String))
    # A row with query text brings its query along; many rows about one query bring it once.
    inline = (rows.filter((pl.col("subject") != "") | (pl.col("description") != ""))
              .select("query_id", *QUERY_FIELDS, ORIGIN).unique(["query_id", *QUERY_FIELDS], keep="first", maintain_order=True))
    new_queries = [stamped(read_table(queries, "queries", dialect=dialect), queries, stamp)] if queries else []
    return {
        "tickets": stamped(read_table(tickets, "tickets", dialect=dialect), tickets, stamp) if tickets else pl.DataFrame(),
        "queries": pl.concat([*new_queries, stamped(inline, file, stamp)], how="diagonal_relaxed"),
        "pairs": stamped(rows.select("query_id", "ticket_id", "label", ORIGIN), file, stamp)
        .with_columns(label=pl.col("label").map_elements(normal_label, return_dtype=pl.String)),
    }


def query_id_of(row: dict[str, str]) -> str:
    """The row's query_id, else the id its text gets, else '' (which validate reports as an unknown query)."""
    if row["query_id"]:
        return row["query_id"]
    return text_query_id(row["subject"], row["description"]) if row["subject"] or row["description"] else ""


def stamped(frame: pl.DataFrame, source: Path, stamp: str) -> pl.DataFrame:
    return frame.with_columns(source_file=pl.lit(source.name), added_at=pl.lit(stamp))


def normal_label(label: str) -> str:
    """YES/REL/NO and 5/3/1 are both stored as 5/3/1; an unknown label stays as given, for validate to report."""
    parsed = parse_label(label)
    return label if parsed is None else str(parsed)


def known_records_skipped(batch: pl.DataFrame, existing: pl.DataFrame, table: str, skipped: list[str]) -> pl.DataFrame:
    """The batch's tickets/queries minus those already in the folder with the same text (noted in `skipped`).

    One with a known id but other text stays in, so validate reports the duplicate id instead of it being dropped.
    """
    if batch.is_empty():
        return batch
    id_column, fields = ID_COLUMN[table], TEXT_FIELDS[table]
    present = {row[id_column]: row for row in existing.iter_rows(named=True)}
    keep = []
    for row in batch.iter_rows(named=True):
        known = present.get((row[id_column] or "").strip())
        if known is not None and all((known[f] or "").strip() == (row[f] or "").strip() for f in fields):
            skipped.append(f"{row[ORIGIN]}: {id_column} {known[id_column]!r}: already in the folder ({known[ORIGIN]})")
            keep.append(False)
        else:
            keep.append(True)
    return batch.filter(pl.Series(keep, dtype=pl.Boolean))


def known_pairs_skipped(batch: pl.DataFrame, existing: pl.DataFrame, skipped: list[str]) -> pl.DataFrame:
    """The batch's pairs minus those already labelled (the same label: validate refused any other) or repeated in it."""
    first = {(q.strip(), t.strip()): origin for q, t, origin in zip(existing["query_id"], existing["ticket_id"], existing[ORIGIN])}
    keep = []
    for row in batch.iter_rows(named=True):
        key = (row["query_id"], row["ticket_id"].strip())
        if key in first:
            skipped.append(f"{row[ORIGIN]}: pair ({key[0]}, {key[1]}): already labelled {row['label']} at {first[key]}")
        first.setdefault(key, row[ORIGIN])
        keep.append(first[key] == row[ORIGIN])
    return batch.filter(pl.Series(keep, dtype=pl.Boolean)).with_columns(pl.col("ticket_id").str.strip_chars())


def replace_all(texts: dict[Path, str]) -> None:
    """Write every file to a temporary file beside it, then rename each over the old one, in order.

    A rename replaces the directory entry, never the old file's bytes, so a DVC cache linked into the folder
    (hardlink or symlink) is not corrupted, and a crash while writing leaves every file as it was.
    """
    staged: dict[Path, str] = {}
    try:
        for path, text in texts.items():
            handle, staged[path] = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            with os.fdopen(handle, "w", encoding="utf-8", newline="") as out:
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
            shutil.copymode(path, staged[path])
        for path, temporary in staged.items():
            os.replace(temporary, path)
    finally:
        for temporary in staged.values():
            Path(temporary).unlink(missing_ok=True)
