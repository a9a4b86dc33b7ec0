"""The CSV/JSONL layout: a folder with tickets, queries and pairs files, read with line-level origins and written back.

This is the user's own export (`source: csv`) and also the layout the synthetic generator writes.
"""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import polars as pl

from ticketsim.data.tables import Corpus
from ticketsim.data.validate import ORIGIN, DataError, IntakeReport, require_columns, validate

REQUIRED = {
    "tickets": ("ticket_id", "subject", "description", "solution"),
    "queries": ("query_id", "subject", "description"),
    "pairs": ("query_id", "ticket_id", "label"),
}
OPTIONAL = {"tickets": (), "queries": (), "pairs": ("split", "source_rank")}


def table_file(directory: Path, table: str) -> Path:
    """tickets.csv or tickets.jsonl (exactly one of them) in `directory`."""
    found = [directory / f"{table}.{ext}" for ext in ("csv", "jsonl") if (directory / f"{table}.{ext}").exists()]
    if len(found) != 1:
        what = "both" if found else "neither"
        raise DataError([f"{directory}: expected exactly one of {table}.csv / {table}.jsonl, found {what}"])
    return found[0]


def read_text(path: Path) -> str:
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise DataError([f"{path}:{line}: bytes that are not UTF-8 ({data[error.start:error.end]!r} at byte {error.start});"
                         " re-export the file as UTF-8"]) from None


def read_table(path: Path, table: str) -> pl.DataFrame:
    """All columns as strings, plus `origin` = 'file:line' of each record."""
    text = read_text(path)
    columns = REQUIRED[table] + OPTIONAL[table]
    records = read_jsonl(text, path, REQUIRED[table]) if path.suffix == ".jsonl" else read_csv(text, path, REQUIRED[table])
    return pl.DataFrame(
        [{**{c: None if r.get(c) is None else str(r[c]) for c in columns}, ORIGIN: r[ORIGIN]} for r in records],
        schema={**{c: pl.String for c in columns}, ORIGIN: pl.String},
    )


def read_csv(text: str, path: Path, required: tuple[str, ...]) -> list[dict]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    require_columns(list(reader.fieldnames or []), required, path)
    records, start = [], reader.line_num + 1
    for record in reader:
        records.append({**record, ORIGIN: f"{path}:{start}"})
        start = reader.line_num + 1
    return records


def read_jsonl(text: str, path: Path, required: tuple[str, ...]) -> list[dict]:
    records, problems = [], []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            problems.append(f"{path}:{number}: not valid JSON ({error.msg})")
            continue
        missing = [c for c in required if c not in record] if isinstance(record, dict) else list(required)
        if missing:
            problems.append(f"{path}:{number}: missing field(s) {missing}")
            continue
        records.append({**record, ORIGIN: f"{path}:{number}"})
    if problems:
        raise DataError(problems)
    return records


def read_corpus(directory: str | Path, split_fractions: dict[str, float], report: IntakeReport) -> Corpus:
    directory = Path(directory)
    if not directory.is_dir():
        raise DataError([f"{directory}: no such folder; it should hold tickets, queries and pairs as .csv or .jsonl"])
    tables = {table: read_table(table_file(directory, table), table) for table in REQUIRED}
    return validate(tables["tickets"], tables["queries"], tables["pairs"], split_fractions, report)


def write_corpus(corpus: Corpus, directory: str | Path) -> None:
    """Write the CSV layout that read_corpus reads back."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for name, frame in corpus.frames().items():
        frame.write_csv(directory / f"{name}.csv")
