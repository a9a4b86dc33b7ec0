"""Bad input never ends in a traceback (issue 13 §4): property-based tests over every importer.

Valid seed files (the CSV/JSONL layout, SemEval XML and its gold file, `pairs add` batches, the help desk exports of
tests/fixtures/exports read through their ready-made column mappings) are mutated by Hypothesis
(byte flips, truncation, invalid UTF-8 and invalid encoding bytes, huge fields, wrong columns, duplicate lines and
ids, BOMs, CRLF, NULs) or replaced by random bytes. Every run must end in success or in the one validation error
type, DataError, each of whose problems starts with 'file:line: ' of a file it was given; a refused `pairs add`
batch leaves the data folder byte-identical, an accepted one leaves a folder that still reads. Deterministic
(derandomize=True, no example database) and fast (100 examples per importer). For a deeper, random search:
TICKETSIM_FUZZ_EXAMPLES=5000 python -m pytest tests/test_fuzz_importers.py
"""
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from ticketsim import cli
from ticketsim.config import DatasetConfig
from ticketsim.data import csvsource, sources
from ticketsim.data.intake import LOCK, add_pairs
from ticketsim.data.validate import DataError, IntakeReport
from ticketsim.workflows import intake as intake_workflow

DEEP = os.environ.get("TICKETSIM_FUZZ_EXAMPLES")
FUZZ = settings(max_examples=int(DEEP or 100), deadline=None, derandomize=not DEEP, database=None, print_blob=not DEEP,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example])
FRACTIONS = {"train": 0.5, "dev": 0.5}
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)

# ---------------------------------------------------------------- seeds: small valid files of every importer

CSV = {
    "tickets": "ticket_id,subject,description,solution\nT1,Pump leak,\"Seal leaks, badly\",Replace seal\n"
               "T2,Fan noise,Bearing noise,Grease bearing\nT3,PLC offline,No bus,\n",
    "queries": "query_id,subject,description\nQ1,pump wet,water under pump\nQ2,fan loud,\"fan\nmakes noise\"\n",
    "pairs": "query_id,ticket_id,label,split,source_rank\nQ1,T1,YES,train,1\nQ1,T2,1,train,2\nQ2,T2,rel,,\n",
}
JSONL = {
    "tickets": [{"ticket_id": "T1", "subject": "Pump leak", "description": "Seal leaks", "solution": "Replace seal"},
                {"ticket_id": "T2", "subject": "Fan noise", "description": "Bearing noise", "solution": "Grease"},
                {"ticket_id": "T3", "subject": "PLC offline", "description": "No bus", "solution": ""}],
    "queries": [{"query_id": "Q1", "subject": "pump wet", "description": "water"},
                {"query_id": "Q2", "subject": "fan loud", "description": "noise \u2028 here"}],
    "pairs": [{"query_id": "Q1", "ticket_id": "T1", "label": "YES", "split": "train", "source_rank": 1},
              {"query_id": "Q1", "ticket_id": "T2", "label": 1, "split": "train"},
              {"query_id": "Q2", "ticket_id": "T2", "label": "REL"}],
}
BATCH_CSV = ("query_id,subject,description,ticket_id,label\nQ1,,,T3,REL\n,pump dripping,drops under the pump,T1,YES\n"
             ",pump dripping,drops under the pump,T3,no\nQ9,plc down,bus fault,T3,5\n")
BATCH_JSONL = "".join(json.dumps(r) + "\n" for r in [
    {"query_id": "Q2", "ticket_id": "T3", "label": "NO"}, {"subject": "fan squeals", "description": "", "ticket_id": "T2", "label": 3}])
BATCH_TICKETS = "ticket_id,subject,description,solution\nT1,Pump leak,\"Seal leaks, badly\",Replace seal\nT4,Valve,Valve jams,Clean\n"


