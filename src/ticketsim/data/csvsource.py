"""The CSV/JSONL layout: a folder with tickets, queries and pairs files, read with line-level origins and written back.

This is the user's own export (`source: csv`) and also the layout the synthetic generator writes. A column mapping
(ticketsim.data.columns) reads a help desk's export whose columns are named otherwise: only the fields it gives are
kept, and a column its text fields join may repeat in the header.

Fields may be as long as the file (a pasted log in a description reads as it does from JSONL). A header that names
one column twice is refused (one copy's values would be lost), except blank names (trailing commas of a spreadsheet).
A CSV file is UTF-8 and comma-separated unless its Dialect says otherwise; a header of one field that holds a `;` or a
tab (Excel's CSV where the decimal mark is a comma) is read with that delimiter when its columns are then the expected
ones, and the intake report says so. JSONL is UTF-8 always.
Every problem of a file, including what the csv and json modules reject, is a DataError naming 'file:line'.
"""
from __future__ import annotations

import csv
import io
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from ticketsim.config import ColumnMapping
from ticketsim.data.columns import TableColumns, csv_values, described, json_values, resolve
from ticketsim.data.tables import FACETS, Corpus
from ticketsim.data.validate import ORIGIN, DataError, IntakeReport, read_text, require_columns, shorten, validate

TABLES = ("tickets", "queries", "pairs")
# new_pairs: a batch for `ticketsim pairs add`, naming each query by query_id or by its subject/description.
# search: queries for `ticketsim search --queries`, their query_id optional (default: the record's line number).
REQUIRED = {
    "tickets": ("ticket_id", "subject", "description", "solution"),
    "queries": ("query_id", "subject", "description"),
    "pairs": ("query_id", "ticket_id", "label"),
    "new_pairs": ("ticket_id", "label"),
    "search": ("subject", "description"),
}
# Provenance of rows appended by `ticketsim pairs add` (ticketsim.data.intake): the file they came from and when.
PROVENANCE = ("source_file", "added_at")
OPTIONAL = {"tickets": PROVENANCE, "queries": PROVENANCE, "pairs": ("split", "source_rank", *PROVENANCE),
            "new_pairs": ("query_id", "subject", "description"), "search": ("query_id",)}
# The csv module refuses fields over 131,072 characters by default; JSONL has no such limit, so CSV gets none either
# (the largest limit a C long holds on every platform). csv.field_size_limit is process-wide: it is only ever raised.
FIELD_LIMIT = 2**31 - 1
DETECTED = ";\t"   # delimiters a header of one field may be written with


@dataclass(frozen=True)
class Dialect:
    """How a help desk's CSV export is written: its encoding (None: UTF-8, a byte order mark allowed) and delimiter
    (None: a comma, or the DETECTED one its header is written with). `named`: how the user sets the encoding, an
    option (--encoding) or a params key, for the message about bytes the encoding cannot read."""

    encoding: str | None = None
    delimiter: str | None = None
    named: str = "--encoding"

    def text(self, path: Path) -> str:
        if path.suffix == ".jsonl":
            return read_text(path)
        told = f"pass {self.named}" if self.named.startswith("--") else f"set {self.named}:"
        return read_text(path, self.encoding, f"{told} {{encoding}} (or the export's encoding)" if self.encoding is None
                         else f"{told} the export's encoding")


def table_file(directory: Path, table: str) -> Path:
    """tickets.csv or tickets.jsonl (exactly one of them) in `directory`."""
    found = [directory / f"{table}.{ext}" for ext in ("csv", "jsonl") if (directory / f"{table}.{ext}").exists()]
    if len(found) != 1:
        what = "both" if found else "neither"
        raise DataError([f"{directory}: expected exactly one of {table}.csv / {table}.jsonl, found {what}"])
    return found[0]


def read_table(path: Path, table: str, mapping: ColumnMapping | None = None, dialect: Dialect = Dialect(),
               report: IntakeReport | None = None, facets: tuple[str, ...] = ()) -> pl.DataFrame:
    """All columns as strings, plus `origin` = 'file:line' of each record.

    Known columns come first, absent optional ones as nulls; any other column the file has is kept after them, so a
    rewrite (table_text) loses nothing. validate() conforms the Corpus tables to their schema, which drops them.
    With a mapping that renames the table's columns, its fields only, read as the mapping says. A delimiter detected is
    noted in `report`. facets: optional fields read too (from the column of their own name under a mapping).
    """
    text = dialect.text(path)
    mapped = TableColumns.of(mapping, table, REQUIRED[table], OPTIONAL[table] + facets)
    if mapped is not None:
        records = read_mapped(text, path, mapped, dialect.delimiter, report)
        columns = mapped.fields
    else:
        records = read_jsonl(text, path, REQUIRED[table]) if path.suffix == ".jsonl" else \
            read_csv(text, path, REQUIRED[table], dialect.delimiter, report)
        known = REQUIRED[table] + OPTIONAL[table] + facets
        columns = known + tuple(dict.fromkeys(c for r in records for c in r if c not in known and c != ORIGIN))
    return pl.DataFrame(
        [{**{c: None if r.get(c) is None else str(r[c]) for c in columns}, ORIGIN: r[ORIGIN]} for r in records],
        schema={**{c: pl.String for c in columns}, ORIGIN: pl.String},
    )


