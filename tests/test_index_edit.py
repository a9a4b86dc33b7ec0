"""A knowledge base that changes: `ticketsim index delete` (by --id or a file of ids) leaves no byte of a deleted
ticket's text in the index folder, a reader holding the old generation keeps answering and then follows, an unknown id
is one line with nothing written; `index add --upsert` replaces a ticket whose id is there (without it: refused)."""
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from benchmarks.common import make_bundle

from ticketsim.bundle.loader import Scorer
from ticketsim.cli import BAD_INPUT, ERROR, OK, main
from ticketsim.search.generations import generations
from ticketsim.search.index import TicketIndex, build_index, model_hash
from ticketsim.search.postings import Postings
from ticketsim.search.searcher import Searcher

SECRET = "Qxyzzyplonk"     # a customer's name: a word no other ticket holds


@pytest.fixture
def workspace(search_parts, tmp_path):
    """(folder, the --model/--index arguments, the tickets): an index of the first 40 tickets."""
    bundle = make_bundle(tmp_path / "bundle", search_parts, "22")
    tickets = search_parts.corpus.tickets
    build_index(Scorer.load(bundle), model_hash(bundle), tickets.head(40), tmp_path / "index")
    return tmp_path, ["--model", str(bundle), "--index", str(tmp_path / "index")], tickets


def folder_bytes(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def holding(folder: Path, text: str) -> list[str]:
    """The files of `folder` whose bytes hold `text` (any case: the tokens are lower-cased)."""
    return [name for name, data in folder_bytes(folder).items() if text.lower().encode() in data.lower()]


def test_a_deleted_ticket_leaves_no_byte_of_its_text_in_the_index_folder(workspace, capsys):
    root, where, tickets = workspace
    folder = root / "index"
    secret = tickets.slice(40, 1).with_columns(ticket_id=pl.lit("T-SECRET"),
                                               description=pl.lit(f"customer {SECRET} calls: the feed pump leaks"))
    secret.write_csv(root / "secret.csv")
    assert main(["index", "add", str(root / "secret.csv"), *where]) == OK
    assert holding(folder, SECRET)      # the test's premise: the text is on disk before the delete
    reader = Searcher.load(where[1], folder)
    query = pl.DataFrame({"query_id": ["1"], "subject": [f"{SECRET} pump"], "description": ["feed pump leaks"]})
    assert "T-SECRET" in [h.ticket_id for h in reader.search(query, 41)[0].hits]
    capsys.readouterr()

    assert main(["index", "delete", "--index", str(folder), "--id", "T-SECRET"]) == OK
    assert "deleted 1 tickets" in capsys.readouterr().out
    assert holding(folder, SECRET) == [] and holding(folder, "T-SECRET") == []
    assert [g.name for g in generations(folder)] == ["gen-000003"]      # no earlier generation kept beside it
    after = TicketIndex.load(folder)
    assert len(after) == 40 and after.row_of("T-SECRET") is None
    everything = Postings.build(after.words(), after.bm25.k1, after.bm25.b)     # BM25 as a rebuild's
    assert np.array_equal(after.postings.docs, everything.docs) and after.postings.word_id(SECRET.lower()) is None
    # the reader that held the removed generation still answers from its mapped files, then follows
    assert len(reader.search(query, 5)[0].hits) == 5
    assert reader.follow() and "T-SECRET" not in [h.ticket_id for h in reader.search(query, 40)[0].hits]

    (root / "ids.txt").write_text(f"{tickets['ticket_id'][3]}\n\n{tickets['ticket_id'][5]}\n")
    assert main(["index", "delete", "--index", str(folder), str(root / "ids.txt")]) == OK
    assert len(TicketIndex.load(folder)) == 38 and TicketIndex.load(folder).row_of(tickets["ticket_id"][5]) is None


def test_an_unknown_id_is_one_line_naming_it_and_nothing_is_written(workspace, capsys):
    root, where, tickets = workspace
    folder, before = root / "index", folder_bytes(root / "index")
    assert main(["index", "delete", "--index", str(folder), "--id", tickets["ticket_id"][0], "--id", "NO-SUCH"]) == ERROR
    said = capsys.readouterr().err.strip()
    assert "\n" not in said and "no ticket 'NO-SUCH' in the index; nothing deleted" in said
    assert main(["index", "delete", "--index", str(folder), str(root / "missing.txt")]) == ERROR
    assert "missing.txt: cannot read the ids to delete" in capsys.readouterr().err
    assert folder_bytes(folder) == before


def test_add_replaces_a_ticket_whose_id_is_there_only_with_upsert(workspace, capsys):
    root, where, tickets = workspace
    folder, known = root / "index", tickets["ticket_id"][7]
    tickets.slice(7, 1).with_columns(solution=pl.lit(f"call {SECRET} and swap the seal")).write_csv(root / "edit.csv")
    before = folder_bytes(folder)
    assert main(["index", "add", str(root / "edit.csv"), *where]) == BAD_INPUT
    assert f"ticket_id {known!r} is already in the index" in capsys.readouterr().err and folder_bytes(folder) == before
    assert main(["index", "add", "--upsert", str(root / "edit.csv"), *where]) == OK
    after = TicketIndex.load(folder)
    assert len(after) == 40 and after.ticket(known)["solution"] == f"call {SECRET} and swap the seal"
    assert sorted(after.tickets["ticket_id"]) == sorted(tickets.head(40)["ticket_id"])
    everything = Postings.build(after.words(), after.bm25.k1, after.bm25.b)
    assert np.array_equal(after.postings.tf, everything.tf) and after.postings.word_id(SECRET.lower()) is not None
