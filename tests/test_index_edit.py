"""A knowledge base that changes: `ticketsim index delete` (by --id or a file of ids) leaves no byte of a deleted
ticket's text in the index folder, a reader holding the old generation keeps answering and then follows, an unknown id
is one line with nothing written, a delete killed at any step leaves the old index or the new one; `index add
--upsert` replaces a ticket whose id is there (without it: refused); `search --where` and the API's `where` search a
filter's tickets only, its top k the exact one, and a field the index lacks is one line naming those it has; `index
sync` makes the index equal to an export in one generation (a second writes nothing), refuses a bad export with one
problem and nothing written, and killed at any step leaves the old index or the new one."""
import json
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from benchmarks.common import make_bundle
from test_index_store import DIES_AT, forker

from ticketsim.app.access import Access
from ticketsim.app.page import create_app
from ticketsim.bundle.loader import Scorer
from ticketsim.channels.bm25 import Postings
from ticketsim.channels.coherence import cooccurrence
from ticketsim.cli import BAD_INPUT, ERROR, OK, main
from ticketsim.config import GraphConfig, ServeConfig
from ticketsim.data.csvsource import read_records
from ticketsim.data.feedback import Journal
from ticketsim.errors import StepError
from ticketsim.search import sync
from ticketsim.search.generations import generations
from ticketsim.search.index import Encoded, TicketIndex, append, build_index, manifest_of, model_hash
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
    base = (TicketIndex.load(folder).segments[0].folder / "vectors.npy").stat().st_ino   # the 40 built; the secret apart
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
    [kept] = after.segments     # the secret's segment rewritten without it (so none), the base linked, not rewritten
    assert (kept.folder / "vectors.npy").stat().st_ino == base and kept.postings.word_id(SECRET.lower()) is None
    # the reader that held the removed generation still answers from its mapped files, then follows
    assert len(reader.search(query, 5)[0].hits) == 5
    assert reader.follow() and "T-SECRET" not in [h.ticket_id for h in reader.search(query, 40)[0].hits]

    (root / "ids.txt").write_text(f"{tickets['ticket_id'][3]}\n\n{tickets['ticket_id'][5]}\n")
    assert main(["index", "delete", "--index", str(folder), str(root / "ids.txt")]) == OK
    after = TicketIndex.load(folder)
    assert len(after) == 38 and after.row_of(tickets["ticket_id"][5]) is None
    everything = Postings.build(after.words(), after.bm25.k1, after.bm25.b)     # BM25 and the topic counts as a rebuild's
    assert np.array_equal(after.segments[0].postings.docs, everything.docs)
    assert np.array_equal(after.cooccurrence, cooccurrence(after.topic_words, after.words())[0])


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
    [joined] = after.segments     # the segment that held the ticket rewritten without it, the new one joined to it
    everything = Postings.build(after.words(), after.bm25.k1, after.bm25.b)
    assert np.array_equal(joined.postings.tf, everything.tf) and joined.postings.word_id(SECRET.lower()) is not None


@pytest.fixture
def products(search_parts, tmp_path):
    """(folder, --model/--index arguments, the tickets with a product and site): an index built from a file with them."""
    tmp_path = tmp_path / "products"
    bundle = make_bundle(tmp_path / "bundle", search_parts, "22")
    tickets = search_parts.corpus.tickets.head(40).with_row_index().with_columns(
        product=pl.when(pl.col("index") % 3 == 0).then(pl.lit("pump")).otherwise(pl.lit("fan")),
        site=pl.when(pl.col("index") % 2 == 0).then(pl.lit("north")).otherwise(pl.lit("south"))).drop("index")
    tickets.write_csv(tmp_path / "tickets.csv")
    where = ["--model", str(bundle), "--index", str(tmp_path / "index")]
    assert main(["index", "build", *where, "--tickets", str(tmp_path / "tickets.csv")]) == OK
    return tmp_path, where, tickets


def ranked(where: list[str], capsys, *args: str) -> list[str]:
    capsys.readouterr()
    assert main(["search", *where, "--subject", "pump leaking oil", "--description", "oil under the feed pump", "--json",
                 *args]) == OK
    return [hit["ticket_id"] for hit in json.loads(capsys.readouterr().out)[0]["hits"]]


