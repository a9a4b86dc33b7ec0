"""Data intake: every kind of bad input is a DataError naming file, record and problem; nothing is dropped silently.

Tiny CSV/JSONL folders and SemEval-format XML snippets are built in tmp_path; the real SemEval-2016 Task 3 files
are read in place from ../shared beside the repo (skipped when absent).
"""
import csv
import json

import polars as pl
import pytest
from lxml import etree

from ticketsim.config import DatasetConfig
from ticketsim.data import csvsource, sources
from ticketsim.data.tables import stable_split
from ticketsim.data.validate import DataError, IntakeReport

FRACTIONS = {"train": 0.7, "dev": 0.3}
TICKETS = ("ticket_id,subject,description,solution\n"
           "T1,Printer,Printer jams,Clear the tray\nT2,VPN,VPN drops,Reinstall\nT3,Mail,No mail,Check quota\n")
QUERIES = "query_id,subject,description\nQ1,printer,my printer jams\nQ2,vpn,vpn keeps dropping\n"
PAIRS = "query_id,ticket_id,label,split\nQ1,T1,YES,train\nQ1,T2,NO,train\nQ2,T2,REL,dev\n"


# ---------------------------------------------------------------- helpers

def make(tmp_path, tickets=TICKETS, queries=QUERIES, pairs=PAIRS, name="raw"):
    """A CSV/JSONL folder: str -> .csv text, bytes -> raw .csv bytes, list of dicts -> .jsonl."""
    folder = tmp_path / name
    folder.mkdir()
    for table, content in (("tickets", tickets), ("queries", queries), ("pairs", pairs)):
        if isinstance(content, list):
            (folder / f"{table}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in content), encoding="utf-8")
        elif isinstance(content, bytes):
            (folder / f"{table}.csv").write_bytes(content)
        else:
            (folder / f"{table}.csv").write_text(content, encoding="utf-8", newline="")
    return folder


def intake(folder, report=None):
    return csvsource.read_corpus(folder, FRACTIONS, report if report is not None else IntakeReport())


def fails(read, *args, **kwargs) -> DataError:
    with pytest.raises(DataError) as caught:
        read(*args, **kwargs)
    assert "nothing was written" in str(caught.value)
    return caught.value


def only(error: DataError, *parts) -> str:
    """The single problem of `error`, checked to mention every part (file:line, record, what is wrong)."""
    assert len(error.problems) == 1, error.problems
    assert all(str(p) in error.problems[0] for p in parts), (parts, error.problems[0])
    return error.problems[0]


def mentions(error: DataError, *parts) -> bool:
    return any(all(str(p) in problem for p in parts) for problem in error.problems)


# ---------------------------------------------------------------- 1. missing columns / fields

@pytest.mark.parametrize("table, header", [
    ("tickets", "ticket_id,subject,description"),
    ("queries", "query_id,description"),
    ("pairs", "query_id,ticket_id,split"),
])
def test_csv_missing_column(tmp_path, table, header):
    files = {"tickets": TICKETS, "queries": QUERIES, "pairs": PAIRS}
    files[table] = header + "\n" + "\n".join(line.rsplit(",", 1)[0] for line in files[table].splitlines()[1:]) + "\n"
    missing = ({"tickets": "solution", "queries": "subject", "pairs": "label"})[table]
    only(fails(intake, make(tmp_path, **files)), f"{tmp_path / 'raw' / table}.csv:1: ", "missing column", missing)


@pytest.mark.parametrize("table, records, line, field, n", [
    ("tickets", [{"ticket_id": "T1", "subject": "s", "description": "d", "solution": "x"},
                 {"ticket_id": "T2", "subject": "s", "description": "d"}], 2, "solution", 1),
    ("queries", [{"query_id": "Q1", "subject": "s", "description": "d"}, {}, {"query_id": "Q2", "subject": "s"}], 2, "query_id", 2),
    ("pairs", [{"query_id": "Q1", "ticket_id": "T1"}], 1, "label", 1),
])
def test_jsonl_missing_field(tmp_path, table, records, line, field, n):
    error = fails(intake, make(tmp_path, **{table: records}))
    assert mentions(error, f"{tmp_path / 'raw' / table}.jsonl:{line}", "missing field", field), error.problems
    assert len(error.problems) == n, error.problems


def test_jsonl_not_json(tmp_path):
    folder = make(tmp_path)
    (folder / "queries.csv").unlink()
    (folder / "queries.jsonl").write_text('{"query_id": "Q1", "subject": "s", "description": "d"}\n{"query_id": "Q2",\n')
    only(fails(intake, folder), f"{folder / 'queries.jsonl'}:2", "not valid JSON")


def test_jsonl_folder_reads(tmp_path):
    tickets = [{"ticket_id": f"T{i}", "subject": "s", "description": "d", "solution": "x"} for i in (1, 2)]
    queries = [{"query_id": "Q1", "subject": "s", "description": "d"}]
    pairs = [{"query_id": "Q1", "ticket_id": "T1", "label": 5, "split": "train", "source_rank": 2},
             {"query_id": "Q1", "ticket_id": "T2", "label": "no", "split": "train"}]
    corpus = intake(make(tmp_path, tickets, queries, pairs))
    assert corpus.pairs.select("label", "source_rank").rows() == [(5, 2), (1, None)]


def test_both_csv_and_jsonl_is_an_error(tmp_path):
    folder = make(tmp_path)
    (folder / "pairs.jsonl").write_text("")
    only(fails(intake, folder), folder, "pairs.csv / pairs.jsonl", "both")


# ---------------------------------------------------------------- 2. empty texts

@pytest.mark.parametrize("table, line, record", [
    ("tickets", "T2,  ,,\t", "T2"),
    ("queries", "Q2, , ", "Q2"),
])
def test_all_texts_empty_is_an_error(tmp_path, table, line, record):
    files = {"tickets": TICKETS, "queries": QUERIES}
    lines = files[table].splitlines()
    lines[2] = line
    files[table] = "\n".join(lines) + "\n"
    only(fails(intake, make(tmp_path, **files)), f"{tmp_path / 'raw' / table}.csv:3", repr(record), "every text field is empty")


def test_one_empty_component_is_accepted_and_counted(tmp_path):
    tickets = TICKETS.replace("T1,Printer,Printer jams,Clear the tray", "T1,Printer,Printer jams,").replace("T2,VPN,", "T2, ,")
    queries = QUERIES.replace("Q2,vpn,", "Q2,,")
    report = IntakeReport()
    corpus = intake(make(tmp_path, tickets, queries), report)
    assert (corpus.tickets.height, corpus.queries.height, corpus.pairs.height) == (3, 2, 3)
    assert report.counts["tickets with empty solution"] == 1
    assert report.counts["tickets with empty subject"] == 1
    assert report.counts["queries with empty subject"] == 1
    assert report.counts["tickets with empty description"] == 0


def test_control_characters_are_removed_from_every_source_and_counted_tabs_and_line_breaks_kept(tmp_path):
    tickets = TICKETS.replace("Printer jams", "Printer\x00 jams\x1b[2J").replace("No mail", '"No\x85 mail\r\n\tquota\x7f"')
    queries = [{"query_id": "Q1", "subject": "printer\u0007", "description": "my printer jams"},
               {"query_id": "Q2", "subject": "vpn\x00", "description": "vpn keeps dropping"}]
    report = IntakeReport()
    corpus = intake(make(tmp_path, tickets=tickets, queries=queries), report)
    assert corpus.tickets["description"].to_list() == ["Printer jams[2J", "VPN drops", "No mail\r\n\tquota"]
    assert corpus.queries.rows()[:2] == [("Q1", "printer", "my printer jams"), ("Q2", "vpn", "vpn keeps dropping")]
    assert {key: n for key, n in report.as_dict().items() if "control" in key} == {
        "control characters removed from tickets": 4, "tickets with control characters removed": 2,
        "control characters removed from queries": 2, "queries with control characters removed": 2}


@pytest.mark.parametrize("queries, line, shown, what", [
    ([{"query_id": "Q1", "subject": "printer", "description": "jams"}, {"query_id": "Q2\x00", "subject": "vpn",
                                                                         "description": "drops"}],
     2, "'Q2\\x00'", "a control character (U+0000)"),
    ("query_id,subject,description\nQ1,printer,jams\n\"Q2\nQ3\",vpn,drops\n", 3, "'Q2\\nQ3'", "a line break (U+000A)"),
    ("query_id,subject,description\nQ1,printer,jams\nQ2\u2028B,vpn,drops\n", 3, "'Q2\\u2028B'", "a line break (U+2028)"),
])
def test_an_id_with_a_line_break_or_a_control_character_is_refused_naming_file_and_line(tmp_path, queries, line, shown, what):
    folder = make(tmp_path, queries=queries)
    table = "queries.jsonl" if isinstance(queries, list) else "queries.csv"
    error = fails(intake, folder)
    assert f"{folder / table}:{line}: query_id {shown} holds {what}; an id is one line of printable characters" in \
        error.problems, error.problems
    assert mentions(error, "pairs.csv:4", "unknown query_id 'Q2'")     # no id is changed to make a pair fit


def test_a_ticket_id_with_a_line_break_is_refused_by_the_index_reader_too(tmp_path):
    path = tmp_path / "new.csv"
    path.write_text('ticket_id,subject,description,solution\n"T7\nT8",Pump,hot,Replace\nT9,Fan,loud,Grease\n')
    error = fails(csvsource.read_records, path, "tickets")
    assert error.problems == [f"{path}:2: ticket_id 'T7\\nT8' holds a line break (U+000A); an id is one line of printable "
                              "characters"]


# ---------------------------------------------------------------- 3. labels

@pytest.mark.parametrize("label", ["MAYBE", "4", "0", "", "5.0", "yes!"])
def test_unknown_label(tmp_path, label):
    pairs = PAIRS.replace("Q1,T2,NO,", f"Q1,T2,{label},")
    only(fails(intake, make(tmp_path, pairs=pairs)), "pairs.csv:3", "(Q1, T2)", "unknown label", repr(label))


def test_labels_by_name_or_grade_any_case(tmp_path):
    rows = [("YES", 5), ("rel", 3), ("No", 1), ("5", 5), ("3", 3), ("1", 1), (" yes ", 5), ("nO", 1)]
    tickets = "ticket_id,subject,description,solution\n" + "".join(f"T{i},s,d,x\n" for i in range(len(rows)))
    pairs = "query_id,ticket_id,label,split\n" + "".join(f"Q1,T{i},{raw},train\n" for i, (raw, _) in enumerate(rows))
    corpus = intake(make(tmp_path, tickets=tickets, pairs=pairs))
    assert corpus.pairs["label"].to_list() == [grade for _, grade in rows]
    assert corpus.pairs["label"].dtype == pl.Int8


# ---------------------------------------------------------------- 4. duplicate ids

@pytest.mark.parametrize("table, extra, record", [
    ("tickets", "T1,Printer again,jams,x\n", "T1"),
    ("queries", "Q1,dup,dup\n", "Q1"),
])
def test_duplicate_id_names_both_places(tmp_path, table, extra, record):
    files = {"tickets": TICKETS, "queries": QUERIES}
    files[table] += extra
    file = tmp_path / "raw" / f"{table}.csv"
    last = files[table].count("\n")
    only(fails(intake, make(tmp_path, **files)), f"{file}:{last}", repr(record), "duplicate", f"first at {file}:2")


def test_duplicate_id_after_stripping_blanks(tmp_path):
    error = fails(intake, make(tmp_path, tickets=TICKETS + " T3 ,x,y,z\n"))
    only(error, "tickets.csv:5", "'T3'", "first at", "tickets.csv:4")


# ---------------------------------------------------------------- 5. pairs naming unknown ids

@pytest.mark.parametrize("row, what", [("Q9,T1,YES,train", "unknown query_id 'Q9'"), ("Q1,T9,YES,train", "unknown ticket_id 'T9'")])
def test_pair_with_unknown_id(tmp_path, row, what):
    only(fails(intake, make(tmp_path, pairs=PAIRS + row + "\n")), "pairs.csv:5", what)


# ---------------------------------------------------------------- 6. duplicate pairs

def test_contradictory_duplicate_pair(tmp_path):
    file = tmp_path / "raw" / "pairs.csv"
    only(fails(intake, make(tmp_path, pairs=PAIRS + "Q1,T1,REL,train\n")), f"{file}:5", "(Q1, T1)", "contradicts", f"{file}:2")


def test_identical_duplicate_pair_is_skipped_and_counted(tmp_path):
    report = IntakeReport()
    corpus = intake(make(tmp_path, pairs=PAIRS + "Q1,T1,5,train\n Q2 ,T2,rel,dev\n"), report)
    assert corpus.pairs.select("query_id", "ticket_id", "label").rows() == [("Q1", "T1", 5), ("Q1", "T2", 1), ("Q2", "T2", 3)]
    assert report.counts["identical duplicate pairs skipped"] == 2


def test_duplicate_pair_in_another_split_is_an_error(tmp_path):
    only(fails(intake, make(tmp_path, pairs=PAIRS + "Q1,T1,YES,dev\n")), "pairs.csv:5", "(Q1, T1)", "split", "pairs.csv:2")


# ---------------------------------------------------------------- 7. encoding

@pytest.mark.parametrize("table, line", [("tickets", 3), ("queries", 2), ("pairs", 4)])
def test_non_utf8_bytes(tmp_path, table, line):
    files = {"tickets": TICKETS, "queries": QUERIES, "pairs": PAIRS}
    lines = files[table].splitlines(keepends=True)
    lines[line - 1] = lines[line - 1].replace(",", ",caf\xe9 ", 1)
    files[table] = "".join(lines).encode("latin-1")
    only(fails(intake, make(tmp_path, **files)), f"{tmp_path / 'raw' / table}.csv:{line}", "not UTF-8 (byte 0xe9 at offset",
         "pass --encoding cp1252")


@pytest.mark.parametrize("mark, said", [
    ("\ufeff", "byte 0xff at offset 0; the file begins with UTF-16's byte order mark"),
    ("", "a NUL byte beside every letter, as UTF-16 writes text"),     # ASCII in UTF-16 without a mark: valid UTF-8
])
def test_utf16_bytes_are_named_utf16_and_read_when_told(tmp_path, mark, said):
    folder = make(tmp_path, **{table: (mark + text).encode("utf-16-le") for table, text in
                               (("tickets", TICKETS), ("queries", QUERIES.replace("vpn,", "vpné,")), ("pairs", PAIRS))})
    error = fails(intake, folder)
    assert mentions(error, f"{folder / 'queries.csv'}:", f"{said}); pass --encoding utf-16 (or the export's encoding)"), \
        error.problems
    corpus = csvsource.read_corpus(folder, FRACTIONS, IntakeReport(), dialect=csvsource.Dialect("utf-16"))
    assert corpus.queries["subject"].to_list() == ["printer", "vpné"]


def test_utf8_bom_and_non_ascii_are_fine(tmp_path):
    corpus = intake(make(tmp_path, tickets=("\ufeff" + TICKETS.replace("Printer jams", "Drucker klemmt – 打印机")).encode()))
    assert corpus.tickets.columns[0] == "ticket_id"
    assert corpus.tickets["description"][0] == "Drucker klemmt – 打印机"


# ---------------------------------------------------------------- 8. splits

def test_query_in_two_splits(tmp_path):
    file = tmp_path / "raw" / "pairs.csv"
    pairs = PAIRS.replace("Q1,T2,NO,train", "Q1,T2,NO,dev")
    only(fails(intake, make(tmp_path, pairs=pairs)), f"{file}:3", "(Q1, T2)", "'dev'", "'train'", f"{file}:2")


def test_unknown_split(tmp_path):
    only(fails(intake, make(tmp_path, pairs=PAIRS.replace("Q2,T2,REL,dev", "Q2,T2,REL,holdout"))), "pairs.csv:4", "unknown split")


def hashed(tmp_path, n_queries, name):
    tickets = "ticket_id,subject,description,solution\n" + "".join(f"T{i},s,d,x\n" for i in range(3))
    queries = "query_id,subject,description\n" + "".join(f"Q{i},s,d\n" for i in range(n_queries))
    pairs = "query_id,ticket_id,label,split\n" + "".join(f"Q{i},T{j},YES,\n" for i in range(n_queries) for j in range(3))
    report = IntakeReport()
    corpus = intake(make(tmp_path, tickets, queries, pairs, name=name), report)
    assert report.counts["pairs given a split by query-id hash"] == 3 * n_queries
    return dict(corpus.pairs.group_by("query_id").agg(pl.col("split").unique()).iter_rows())


def test_pairs_without_split_get_a_stable_hash_split(tmp_path):
    small, large = hashed(tmp_path, 20, "small"), hashed(tmp_path, 60, "large")
    assert all(len(splits) == 1 for splits in large.values())  # one split per query
    assert {q: s[0] for q, s in small.items()} == {q: large[q][0] for q in small}  # adding queries moves nothing
    assert all(s[0] == stable_split(q, FRACTIONS) for q, s in large.items())
    assert {s[0] for s in large.values()} == {"train", "dev"}


def test_split_column_may_be_absent(tmp_path):
    pairs = "query_id,ticket_id,label\nQ1,T1,YES\nQ1,T2,NO\nQ2,T2,REL\n"
    corpus = intake(make(tmp_path, pairs=pairs))
    assert corpus.pairs["split"].to_list() == [stable_split(q, FRACTIONS) for q in ("Q1", "Q1", "Q2")]


# ---------------------------------------------------------------- 9. everything reported together

def test_many_problems_reported_together(tmp_path):
    tickets = TICKETS + "T4,,,\nT1,dup,dup,dup\n"  # line 5 all empty, line 6 duplicate
    queries = QUERIES + "Q2,dup,dup\n"  # line 4 duplicate
    pairs = PAIRS + "Q1,T1,MAYBE,train\nQ9,T9,YES,train\nQ1,T2,YES,train\nQ2,T3,NO,train\n"
    # line 5 unknown label; line 6 unknown query + unknown ticket; line 7 contradicts line 3; line 8 second split
    error = fails(intake, make(tmp_path, tickets, queries, pairs))
    assert len(error.problems) == 8, error.problems
    assert str(error).startswith("8 problem(s)")
    for parts in [("tickets.csv:5", "every text field is empty"), ("tickets.csv:6", "duplicate"), ("queries.csv:4", "duplicate"),
                  ("pairs.csv:5", "unknown label"), ("pairs.csv:6", "unknown query_id"), ("pairs.csv:6", "unknown ticket_id"),
                  ("pairs.csv:7", "contradicts"), ("pairs.csv:8", "split")]:
        assert mentions(error, *parts), (parts, error.problems)


def test_split_problem_reported_with_others(tmp_path):
    error = fails(intake, make(tmp_path, pairs=PAIRS + "Q2,T3,NO,train\nQ1,T3,MAYBE,train\n"))
    assert len(error.problems) == 2 and mentions(error, "pairs.csv:5", "split") and mentions(error, "pairs.csv:6", "unknown label")


def test_parse_problems_of_several_files_reported_together(tmp_path):
    tickets = [{"ticket_id": "T1", "subject": "s", "description": "d"}]  # missing solution
    error = fails(intake, make(tmp_path, tickets=tickets, pairs="query_id,ticket_id\nQ1,T1\n"))  # missing label column
    assert len(error.problems) == 2, error.problems


# ---------------------------------------------------------------- 10. CSV round trip

def test_csv_round_trip(tmp_path):
    tickets = ('ticket_id,subject,description,solution\n'
               'T1,"Comma, here","Line one\nline two","He said ""reboot"""\n'
               'T2,  padded  ,Ünïcödé – 打印机 \u2028sep,\n'
               'T3,NA,null,"a\r\nb"\n')
    pairs = "query_id,ticket_id,label,split,source_rank\nQ1,T1,YES,train,2\nQ1,T2,no,train,\nQ2,T3,3,,7\n"
    first = intake(make(tmp_path, tickets=tickets, pairs=pairs))
    csvsource.write_corpus(first, tmp_path / "out")
    second = intake(tmp_path / "out")
    for name, frame in first.frames().items():
        assert frame.equals(second.frames()[name]), name
        assert frame.schema == second.frames()[name].schema
    assert first.tickets["solution"].to_list() == ['He said "reboot"', "", "a\r\nb"]
    assert first.pairs["source_rank"].to_list() == [2, None, 7]


# ---------------------------------------------------------------- 11. multi-line records keep their start line

@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_multiline_fields_keep_line_numbers(tmp_path, newline):
    tickets = newline.join(["ticket_id,subject,description,solution",
                            'T1,Printer,"jams', "every", 'morning",Clear',  # lines 2-4
                            'T2,,,""',  # line 5: all empty
                            'T3,"a', 'b",c,d',  # lines 6-7
                            'T1,again,x,y', ""])  # line 8: duplicate of line 2
    error = fails(intake, make(tmp_path, tickets=tickets))
    assert len(error.problems) == 2, error.problems
    assert mentions(error, "tickets.csv:5", "'T2'", "every text field is empty")
    assert mentions(error, "tickets.csv:8", "'T1'", "first at", "tickets.csv:2")


def test_blank_line_does_not_shift_line_numbers(tmp_path):
    only(fails(intake, make(tmp_path, tickets=TICKETS + "\nT1,again,x,y\n")), "tickets.csv:6", "'T1'")


@pytest.mark.parametrize("row", ["T4,Printer,jams, badly,Clear", "T4,Printer"])
def test_row_with_wrong_field_count_is_an_error(tmp_path, row):
    only(fails(intake, make(tmp_path, tickets=TICKETS + row + "\n")), "tickets.csv:5", "field")


def test_jsonl_text_with_unicode_line_separator(tmp_path):
    tickets = [{"ticket_id": "T1", "subject": "s", "description": "one\u2028two", "solution": "x"}]
    pairs = [{"query_id": "Q1", "ticket_id": "T1", "label": "YES", "split": "train"}]
    corpus = intake(make(tmp_path, tickets=tickets, pairs=pairs))
    assert corpus.tickets["description"].to_list() == ["one\u2028two"]


def test_read_dataset_csv_source(tmp_path):
    folder = make(tmp_path, pairs=PAIRS.replace(",train\n", ",\n"))
    cfg = DatasetConfig(name="mine", source="csv", raw=str(folder), split={"train": 0.5, "dev": 0.5})
    corpus = sources.read_dataset(cfg, IntakeReport())
    assert corpus.pairs.height == 3
    assert corpus.pairs.filter(pl.col("query_id") == "Q1")["split"].to_list() == [stable_split("Q1", cfg.split)] * 2


# ---------------------------------------------------------------- 12. SemEval-2016 Task 3, real files

TRAIN2, DEV = "SemEval2016-Task3-CQA-QL-train-part2.xml", "SemEval2016-Task3-CQA-QL-dev.xml"


@pytest.fixture(scope="module")
def real(semeval_dir):
    report = IntakeReport()
    cfg = DatasetConfig(name="semeval", source="semeval2016", raw=str(semeval_dir), train=(TRAIN2,), dev=DEV)
    return sources.read_dataset(cfg, report), report


def test_semeval_real_counts(real):
    corpus, report = real
    assert (corpus.tickets.height, corpus.queries.height, corpus.pairs.height) == (1170, 117, 1170)
    got = {(split, int(label)): n for split, label, n in corpus.pairs.group_by("split", "label").len().iter_rows()}
    assert got == {("train", 5): 54, ("train", 3): 242, ("train", 1): 374, ("dev", 5): 59, ("dev", 3): 155, ("dev", 1): 286}
    per_split = corpus.pairs.group_by("split").agg(pl.col("query_id").n_unique(), pl.len())
    assert dict(per_split.select("split", "query_id").iter_rows()) == {"train": 67, "dev": 50}
    # each OrgQuestion appears 10 times (once per RelQuestion): the repeats are merged into one query.
    assert report.counts["repeated query_id records merged"] == 1170 - 117
    assert corpus.pairs.group_by("query_id").len()["len"].unique().to_list() == [10]
    assert report.counts["threads repeated from another original question (kept: valid subtask-B pairs)"] == 291 + 256
    assert corpus.pairs["source_rank"].null_count() == 0


def test_semeval_real_empty_bodies_counted(real, semeval_dir):
    corpus, report = real
    empty = corpus.tickets.filter(pl.col("description").str.strip_chars() == "").height
    assert empty > 0 and report.counts["tickets with empty description"] == empty
    expected = sum(1 for f in (TRAIN2, DEV) for rq in etree.parse(str(semeval_dir / f)).iter("RelQuestion")
                   if not (rq.findtext("RelQBody") or "").strip())
    assert empty == expected == 31


def test_semeval_real_solution_is_the_comments_in_order(real, semeval_dir):
    corpus, _ = real
    solution = corpus.tickets.filter(pl.col("ticket_id") == "Q268_R4")["solution"].item()
    assert solution.startswith("Commercial bank/IBQ\nThe best bank in Qatar for you would be the one")
    threads = {rq.get("RELQ_ID"): [(c.text or "").strip() for c in rq.getparent().iterfind("RelComment/RelCText")]
               for f in (TRAIN2, DEV) for rq in etree.parse(str(semeval_dir / f)).iter("RelQuestion")}
    got = dict(corpus.tickets.select("ticket_id", "solution").iter_rows())
    assert got == {t: "\n".join(c for c in comments if c) for t, comments in threads.items()}
    assert all(len(comments) == 10 for comments in threads.values())


def test_semeval_real_csv_round_trip(real, tmp_path):
    corpus, _ = real
    csvsource.write_corpus(corpus, tmp_path)
    again = intake(tmp_path)
    assert all(frame.equals(again.frames()[name]) for name, frame in corpus.frames().items())


# ---------------------------------------------------------------- 13. SemEval snippets, gold files, malformed XML

def org(qid, rid, relevance="Relevant", rank=1, body="How do I renew my visa?", relq=None, comments=("First.", "Second.")):
    """One <OrgQuestion> with one thread; relevance None -> no RELQ_RELEVANCE2ORGQ attribute; relq overrides RelQuestion."""
    label = "" if relevance is None else f' RELQ_RELEVANCE2ORGQ="{relevance}"'
    relq = relq or (f'<RelQuestion RELQ_ID="{rid}" RELQ_RANKING_ORDER="{rank}"{label}>\n'
                    f"<RelQSubject>About {rid}</RelQSubject>\n<RelQBody>Body of {rid}</RelQBody>\n</RelQuestion>")
    texts = "".join(f"<RelComment><RelCText>{c}</RelCText></RelComment>\n" for c in comments)
    return (f'<OrgQuestion ORGQ_ID="{qid}">\n<OrgQSubject>Visa {qid}</OrgQSubject>\n<OrgQBody>{body}</OrgQBody>\n'
            f'<Thread THREAD_SEQUENCE="{rid}">\n{relq}\n{texts}</Thread>\n</OrgQuestion>\n')


def xml(tmp_path, *orgs, name="part.xml"):
    (tmp_path / name).write_text('<?xml version="1.0" encoding="UTF-8"?>\n<xml>\n' + "".join(orgs) + "</xml>\n", encoding="utf-8")
    return tmp_path / name


def line_of(path, needle, nth=0):
    return [n for n, line in enumerate(path.read_text().splitlines(), 1) if needle in line][nth]


def semeval(tmp_path, **files):
    return sources.read_dataset(DatasetConfig(name="s", source="semeval2016", raw=str(tmp_path), **files), IntakeReport())


def test_semeval_snippet_reads(tmp_path):
    xml(tmp_path, org("Q1", "Q1_R1", "PerfectMatch", 1), org("Q1", "Q1_R2", "Irrelevant", 2, comments=("a", "", "b")),
        org("Q2", "Q2_R1", "Relevant", 1))
    corpus = semeval(tmp_path, train=("part.xml",))
    assert corpus.pairs.select("query_id", "ticket_id", "label", "split", "source_rank").rows() == [
        ("Q1", "Q1_R1", 5, "train", 1), ("Q1", "Q1_R2", 1, "train", 2), ("Q2", "Q2_R1", 3, "train", 1)]
    assert corpus.queries["query_id"].to_list() == ["Q1", "Q2"]
    assert corpus.tickets["solution"].to_list() == ["First.\nSecond.", "a\nb", "First.\nSecond."]


RELQ_WITHOUT_ID = ('<RelQuestion RELQ_RANKING_ORDER="1" RELQ_RELEVANCE2ORGQ="Relevant">'
                   '<RelQSubject>s</RelQSubject><RelQBody>b</RelQBody></RelQuestion>')
RELQ_WITHOUT_BODY = ('<RelQuestion RELQ_ID="Q2_R1" RELQ_RANKING_ORDER="1" RELQ_RELEVANCE2ORGQ="Relevant">'
                     '<RelQSubject>s</RelQSubject></RelQuestion>')


@pytest.mark.parametrize("bad, record, missing", [
    (org("Q2", "Q2_R1").replace("<OrgQBody>How do I renew my visa?</OrgQBody>\n", ""), "OrgQuestion Q2", "OrgQBody"),
    (org("Q2", "Q2_R1").replace("<OrgQSubject>Visa Q2</OrgQSubject>\n", ""), "OrgQuestion Q2", "OrgQSubject"),
    (org("Q2", "Q2_R1").replace(' ORGQ_ID="Q2"', ""), "OrgQuestion ?", "ORGQ_ID"),
    (org("Q2", "Q2_R1", relq=RELQ_WITHOUT_ID), "OrgQuestion Q2", "RelQuestion@RELQ_ID"),
    (org("Q2", "Q2_R1", relq=RELQ_WITHOUT_BODY), "OrgQuestion Q2", "RelQuestion/RelQBody"),
    (org("Q2", "Q2_R1", relq="<Nothing/>"), "OrgQuestion Q2", "Thread/RelQuestion"),
], ids=["no-OrgQBody", "no-OrgQSubject", "no-ORGQ_ID", "no-RELQ_ID", "no-RelQBody", "no-RelQuestion"])
def test_semeval_missing_element(tmp_path, bad, record, missing):
    path = xml(tmp_path, org("Q1", "Q1_R1"), bad, org("Q3", "Q3_R1"))
    line = line_of(path, "<OrgQuestion", 1)
    only(fails(semeval, tmp_path, train=("part.xml",)), f"{path}:{line}", record, "missing", missing)


@pytest.mark.parametrize("relevance", [None, "?", "Good"])
def test_semeval_unknown_relevance_without_gold(tmp_path, relevance):
    path = xml(tmp_path, org("Q1", "Q1_R1"), org("Q1", "Q1_R2", relevance))
    only(fails(semeval, tmp_path, dev="part.xml"), f"{path}:{line_of(path, '<OrgQuestion', 1)}", "Q1_R2", "RELQ_RELEVANCE2ORGQ")


def test_semeval_repeated_org_question_with_other_text(tmp_path):
    """The refusal says which field differs and shows both values (shortened), not just 'a duplicate'."""
    long = "Another text " + "x" * 500
    path = xml(tmp_path, org("Q1", "Q1_R1"), org("Q1", "Q1_R2", body=long))
    first, second = (f"{path}:{line_of(path, '<OrgQuestion', n)}" for n in (0, 1))
    problem = only(fails(semeval, tmp_path, train=("part.xml",)), f"{second}: query_id 'Q1'", "description (OrgQBody)",
                   "'How do I renew my visa?'", f"at {first}", "'Another text xxx", f"({len(long)} characters)")
    assert len(problem.replace(str(path), "")) < 200, problem


def test_semeval_repeated_org_question_with_an_empty_body_is_filled_and_counted(tmp_path):
    """An empty body in one copy is tolerated like other empty components: the other copy's text, counted."""
    xml(tmp_path, org("Q1", "Q1_R1", body=""), org("Q1", "Q1_R2"), org("Q1", "Q1_R3", body=""), org("Q2", "Q2_R1", body=""))
    report = IntakeReport()
    corpus = sources.read_dataset(DatasetConfig(name="s", source="semeval2016", raw=str(tmp_path), train=("part.xml",)), report)
    assert corpus.queries.rows() == [("Q1", "Visa Q1", "How do I renew my visa?"), ("Q2", "Visa Q2", "")]
    assert corpus.pairs.height == 4
    assert report.counts["queries with an empty description in a repeated copy, filled from another"] == 2
    assert report.counts["repeated query_id records merged"] == 2
    assert report.counts["queries with empty description"] == 1   # Q2: empty in its only copy


def test_semeval_malformed_xml(tmp_path):
    path = xml(tmp_path, org("Q1", "Q1_R1"), org("Q2", "Q2_R1").replace("</OrgQBody>", "</OrgQBdy>"))
    line = line_of(path, "</OrgQBdy>")
    only(fails(semeval, tmp_path, train=("part.xml",)), f"{path}:{line}", "not well-formed XML")


def gold_case(tmp_path, gold_lines):
    """An unlabelled test XML (relevance absent or '?') and its .relevancy gold file."""
    xml(tmp_path, org("Q1", "Q1_R1", None, 1), org("Q1", "Q1_R2", "?", 2), org("Q2", "Q2_R1", None, 1), name="test.xml")
    gold = tmp_path / "test.relevancy"
    gold.write_text("".join(line + "\n" for line in gold_lines), encoding="utf-8")
    return gold


GOLD = ["Q1\tQ1_R1\t1\t0.9\ttrue", "Q1 Q1_R2 2 0.1 false", "", "Q2 Q2_R1 1 3.5 true"]


def test_semeval_labels_from_gold(tmp_path):
    gold_case(tmp_path, GOLD)
    corpus = semeval(tmp_path, train=(), test="test.xml", test_gold="test.relevancy")
    assert corpus.pairs.select("ticket_id", "label", "split").rows() == [("Q1_R1", 3, "test"), ("Q1_R2", 1, "test"), ("Q2_R1", 3, "test")]


@pytest.mark.parametrize("bad, line, what", [
    ("Q1 Q1_R1 1 0.9", 1, "expected 'ORGQ_ID RELQ_ID rank score true|false'"),
    ("Q1 Q1_R1 1 0.9 maybe", 1, "expected 'ORGQ_ID RELQ_ID rank score true|false'"),
])
def test_semeval_malformed_gold_line(tmp_path, bad, line, what):
    gold = gold_case(tmp_path, [bad] + GOLD[1:])
    only(fails(semeval, tmp_path, test="test.xml", test_gold="test.relevancy"), f"{gold}:{line}", what, repr(bad))


def test_semeval_missing_gold_line(tmp_path):
    gold_case(tmp_path, GOLD[:2])
    path = tmp_path / "test.xml"
    only(fails(semeval, tmp_path, test="test.xml", test_gold="test.relevancy"),
         f"{path}:{line_of(path, '<OrgQuestion', 2)}", "Q2 Q2_R1", "no line in the gold file")


def test_semeval_gold_line_for_unknown_pair(tmp_path):
    gold = gold_case(tmp_path, GOLD + ["Q9 Q9_R1 1 0.5 true"])
    only(fails(semeval, tmp_path, test="test.xml", test_gold="test.relevancy"), f"{gold}:5", "Q9 Q9_R1")


def test_semeval_gold_line_for_unknown_pair_is_reported(tmp_path):
    """What does work today: the unknown pair is an error (not dropped), and it is named."""
    gold_case(tmp_path, GOLD + ["Q9 Q9_R1 1 0.5 true"])
    only(fails(semeval, tmp_path, test="test.xml", test_gold="test.relevancy"), "Q9 Q9_R1", "test.xml")


def test_semeval_contradictory_gold_lines(tmp_path):
    gold = gold_case(tmp_path, GOLD + ["Q1 Q1_R1 1 0.9 false"])
    only(fails(semeval, tmp_path, test="test.xml", test_gold="test.relevancy"), f"{gold}:5", f"{gold}:1")


def test_semeval_gold_not_utf8(tmp_path):
    gold = gold_case(tmp_path, GOLD)
    gold.write_bytes(gold.read_bytes().replace(b"Q2 Q2_R1 1 3.5", b"Q2 Q2_R1 1 3\xe9"))
    only(fails(semeval, tmp_path, test="test.xml", test_gold="test.relevancy"), f"{gold}:4")


# ---------------------------------------------------------------- 14. bad input is a DataError, never a traceback (issue 13 §4)

def test_csv_field_longer_than_the_csv_default_limit_reads_like_jsonl(tmp_path):
    log = "kernel: oops at 0xdeadbeef\n" * 8000   # a pasted log: 216,000 characters, over csv's 131,072
    as_csv = intake(make(tmp_path, tickets=TICKETS.replace("Printer jams", f'"{log}"'), name="csv"))
    tickets = [dict(zip(("ticket_id", "subject", "description", "solution"), line.split(",")))
               for line in TICKETS.replace("Printer jams", "LOG").splitlines()[1:]]
    tickets[0]["description"] = log
    as_jsonl = intake(make(tmp_path, tickets=tickets, name="jsonl"))
    assert as_csv.tickets["description"][0] == log
    assert as_csv.tickets.equals(as_jsonl.tickets)


def test_csv_reader_error_names_file_and_line(tmp_path, monkeypatch):
    """Whatever the csv module refuses becomes a DataError at the record's first line (here: a field over a tiny limit)."""
    monkeypatch.setattr(csvsource, "FIELD_LIMIT", 100)
    default = csv.field_size_limit(100)
    try:
        error = fails(intake, make(tmp_path, tickets=TICKETS + 'T4,s,"' + "x\n" * 100 + '",y\n'))
    finally:
        csv.field_size_limit(default)
    only(error, f"{tmp_path / 'raw' / 'tickets.csv'}:5: ", "field larger than field limit")


def test_csv_header_naming_a_column_twice(tmp_path):
    tickets = TICKETS.replace("ticket_id,subject,", "ticket_id,subject,subject,").replace("T1,Printer,", "T1,Printer,Drucker,")
    only(fails(intake, make(tmp_path, tickets=tickets)), f"{tmp_path / 'raw' / 'tickets.csv'}:1: ", "'subject'", "more than once")


def test_csv_header_with_blank_column_names_reads(tmp_path):
    tickets = "\n".join(line + ",," for line in TICKETS.splitlines()) + "\n"   # a spreadsheet's trailing empty columns
    assert intake(make(tmp_path, tickets=tickets)).tickets.height == 3


@pytest.mark.parametrize("rank", ["\u00b2", "\u0661", "99999999999", "1" * 5000, "-1", "1.5"],
                         ids=["superscript", "arabic-indic", "over-int32", "5000-digits", "negative", "decimal"])
def test_source_rank_that_is_no_int32(tmp_path, rank):
    pairs = "query_id,ticket_id,label,split,source_rank\nQ1,T1,YES,train,1\nQ1,T2,NO,train,%s\nQ2,T2,REL,dev,\n" % rank
    problem = only(fails(intake, make(tmp_path, pairs=pairs)), "pairs.csv:3: ", "(Q1, T2)", "source_rank", "whole number from 0")
    assert len(problem.replace(str(tmp_path), "")) < 200


@pytest.mark.parametrize("line, what", [
    ('{"query_id": "Q3", "subject": "s", "description": %s}' % ("1" * 5000), "4300 digits"),
    ('{"query_id": "Q3", "subject": "s", "description": %s}' % ("[" * 5000 + "]" * 5000), "nested too deeply"),
    ('{"query_id": "Q3", "subject": "s", "description": "half \\ud800 a pair"}', "surrogate"),
], ids=["5000-digit-number", "nested-5000-deep", "lone-surrogate"])
def test_jsonl_values_python_cannot_hold(tmp_path, line, what):
    folder = make(tmp_path)
    (folder / "queries.csv").unlink()
    (folder / "queries.jsonl").write_text('{"query_id": "Q1", "subject": "s", "description": "d"}\n' + line + "\n")
    only(fails(intake, folder), f"{folder / 'queries.jsonl'}:2: ", what)


@pytest.mark.parametrize("declared, replace", [
    ("UTF-8", ("How do I renew my visa?", "Wie verl\xe4ngere ich mein Visum?")),   # latin-1 bytes in a UTF-8 file
    ("US-ASCII", ("How do I renew my visa?", "caf\xe9")),
])
def test_semeval_bytes_invalid_in_the_declared_encoding(tmp_path, declared, replace):
    path = xml(tmp_path, org("Q1", "Q1_R1"), org("Q2", "Q2_R1"))
    text = path.read_text().replace('encoding="UTF-8"', f'encoding="{declared}"')
    line = [n for n, row in enumerate(text.splitlines(), 1) if replace[0] in row][1]
    lines = text.splitlines(keepends=True)
    lines[line - 1] = lines[line - 1].replace(*replace)
    path.write_bytes("".join(lines).encode("latin-1"))
    byte = r"b'\xe4" if declared == "UTF-8" else r"b'\xe9"
    only(fails(semeval, tmp_path, train=("part.xml",)), f"{path}:{line}: ", "bytes that are not", byte)


def test_semeval_file_without_questions(tmp_path):
    path = tmp_path / "part.xml"
    path.write_text('<?xml version="1.0" encoding="UTF-8"?>\n<xml>\n</xml>\n')
    only(fails(semeval, tmp_path, train=("part.xml",)), f"{path}:2: ", "no OrgQuestion")


def test_unreadable_file_is_named(tmp_path):
    folder = make(tmp_path)
    (folder / "queries.csv").unlink()
    (folder / "queries.csv").mkdir()   # exists, but is no file
    only(fails(intake, folder), f"{folder / 'queries.csv'}: ", "cannot be read")
