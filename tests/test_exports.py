"""Help desk exports read through column mappings (ticketsim.data.columns): each ready-made mapping on a fixture in its
system's export shape (tests/fixtures/exports/, written for these tests), mappings in params, in a file and on the
command line, and bad exports refused with file:line, the column read and what is wrong, nothing written.

Expected values are read from the fixture files themselves with the csv and json modules, so the tests say what the
mapping must do with an export (which columns, in which order, what is removed), not what one run printed.
"""
import csv
import io
import json
import re
from pathlib import Path

import pytest
from benchmarks.common import make_bundle

from ticketsim.cli import BAD_INPUT, ERROR, OK, main
from ticketsim.config import ColumnMapping, ConfigError, DatasetConfig, load_params
from ticketsim.data import csvsource
from ticketsim.data.columns import HTML_MARKUP, READY_MADE, html_text, resolve
from ticketsim.data.csvsource import read_records, read_table
from ticketsim.data.source_record import MissingSource, source_record
from ticketsim.data.sources import load_corpus
from ticketsim.data.validate import DataError, IntakeReport

EXPORTS = Path(__file__).parent / "fixtures" / "exports"
JIRA = EXPORTS / "jira"   # a dataset folder: tickets and queries as Jira exports them, pairs in ticketsim's layout
FILES = {"jira": JIRA / "tickets.csv", "servicenow": EXPORTS / "servicenow.csv", "zendesk": EXPORTS / "zendesk.jsonl",
         "otrs": EXPORTS / "otrs.jsonl"}
# Every export shape of every ready-made mapping (its file -> the mapping): with and without the optional columns, with
# HTML where the system can write it.
SHAPES = {**{path: name for name, path in FILES.items()},
          EXPORTS / "jira-html.csv": "jira", EXPORTS / "jira-current-fields.csv": "jira",
          EXPORTS / "servicenow-no-work-notes.csv": "servicenow", EXPORTS / "servicenow-journals.csv": "servicenow",
          EXPORTS / "zendesk-no-comments.jsonl": "zendesk", EXPORTS / "otrs-html.jsonl": "otrs"}