def test_a_filter_searches_only_its_tickets_and_its_top_k_is_the_exact_one(products, capsys):
    root, where, tickets = products
    pumps = set(tickets.filter(pl.col("product") == "pump")["ticket_id"])
    north_pumps = set(tickets.filter((pl.col("product") == "pump") & (pl.col("site") == "north"))["ticket_id"])
    everything = ranked(where, capsys, "-k", "40")
    # filtered before the top k is taken: the first 5 pumps of the whole ranking, not the pumps among its top 5
    assert ranked(where, capsys, "-k", "5", "--where", "product=pump") == [t for t in everything if t in pumps][:5]
    both = ranked(where, capsys, "-k", "40", "--where", "product=pump", "--where", "site=north")
    assert both == [t for t in everything if t in north_pumps] and len(both) == len(north_pumps) < 40
    # over an index that keeps a graph the filter's top k is still exact
    graph = TicketIndex.load(root / "index")
    build_index(Scorer.load(where[1]), model_hash(where[1]), pl.read_csv(root / "tickets.csv"), root / "graph",
                graph=GraphConfig(tickets=10))
    assert TicketIndex.load(root / "graph").vectors.graphs == 1 and graph.vectors.graphs == 0
    assert ranked([where[0], where[1], "--index", str(root / "graph")], capsys, "-k", "5", "--where", "product=pump") == \
        [t for t in everything if t in pumps][:5]


def test_a_filter_on_a_field_the_index_lacks_is_one_line_naming_the_fields_it_has(products, workspace, capsys):
    _, where, _ = products
    capsys.readouterr()
    assert main(["search", *where, "--subject", "pump", "--where", "queue=l2"]) == ERROR
    said = capsys.readouterr().err.strip().splitlines()[-1]     # after the note that the query goes through torch
    assert said == "ticketsim search: the index's tickets have no field 'queue' to filter on; the fields they have: product, site"
    assert main(["search", *workspace[1], "--subject", "pump", "--where", "product=pump"]) == ERROR
    assert "the fields they have: none (an index keeps product, site, queue" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:
        main(["search", *where, "--subject", "pump", "--where", "product"])
    assert usage.value.code == ERROR and "expected FIELD=VALUE" in capsys.readouterr().err


def test_tickets_added_without_a_field_the_index_keeps_match_no_filter_on_it(products, search_parts, capsys):
    root, where, _ = products
    search_parts.corpus.tickets.slice(40, 3).write_csv(root / "plain.csv")
    assert main(["index", "add", str(root / "plain.csv"), *where]) == OK
    index = TicketIndex.load(root / "index")
    assert len(index) == 43 and len(index.matching({"product": "fan"})) + len(index.matching({"product": "pump"})) == 40


def test_the_api_filters_as_the_cli_and_a_bad_filter_is_a_400(products, capsys):
    root, where, tickets = products
    pumps = set(tickets.filter(pl.col("product") == "pump")["ticket_id"])
    client = create_app(Searcher.load(where[1], root / "index"), ServeConfig(), Journal(root / "judgments.jsonl"),
                        Access("127.0.0.1", None)).test_client()
    query = {"subject": "pump leaking oil", "description": "oil under the feed pump", "k": "5"}
    found = client.get("/api/search", query_string={**query, "where": "product=pump"}).get_json()
    assert [h["ticket_id"] for h in found["hits"]] == ranked(where, capsys, "-k", "5", "--where", "product=pump")
    assert {h["ticket_id"] for h in found["hits"]} <= pumps
    for bad, said in (("queue=l2", "no field 'queue' to filter on; the fields they have: product, site"),
                      ("product", "is not FIELD=VALUE")):
        answer = client.get("/api/search", query_string={**query, "where": bad})
        assert answer.status_code == 400 and said in answer.get_json()["problems"][0]


DELETER = DIES_AT + textwrap.dedent("""
    from ticketsim.search.index import delete_tickets
    folder, kill_at, ticket = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    die_at(kill_at)
    delete_tickets(folder, [ticket])
    print("done")
""")


def erased_at_each_step(source: Path, tmp_path: Path, script: str, args: list[str], gone: str, says: str,
                        state=len, old: object = 40, new: object = 39) -> None:
    """`script` (a writer erasing the ticket `gone`, killed at its kill_at'th fsync, rename or unlink) run on copies of
    the index at `source`, killed at each step in turn until it ends saying `says`: each copy holds the old index or the
    new one (`state` of it: `old` or `new`), and once the new one is in force the next writer leaves no generation
    holding the ticket."""
    outcomes = []
    with forker(tmp_path) as run:
        for kill_at in range(1, 100):
            folder = tmp_path / f"kill-{kill_at}"
            subprocess.run(["cp", "-a", str(source), str(folder)], check=True)
            done = run(script, str(folder), str(kill_at), *args)
            index = TicketIndex.load(folder)        # never damaged: the pointer names a whole generation
            outcomes.append(state(index))
            assert outcomes[-1] in (old, new), (kill_at, outcomes[-1])
            if outcomes[-1] == new:
                added = index.tickets[[0]].with_columns(ticket_id=pl.lit("T-LATER"))
                append(folder, index.model_hash, Encoded(np.asarray(index.vectors.take([0]), np.float32), added))
                assert all(TicketIndex.of_generation(folder, g, manifest_of(g)).row_of(gone) is None for g in generations(folder))
            if done.returncode == 0:
                assert done.stdout.strip() == says
                break
            assert done.returncode == -9, done.stderr
    assert outcomes[0] == old and outcomes[-1] == new and len(outcomes) > 10


