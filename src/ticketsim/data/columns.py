"""Column mappings: how a help desk's export becomes the fields of the tickets, queries and pairs tables.

A mapping (ticketsim.config.ColumnMapping: data, no code) names per table and field the export's column, or for a text
field (subject, description, solution) the columns joined into it. This module owns the ready-made mappings
(READY_MADE), resolves what a dataset's `columns` or `--columns` names (a ready-made name, a .yaml file, or a mapping)
into one checked mapping, and turns each record of an export into its table's fields (TableColumns).

Joining a text field: its columns in the mapping's order; a column that the CSV header names several times (Jira's one
"Comment" column per comment) or a JSON list gives all its values in order. Each value loses the matches of its
column's `strip` regex and, with `html` (true, or "auto" for a value that holds HTML markup), is reduced to the text a
browser shows; empty values are left out and the rest joined by a blank line. A text field's column named with a
trailing "?" may be missing from the export (a Jira export without any comment has no "Comment" column): the field joins
the columns it finds. An id, label, split or rank reads exactly one value.

JSONL: a name with dots reads inside objects and lists when the record has no key of that name: `comments.plain_body`
is every comment's plain_body, `Article.0.Body` the first article's, `Article.1:.Body` every later one's (an index or a
slice, as in Python; a slice past the end is empty). CSV column names are always read as written.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lxml import etree
from lxml import html as lxml_html

from ticketsim.config import ColumnMapping, ConfigError, load_columns
from ticketsim.data.tables import PAIR_SCHEMA, QUERY_FIELDS, QUERY_SCHEMA, TICKET_FIELDS, TICKET_SCHEMA
from ticketsim.data.validate import DataError, shorten

FIELDS = {"tickets": tuple(TICKET_SCHEMA), "queries": tuple(QUERY_SCHEMA), "pairs": tuple(PAIR_SCHEMA)}
TABLE_NAMES = tuple(FIELDS)
TEXT_FIELDS = {"tickets": TICKET_FIELDS, "queries": QUERY_FIELDS, "pairs": ()}
JOIN = "\n\n"

# Jira's CSV export writes each comment as "DATE TIME;AUTHOR;TEXT": "24/Nov/26 5:04 AM;<account id>;", "03/Nov/26 14:31;",
# "2026-10-11 09:12;j.doe;" (the date format is the instance's; the author may be missing). An author holds no blank, so
# the first sentence of a comment without one is not taken for it.
JIRA_COMMENT_HEAD = r"^(?:\d{4}-\d{2}-\d{2}|\d{1,2}/\w{3}/\d{2,4}) \d{1,2}:\d{2}(?::\d{2})? ?(?:[AP]M)?;(?:[^;\s]*;)?"
# ServiceNow's journal fields (work_notes) head each entry with "2026-01-05 10:22:13 - Jane Agent (Work notes)".
SERVICENOW_JOURNAL_HEAD = r"(?m)^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} - .*\((?:Work notes|Additional comments)\)[ \t]*$"
# ... and an entry written as HTML is wrapped in [code]...[/code]: the markers go, the HTML inside is reduced (html: auto).
SERVICENOW_JOURNAL = SERVICENOW_JOURNAL_HEAD + r"|\[/?code\]"
OPTIONAL = "?"   # a text field's column named with this suffix may be missing from the export

# Every system below can write HTML into some text field (Jira's rich-text descriptions and comments, ServiceNow's
# [code] journal entries, Zendesk's html_body, an OTRS article sent as HTML): "auto" reduces the values that hold markup
# and keeps plain text and wiki markup as written.
READY_MADE: dict[str, ColumnMapping] = {
    # Jira "Export CSV (all fields)": one Comment column per comment (none when no issue has one). Resolution is a code
    # (Fixed, Done, Won't Fix): after the comments, so a solution's first line is the first comment's text.
    "jira": ColumnMapping(
        tickets={"ticket_id": "Issue key", "subject": "Summary", "description": "Description",
                 "solution": ("Comment?", "Resolution?")},
        queries={"query_id": "Issue key", "subject": "Summary", "description": "Description"},
        html="auto", strip={"Comment": JIRA_COMMENT_HEAD}),
    # ServiceNow incident list "Export > CSV" with these fields in the list; the journals (work_notes, comments) if added.
    "servicenow": ColumnMapping(
        tickets={"ticket_id": "number", "subject": "short_description", "description": "description",
                 "solution": ("close_notes", "work_notes?", "comments?")},
        queries={"query_id": "number", "subject": "short_description", "description": "description"},
        html="auto", strip={"work_notes": SERVICENOW_JOURNAL, "comments": SERVICENOW_JOURNAL}),
    # Zendesk's JSON export, one ticket per line: the first comment is the description itself; an export without the
    # comments inline (the incremental API's tickets) has no solution.
    "zendesk": ColumnMapping(
        tickets={"ticket_id": "id", "subject": "subject", "description": "description", "solution": "comments.1:.html_body?"},
        queries={"query_id": "id", "subject": "subject", "description": "description"},
        html="auto"),
    # OTRS / Znuny TicketGet with AllArticles, one ticket per line: the first article is the customer's request.
    "otrs": ColumnMapping(
        tickets={"ticket_id": "TicketNumber", "subject": "Title", "description": "Article.0.Body",
                 "solution": "Article.1:.Body"},
        queries={"query_id": "TicketNumber", "subject": "Title", "description": "Article.0.Body"},
        html="auto"),
}


def resolve(spec: str | ColumnMapping | None, where: str) -> ColumnMapping | None:
    """The mapping `spec` names: None (columns as named), a ready-made name, a .yaml file, or a mapping; `use` applied
    and every name checked. A ConfigError names `where` (the param or option) and what is wrong."""
    if spec is None:
        return None
    if isinstance(spec, str):
        if spec in READY_MADE:
            return READY_MADE[spec]
        if not spec.endswith((".yaml", ".yml")):
            raise ConfigError(f"{where}: {spec!r} is neither a ready-made mapping ({', '.join(READY_MADE)}) "
                              "nor a mapping file (.yaml)")
        where, spec = spec, load_columns(spec)
    if spec.use is not None:
        if spec.use not in READY_MADE:
            raise ConfigError(f"{where}.use: {spec.use!r} is not a ready-made mapping ({', '.join(READY_MADE)})")
        base = READY_MADE[spec.use]
        spec = ColumnMapping(**{table: {**getattr(base, table), **getattr(spec, table)} for table in TABLE_NAMES},
                             html=base.html if spec.html is None else spec.html, strip={**base.strip, **spec.strip})
    check(spec, where)
    return spec


def check(mapping: ColumnMapping, where: str) -> None:
    for table, known in FIELDS.items():
        for name, columns in getattr(mapping, table).items():
            if name not in known:
                raise ConfigError(f"{where}.{table}.{name}: no such field; {table} has {', '.join(known)}")
            if not isinstance(columns, str) and not columns:
                raise ConfigError(f"{where}.{table}.{name}: name at least one column")
            if not isinstance(columns, str) and len(columns) > 1 and name not in TEXT_FIELDS[table]:
                raise ConfigError(f"{where}.{table}.{name}: reads one column (only the text fields "
                                  f"{', '.join(TEXT_FIELDS[table]) or 'of other tables'} join several)")
            if name not in TEXT_FIELDS[table] and any(c.endswith(OPTIONAL) for c in names(columns)):
                raise ConfigError(f"{where}.{table}.{name}: only a text field's columns may be optional ('{OPTIONAL}')")
    for column, pattern in mapping.strip.items():
        try:
            re.compile(pattern)
        except re.error as error:
            raise ConfigError(f"{where}.strip.{column}: {pattern!r} is not a regular expression ({error})") from None


def names(columns: str | tuple[str, ...]) -> tuple[str, ...]:
    return (columns,) if isinstance(columns, str) else tuple(columns)


def described(mapping: ColumnMapping | None) -> dict[str, dict[str, str]]:
    """Per table, each mapped field -> the column(s) it reads, as error messages name them ("'Resolution' + 'Comment'")."""
    if mapping is None:
        return {}
    return {table: {name: " + ".join(repr(c.removesuffix(OPTIONAL)) for c in names(columns))
                    for name, columns in getattr(mapping, table).items()}
            for table in TABLE_NAMES}


@dataclass(frozen=True)
class TableColumns:
    """One table's mapping, resolved: which columns each field reads, and how its values are cleaned."""

    table: str
    mapped: dict[str, tuple[str, ...]]       # fields the mapping names -> their columns (required when read)
    own: tuple[str, ...]                     # the table's other fields: read from the column of their own name
    optional: frozenset[str]                 # fields a record or header may lack
    html: bool | str                         # True, False or "auto" (the values that hold HTML markup)
    strip: dict[str, re.Pattern]
    absent_ok: frozenset[str] = frozenset()  # columns of text fields marked optional ("Comment?"), without the mark

    @classmethod
    def of(cls, mapping: ColumnMapping | None, table: str, required: tuple[str, ...],
           optional: tuple[str, ...]) -> TableColumns | None:
        """None when the mapping leaves the table as it is (the export names every field itself)."""
        if table not in TABLE_NAMES or mapping is None or not (getattr(mapping, table) or mapping.html or mapping.strip):
            return None
        marked = {name: names(columns) for name, columns in getattr(mapping, table).items()}
        mapped = {name: tuple(c.removesuffix(OPTIONAL) for c in columns) for name, columns in marked.items()}
        absent_ok = frozenset(c.removesuffix(OPTIONAL) for columns in marked.values() for c in columns if c.endswith(OPTIONAL))
        return cls(table, mapped, tuple(f for f in required + optional if f not in mapped), frozenset(optional) - set(mapped),
                   mapping.html or False, {column: re.compile(p) for column, p in mapping.strip.items()}, absent_ok)

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(self.mapped) + self.own

    def columns(self, name: str) -> tuple[str, ...]:
        return self.mapped.get(name, (name,))

    def check_header(self, header: list[str], path: Path) -> None:
        """Line 1 names every column read; a column read into a one-value field appears once."""
        problems = []
        missing = [f"{column!r} (for {name})" for name in self.fields if name not in self.optional
                   for column in self.columns(name) if column not in header and column not in self.absent_ok]
        if missing:
            found = ", ".join(shorten(c, 40) for c in header[:20]) + (", ..." if len(header) > 20 else "")
            problems.append(f"{path}:1: missing column(s) {', '.join(missing)}; found {found or 'no header'}")
        for name in self.fields:
            if name in TEXT_FIELDS[self.table]:
                continue
            twice = [c for c in self.columns(name) if header.count(c) > 1]
            if twice:
                problems.append(f"{path}:1: the header names column {shorten(twice[0])} {header.count(twice[0])} times; "
                                f"{name} reads one value")
        if problems:
            raise DataError(problems)

    def record(self, values: Callable[[str], list | None], origin: str, problems: list[str]) -> dict | None:
        """A record's fields from `values(column)` (all values of a column, None when absent), or None after adding
        its problems: file:line, the column read and what is wrong."""
        record, before = {}, len(problems)
        for name in self.fields:
            read, unreadable = [], False
            for column in self.columns(name):
                try:
                    found = values(column)
                except LookupError as error:
                    problems.append(f"{origin}: {error.args[0]} (for {name})")
                    unreadable = True
                    continue
                if found is not None or column not in self.absent_ok:
                    read.append((column, found))
            absent = [column for column, found in read if found is None]
            if absent and name in self.optional:
                record[name] = None
            elif absent:
                problems.append(f"{origin}: missing field(s) {absent} (for {name})")
            elif not unreadable:
                record[name] = self.value(name, read, origin, problems)
        return record if len(problems) == before else None

    def value(self, name: str, read: list[tuple[str, list]], origin: str, problems: list[str]) -> str | None:
        if name not in TEXT_FIELDS[self.table]:
            (column, found), = read
            if len(found) != 1:
                problems.append(f"{origin}: column {column!r} holds {len(found)} values; {name} reads one")
                return None
            return None if found[0] is None else str(found[0])
        parts = []
        for column, found in read:
            for item in found:
                text = self.clean(column, "" if item is None else str(item), origin, problems)
                if text:
                    parts.append(text)
        return JOIN.join(parts)

    def clean(self, column: str, text: str, origin: str, problems: list[str]) -> str:
        if column in self.strip:   # a removed head line leaves its line break behind
            text = re.sub(r"\n\s*\n(\s*\n)+", "\n\n", self.strip[column].sub("", text))
        if self.html is True or self.html == "auto" and HTML_MARKUP.search(text):
            try:
                text = html_text(text)
            except (etree.LxmlError, ValueError) as error:
                problems.append(f"{origin}: column {column!r}: not readable as HTML ({error})")
        return text.strip()