def jsonl(records: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def org(qid, rid, relevance="Relevant", rank=1, body="How do I renew my visa?"):
    return (f'<OrgQuestion ORGQ_ID="{qid}">\n<OrgQSubject>Visa {qid}</OrgQSubject>\n<OrgQBody>{body}</OrgQBody>\n'
            f'<Thread THREAD_SEQUENCE="{rid}">\n<RelQuestion RELQ_ID="{rid}" RELQ_RANKING_ORDER="{rank}" '
            f'RELQ_RELEVANCE2ORGQ="{relevance}">\n<RelQSubject>About {rid}</RelQSubject>\n<RelQBody>Body &amp; {rid}</RelQBody>\n'
            f"</RelQuestion>\n<RelComment><RelCText>First.</RelCText></RelComment>\n"
            f"<RelComment><RelCText>Caf\u00e9 \u2013 ok</RelCText></RelComment>\n</Thread>\n</OrgQuestion>\n")


XML = ('<?xml version="1.0" encoding="UTF-8"?>\n<xml>\n' + org("Q1", "Q1_R1", "PerfectMatch", 1)
       + org("Q1", "Q1_R2", "Irrelevant", 2) + org("Q2", "Q2_R1", "Relevant", 1) + "</xml>\n").encode()
TEST_XML = XML.replace(b' RELQ_RELEVANCE2ORGQ="PerfectMatch"', b"").replace(b'RELQ_RELEVANCE2ORGQ="Irrelevant"', b'RELQ_RELEVANCE2ORGQ="?"')
GOLD = b"Q1\tQ1_R1\t1\t0.9\ttrue\nQ1 Q1_R2 2 0.1 false\n\nQ2 Q2_R1 1 3.5 true\n"

# ---------------------------------------------------------------- mutations

LONG = b"x" * 140_000                      # longer than the csv module's default field limit (131,072)
NASTY = [b"\x00", b"\xff", b"\xe9", b"\xc3", b"\x80", b"\xef\xbb\xbf", b"\xff\xfe", b"\r\n", b"\r", b"\n", b'"', b",", b"\t",
         b"{", b"}", b"[", b":", b"<", b">", b"&", b"&bogus;", b"<!--", b"]]>", "\u00b2".encode(), "\u2028".encode(),
         b"99999999999", b"1" * 5000, b"[" * 3000, LONG, b'"' + LONG + b'"', b"null", b"true", b"-1", b" ", b"origin",
         b"T1", b"Q1", b"YES", b"encoding=\"UTF-16\"", b"encoding=\"ISO-8859-1\"", b"encoding=\"bogus\"", b"<OrgQuestion>"]

position = st.integers(min_value=0, max_value=2**20)
mutation = st.one_of(
    st.tuples(st.just("flip"), position, st.integers(1, 255)),
    st.tuples(st.just("truncate"), position),
    st.tuples(st.just("insert"), position, st.one_of(st.sampled_from(NASTY), st.binary(min_size=1, max_size=6))),
    st.tuples(st.just("delete"), position, st.integers(1, 40)),
    st.tuples(st.just("duplicate line"), position),
    st.tuples(st.just("swap lines"), position, position),
    st.tuples(st.just("crlf")),
    st.tuples(st.just("bom")),
)


def mutate(data: bytes, mutations) -> bytes:
    for kind, *args in mutations:
        at = args[0] % (len(data) + 1) if args else 0
        if kind == "flip" and data:
            at %= len(data)
            data = data[:at] + bytes([data[at] ^ args[1]]) + data[at + 1:]
        elif kind == "truncate":
            data = data[:at]
        elif kind == "insert":
            data = data[:at] + args[1] + data[at:]
        elif kind == "delete":
            data = data[:at] + data[at + args[1]:]
        elif kind in ("duplicate line", "swap lines"):
            lines = data.splitlines(keepends=True) or [b""]
            i = args[0] % len(lines)
            if kind == "duplicate line":
                lines.insert(i, lines[i])
            else:
                j = args[1] % len(lines)
                lines[i], lines[j] = lines[j], lines[i]
            data = b"".join(lines)
        elif kind == "crlf":
            data = data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
        elif kind == "bom":
            data = b"\xef\xbb\xbf" + data
    return data


COLUMNS = ["ticket_id", "query_id", "subject", "description", "solution", "label", "split", "source_rank", "origin", "",
           "extra", "Ticket_ID", " label"]
# A whole file: a mutated seed, random bytes, a header of wrong columns, or empty.
wrong_header = st.lists(st.sampled_from(COLUMNS), max_size=7).map(lambda cols: ",".join(cols).encode() + b"\n")


def file_bytes(seed: bytes):
    return st.one_of(
        st.lists(mutation, min_size=1, max_size=4).map(lambda ms: mutate(seed, ms)),
        st.binary(max_size=300),
        wrong_header.map(lambda header: header + seed.split(b"\n", 1)[-1]),
        st.just(b""),
    )


# ---------------------------------------------------------------- the property

def assert_named_refusal(problems, files) -> None:
    """Every problem starts with 'file:line: ' of one of `files` (the file and the record), none is a traceback."""
    assert problems
    names = "|".join(re.escape(str(f)) for f in files)
    for problem in problems:
        assert re.match(rf"(?:{names}):\d+: \S", problem), problem
        assert "Traceback" not in problem


def read_or_refuse(read, files):
    try:
        result = read()
    except DataError as error:
        assert "nothing was written" in str(error)
        assert_named_refusal(error.problems, files)
        event("refused")
        return None
    event("accepted")
    return result


def fingerprint(folder: Path) -> dict[str, str]:
    """Every file of the folder but the intake's lock, which the first intake leaves, whatever it did."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.name != LOCK}


def write_folder(folder: Path, fmt: str, override: tuple[str, bytes] | None = None) -> dict[str, Path]:
    folder.mkdir(exist_ok=True)
    paths = {}
    for table in ("tickets", "queries", "pairs"):
        paths[table] = folder / f"{table}.{fmt}"
        paths[table].write_bytes((CSV[table] if fmt == "csv" else jsonl(JSONL[table])).encode())
    if override:
        paths[override[0]].write_bytes(override[1])
    return paths


# ---------------------------------------------------------------- 1. the CSV/JSONL layout (`validate --csv`, source: csv)

def csv_case(fmt):
    seeds = {t: (CSV[t] if fmt == "csv" else jsonl(JSONL[t])).encode() for t in CSV}
    return st.sampled_from(list(CSV)).flatmap(lambda table: st.tuples(st.just(table), file_bytes(seeds[table])))


def check_folder(fmt, case):
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_folder(Path(tmp) / "raw", fmt, case)
        corpus = read_or_refuse(lambda: csvsource.read_corpus(Path(tmp) / "raw", FRACTIONS, IntakeReport()), paths.values())
        if corpus is not None:
            assert set(corpus.pairs["split"]) <= {"train", "dev"}


@FUZZ
@given(case=csv_case("csv"))
@example(case=("tickets", CSV["tickets"].replace("Bearing noise", "x" * 200_000).encode()))      # a long pasted log
@example(case=("tickets", CSV["tickets"].replace("Bearing noise", '"' + "x" * 200_000).encode()))  # and unterminated
@example(case=("pairs", CSV["pairs"].replace("train,1", "train,\u00b2").encode()))                 # a digit, not 0-9
@example(case=("pairs", CSV["pairs"].replace("train,1", "train,99999999999").encode()))             # beyond Int32
@example(case=("tickets", CSV["tickets"].replace("ticket_id,subject,", "ticket_id,subject,subject,", 1).encode()))
@example(case=("queries", CSV["queries"].encode("utf-16")))
@example(case=("queries", b"\x00" * 10))
def test_csv_folder_never_crashes(case):
    check_folder("csv", case)


@FUZZ
@given(case=csv_case("jsonl"))
@example(case=("pairs", jsonl(JSONL["pairs"]).replace('"source_rank": 1', '"source_rank": ' + "1" * 5000).encode()))
@example(case=("queries", b'{"query_id": ' + b"[" * 5000 + b"]" * 5000 + b"}\n"))
@example(case=("tickets", jsonl(JSONL["tickets"]).replace("Bearing noise", "x" * 200_000).encode()))
def test_jsonl_folder_never_crashes(case):
    check_folder("jsonl", case)


# ---------------------------------------------------------------- 2. SemEval XML and its gold file

def read_semeval(folder: Path, **files):
    return sources.read_dataset(DatasetConfig(name="s", source="semeval2016", raw=str(folder), **files), IntakeReport())


@FUZZ
@given(data=file_bytes(XML))
@example(data=XML.replace("Café".encode(), b"Caf\xe9"))                                            # not valid UTF-8
@example(data=XML.replace(b'encoding="UTF-8"', b'encoding="ISO-8859-1"').replace("Café".encode(), b"Caf\xe9"))
@example(data=XML.replace(b'encoding="UTF-8"', b'encoding="UTF-16"'))
@example(data=b'<?xml version="1.0"?>\n<xml>\n</xml>\n')                                              # no question at all
@example(data=XML.replace(b"<OrgQBody>How do I renew my visa?</OrgQBody>", b"<OrgQBody></OrgQBody>", 1))
@example(data=XML.replace(b"<OrgQBody>How do I renew my visa?</OrgQBody>", b"<OrgQBody>Other</OrgQBody>", 1))
@example(data=XML.replace(b'RELQ_RANKING_ORDER="2"', b'RELQ_RANKING_ORDER="\xc2\xb2"'))
def test_semeval_xml_never_crashes(data):
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "part.xml").write_bytes(data)
        read_or_refuse(lambda: read_semeval(Path(tmp), train=("part.xml",)), [Path(tmp) / "part.xml"])


@FUZZ
@given(xml=st.one_of(st.just(TEST_XML), file_bytes(TEST_XML)), gold=st.one_of(st.just(GOLD), file_bytes(GOLD)))
@example(xml=TEST_XML, gold=GOLD.replace(b"3.5", b"3\xe9"))
def test_semeval_test_file_with_gold_never_crashes(xml, gold):
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "test.xml").write_bytes(xml)
        (Path(tmp) / "test.relevancy").write_bytes(gold)
        read_or_refuse(lambda: read_semeval(Path(tmp), test="test.xml", test_gold="test.relevancy"),
                       [Path(tmp) / "test.xml", Path(tmp) / "test.relevancy"])


# ---------------------------------------------------------------- 3. `pairs add` batches

batch_case = st.one_of(
    st.tuples(st.just("batch.csv"), file_bytes(BATCH_CSV.encode()), st.none(), st.none()),
    st.tuples(st.just("batch.jsonl"), file_bytes(BATCH_JSONL.encode()), st.none(), st.none()),
    st.tuples(st.just("batch.csv"), st.just(b"query_id,ticket_id,label\nQ2,T4,YES\n"), file_bytes(BATCH_TICKETS.encode()), st.none()),
    st.tuples(st.just("batch.csv"), st.just(BATCH_CSV.encode()), st.none(),
              st.sampled_from(list(CSV)).flatmap(lambda t: st.tuples(st.just(t), file_bytes(CSV[t].encode())))),
)


@FUZZ
@given(case=batch_case)
@example(case=("batch.csv", BATCH_CSV.replace("bus fault", "y" * 200_000).encode(), None, None))
@example(case=("batch.csv", BATCH_CSV.replace("bus fault", "caf\xe9").encode("latin-1"), None, None))
@example(case=("batch.jsonl", b'{"ticket_id": "T1", "label": ' + b"5" * 5000 + b"}\n", None, None))
@example(case=("batch.csv", b"", None, None))
@example(case=("batch.csv", BATCH_CSV.replace("bus fault", "nul \x00 and cr \r alone").encode(), None, None))
@example(case=("batch.csv", BATCH_CSV.encode(), None, ("pairs", CSV["pairs"].replace("train,1", "train,\u00b2").encode())))
def test_pairs_add_never_crashes_and_a_refusal_writes_nothing(case):
    name, batch, tickets, broken = case
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "labeled"
        paths = write_folder(data, "csv", broken)
        (Path(tmp) / name).write_bytes(batch)
        files = [*paths.values(), Path(tmp) / name]
        if tickets is not None:
            (Path(tmp) / "new_tickets.csv").write_bytes(tickets)
            files.append(Path(tmp) / "new_tickets.csv")
        before = fingerprint(data)
        result = add_pairs(data, Path(tmp) / name, FRACTIONS, NOW, tickets=Path(tmp) / "new_tickets.csv" if tickets else None)
        event("accepted" if result.ok else "refused")
        if result.ok:
            corpus = csvsource.read_corpus(data, FRACTIONS, IntakeReport())   # what was written reads back
            assert corpus.pairs.height >= 3
            assert (fingerprint(data) != before) == bool(result.written)
        else:
            assert_named_refusal(result.refused, files)
            assert fingerprint(data) == before
            assert "nothing was written" in result.render()


# ---------------------------------------------------------------- 4. help desk exports read through a column mapping

EXPORTS = Path(__file__).parent / "fixtures" / "exports"
EXPORT_FILES = {"jira": "jira/tickets.csv", "servicenow": "servicenow.csv", "zendesk": "zendesk.jsonl", "otrs": "otrs.jsonl"}
export_case = st.sampled_from(list(EXPORT_FILES)).flatmap(
    lambda name: st.tuples(st.just(name), file_bytes((EXPORTS / EXPORT_FILES[name]).read_bytes())))


@FUZZ
@given(case=export_case)
@example(case=("zendesk", (EXPORTS / "zendesk.jsonl").read_bytes().replace(b'"html_body": "', b'"html_body": "<' * 3000, 1)))
@example(case=("zendesk", (EXPORTS / "zendesk.jsonl").read_bytes().replace(b"<p>", b"<p>\\u0000&#0;&bogus;<![CDATA[", 1)))
@example(case=("otrs", (EXPORTS / "otrs.jsonl").read_bytes().replace(b'"Article": [', b'"Article": [[], 7, null, ', 1)))
@example(case=("jira", (EXPORTS / "jira" / "tickets.csv").read_bytes().replace(b"Summary,Issue key", b"Summary,Issue key,Issue key", 1)))
def test_exports_through_a_mapping_never_crash(case):
    name, data = case
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / Path(EXPORT_FILES[name]).name
        path.write_bytes(data)
        read_or_refuse(lambda: csvsource.read_records(path, "tickets", name), [path])


# ---------------------------------------------------------------- 5. the command line: exit 65, no traceback

BAD_FOLDERS = {
    "not-utf8": ("tickets", CSV["tickets"].replace("Seal leaks", "Dichtung l\xe4uft").encode("latin-1")),
    "wrong-field-count": ("pairs", CSV["pairs"] + "Q2,T3\n"),
    "json-number-too-long": ("pairs", jsonl(JSONL["pairs"]).replace('"source_rank": 1', '"source_rank": ' + "1" * 5000)),
}


def bad_folder(root: Path, case: str) -> Path:
    table, content = BAD_FOLDERS[case]
    fmt = "jsonl" if case.startswith("json") else "csv"
    write_folder(root / case, fmt, (table, content if isinstance(content, bytes) else content.encode()))
    return root / case


@pytest.mark.parametrize("case", list(BAD_FOLDERS))
def test_cli_validate_bad_folder_exits_65(tmp_path, capsys, case):
    folder = bad_folder(tmp_path, case)
    assert cli.main(["validate", "--csv", str(folder)]) == cli.BAD_INPUT == 65
    err = capsys.readouterr().err
    assert "Traceback" not in err and re.search(rf"{re.escape(str(folder))}/\w+\.\w+:\d+: ", err), err


def test_cli_validate_bad_folder_exits_65_as_a_process(tmp_path):
    folder = bad_folder(tmp_path, "not-utf8")
    done = subprocess.run([sys.executable, "-m", "ticketsim.cli", "validate", "--csv", str(folder)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 65, done.stderr
    assert "Traceback" not in done.stderr and f"{folder / 'tickets.csv'}:2: not UTF-8 (byte" in done.stderr


def test_cli_unexpected_exception_is_a_bug_exit_70_with_its_traceback(tmp_path, capsys, monkeypatch):
    def broken(*args, **kwargs):
        raise ZeroDivisionError("a slip in ticketsim")

    monkeypatch.setattr(intake_workflow, "read_dataset", broken)    # the name `ticketsim validate` calls
    assert cli.main(["validate", "--csv", str(tmp_path)]) == cli.BUG == 70
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "ZeroDivisionError: a slip in ticketsim" in err
    assert err.rstrip().splitlines()[-1].startswith("ticketsim validate: the error above is a bug in ticketsim")


def test_cli_help_lists_the_exit_codes(capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    codes = [line.split()[0] for line in out.split("exit codes:", 1)[1].splitlines() if line.strip()]
    assert codes == ["0", "1", "2", "65", "70", "141"]
    assert "quality gate failed" in out and "EX_DATAERR" in out and "EX_SOFTWARE" in out and "| head" in out