@pytest.mark.slow
def test_a_delete_killed_at_each_step_leaves_the_old_or_the_new_index_and_the_next_writer_erases(workspace, tmp_path):
    root, _, tickets = workspace
    erased_at_each_step(root / "index", tmp_path, DELETER, [tickets["ticket_id"][4]], tickets["ticket_id"][4], "done")


def synced(where: list[str], capsys, export: Path, *args: str, code: int = OK) -> str:
    """What `index sync` of `export` says (stdout where it runs, stderr's last line where it is refused)."""
    capsys.readouterr()
    assert main(["index", "sync", str(export), *where, *args]) == code
    said = capsys.readouterr()
    return said.out.strip() if code == OK else said.err.strip()


def test_sync_makes_the_index_equal_to_the_export_in_one_generation_and_a_second_sync_writes_nothing(products, search_parts,
                                                                                                     capsys):
    root, where, tickets = products
    folder, export = root / "index", root / "export.csv"
    edited, refiled, gone = tickets["ticket_id"][2], tickets["ticket_id"][4], tickets["ticket_id"][6]
    wanted = pl.concat([tickets.filter(pl.col("ticket_id") != gone), search_parts.corpus.tickets.slice(40, 2).with_columns(
        product=pl.lit("pump"), site=pl.lit("north"))]).with_columns(
        solution=pl.when(pl.col("ticket_id") == edited).then(pl.lit(f"call {SECRET} and swap the seal")).otherwise("solution"),
        queue=pl.when(pl.col("ticket_id") == refiled).then(pl.lit("l2")).otherwise(None))
    wanted.write_csv(export)
    before = folder_bytes(folder)
    assert synced(where, capsys, export, "--dry-run") == f"{folder}: 2 added, 2 updated, 1 deleted by a sync with {export} " \
                                                         "(dry run: nothing written)"
    assert folder_bytes(folder) == before
    writes = [g.name for g in generations(folder)]
    assert synced(where, capsys, export).startswith(f"{folder}: 2 added, 2 updated, 1 deleted by a sync with {export} (41 tickets")
    assert [g.name for g in generations(folder)] == ["gen-000002"] and writes == ["gen-000001"]  # one generation, erased
    after = TicketIndex.load(folder)
    assert sorted(after.tickets["ticket_id"]) == sorted(wanted["ticket_id"]) and after.row_of(gone) is None
    stored = after.tickets.select(wanted.columns).sort("ticket_id").fill_null("")     # an empty facet is none
    assert stored.equals(wanted.sort("ticket_id").cast(dict.fromkeys(wanted.columns, pl.String)).fill_null(""))
    # a facet alone changed keeps its stored vector; the whole index's vectors are a rebuild's
    rebuilt = build_index(Scorer.load(where[1]), model_hash(where[1]), wanted, root / "rebuilt")
    rows = [rebuilt.row_of(t) for t in after.tickets["ticket_id"]]
    assert np.allclose(after.vectors.take(range(len(after))), rebuilt.vectors.take(rows), atol=1e-5)
    [joined] = after.segments     # the segment that held the ticket rewritten without it, the new one joined to it
    everything = Postings.build(after.words(), after.bm25.k1, after.bm25.b)
    assert np.array_equal(joined.postings.tf, everything.tf) and joined.postings.word_id(SECRET.lower()) is not None
    assert after.matching({"queue": "l2"}).tolist() == [after.row_of(refiled)]
    settled = folder_bytes(folder)
    assert synced(where, capsys, export) == f"{folder}: 0 added, 0 updated, 0 deleted by a sync with {export} (it equals " \
                                            "the export already: nothing written)"
    assert folder_bytes(folder) == settled
    pl.concat([wanted, search_parts.corpus.tickets.slice(42, 1)], how="diagonal").write_csv(export)
    assert synced(where, capsys, export).startswith(f"{folder}: 1 added, 0 updated, 0 deleted")
    assert [g.name for g in generations(folder)] == ["gen-000002", "gen-000003"]   # as an add: the one before kept


