"""The index folder as a store: it opens without reading its tickets, writers take turns (two `ticketsim index add` at once
both land), a writer killed at any step leaves the previous generation or the new one, `index build` replaces an index
only with --force, and a server answers from tickets added while it runs."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from benchmarks.common import make_bundle

from ticketsim.app.access import Access
from ticketsim.app.page import create_app
from ticketsim.bundle.loader import Scorer
from ticketsim.config import ServeConfig
from ticketsim.data.feedback import Journal
from ticketsim.errors import StepError
from ticketsim.search.generations import POINTER, current
from ticketsim.search.index import Encoded, TicketIndex, append, build_index, model_hash
from ticketsim.search.postings import Postings
from ticketsim.search.queries import query_encoder
from ticketsim.search.searcher import Searcher

SRC = Path(__file__).resolve().parents[1] / "src"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]), "HF_HUB_OFFLINE": "1"}


@pytest.fixture(scope="module")
def store(search_parts, tmp_path_factory):
    """(bundle, an index folder of the first 60 tickets, the tickets)."""
    root = tmp_path_factory.mktemp("store")
    bundle = make_bundle(root / "bundle", search_parts, "22")
    tickets = search_parts.corpus.tickets
    build_index(Scorer.load(bundle), model_hash(bundle), tickets.head(60), root / "index")
    return bundle, root / "index", tickets


def renamed(index: TicketIndex, rows: list[int], suffix: str) -> Encoded:
    """Stored tickets again under new ids: encoded tickets with no encoder (what a writer appends)."""
    frame = index.tickets[rows].with_columns(ticket_id=pl.col("ticket_id") + suffix)
    return Encoded(np.asarray(index.vectors.array[rows], np.float32), frame)


def test_opening_reads_no_ticket_and_build_refuses_an_existing_index_without_force(store, tmp_path):
    bundle, index_folder, tickets = store
    index = TicketIndex.load(index_folder)
    assert isinstance(index.vectors.array, np.memmap) and isinstance(index.postings.docs, np.memmap)
    assert isinstance(index.order, np.memmap) and isinstance(index.ids.blob, np.memmap)
    assert index.row_of(tickets["ticket_id"][7]) == 7 and index.row_of("no such ticket") is None
    with pytest.raises(StepError, match=r"already holds an index \(gen-000001\); pass --force"):
        build_index(Scorer.load(bundle), model_hash(bundle), tickets.head(3), index_folder)
    assert TicketIndex.load(index_folder).generation == index.generation and len(TicketIndex.load(index_folder)) == 60
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    with pytest.raises(StepError, match="cannot write the index there"):
        build_index(Scorer.load(bundle), model_hash(bundle), tickets.head(3), blocked / "index")


KILLER = textwrap.dedent("""
    import os, signal, sys
    import numpy as np, polars as pl
    from ticketsim.search.index import Encoded, TicketIndex, append
    folder, kill_at = sys.argv[1], int(sys.argv[2])
    index = TicketIndex.load(folder)
    frame = index.tickets[:5].with_columns(ticket_id=pl.col("ticket_id") + "-new")
    new = Encoded(np.asarray(index.vectors.array[:5], np.float32), frame)
    calls = [0]
    def dying(real):
        def call(*args, **kwargs):
            calls[0] += 1
            if calls[0] == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*args, **kwargs)
        return call
    for name in ("fsync", "rename", "replace", "unlink", "rmdir"):
        setattr(os, name, dying(getattr(os, name)))
    append(folder, index.model_hash, new)
    print("done")
""")


@pytest.mark.slow
def test_a_writer_killed_at_each_step_leaves_the_old_or_the_new_generation(store, tmp_path):
    bundle, index_folder, _ = store
    outcomes = []
    for kill_at in range(1, 60):
        folder = tmp_path / f"kill-{kill_at}"
        subprocess.run(["cp", "-a", str(index_folder), str(folder)], check=True)
        done = subprocess.run([sys.executable, "-c", KILLER, str(folder), str(kill_at)], capture_output=True, text=True, env=ENV)
        index = TicketIndex.load(folder)        # never damaged: the pointer names a whole generation
        assert len(index) in (60, 65), (kill_at, len(index))
        outcomes.append(len(index))
        # and the next writer works: it cleans the leftovers and appends exactly once
        after = append(folder, index.model_hash, renamed(index, [1, 2], "-later"))
        assert len(after) == len(index) + 2 and not list(folder.glob(".gen-*"))
        everything = Postings.build(after.words(), after.bm25.k1, after.bm25.b)
        assert np.array_equal(after.postings.docs, everything.docs) and np.array_equal(after.postings.tf, everything.tf)
        if done.returncode == 0:
            assert done.stdout.strip() == "done"
            break
        assert done.returncode == -9, done.stderr
    assert outcomes[0] == 60 and outcomes[-1] == 65 and len(outcomes) > 10    # killed at every step before it finished


@pytest.mark.slow
def test_two_index_adds_at_once_both_land(store, tmp_path):
    bundle, index_folder, tickets = store
    folder = tmp_path / "index"
    subprocess.run(["cp", "-a", str(index_folder), str(folder)], check=True)
    files = []
    for name, batch in (("a", tickets.slice(60, 10)), ("b", tickets.slice(70, 10))):
        batch.write_csv(tmp_path / f"{name}.csv")
        files.append(tmp_path / f"{name}.csv")
    started = [subprocess.Popen([sys.executable, "-m", "ticketsim.cli", "index", "add", str(f), "--model", str(bundle),
                                 "--index", str(folder)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
               for f in files]
    results = [(p.wait(timeout=300), p.stdout.read(), p.stderr.read()) for p in started]
    assert all(code == 0 for code, _, _ in results), results
    index = TicketIndex.load(folder)
    assert len(index) == 80 and sorted(index.tickets["ticket_id"]) == sorted(tickets.head(80)["ticket_id"])
    assert current(folder).name == "gen-000003" and (folder / POINTER).read_text().strip() == "gen-000003"


def test_the_page_answers_from_tickets_added_while_it_runs(store, tmp_path):
    bundle, index_folder, _ = store
    folder = tmp_path / "index"
    subprocess.run(["cp", "-a", str(index_folder), str(folder)], check=True)
    searcher = Searcher(query_encoder(bundle), TicketIndex.load(folder), bundle)
    client = create_app(searcher, ServeConfig(), Journal(tmp_path / "judgments.jsonl"), Access("127.0.0.1", None)).test_client()
    index = TicketIndex.load(folder)
    new = renamed(index, [3], "-new")
    query = {"subject": index.tickets["subject"][3], "description": index.tickets["description"][3], "k": "3"}
    before = client.get("/api/search", query_string=query).get_json()
    assert "-new" not in str(before)
    judgment = {"subject": "x", "description": "y", "ticket_id": new.frame["ticket_id"][0], "label": "YES"}
    assert client.post("/api/feedback", json=judgment).status_code == 400      # not in the index yet
    append(folder, index.model_hash, new)
    after = client.get("/api/search", query_string=query).get_json()
    assert new.frame["ticket_id"][0] in [hit["ticket_id"] for hit in after["hits"]]     # the same text: a top hit
    assert client.post("/api/feedback", json=judgment).status_code == 200
    assert len(searcher.index) == 61