def read_mapped(text: str, path: Path, mapped: TableColumns, delimiter: str | None = None,
                report: IntakeReport | None = None) -> list[dict]:
    """The records of an export as the mapping's fields, or a DataError naming file:line and the column read."""
    if path.suffix == ".jsonl":
        return parse_jsonl(text, path, lambda record, origin, problems: mapped.record(
            lambda column: json_values(record, column), origin, problems))

    def converter(header: list[str]):
        mapped.check_header(header, path)
        values = csv_values(header)
        return lambda row, origin, problems: mapped.record(values(row), origin, problems)

    return parse_csv(text, path, converter, delimiter, report)


def read_csv(text: str, path: Path, required: tuple[str, ...], delimiter: str | None = None,
             report: IntakeReport | None = None) -> list[dict]:
    def converter(header: list[str]):
        require_columns(header, required, path)
        twice = sorted(c for c, n in Counter(header).items() if n > 1 and c.strip())
        if twice:
            raise DataError([f"{path}:1: the header names column(s) {', '.join(map(shorten, twice))} more than once"])
        return lambda row, origin, problems: dict(zip(header, row))

    return parse_csv(text, path, converter, delimiter, report)


def parse_csv(text: str, path: Path, converter, delimiter: str | None = None, report: IntakeReport | None = None) -> list[dict]:
    """Each data row as `convert(row, origin, problems)` (None: refused, its problems added) with its origin, where
    `converter(header)` checks the header (a DataError) and returns `convert`; a DataError lists every problem.
    Without a `delimiter`, a header refused as one field holding a DETECTED delimiter is split on it and checked again."""
    if csv.field_size_limit() < FIELD_LIMIT:
        csv.field_size_limit(FIELD_LIMIT)
    records, problems, start = [], [], 1
    try:
        reader, header = csv_rows(text, delimiter or ",")
        try:
            convert = converter(header)
        except DataError:
            found = next((d for d in DETECTED if d in header[0]), None) if delimiter is None and len(header) == 1 else None
            if found is None:
                raise
            reader, header = csv_rows(text, found)
            convert = converter(header)     # refused again: the problems name the columns as split on it
            if report is not None:
                report.add(f"{path}: read with {spelled(found)} as its delimiter, as its header is written")
        start = reader.line_num + 1
        for row in reader:
            if row and len(row) != len(header):
                problems.append(f"{path}:{start}: {len(row)} fields where the header has {len(header)}; "
                                f"quote fields that contain {spelled(reader.dialect.delimiter)}")
            elif row:  # csv gives [] for a blank line
                record = convert(row, f"{path}:{start}", problems)
                if record is not None:
                    records.append({**record, ORIGIN: f"{path}:{start}"})
            start = reader.line_num + 1
    except csv.Error as error:  # the reader cannot go on past it: report it with what came before
        problems.append(f"{path}:{start}: not readable as CSV from here ({error})")
    if problems:
        raise DataError(problems)
    return records


def spelled(delimiter: str) -> str:
    return {",": "a comma", "\t": "a tab"}.get(delimiter, repr(delimiter))