def test_every_bad_sync_is_one_problem_and_nothing_is_written(products, capsys):
    root, where, tickets = products
    folder, before = root / "index", folder_bytes(root / "index")
    tickets.drop("solution").write_csv(root / "no-solution.csv")
    said = synced(where, capsys, root / "no-solution.csv", code=BAD_INPUT).splitlines()
    assert len(said) == 2 and said[1].strip().startswith(f"{root / 'no-solution.csv'}:1: missing column(s) ['solution']")
    pl.concat([tickets, tickets.slice(3, 1)]).write_csv(root / "twice.csv")
    said = synced(where, capsys, root / "twice.csv", code=BAD_INPUT).splitlines()
    assert len(said) == 2 and f"twice.csv:42: ticket_id {tickets['ticket_id'][3]!r} is a duplicate (first at" in said[1]
    tickets.drop("site").write_csv(root / "no-site.csv")
    assert synced(where, capsys, root / "no-site.csv", code=ERROR) == \
        f"ticketsim index: {root / 'no-site.csv'} has no column 'site', which the index keeps for its tickets (the sync " \
        "would clear it on all 40); add the column, or rebuild with `ticketsim index build --force`; nothing written"
    tickets.with_columns(ticket_id=pl.col("ticket_id") + "-other").write_csv(root / "other.csv")
    for args in ((), ("--dry-run",)):
        said = synced(where, capsys, root / "other.csv", *args, code=ERROR)
        assert "\n" not in said and "holds none of the index's 40 ticket ids: the sync would delete every ticket" in said
    assert folder_bytes(folder) == before


def test_a_sync_refuses_when_another_writer_changed_the_index_while_it_encoded(products, monkeypatch, capsys):
    root, where, tickets = products
    export = read_records(root / "tickets.csv", "tickets").with_columns(
        product=pl.when(pl.col("ticket_id") == tickets["ticket_id"][0]).then(pl.lit("valve")).otherwise("product"))
    encoding = sync.changed_tickets

    def meanwhile(*args):     # another writer appends while this sync encodes
        index = TicketIndex.load(root / "index")
        append(root / "index", index.model_hash, Encoded(np.asarray(index.vectors.take([1]), np.float32),
                                                         index.tickets[[1]].with_columns(ticket_id=pl.lit("T-MEANWHILE"))))
        return encoding(*args)

    monkeypatch.setattr(sync, "changed_tickets", meanwhile)
    with pytest.raises(StepError, match=r"another writer changed the index during the sync \(gen-000002 in force, the "
                                        r"sync read gen-000001\); nothing written: run the sync again"):
        sync.sync_tickets(root / "index", None, where[1], export)
    monkeypatch.undo()
    assert [g.name for g in generations(root / "index")] == ["gen-000001", "gen-000002"]
    plan, after = sync.sync_tickets(root / "index", None, where[1], export)     # again: T-MEANWHILE is not in the export
    assert plan.counts() == "0 added, 1 updated, 1 deleted" and after.row_of("T-MEANWHILE") is None


SYNCER = DIES_AT + textwrap.dedent("""
    import polars as pl
    from ticketsim.search.sync import sync_tickets
    folder, kill_at, bundle, export = sys.argv[1], int(sys.argv[2]), sys.argv[3], pl.read_parquet(sys.argv[4])
    die_at(kill_at)
    print(sync_tickets(folder, None, bundle, export)[0].counts())
""")


@pytest.mark.slow
def test_a_sync_killed_at_each_step_leaves_the_old_or_the_new_index_and_the_next_writer_erases(products, tmp_path):
    root, where, tickets = products
    gone = tickets["ticket_id"][4]
    # a facet changed and a ticket deleted: nothing to encode, so the script loads no model
    read_records(root / "tickets.csv", "tickets").filter(pl.col("ticket_id") != gone).with_columns(
        product=pl.when(pl.col("ticket_id") == tickets["ticket_id"][0]).then(pl.lit("valve")).otherwise("product")
    ).write_parquet(root / "export.parquet")
    erased_at_each_step(root / "index", tmp_path, SYNCER, [where[1], str(root / "export.parquet")], gone,
                        "0 added, 1 updated, 1 deleted", lambda index: (len(index), len(index.matching({"product": "valve"}))),
                        (40, 0), (39, 1))
