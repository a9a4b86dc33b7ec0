"""`ticketsim pairs add`: append-only, all-or-nothing intake of new labelled pairs into a CSV-layout folder."""
import difflib
import fcntl
import shutil
import subprocess
import sys
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest
import yaml

from ticketsim import cli
from ticketsim.config import Params, SyntheticConfig, load_params
from ticketsim.data import intake
from ticketsim.data.csvsource import read_corpus
from ticketsim.data.intake import add_pairs, text_query_id
from ticketsim.data.tables import PAIR_SCHEMA, QUERY_SCHEMA, TICKET_SCHEMA, stable_split
from ticketsim.data.validate import IntakeReport
from ticketsim.workflows import intake as intake_workflow

REPO = Path(__file__).resolve().parents[1]
FRACTIONS = {"train": 0.5, "dev": 0.5}
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
# Q1's pairs are in dev although its hash says train: a new pair of Q1 must follow its query, not the hash.
FOLDER = {
    "tickets.csv": "ticket_id,subject,description,solution,owner\n"
                   "T1,Pump leak,Seal leaks,Replace seal,ana\nT2,Fan noise,Bearing noise,Grease bearing,bo\n"
                   "T3,PLC offline,No bus,Reseat cable,ana\n",
    "queries.csv": "query_id,subject,description\nQ1,pump wet,water under pump\nQ2,fan loud,fan makes noise\n",
    "pairs.csv": "query_id,ticket_id,label,split\nQ1,T1,5,{q1}\nQ1,T2,1,{q1}\nQ2,T2,YES,\n".format(
        q1="dev" if stable_split("Q1", FRACTIONS) == "train" else "train"),
}


def folder(tmp_path: Path) -> Path:
    path = tmp_path / "labeled"
    path.mkdir()
    for name, text in FOLDER.items():
        (path / name).write_text(text, encoding="utf-8")
    return path