def csv_rows(text: str, delimiter: str):
    """A csv reader of `text` and its first row (the header; [] for an empty text)."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    return reader, next(reader, [])


def read_jsonl(text: str, path: Path, required: tuple[str, ...]) -> list[dict]:
    def convert(record: dict, origin: str, problems: list[str]) -> dict | None:
        missing = [c for c in required if c not in record]
        if missing:
            problems.append(f"{origin}: missing field(s) {missing}")
            return None
        return record

    return parse_jsonl(text, path, convert)


def parse_jsonl(text: str, path: Path, convert) -> list[dict]:
    """Each line's JSON object as `convert(record, origin, problems)` (None: refused) with its origin; a DataError
    lists every problem."""
    records, problems = [], []
    # Split on newlines only: JSON strings may hold U+2028 and other characters str.splitlines breaks at.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            json.dumps(record, ensure_ascii=False).encode()   # a lone surrogate (say "\ud800") is no character
        except json.JSONDecodeError as error:
            problems.append(f"{path}:{number}: not valid JSON ({error.msg})")
            continue
        except UnicodeEncodeError:
            problems.append(f"{path}:{number}: a \\u escape that is half of a surrogate pair, not a character")
            continue
        except (ValueError, RecursionError) as error:  # a number of over 4300 digits; arrays nested thousands deep
            reason = "nested too deeply" if isinstance(error, RecursionError) else str(error).split(":")[0]
            problems.append(f"{path}:{number}: not valid JSON here ({reason})")
            continue
        if not isinstance(record, dict):
            kind = {list: "an array", str: "a string", bool: "true or false", type(None): "null"}.get(type(record), "a number")
            problems.append(f"{path}:{number}: {kind}, not an object of fields")
            continue
        converted = convert(record, f"{path}:{number}", problems)
        if converted is not None:
            records.append({**converted, ORIGIN: f"{path}:{number}"})
    if problems:
        raise DataError(problems)
    return records


def read_records(path: str | Path, table: str, columns: str | ColumnMapping | None = None,
                 origins: bool = False, dialect: Dialect = Dialect(), report: IntakeReport | None = None) -> pl.DataFrame:
    """One file of tickets ('tickets') or of queries to search ('search'), checked as a dataset's tables are: the table
    in its schema (with `origin`, file:line, when `origins`; a tickets file's FACETS where it has them), or a DataError
    naming file:line of every problem, a file without a record included. `columns`: a column mapping (see resolve);
    `report`: what intake counted (a field cut)."""
    mapping = resolve(columns, "--columns")
    frame = read_table(Path(path), table, mapping, dialect, facets=FACETS if table == "tickets" else ())
    refuse_empty(frame, path, table)
    if table == "search":
        line = pl.col(ORIGIN).str.extract(r":(\d+)$")
        frame = frame.with_columns(query_id=pl.when(pl.col("query_id").str.strip_chars() != "").then("query_id").otherwise(line))
    tables = {**{name: empty_table(name) for name in TABLES}, "tickets" if table == "tickets" else "queries": frame}
    corpus = validate(tables["tickets"], tables["queries"], tables["pairs"], {"test": 1.0},
                      IntakeReport() if report is None else report, read_from=described(mapping))
    records = corpus.tickets if table == "tickets" else corpus.queries
    # validate keeps the rows in their order, and drops what its schema lacks: the facets a file has come back
    records = records.with_columns([frame[c] for c in FACETS if c in frame.columns and frame[c].is_not_null().any()])
    return records.with_columns(frame[ORIGIN]) if origins else records


def refuse_empty(frame: pl.DataFrame, path: str | Path, table: str) -> None:
    """A file of tickets or queries without a record is refused: nothing could be searched or indexed."""
    if frame.is_empty():
        raise DataError([f"{path}:1: no {'ticket' if table == 'tickets' else 'query'} in the file (a header alone, or nothing)"])


def empty_table(table: str) -> pl.DataFrame:
    """A table with no record, as read_table gives one (validate() conforms it to the Corpus schema)."""
    return pl.DataFrame(schema={**dict.fromkeys(REQUIRED[table], pl.String), ORIGIN: pl.String})


def read_corpus(directory: str | Path, split_fractions: dict[str, float], report: IntakeReport,
                mapping: ColumnMapping | None = None, read: tuple[str, ...] = TABLES, dialect: Dialect = Dialect()) -> Corpus:
    """The folder's tables; those not `read` are empty (tickets alone: a dataset without labelled pairs). A tickets
    file without a record is refused, as `index build` refuses it."""
    directory = Path(directory)
    if not directory.is_dir():
        raise DataError([f"{directory}: no such folder; it should hold {', '.join(read)} as .csv or .jsonl"])
    tables, problems = {name: empty_table(name) for name in TABLES if name not in read}, []
    for table in read:  # read every file before failing, so all their problems are reported together
        try:
            path = table_file(directory, table)
            tables[table] = read_table(path, table, mapping, dialect, report)
            if table == "tickets":
                refuse_empty(tables[table], path, table)
        except DataError as error:
            problems += error.problems
    if problems:
        raise DataError(problems)
    return validate(tables["tickets"], tables["queries"], tables["pairs"], split_fractions, report,
                    read_from=described(mapping))


def write_corpus(corpus: Corpus, directory: str | Path) -> None:
    """Write the CSV layout that read_corpus reads back."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for name, frame in corpus.frames().items():
        frame.write_csv(directory / f"{name}.csv")


def table_text(frame: pl.DataFrame, suffix: str) -> str:
    """A table as the text of a .csv or .jsonl file of this layout (without `origin`); read_table reads it back."""
    frame = frame.drop(ORIGIN, strict=False)
    if suffix == ".jsonl":
        return frame.write_ndjson()
    # CSV has no null: read_csv gives "" for an empty field, written back bare rather than as "".
    return frame.with_columns(pl.col(pl.String).replace("", None)).write_csv()
