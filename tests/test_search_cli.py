"""`ticketsim search`, `ticketsim index build` and `index add` on a tiny bundle: a table, JSON, a queries file, and a
clear message with the documented exit code for every kind of bad input."""
import json
import sys

import polars as pl
import pytest
import yaml
from benchmarks.common import make_bundle
from conftest import REPO

from ticketsim.cli import BAD_INPUT, ERROR, OK, main
from ticketsim.search.index import TicketIndex


@pytest.fixture(scope="module")
def workspace(search_parts, tmp_path_factory):
    """A '22' bundle (no channel S: quick to load), its index of all but the last 10 tickets, and those 10 as a CSV."""
    root = tmp_path_factory.mktemp("cli")
    bundle = make_bundle(root / "bundle", search_parts, "22")
    tickets = search_parts.corpus.tickets
    tickets.head(-10).write_csv(root / "tickets.csv")
    tickets.tail(10).write_csv(root / "new.csv")
    assert main(["index", "build", "--model", str(bundle), "--index", str(root / "index"), "--tickets", str(root / "tickets.csv")]) == OK
    return root, ["--model", str(bundle), "--index", str(root / "index")]


def test_a_typed_query_gets_a_table_with_scores_solutions_and_reasons(workspace, capsys):
    _, where = workspace
    assert main(["search", *where, "--subject", "pump leaking oil", "--description", "oil under the feed pump", "-k", "3"]) == OK
    out = capsys.readouterr().out
    assert "rank  ticket" in out and out.count("why: ") == 3 and "solution (first line)" in out


def test_json_and_a_queries_file(workspace, capsys, tmp_path):
    root, where = workspace
    (tmp_path / "queries.jsonl").write_text('{"subject": "fan noise", "description": ""}\n'
                                            '{"query_id": "Q7", "subject": "", "description": "plc offline, no comms"}\n')
    assert main(["search", *where, "--queries", str(tmp_path / "queries.jsonl"), "-k", "2", "--json"]) == OK
    answers = json.loads(capsys.readouterr().out)
    assert [a["query_id"] for a in answers] == ["1", "Q7"] and all(len(a["hits"]) == 2 for a in answers)
    hit = answers[0]["hits"][0]
    assert set(hit) == {"rank", "ticket_id", "score", "calibrated", "subject", "description", "solution", "reasons", "cut"}
    assert answers[0]["calibrated"] is True and 1 <= hit["calibrated"] <= 5


def test_bad_input_is_refused_with_a_message_and_its_exit_code(workspace, search_parts, capsys, tmp_path):
    root, where = workspace
    assert main(["search", *where, "--subject", " ", "--description", ""]) == BAD_INPUT
    assert "subject and description are both empty" in capsys.readouterr().err
    (tmp_path / "latin1.csv").write_bytes("subject,description\nPumpe überhitzt,\n".encode("latin-1"))
    assert main(["search", *where, "--queries", str(tmp_path / "latin1.csv")]) == BAD_INPUT
    assert "latin1.csv:2: not UTF-8 (byte 0xfc at offset 26); pass --encoding cp1252" in capsys.readouterr().err
    assert main(["search", *where, "--queries", str(tmp_path / "latin1.csv"), "--encoding", "latin-1", "--json"]) == OK
    assert [answer["query_id"] for answer in json.loads(capsys.readouterr().out)] == ["2"]     # read as Latin-1
    assert main(["search", *where, "--subject", "xqzzv wrrbl", "-k", "500"]) == OK     # answered, with notes saying why
    out = capsys.readouterr().out
    assert "note: k = 500, but the knowledge base holds" in out and "note: no word of the query (xqzzv, wrrbl)" in out
    with pytest.raises(SystemExit) as usage:
        main(["search", *where, "--subject", "pump", "-k", "0"])
    assert usage.value.code == ERROR and "expected a whole number of at least 1" in capsys.readouterr().err
    other = make_bundle(tmp_path / "other", search_parts, "22", seed=5)
    assert main(["search", "--model", str(other), "--index", str(root / "index"), "--subject", "pump"]) == ERROR
    assert "built with other model weights" in capsys.readouterr().err
    assert main(["search", "--model", str(tmp_path / "nowhere"), "--index", str(root / "index"), "--subject", "pump"]) == ERROR
    assert "not a model bundle (no manifest.json)" in capsys.readouterr().err