def batch(tmp_path: Path, text: str, name: str = "batch.csv") -> Path:
    (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path / name


def snapshot(path: Path) -> dict[str, bytes]:
    """Every file of the folder but the intake's lock, which the first intake leaves, whatever it did."""
    return {p.name: p.read_bytes() for p in sorted(path.iterdir()) if p.name != intake.LOCK}


def splits(path: Path) -> dict[tuple[str, str], str]:
    pairs = read_corpus(path, FRACTIONS, IntakeReport()).pairs
    return {(q, t): s for q, t, s in zip(pairs["query_id"], pairs["ticket_id"], pairs["split"])}


def test_good_batch_is_appended_with_provenance_and_splits_by_query(tmp_path):
    data = folder(tmp_path)
    before = splits(data)
    new = batch(tmp_path, "query_id,subject,description,ticket_id,label\n"
                          "Q1,,,T3,REL\n"                                  # an existing query
                          ",pump dripping,drops under the pump,T1,YES\n"   # a new query given by its text
                          ",pump dripping,drops under the pump,T3,no\n"
                          "Q9,plc down,bus fault on plc,T3,5\n")           # a new query with its own id
    result = add_pairs(data, new, FRACTIONS, NOW)

    assert result.ok and result.added["queries"] == 2 and sum(n for k, n in result.added.items() if "pairs" in k) == 4
    corpus = read_corpus(data, FRACTIONS, IntakeReport())
    assert (corpus.tickets.schema, corpus.queries.schema, corpus.pairs.schema) == (TICKET_SCHEMA, QUERY_SCHEMA, PAIR_SCHEMA)
    after = splits(data)
    assert {k: after[k] for k in before} == before                       # no existing pair moved
    hashed = text_query_id("pump dripping", "drops under the pump")
    assert after[("Q1", "T3")] == before[("Q1", "T1")]                   # follows its query, not the hash
    assert after[(hashed, "T1")] == after[(hashed, "T3")] == stable_split(hashed, FRACTIONS)
    assert after[("Q9", "T3")] == stable_split("Q9", FRACTIONS)

    pairs = pl.read_csv(data / "pairs.csv", infer_schema=False)
    assert pairs.head(3)["source_file"].to_list() == [None] * 3          # existing rows keep theirs (none)
    new_rows = pairs.tail(4)
    assert new_rows["source_file"].to_list() == ["batch.csv"] * 4 and set(new_rows["added_at"]) == {NOW.isoformat()}
    assert new_rows["label"].to_list() == ["3", "5", "1", "5"]           # YES/REL/NO stored as 5/3/1
    queries = pl.read_csv(data / "queries.csv", infer_schema=False)
    assert queries.filter(pl.col("query_id") == hashed)["subject"].to_list() == ["pump dripping"]
    assert pl.read_csv(data / "tickets.csv")["owner"].to_list() == ["ana", "bo", "ana"]   # untouched, extra column kept


def test_a_contradicting_pair_is_reported_and_nothing_is_applied(tmp_path):
    data = folder(tmp_path)
    before = snapshot(data)
    new = batch(tmp_path, "query_id,ticket_id,label\nQ9,T3,YES\nQ1,T2,YES\n")   # Q1-T2 is labelled NO
    result = add_pairs(data, new, FRACTIONS, NOW)
    assert not result.ok and result.added == {}
    problem, = [p for p in result.refused if "contradicts" in p]
    assert "batch.csv:3" in problem and "(Q1, T2)" in problem and f"{data / 'pairs.csv'}:3" in problem
    assert snapshot(data) == before


def test_a_refused_file_changes_nothing_on_disk_and_every_problem_is_listed(tmp_path):
    data = folder(tmp_path)
    before = snapshot(data)
    new = batch(tmp_path, "query_id,subject,description,ticket_id,label\n"
                          ",pump dripping,drops,T1,YES\n"   # fine on its own, refused with the rest
                          "Q1,,,T404,YES\n"                 # unknown ticket
                          "Q2,,,T1,MAYBE\n"                 # bad label
                          ",,,T1,YES\n"                     # names no query
                          "Q2,,,T3,NO\nQ2,,,T3,YES\n")      # contradicts itself
    tickets = batch(tmp_path, "ticket_id,subject,description,solution\nT7,,,\nT1,Pump leak,Other text,Replace seal\n",
                    "tickets.csv")
    result = add_pairs(data, new, FRACTIONS, NOW, tickets=tickets)
    refused = "\n".join(result.refused)
    for part in ("T404", "MAYBE", "unknown query_id ''", "label 5 contradicts label 1", "'T7': every text field is empty",
                 "'T1' is a duplicate"):
        assert part in refused, (part, refused)
    assert snapshot(data) == before
    assert "nothing was written" in result.render()


def test_known_rows_are_skipped_with_the_reason_and_a_rerun_adds_nothing(tmp_path):
    data = folder(tmp_path)
    tickets = batch(tmp_path, "ticket_id,subject,description,solution\nT1,Pump leak,Seal leaks,Replace seal\n"
                              "T4,Valve stuck,Valve jams,Clean stem\n", "tickets.csv")
    new = batch(tmp_path, '{"query_id": "Q2", "ticket_id": "T2", "label": 5}\n{"query_id": "Q2", "ticket_id": "T4", "label": 3}\n',
                "batch.jsonl")
    first = add_pairs(data, new, FRACTIONS, NOW, tickets=tickets)
    assert first.added == {"tickets": 1, f"{splits(data)[('Q2', 'T2')]} pairs": 1}
    assert any("T1" in s and "already in the folder" in s for s in first.skipped)
    assert any("(Q2, T2): already labelled 5" in s for s in first.skipped)
    before = snapshot(data)
    again = add_pairs(data, new, FRACTIONS, NOW, tickets=tickets)
    assert again.ok and again.added == {} and len(again.skipped) == 4 and snapshot(data) == before


def test_a_crash_while_writing_leaves_the_folder_as_it_was(tmp_path, monkeypatch):
    data = folder(tmp_path)
    before = snapshot(data)

    def crash(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(intake.os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        add_pairs(data, batch(tmp_path, "query_id,subject,description,ticket_id,label\n,new q,text,T1,YES\n"), FRACTIONS, NOW)
    assert snapshot(data) == before   # no temporary file left behind either


def test_a_staged_file_a_killed_writer_left_is_removed_by_the_next_add(tmp_path):
    data = folder(tmp_path)
    (data / ".pairs.csv.x1y2.tmp").write_text("query_id,ticket_id,label\nQ1,T3,5\n")   # half of a killed add
    (data / ".notes.tmp").write_text("not ours")
    result = add_pairs(data, batch(tmp_path, "query_id,ticket_id,label\nQ2,T3,NO\n"), FRACTIONS, NOW)
    assert result.ok and sorted(p.name for p in data.iterdir() if p.name.startswith(".")) == [".notes.tmp", intake.LOCK]
    assert ("Q1", "T3") not in splits(data) and ("Q2", "T3") in splits(data)


def test_two_adds_at_once_wait_for_each_other_and_both_land_each_pair_once(tmp_path):
    """Both start while the folder's lock is held, each says it waits, and both batches are in once it is let go: the
    second's read sees the first one's rows (a pair and a new query in both batches are there once)."""
    data = folder(tmp_path)
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"seed": 1, "datasets": {"mine": {"source": "csv", "raw": str(data), "split": FRACTIONS}}}))
    shared = ",pump dripping,drops under the pump,T1,YES\n"
    batches = [batch(tmp_path, "query_id,subject,description,ticket_id,label\nQ2,,,T3,NO\n" + shared, "a.csv"),
               batch(tmp_path, "query_id,subject,description,ticket_id,label\nQ1,,,T3,REL\n" + shared, "b.csv")]
    with open(data / intake.LOCK, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        adds = [subprocess.Popen([sys.executable, "-m", "ticketsim.cli", "pairs", "add", str(b), "--dataset", "mine",
                                  "--params", str(params)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for b in batches]
        for add in adds:
            assert add.stderr.readline() == f"{data}: another writer is adding pairs; waiting for it\n"
    outcomes = [add.communicate(timeout=60) for add in adds]
    assert [add.returncode for add in adds] == [0, 0], outcomes
    hashed = text_query_id("pump dripping", "drops under the pump")
    pairs = pl.read_csv(data / "pairs.csv", infer_schema=False).select("query_id", "ticket_id").rows()
    assert sorted(pairs) == sorted([("Q1", "T1"), ("Q1", "T2"), ("Q2", "T2"), ("Q2", "T3"), ("Q1", "T3"), (hashed, "T1")])
    assert pl.read_csv(data / "queries.csv", infer_schema=False)["query_id"].to_list().count(hashed) == 1
    assert sum("already labelled" in out for out, _ in outcomes) == 1    # the shared pair: added by one, skipped by the other


def test_cli_pairs_add_prints_and_exits_by_outcome(tmp_path, capsys):
    data = folder(tmp_path)
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"seed": 1, "datasets": {"mine": {"source": "csv", "raw": str(data), "split": FRACTIONS}}}))
    good = batch(tmp_path, "query_id,ticket_id,label\nQ2,T3,NO\n")
    assert cli.main(["pairs", "add", str(good), "--dataset", "mine", "--params", str(params)]) == 0
    assert "added from" in capsys.readouterr().out
    bad = batch(tmp_path, "query_id,ticket_id,label\nQ2,T3,YES\n", "bad.csv")
    assert cli.main(["pairs", "add", str(bad), "--dataset", "mine", "--params", str(params)]) == cli.BAD_INPUT == 65
    assert "contradicts" in capsys.readouterr().err
    missing = tmp_path / "no_such_batch.csv"
    assert cli.main(["pairs", "add", str(missing), "--dataset", "mine", "--params", str(params)]) == cli.BAD_INPUT
    err = capsys.readouterr().err
    assert f"{missing}: file not found" in err and "Traceback" not in err