def csv_rows(path: Path) -> list[list[str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.reader(handle))


def jsonl_records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def by_id(frame, column="ticket_id") -> dict[str, dict]:
    return {row[column]: row for row in frame.iter_rows(named=True)}


def refused(read, *args, **kwargs) -> list[str]:
    with pytest.raises(DataError) as caught:
        read(*args, **kwargs)
    assert "nothing was written" in str(caught.value)
    return caught.value.problems


# ---------------------------------------------------------------- the ready-made mappings, on their export shapes

def test_jira_joins_every_comment_column_in_order_without_their_heads_then_the_resolution():
    header, *rows = csv_rows(FILES["jira"])
    assert header.count("Comment") == 3 and header.count("Watchers") == 2   # repeated columns, as Jira writes them
    tickets = by_id(read_records(FILES["jira"], "tickets", "jira"))
    assert list(tickets) == [row[header.index("Issue key")] for row in rows]
    for row in rows:
        ticket = tickets[row[header.index("Issue key")]]
        comments = [row[at].split(";", 2)[2] for at, name in enumerate(header) if name == "Comment" and row[at]]
        assert ticket["solution"] == "\n\n".join([*comments, row[header.index("Resolution")]])
        assert ticket["subject"] == row[header.index("Summary")]
        assert ticket["description"] == row[header.index("Description")]
    assert all(not re.search(r"\d{2}/\w{3}/\d{2}.*;", t["solution"]) for t in tickets.values())


@pytest.mark.parametrize("head", ["2026-10-11 09:12;j.doe;", "03/Nov/26 14:31;", "03/Nov/26 14:31;j.doe;",
                                  "24/Nov/26 5:04 AM;5b10ac8d82e05b22cc7d4ef5;", "11/Nov/26 3:10PM;712020:8f3a2c1e;"])
def test_jira_comment_heads_of_every_date_format_leave_the_solution_with_or_without_an_author(tmp_path, head):
    path = tmp_path / "tickets.csv"
    path.write_text(f'Issue key,Summary,Description,Comment\nOPS-1,Pump hot,Feed pump at 95 C,"{head}Cleaned the filter; '
                    'it runs cool."\n')
    assert read_records(path, "tickets", "jira")["solution"].to_list() == ["Cleaned the filter; it runs cool."]


def test_servicenow_joins_close_notes_and_work_notes_without_the_journal_heads():
    header, *rows = csv_rows(FILES["servicenow"])
    tickets = by_id(read_records(FILES["servicenow"], "tickets", "servicenow"))
    for row in rows:
        ticket = tickets[row[header.index("number")]]
        notes = row[header.index("work_notes")]
        entries = [entry.split("\n", 1)[1].strip() for entry in notes.split("\n\n") if entry.strip()]
        assert entries or not notes
        assert ticket["solution"] == "\n\n".join([row[header.index("close_notes")], *entries])
        assert "(Work notes)" not in ticket["solution"]
        assert ticket["subject"] == row[header.index("short_description")]


def test_zendesk_takes_the_later_comments_as_the_solution_and_reduces_their_html():
    records = jsonl_records(FILES["zendesk"])
    tickets = by_id(read_records(FILES["zendesk"], "tickets", "zendesk"))
    assert list(tickets) == [str(r["id"]) for r in records]   # numeric ids become text
    for record in records:
        ticket = tickets[str(record["id"])]
        assert ticket["description"] == record["description"]
        later = record["comments"][1:]
        assert ticket["solution"] == "\n\n".join(html_text(c["html_body"]) for c in later)
        assert record["comments"][0]["plain_body"] not in ticket["solution"]   # the first comment is the description
    solved = tickets["4101"]["solution"]
    assert "<" not in solved and "track()" not in solved and "reduced & re-issued" in solved
    assert solved.splitlines()[-2:] == ["INV-2231", "INV-2240"]   # list items on lines of their own
    assert tickets["4102"]["solution"] == ""                       # one comment: no answer yet


def test_otrs_reads_the_first_article_as_description_and_the_later_ones_as_solution():
    records = jsonl_records(FILES["otrs"])
    tickets = by_id(read_records(FILES["otrs"], "tickets", "otrs"))
    for record in records:
        ticket = tickets[record["TicketNumber"]]
        assert ticket["subject"] == record["Title"]
        assert ticket["description"] == record["Article"][0]["Body"]
        assert ticket["solution"] == "\n\n".join(a["Body"] for a in record["Article"][1:])


def test_jira_html_is_reduced_to_text_and_a_solution_starts_with_the_first_comment_not_the_resolution_code():
    path = EXPORTS / "jira-html.csv"
    header, *rows = csv_rows(path)
    assert header.count("Comment") == 2 and "<br/>" in rows[0][header.index("Description")]
    tickets = by_id(read_records(path, "tickets", "jira"))
    for row in rows:
        ticket = tickets[row[header.index("Issue key")]]
        comments = [html_text(row[at].split(";", 2)[2]) for at, name in enumerate(header) if name == "Comment" and row[at]]
        resolution = row[header.index("Resolution")]
        assert ticket["description"] == html_text(row[header.index("Description")])
        assert ticket["solution"] == "\n\n".join([*comments, resolution])
        assert ticket["solution"].splitlines()[0] != resolution or not comments
    assert "15°C" in tickets["OPS-201"]["description"] and "Xp 4.5 %" in tickets["OPS-201"]["solution"]
    assert tickets["OPS-203"]["solution"] == "Won't Fix"          # no comment: the resolution is all there is


@pytest.mark.parametrize("path", list(SHAPES), ids=lambda path: path.name)
def test_no_export_shape_leaves_html_markup_in_a_text_field(path):
    for ticket in read_records(path, "tickets", SHAPES[path]).iter_rows(named=True):
        for field in ("subject", "description", "solution"):
            assert not HTML_MARKUP.search(ticket[field] or ""), (ticket["ticket_id"], field, ticket[field])


def test_html_auto_keeps_plain_text_and_wiki_markup_as_written():
    records = jsonl_records(EXPORTS / "otrs-html.jsonl")
    tickets = by_id(read_records(EXPORTS / "otrs-html.jsonl", "tickets", "otrs"))
    assert tickets[records[1]["TicketNumber"]]["solution"] == records[1]["Article"][1]["Body"]   # <s.berg@example.com> kept
    assert tickets[records[0]["TicketNumber"]]["solution"] == html_text(records[0]["Article"][1]["Body"])
    header, *rows = csv_rows(FILES["jira"])
    jira = by_id(read_records(FILES["jira"], "tickets", "jira"))
    assert [jira[row[1]]["description"] for row in rows] == [row[header.index("Description")] for row in rows]   # {code} kept


@pytest.mark.parametrize("path, solution", [
    (EXPORTS / "jira-current-fields.csv", lambda row: ""),                         # no Comment, no Resolution column
    (EXPORTS / "servicenow-no-work-notes.csv", lambda row: row["close_notes"]),    # an incident list without work notes
    (EXPORTS / "zendesk-no-comments.jsonl", lambda row: ""),                       # tickets without their comments inline
], ids=lambda value: value.name if isinstance(value, Path) else "")
def test_an_export_without_the_optional_columns_reads_the_columns_it_has(path, solution):
    tickets = read_records(path, "tickets", SHAPES[path])
    raw = jsonl_records(path) if path.suffix == ".jsonl" else [dict(zip(csv_rows(path)[0], row)) for row in csv_rows(path)[1:]]
    assert tickets["solution"].to_list() == [solution(row) for row in raw]
    assert tickets.height == len(raw) and all(tickets["description"])


def test_servicenow_joins_close_notes_work_notes_and_comments_without_journal_heads_or_code_markers():
    path = EXPORTS / "servicenow-journals.csv"
    tickets = by_id(read_records(path, "tickets", "servicenow"))
    first = tickets["INC0030201"]["solution"].split("\n\n")
    assert first == ["Allowed UDP 3478-3481 outbound on the branch firewall.",
                     "Firewall log shows UDP 3478 denied > 200 times per call.",
                     "Reproduced on two laptops in the branch office.",
                     "Calls should be stable now, please tell us if they drop again."]
    assert tickets["INC0030202"]["solution"] == "Updated the scan-to-folder profile to the new share path."


def test_a_required_column_is_still_required_beside_optional_ones(tmp_path):
    path = write(tmp_path, "incidents.csv", (EXPORTS / "servicenow-no-work-notes.csv").read_text().replace("close_notes", "notes"))
    problems = refused(read_records, path, "tickets", "servicenow")
    assert len(problems) == 1 and problems[0].startswith(f"{path}:1: missing column(s) 'close_notes' (for solution)")


@pytest.mark.parametrize("name", list(READY_MADE))
def test_every_ready_made_mapping_reads_its_export_as_queries_too(name):
    queries = read_table(FILES[name], "queries", READY_MADE[name])
    tickets = read_records(FILES[name], "tickets", name)
    assert queries["query_id"].to_list() == tickets["ticket_id"].to_list()
    assert queries["subject"].to_list() == tickets["subject"].to_list()
    assert set(queries.columns) == {"query_id", "subject", "description", "source_file", "added_at", "origin"}


# ---------------------------------------------------------------- a dataset of exports, mapped in params

def jira_dataset(tmp_path: Path, columns: str) -> Path:
    (tmp_path / "params.yaml").write_text(f"seed: 1\ndatasets:\n  desk:\n    source: csv\n    raw: {JIRA}\n{columns}")
    return tmp_path / "params.yaml"


@pytest.mark.parametrize("columns", [
    "    columns: jira\n",
    "    columns:\n      use: jira\n",
    "    columns:\n      tickets: {ticket_id: Issue key, subject: Summary, description: Description,\n"
    "                solution: ['Comment?', 'Resolution?']}\n"
    "      queries: {query_id: Issue key, subject: Summary, description: Description}\n"
    "      html: auto\n      strip: {Comment: '^[^;]*;[^;]*;'}\n",
])
def test_a_dataset_reads_its_export_through_the_mapping_in_params(tmp_path, columns):
    params = load_params(jira_dataset(tmp_path, columns))
    corpus = load_corpus(params, "desk", IntakeReport())
    assert corpus.tickets.rows() == read_records(FILES["jira"], "tickets", "jira").rows()
    header, *queries = csv_rows(JIRA / "queries.csv")
    assert corpus.queries["query_id"].to_list() == [row[header.index("Issue key")] for row in queries]
    assert "Asked for a photo" not in "".join(corpus.queries["description"])   # queries read no comments
    _, *pairs = csv_rows(JIRA / "pairs.csv")
    grades = {"YES": 5, "REL": 3, "NO": 1}
    assert corpus.pairs.select("query_id", "ticket_id", "label").rows() == [(q, t, grades[label]) for q, t, label in pairs]


def test_use_starts_from_a_ready_made_mapping_and_the_keys_given_replace_its_own(tmp_path):
    mapping = tmp_path / "mine.yaml"
    mapping.write_text("use: jira\ntickets:\n  solution: [Comment]\n")
    tickets = by_id(read_records(FILES["jira"], "tickets", str(mapping)))
    jira = by_id(read_records(FILES["jira"], "tickets", "jira"))
    for key, ticket in tickets.items():
        assert ticket["subject"] == jira[key]["subject"]
        resolution = jira[key]["solution"].rsplit("\n\n", 1)[-1]
        assert ticket["solution"] == jira[key]["solution"].removesuffix(resolution).rstrip("\n")


def test_cli_validate_reads_an_export_folder_with_columns(tmp_path, capsys):
    params = jira_dataset(tmp_path, "")
    assert main(["validate", "--csv", str(JIRA), "--columns", "jira"]) == OK
    report = json.loads(capsys.readouterr().out)
    assert report["tickets"] == len(csv_rows(JIRA / "tickets.csv")) - 1
    assert report["queries"] == len(csv_rows(JIRA / "queries.csv")) - 1
    assert main(["validate", "desk", "--params", str(params), "--columns", "jira"]) == OK
    assert json.loads(capsys.readouterr().out) == report
    assert main(["validate", "--csv", str(JIRA)]) == BAD_INPUT   # the export's own names are not ticketsim's
    assert f"{JIRA / 'tickets.csv'}:1: missing column(s) ['ticket_id'" in capsys.readouterr().err


# ---------------------------------------------------------------- Excel's CSV: another delimiter, another encoding

def excel_folder(folder: Path, delimiter: str, encoding: str) -> Path:
    """The Jira folder as Excel saves CSV where the decimal mark is a comma: `delimiter`-separated, in `encoding`, its
    first ticket's subject ending in letters that encoding and UTF-8 write otherwise."""
    folder.mkdir()
    for name in ("tickets.csv", "queries.csv", "pairs.csv"):
        header, *rows = csv_rows(JIRA / name)
        if name == "tickets.csv":
            rows[0][header.index("Summary")] += " – Café"
        out = io.StringIO()
        csv.writer(out, delimiter=delimiter).writerows([header, *rows])
        (folder / name).write_bytes(out.getvalue().encode(encoding))
    return folder


@pytest.mark.parametrize("delimiter, said", [(";", "';'"), ("\t", "a tab")])
def test_a_header_written_with_semicolons_or_tabs_is_read_so_and_the_report_says_it(tmp_path, capsys, delimiter, said):
    folder = excel_folder(tmp_path / "excel", delimiter, "utf-8")
    assert main(["validate", "--csv", str(folder), "--columns", "jira"]) == OK
    report = json.loads(capsys.readouterr().out)
    assert report[f"{folder / 'tickets.csv'}: read with {said} as its delimiter, as its header is written"] == 1
    corpus = csvsource.read_corpus(folder, {"train": 1.0}, IntakeReport(), resolve("jira", "--columns"))
    assert corpus.tickets["subject"][0].endswith(" – Café")
    assert corpus.tickets.drop("subject").rows() == read_records(FILES["jira"], "tickets", "jira").drop("subject").rows()
    assert main(["validate", "--csv", str(folder), "--columns", "jira", "--delimiter", "tab" if delimiter == "\t" else ";"]) == OK
    assert not any("delimiter" in key for key in json.loads(capsys.readouterr().out))    # told, not detected
    (folder / "tickets.csv").write_text("Key;Title\nOPS-1;Pump hot\n")     # split on ';', still not Jira's columns
    assert main(["validate", "--csv", str(folder), "--columns", "jira"]) == BAD_INPUT
    assert f"{folder / 'tickets.csv'}:1: missing column(s) 'Issue key' (for ticket_id)" in capsys.readouterr().err


def test_a_windows_1252_export_is_refused_naming_the_byte_and_the_option_then_read_with_it(tmp_path, capsys):
    folder = excel_folder(tmp_path / "excel", ",", "cp1252")
    first = (folder / "tickets.csv").read_bytes()
    dash = first.index(b"\x96")
    assert main(["validate", "--csv", str(folder), "--columns", "jira"]) == BAD_INPUT
    line = first[:dash].count(b"\n") + 1
    assert capsys.readouterr().err.splitlines()[1].strip() == (f"{folder / 'tickets.csv'}:{line}: not UTF-8 (byte 0x96 at "
                                                               f"offset {dash}); pass --encoding cp1252 (or the export's encoding)")
    assert main(["validate", "--csv", str(folder), "--columns", "jira", "--encoding", "cp1252"]) == OK
    assert json.loads(capsys.readouterr().out)["tickets"] == len(csv_rows(JIRA / "tickets.csv")) - 1


def test_a_dataset_in_params_names_its_exports_encoding_and_delimiter(tmp_path):
    folder = excel_folder(tmp_path / "excel", ";", "cp1252")
    text = f"seed: 1\ndatasets:\n  desk:\n    source: csv\n    raw: {folder}\n    columns: jira\n"
    (tmp_path / "params.yaml").write_text(text)
    problems = refused(load_corpus, load_params(tmp_path / "params.yaml"), "desk", IntakeReport())
    assert problems[0].endswith("; set datasets.desk.encoding: cp1252 (or the export's encoding)")
    (tmp_path / "params.yaml").write_text(text + "    encoding: cp1252\n    delimiter: ';'\n")
    report = IntakeReport()
    corpus = load_corpus(load_params(tmp_path / "params.yaml"), "desk", report)
    assert corpus.tickets["subject"][0].endswith(" – Café") and not any("delimiter" in key for key in report.as_dict())
    for bad, message in (("encoding: klingon", "datasets.desk.encoding: 'klingon': not a text encoding Python knows"),
                         ("delimiter: ';;'", "datasets.desk.delimiter: ';;': a delimiter is one character")):
        (tmp_path / "params.yaml").write_text(f"{text}    {bad}\n")
        with pytest.raises(ConfigError, match=re.escape(message)):
            load_params(tmp_path / "params.yaml")


# ---------------------------------------------------------------- bad exports: file:line, the column read, nothing written

def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8", newline="")
    return path


def jira_text(edit=lambda header, rows: None) -> str:
    """The Jira fixture after `edit(header, rows)`, written back as CSV."""
    header, *rows = csv_rows(FILES["jira"])
    edit(header, rows)
    out = io.StringIO()
    csv.writer(out).writerows([header, *rows])
    return out.getvalue()


def test_a_missing_column_is_named_with_the_field_it_feeds(tmp_path):
    path = write(tmp_path, "jira.csv", jira_text(lambda header, rows: header.__setitem__(header.index("Summary"), "Title")))
    problems = refused(read_records, path, "tickets", "jira")
    assert len(problems) == 1 and problems[0].startswith(f"{path}:1: missing column(s) 'Summary' (for subject)")


def test_a_duplicate_id_names_the_column_it_was_read_from(tmp_path):
    def repeat(header, rows):
        rows.append(list(rows[0]))
    path = write(tmp_path, "jira.csv", jira_text(repeat))
    problems = refused(read_records, path, "tickets", "jira")
    # OPS-101 and OPS-102 each hold a description of two lines: the copy of OPS-101 starts on line 7
    assert problems == [f"{path}:7: ticket_id (column 'Issue key') 'OPS-101' is a duplicate (first at {path}:2)"]


def test_a_record_without_any_text_names_every_column_it_read(tmp_path):
    def blank(header, rows):
        for name in ("Summary", "Description", "Resolution", "Comment"):
            for at in (i for i, h in enumerate(header) if h == name):
                rows[2][at] = " "
    path = write(tmp_path, "jira.csv", jira_text(blank))
    problems = refused(read_records, path, "tickets", "jira")
    assert len(problems) == 1 and problems[0].startswith(f"{path}:6: ticket_id (column 'Issue key') 'OPS-103': every text field is empty")
    assert "solution (column 'Comment' + 'Resolution')" in problems[0] and "subject (column 'Summary')" in problems[0]


def test_an_id_column_named_twice_is_refused_as_the_header_line(tmp_path):
    path = write(tmp_path, "jira.csv", jira_text(lambda header, rows: header.__setitem__(header.index("Issue id"), "Issue key")))
    problems = refused(read_records, path, "tickets", "jira")
    assert problems == [f"{path}:1: the header names column 'Issue key' 2 times; ticket_id reads one value"]


@pytest.mark.parametrize("line, edit, expected", [
    (1, lambda r: r["comments"][2].pop("html_body"),
     "'comments.1:.html_body': not found (no field 'html_body' here) (for solution)"),
    (2, lambda r: r.__setitem__("description", {"text": "nested"}),
     "'description' holds an object, not text; name a field inside it with a dot (for description)"),
    (1, lambda r: r.pop("subject"), "missing field(s) ['subject'] (for subject)"),
    (2, lambda r: r.__setitem__("id", [1, 2]), "column 'id' holds 2 values; ticket_id reads one"),
])
def test_jsonl_exports_name_the_line_and_the_field_path(tmp_path, line, edit, expected):
    records = jsonl_records(FILES["zendesk"])
    edit(records[line - 1])
    path = write(tmp_path, "zendesk.jsonl", "".join(json.dumps(r) + "\n" for r in records))
    assert refused(read_records, path, "tickets", "zendesk") == [f"{path}:{line}: {expected}"]


def test_otrs_ticket_without_articles_and_a_line_that_is_no_object_are_reported_together(tmp_path):
    records = jsonl_records(FILES["otrs"])
    records[1].pop("Article")
    path = write(tmp_path, "otrs.jsonl", "".join(json.dumps(r) + "\n" for r in records) + "[1, 2]\n")
    problems = refused(read_records, path, "tickets", "otrs")
    assert problems == [f"{path}:2: missing field(s) ['Article.0.Body'] (for description)",
                        f"{path}:2: missing field(s) ['Article.1:.Body'] (for solution)",
                        f"{path}:3: an array, not an object of fields"]


def test_index_build_of_a_bad_export_writes_no_index(tmp_path, capsys):
    path = write(tmp_path, "jira.csv", jira_text(lambda header, rows: header.remove("Description") or [r.pop() for r in rows]))
    index = tmp_path / "index"
    assert main(["index", "build", "--tickets", str(path), "--columns", "jira", "--model", str(tmp_path / "no-bundle"),
                 "--index", str(index)]) == BAD_INPUT
    assert f"{path}:1: missing column(s) 'Description' (for description)" in capsys.readouterr().err
    assert not index.exists()


def test_index_build_and_add_read_exports_through_columns(search_parts, tmp_path, capsys):
    bundle = make_bundle(tmp_path / "bundle", search_parts, "22")
    where = ["--model", str(bundle), "--index", str(tmp_path / "index")]
    assert main(["index", "build", "--tickets", str(FILES["servicenow"]), "--columns", "servicenow", *where]) == OK
    assert main(["index", "add", str(FILES["jira"]), "--columns", "jira", *where]) == OK
    capsys.readouterr()
    assert main(["search", *where, "--subject", "conveyor belt stops", "--description", "drive fault overtemperature",
                 "-k", "6", "--json"]) == OK
    found = [hit["ticket_id"] for hit in json.loads(capsys.readouterr().out)[0]["hits"]]
    assert sorted(found) == sorted([*by_id(read_records(FILES["servicenow"], "tickets", "servicenow")),
                                    *by_id(read_records(FILES["jira"], "tickets", "jira"))])


# ---------------------------------------------------------------- mappings that are wrong are refused by name

@pytest.mark.parametrize("spec, message", [
    ("jiro", "--columns: 'jiro' is neither a ready-made mapping (jira, servicenow, zendesk, otrs) nor a mapping file"),
    (ColumnMapping(tickets={"title": "Summary"}), "--columns.tickets.title: no such field; tickets has ticket_id,"),
    (ColumnMapping(tickets={"ticket_id": ("Issue key", "Issue id")}), "--columns.tickets.ticket_id: reads one column"),
    (ColumnMapping(pairs={"label": ()}), "--columns.pairs.label: name at least one column"),
    (ColumnMapping(strip={"Comment": "(unclosed"}), "--columns.strip.Comment: '(unclosed' is not a regular expression"),
    (ColumnMapping(use="freshdesk"), "--columns.use: 'freshdesk' is not a ready-made mapping"),
    (ColumnMapping(tickets={"ticket_id": "Issue key?"}), "--columns.tickets.ticket_id: only a text field's columns may be optional"),
])
def test_a_wrong_mapping_is_a_config_error_naming_the_key(spec, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        resolve(spec, "--columns")


def test_a_mapping_file_with_an_unknown_key_and_the_cli_exit_code(tmp_path, capsys):
    mapping = write(tmp_path, "mine.yaml", "tickets:\n  ticket_id: Key\ncolumns_html: true\n")
    assert main(["index", "build", "--tickets", str(FILES["jira"]), "--columns", str(mapping)]) == ERROR
    assert f"{mapping}: unknown key(s) ['columns_html']" in capsys.readouterr().err


def test_columns_belong_to_csv_datasets_only(tmp_path):
    params = write(tmp_path, "params.yaml", "seed: 1\ndatasets:\n  s:\n    source: semeval2016\n    raw: x\n    columns: jira\n")
    with pytest.raises(ConfigError, match=r"datasets.s.columns: a column mapping reads `source: csv` exports, not 'semeval2016'"):
        load_params(params)


def test_a_mapping_in_params_is_a_frozen_column_mapping(tmp_path):
    params = load_params(jira_dataset(tmp_path, "    columns:\n      html: true\n      tickets: {solution: [Resolution, Comment]}\n"))
    columns = params.dataset("desk").columns
    assert columns == ColumnMapping(tickets={"solution": ("Resolution", "Comment")}, html=True)


# ---------------------------------------------------------------- HTML to text

@pytest.mark.parametrize("html, text", [
    ("<p>Reboot the <b>router</b>.</p><p>Then wait.</p>", "Reboot the router.\nThen wait."),
    ("line one<br>line two<br/>line three", "line one\nline two\nline three"),
    ("<ul><li>first</li><li>second</li></ul>", "first\nsecond"),
    ("<style>p {color: red}</style><script>alert(1)</script>kept", "kept"),
    ("Fish &amp; chips &lt;3 &#8364;5", "Fish & chips <3 \u20ac5"),
    ("<div>a<!-- hidden --> b</div>", "a b"),
    ("plain text, a < b and c > d, kept as it is", "plain text, a < b and c > d, kept as it is"),
    ("<p>  spaced    out\t words </p>", "spaced out words"),
])
def test_html_is_reduced_to_the_text_a_browser_shows(html, text):
    assert html_text(html) == text


def test_a_mapping_with_html_reduces_every_text_field_of_a_csv_export(tmp_path):
    path = write(tmp_path, "t.csv", "id,title,body,answer\n"
                                    "A1,Printer &amp; scanner,<p>Jams</p><p>twice</p>,<ol><li>Open</li><li>Clear</li></ol>\n")
    mapping = ColumnMapping(tickets={"ticket_id": "id", "subject": "title", "description": "body", "solution": "answer"}, html=True)
    assert read_records(path, "tickets", mapping).row(0) == ("A1", "Printer & scanner", "Jams\ntwice", "Open\nClear")


def test_reading_without_a_mapping_is_unchanged_by_mappings(tmp_path):
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "tickets.csv").write_text("ticket_id,subject,description,solution,extra\nT1,<b>s</b>,d,x,kept\n")
    (folder / "queries.csv").write_text("query_id,subject,description\nQ1,s,d\n")
    (folder / "pairs.csv").write_text("query_id,ticket_id,label\nQ1,T1,YES\n")
    assert read_table(folder / "tickets.csv", "tickets")["extra"].to_list() == ["kept"]   # kept for `pairs add` rewrites
    assert csvsource.read_corpus(folder, {"train": 1.0}, IntakeReport()).tickets["subject"].to_list() == ["<b>s</b>"]


def test_a_mapping_file_is_in_the_dataset_manifest_so_prepare_reruns_when_it_changes(tmp_path):
    mapping = write(tmp_path, "desk.yaml", "use: jira\n")
    cfg = DatasetConfig(name="desk", source="csv", raw=str(JIRA), columns=str(mapping))
    before = source_record(cfg)["files"]
    assert set(before) == {"tickets.csv", "queries.csv", "pairs.csv", "desk.yaml"}
    write(tmp_path, "desk.yaml", "use: jira\nhtml: true\n")
    after = source_record(cfg)["files"]
    assert after["desk.yaml"] != before["desk.yaml"] and after["tickets.csv"] == before["tickets.csv"]
    mapping.unlink()
    with pytest.raises(MissingSource, match=re.escape(f"datasets.desk.columns = {str(mapping)!r}: no such column mapping file")):
        source_record(cfg)