def csv_values(header: list[str]) -> Callable[[list[str]], Callable[[str], list | None]]:
    """For a CSV row: column -> its values in header order (several when the header repeats the column)."""
    positions: dict[str, list[int]] = {}
    for at, column in enumerate(header):
        positions.setdefault(column, []).append(at)
    return lambda row: lambda column: [row[at] for at in positions[column]] if column in positions else None


def json_values(record: dict, column: str) -> list | None:
    """A JSONL record's values for a column name or a dotted path (see the module's docstring); None when the record
    has no such top-level field; LookupError naming the path when it leads nowhere or to an object."""
    if column in record:
        found, steps = [record[column]], []
    else:
        head, *steps = column.split(".")
        if head not in record or not steps:
            return None
        found = [record[head]]
    path = column.split(".")[0] if steps else column
    for step in steps:
        path, following = f"{path}.{step}", []
        for node in found:
            if isinstance(node, list) and re.fullmatch(r"-?\d+", step):
                following += node[int(step):int(step) + 1 or None]
            elif isinstance(node, list) and re.fullmatch(r"-?\d*:-?\d*", step):
                start, stop = (int(p) if p else None for p in step.split(":"))
                following += node[start:stop]
            else:
                for item in node if isinstance(node, list) else [node]:
                    if not isinstance(item, dict) or step not in item:
                        raise LookupError(f"{path!r}: not found (no field {step!r} here)")
                    following.append(item[step])
        found = following
    flat = []
    for node in found:
        for item in node if isinstance(node, list) else [node]:
            if isinstance(item, (dict, list)):
                raise LookupError(f"{column!r} holds {'an object' if isinstance(item, dict) else 'a nested list'}, "
                                  "not text; name a field inside it with a dot")
            flat.append(item)
    return flat