def test_cli_pairs_add_reads_a_batch_in_its_encoding_and_delimiter_and_keeps_the_folder_in_its_layout(tmp_path, capsys):
    data = folder(tmp_path)
    params = tmp_path / "params.yaml"
    mine = {"source": "csv", "raw": str(data), "split": FRACTIONS}
    params.write_text(yaml.safe_dump({"seed": 1, "datasets": {"mine": mine}}))
    (tmp_path / "excel.csv").write_bytes("query_id;subject;description;ticket_id;label\n;Lüfter laut;brummt;T2;YES\n"
                                         .encode("cp1252"))
    command = ["pairs", "add", str(tmp_path / "excel.csv"), "--dataset", "mine", "--params", str(params)]
    assert cli.main(command) == cli.BAD_INPUT
    assert "excel.csv:2: not UTF-8 (byte 0xfc at offset 47); pass --encoding cp1252" in capsys.readouterr().err
    assert cli.main([*command, "--encoding", "cp1252", "--delimiter", ";"]) == 0
    assert read_corpus(data, FRACTIONS, IntakeReport()).queries["subject"].to_list()[-1] == "Lüfter laut"
    assert (data / "queries.csv").read_text(encoding="utf-8").splitlines()[-1].startswith("q-")   # UTF-8, commas
    params.write_text(yaml.safe_dump({"seed": 1, "datasets": {"mine": {**mine, "delimiter": ";"}}}))
    before = snapshot(data)
    assert cli.main([*command, "--encoding", "cp1252"]) == cli.ERROR
    assert "datasets.mine sets its files' encoding or delimiter" in capsys.readouterr().err and snapshot(data) == before