def test_the_ray_engine_without_ray_is_one_line_naming_the_key_and_the_extra(workspace, capsys, tmp_path, monkeypatch):
    root, where = workspace
    params = {**yaml.safe_load((REPO / "params.yaml").read_text()), "encode": {"engine": "ray"}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    pl.read_csv(root / "new.csv").head(1).with_columns(ticket_id=pl.lit("RAY1")).write_csv(tmp_path / "one.csv")
    monkeypatch.setitem(sys.modules, "ray", None)     # `import ray` fails, as on a machine without the cluster extra
    for command in (["build", "--model", where[1], "--index", str(tmp_path / "index"), "--tickets", str(root / "tickets.csv")],
                    ["add", str(tmp_path / "one.csv"), *where]):
        assert main(["index", *command, "--params", str(tmp_path / "params.yaml")]) == ERROR
        assert capsys.readouterr().err == ('ticketsim index: encode.engine: ray needs Ray, which is not installed: '
                                           'pip install -e ".[cluster]"\n')
    assert not (tmp_path / "index").exists()


def test_index_add_appends_tickets_and_refuses_known_ids(workspace, capsys):
    root, where = workspace
    before = len(TicketIndex.load(root / "index"))
    assert main(["index", "add", str(root / "new.csv"), *where]) == OK
    assert "added 10 tickets" in capsys.readouterr().out
    assert len(TicketIndex.load(root / "index")) == before + 10
    new_id = pl.read_csv(root / "new.csv")["ticket_id"][0]
    index_files = {path.relative_to(root): path.read_bytes() for path in (root / "index").rglob("*") if path.is_file()}
    assert main(["index", "add", str(root / "new.csv"), *where]) == BAD_INPUT
    err = capsys.readouterr().err
    assert "10 problem(s)" in err and f"{root / 'new.csv'}:2: ticket_id {new_id!r} is already in the index" in err
    assert {path.relative_to(root): path.read_bytes() for path in (root / "index").rglob("*") if path.is_file()} == index_files
    assert main(["search", *where, "--subject", pl.read_csv(root / "new.csv")["subject"][0], "-k", "10", "--json"]) == OK
    assert new_id in [h["ticket_id"] for h in json.loads(capsys.readouterr().out)[0]["hits"]]


def test_a_tickets_or_queries_file_with_a_header_alone_is_refused_naming_it(workspace, capsys, tmp_path):
    root, where = workspace
    (tmp_path / "header.csv").write_text("ticket_id,subject,description,solution\n")
    (tmp_path / "empty.jsonl").write_text("")
    for command in (["index", "add", str(tmp_path / "header.csv"), *where],
                    ["index", "build", "--tickets", str(tmp_path / "header.csv"), "--model", where[1], "--index", str(tmp_path / "new")],
                    ["search", *where, "--queries", str(tmp_path / "empty.jsonl")]):
        assert main(command) == BAD_INPUT
        named = str(tmp_path / ("empty.jsonl" if "search" in command else "header.csv"))
        assert f"{named}:1: no {'query' if 'search' in command else 'ticket'} in the file (a header alone, or nothing)" \
            in capsys.readouterr().err
    assert not (tmp_path / "new").exists()


def test_a_long_field_is_said_cut_at_intake_and_searched_as_an_excerpt_unless_asked_whole(workspace, capsys, tmp_path,
                                                                                          monkeypatch):
    from ticketsim.app.access import Access
    from ticketsim.app.page import create_app
    from ticketsim.config import ServeConfig
    from ticketsim.data import validate
    from ticketsim.data.feedback import Journal
    from ticketsim.search.searcher import EXCERPT, Searcher

    root, where = workspace
    limit = EXCERPT + 1000
    monkeypatch.setattr(validate, "MAX_TEXT_CHARS", limit)     # the intake's limit (a million characters) made small
    log = "".join(f"pump log line {i}: bearing temperature rising\n" for i in range(limit // 20))
    pl.DataFrame({"ticket_id": ["LONG1"], "subject": ["Feed pump bearing log"], "description": ["feed pump hot"],
                  "solution": [log]}).write_csv(tmp_path / "long.csv")
    index = tmp_path / "index"
    assert main(["index", "build", "--model", where[1], "--index", str(index), "--tickets", str(root / "tickets.csv")]) == OK
    capsys.readouterr()
    assert main(["index", "add", str(tmp_path / "long.csv"), "--model", where[1], "--index", str(index)]) == OK
    assert f"ticketsim: {tmp_path / 'long.csv'}: tickets solution cut to its first {limit:,} characters: 1" in \
        capsys.readouterr().err
    query = ["search", "--model", where[1], "--index", str(index), "--subject", "feed pump bearing log", "-k", "100", "--json"]
    for extra, length, cut in (([], EXCERPT, {"solution": limit}), (["--full"], limit, {})):
        assert main([*query, *extra]) == OK
        hit = next(h for h in json.loads(capsys.readouterr().out)[0]["hits"] if h["ticket_id"] == "LONG1")
        assert len(hit["solution"]) == length and log.startswith(hit["solution"]) and hit["cut"] == cut
    searcher = Searcher.load(where[1], index)
    client = create_app(searcher, ServeConfig(), Journal(tmp_path / "j.jsonl"), Access("127.0.0.1", None)).test_client()
    for extra, length in (({}, EXCERPT), ({"full": "1"}, limit)):
        answer = client.get("/api/search", query_string={"subject": "feed pump bearing log", "k": "100", **extra}).get_json()
        assert [len(h["solution"]) for h in answer["hits"] if h["ticket_id"] == "LONG1"] == [length]
    page = client.get("/", query_string={"subject": "feed pump bearing log", "k": "100"}).get_data(as_text=True)
    assert f"solution: the first {EXCERPT:,} of {limit} characters" in page