BLOCK_TAGS = {"p", "div", "br", "li", "tr", "td", "th", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote",
              "table", "ul", "ol", "dd", "dt", "hr", "section", "article", "header", "footer"}
HTML_PARSER = lxml_html.HTMLParser(huge_tree=True)   # a pasted log can exceed libxml2's 10 MB text limit
# What makes a value HTML for html: auto: an element of HTML's common vocabulary written as a tag (<p>, <br/>, </div>,
# <a href=...>; not <p.weber@example.com> or "a <b" in a sentence), or a character entity (&deg;, &#176;, &amp;).
INLINE_TAGS = {"a", "b", "i", "u", "s", "em", "strong", "span", "code", "img", "font", "sub", "sup", "small", "strike",
               "del", "ins", "tbody", "thead", "caption", "html", "body"}
HTML_MARKUP = re.compile(r"</?(?:%s)(?:\s[^<>]*)?/?>|&(?:[a-z][a-z0-9]{1,31}|#\d{1,7}|#x[0-9a-f]{1,6});"
                         % "|".join(sorted(BLOCK_TAGS | INLINE_TAGS, key=len, reverse=True)), re.IGNORECASE)


def html_text(text: str) -> str:
    """The text a browser shows for an HTML fragment: tags, scripts and styles dropped, entities decoded, block
    elements and <br> on lines of their own, runs of blanks within a line made one space."""
    if "<" not in text and "&" not in text:
        return text
    root = lxml_html.fragment_fromstring(text, create_parent="div", parser=HTML_PARSER)
    for hidden in root.xpath(".//script | .//style"):
        hidden.drop_tree()
    for element in root.iter():
        if element.tag in BLOCK_TAGS:   # comments' tag is a function: never a block
            element.tail = "\n" + (element.tail or "")
    lines = (re.sub(r"[^\S\n]+", " ", line).strip() for line in root.text_content().split("\n"))
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