@pytest.mark.parametrize("which", ["file", "tickets", "queries"])
def test_a_batch_file_that_does_not_exist_is_refused(tmp_path, which):
    data = folder(tmp_path)
    before = snapshot(data)
    files = {"file": batch(tmp_path, "query_id,ticket_id,label\nQ2,T3,NO\n"), which: tmp_path / "missing.csv"}
    result = add_pairs(data, files.pop("file"), FRACTIONS, NOW, **files)
    assert result.refused == (f"{tmp_path / 'missing.csv'}: file not found",)
    assert snapshot(data) == before


def test_export_writes_the_csv_layout_and_sets_params_keeping_comments(tmp_path, monkeypatch, capsys):
    params = tmp_path / "params.yaml"
    shutil.copy(REPO / "params.yaml", params)
    text = params.read_text()
    monkeypatch.chdir(tmp_path)
    small = {"n_tickets": 30, "n_labeled_queries": 10, "n_enduser_queries": 3}
    monkeypatch.setattr(intake_workflow, "load_params", lambda path: replace_synthetic(path, small))   # the workflow reads params
    assert cli.main(["export", "--out", "data/labeled", "--set-params", "--params", str(params)]) == 0
    out = capsys.readouterr().out
    assert "dvc add data/labeled" in out and "datasets.default: {source: csv, raw: data/labeled}" in out
    assert read_corpus("data/labeled", FRACTIONS, IntakeReport()).tickets.height == 30
    diff = list(difflib.unified_diff(text.splitlines(), params.read_text().splitlines(), lineterm="", n=0))[2:]
    # the default's one key changes and `raw` joins it (the synthetic default had none); every other byte stays
    assert [line.split("#")[0].rstrip() for line in diff if not line.startswith("@@")] == [
        "-    source: synthetic", "+    source: csv", "+    raw: data/labeled"]
    before = snapshot(tmp_path / "data" / "labeled")
    assert cli.main(["export", "--out", "data/labeled", "--params", str(params)]) == cli.ERROR   # never overwrites
    assert snapshot(tmp_path / "data" / "labeled") == before


def replace_synthetic(path: Path, synthetic: dict) -> Params:
    params = load_params(path)
    return replace(params, synthetic=SyntheticConfig(**synthetic))


def test_a_new_field_that_intake_cuts_to_its_limit_is_said_with_the_batch(tmp_path, monkeypatch):
    from ticketsim.data import validate

    monkeypatch.setattr(validate, "MAX_TEXT_CHARS", 50)     # the limit (a million characters) made small
    data = folder(tmp_path)
    tickets = batch(tmp_path, f"ticket_id,subject,description,solution\nT4,Valve stuck,Valve jams,{'log line ' * 10}\n",
                    "tickets.csv")
    result = add_pairs(data, batch(tmp_path, "query_id,ticket_id,label\nQ2,T4,NO\n"), FRACTIONS, NOW, tickets=tickets)
    assert result.ok and result.altered == ("tickets solution cut to its first 50 characters: 1",)
    assert "noted: tickets solution cut to its first 50 characters: 1" in result.render()
