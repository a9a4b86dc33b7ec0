"""The index folder as a store: it opens without reading its tickets, writers take turns (two `ticketsim index add` at once
both land), a writer killed at any step leaves the previous generation or the new one, `index build` replaces an index
only with --force, a server answers from tickets added while it runs, and a damaged file is one line naming it and the
generation `ticketsim index rollback` puts in force instead (a page whose workers cannot load stops with it), and a
full disk is one line saying how much to free, before the encoding where the size is known, the index as it was."""
import errno
import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from benchmarks.common import free_port, make_bundle

from ticketsim.app.access import Access
from ticketsim.app.page import create_app
from ticketsim.bundle.loader import Scorer
from ticketsim.channels.bm25 import Postings
from ticketsim.config import ServeConfig
from ticketsim.data.feedback import Journal
from ticketsim.errors import StepError
from ticketsim.search.generations import POINTER, current
from ticketsim.search.index import Encoded, TicketIndex, append, build_index, model_hash
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
    return Encoded(np.asarray(index.vectors.take(rows), np.float32), frame)


def mapped(array: np.ndarray) -> bool:
    """Memory-mapped: a np.memmap, or a plain view of one (what the postings and sorted strings probe)."""
    return isinstance(array, np.memmap) or isinstance(array.base, np.memmap)


def test_opening_reads_no_ticket_and_build_refuses_an_existing_index_without_force(store, tmp_path):
    bundle, index_folder, tickets = store
    index = TicketIndex.load(index_folder)
    [segment] = index.segments
    assert mapped(segment.vectors.array) and mapped(segment.postings.docs) and mapped(segment.by_id) and mapped(segment.ids.blob)
    assert index.row_of(tickets["ticket_id"][7]) == 7 and index.row_of("no such ticket") is None
    with pytest.raises(StepError, match=r"already holds an index \(gen-000001\); pass --force"):
        build_index(Scorer.load(bundle), model_hash(bundle), tickets.head(3), index_folder)
    assert TicketIndex.load(index_folder).generation == index.generation and len(TicketIndex.load(index_folder)) == 60
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    with pytest.raises(StepError, match="cannot write the index there"):
        build_index(Scorer.load(bundle), model_hash(bundle), tickets.head(3), blocked / "index")


# The head of a writer's script: die_at(n) makes its n-th filesystem call (fsync, rename, replace, unlink, rmdir) a
# SIGKILL, the kill -9 a writer must survive at every step (here and in test_index_edit.py).
DIES_AT = textwrap.dedent("""
    import os, signal, sys
    def die_at(kill_at):
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
""")
KILLER = DIES_AT + textwrap.dedent("""
    import numpy as np, polars as pl
    from ticketsim.search.index import Encoded, TicketIndex, append
    folder, kill_at = sys.argv[1], int(sys.argv[2])
    index = TicketIndex.load(folder)
    frame = index.tickets[:5].with_columns(ticket_id=pl.col("ticket_id") + "-new")
    new = Encoded(np.asarray(index.vectors.take(range(5)), np.float32), frame)
    die_at(kill_at)
    append(folder, index.model_hash, new)
    print("done")
""")
# One process imports what the writers' scripts import, once, and forks a child per kill point that runs a script as
# `python -c` would (its argv, its stdout and stderr to files): a fresh Python per kill point spent most of the three
# kill loops' 424 s importing polars, numpy and ticketsim. Imported, not run: polars' thread pool starts in each child.
FORKER = textwrap.dedent("""
    import json, os, sys, traceback
    import numpy, polars, ticketsim.search.index, ticketsim.search.sync
    for line in sys.stdin:
        script, argv, out, err = json.loads(line)
        pid = os.fork()
        if pid == 0:
            for descriptor, path in ((1, out), (2, err)):
                os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), descriptor)
            sys.argv, code = ["-c", *argv], 0
            try:
                exec(compile(script, "<string>", "exec"), {"__name__": "__main__"})
            except BaseException:
                traceback.print_exc()
                code = 1
            sys.stdout.flush(), sys.stderr.flush()
            os._exit(code)
        print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
""")


@contextmanager
def forker(folder: Path) -> Iterator[Callable[..., subprocess.CompletedProcess]]:
    """run(script, *argv): `python -c script *argv` in a child forked from FORKER's process, as subprocess.run gives it."""
    process = subprocess.Popen([sys.executable, "-c", FORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=ENV)

    def run(script: str, *argv: str) -> subprocess.CompletedProcess:
        out, err = folder / "forked.out", folder / "forked.err"
        process.stdin.write(json.dumps([script, list(argv), str(out), str(err)]) + "\n")
        process.stdin.flush()
        code = process.stdout.readline()
        assert code, "the forking process ended"
        return subprocess.CompletedProcess(argv, int(code), out.read_text(), err.read_text())

    try:
        yield run
    finally:
        process.stdin.close()
        process.wait(timeout=60)


@pytest.mark.slow
def test_a_writer_killed_at_each_step_leaves_the_old_or_the_new_generation(store, tmp_path):
    bundle, index_folder, _ = store
    outcomes = []
    with forker(tmp_path) as run:
        for kill_at in range(1, 60):
            folder = tmp_path / f"kill-{kill_at}"
            subprocess.run(["cp", "-a", str(index_folder), str(folder)], check=True)
            done = run(KILLER, str(folder), str(kill_at))
            index = TicketIndex.load(folder)        # never damaged: the pointer names a whole generation
            assert len(index) in (60, 65), (kill_at, len(index))
            outcomes.append(len(index))
            # and the next writer works: it cleans the leftovers and appends exactly once
            after = append(folder, index.model_hash, renamed(index, [1, 2], "-later"))
            assert len(after) == len(index) + 2 and not list(folder.glob(".gen-*"))
            everything = Postings.build(after.words(), after.bm25.k1, after.bm25.b)     # BM25 over the segments: a rebuild's
            assert all(np.array_equal(after.postings.bm25(words), everything.bm25(words)) for words in after.words()[::9])
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


def damage_vectors(folder: Path) -> str:
    vectors = folder / "gen-000002" / "seg-000002" / "vectors.npy"     # the segment gen-000002 wrote, not the one it links
    os.truncate(vectors, vectors.stat().st_size // 2)
    return f"{vectors}: cut short: "


def damage_current(folder: Path) -> str:
    (folder / POINTER).write_bytes(b"\xff\xfe\x00\x1b[2J gen")
    return f"{folder / POINTER}: holds b'\\xff\\xfe\\x00\\x1b[2J gen', which names no generation"


def damage_tickets(folder: Path) -> str:
    (folder / "gen-000002" / "seg-000002" / "tickets.arrow").unlink()
    return f"{folder / 'gen-000002' / 'seg-000002' / 'tickets.arrow'}: missing"


def escape_current(folder: Path) -> str:
    (folder / POINTER).write_text("../gen-000001\n")
    return f"{folder / POINTER}: holds b'../gen-000001\\n', which names no generation"


def name_a_missing_generation(folder: Path) -> str:
    (folder / POINTER).write_text("gen-000003\n")
    return f"{folder / POINTER}: names gen-000003, which is missing"


@pytest.fixture
def two_generations(store, tmp_path) -> Path:
    """A copy of the store's index with a second generation of 5 tickets more (gen-000002, 65 tickets)."""
    folder = tmp_path / "index"
    subprocess.run(["cp", "-a", str(store[1]), str(folder)], check=True)
    index = TicketIndex.load(folder)
    append(folder, index.model_hash, renamed(index, [0, 1, 2, 3, 4], "-new"))
    return folder


@pytest.mark.parametrize("damage, before", [(damage_vectors, "the generation before it, gen-000001 (60 tickets)"),
                                            (damage_current, "the newest generation, gen-000002 (65 tickets)"),
                                            (damage_tickets, "the generation before it, gen-000001 (60 tickets)"),
                                            (escape_current, "the newest generation, gen-000002 (65 tickets)"),
                                            (name_a_missing_generation, "the generation before it, gen-000002 (65 tickets)")])
def test_a_damaged_index_is_one_line_naming_the_file_and_the_generation_that_rollback_puts_in_force(
        store, two_generations, capsys, damage, before):
    from ticketsim.cli import ERROR, OK, main

    bundle, folder = store[0], two_generations
    said = damage(folder)
    where = ["--model", str(bundle), "--index", str(folder)]
    assert main(["search", *where, "--subject", "pump leaking oil", "-k", "3"]) == ERROR
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith(f"ticketsim search: {said}"), err
    assert err.rstrip().endswith(f"; {before}, is intact: `ticketsim index rollback --index {folder}` puts it in force")
    with pytest.raises(StepError, match=re.escape(said)):
        TicketIndex.load(folder)
    assert main(["index", "rollback", "--index", str(folder)]) == OK
    restored = before.split(", ")[1].split(" ")[0]
    assert capsys.readouterr().out.startswith(f"{folder}: {restored} in force (")
    assert current(folder).name == restored
    assert main(["search", *where, "--subject", "pump leaking oil", "-k", "3", "--json"]) == OK
    assert len(json.loads(capsys.readouterr().out)[0]["hits"]) == 3
    assert len(append(folder, TicketIndex.load(folder).model_hash, renamed(TicketIndex.load(folder), [5], "-after"))) > 60


def test_rollback_with_no_intact_generation_before_says_rebuild(store, tmp_path, capsys):
    from ticketsim.cli import ERROR, main

    folder = tmp_path / "index"
    subprocess.run(["cp", "-a", str(store[1]), str(folder)], check=True)
    vectors = folder / "gen-000001" / "seg-000001" / "vectors.npy"
    os.truncate(vectors, 200)
    assert main(["search", "--model", str(store[0]), "--index", str(folder), "--subject", "pump"]) == ERROR
    err = capsys.readouterr().err
    assert f"{vectors}: cut short: 200 of its" in err and "no earlier generation of the index is intact: rebuild it" in err
    assert main(["index", "rollback", "--index", str(folder)]) == ERROR
    assert "no earlier generation is intact to roll back to; rebuild it" in capsys.readouterr().err


@pytest.mark.slow
def test_a_page_whose_workers_cannot_load_the_index_stops_with_the_line_saying_why(store, two_generations, tmp_path):
    bundle, folder = store[0], two_generations
    serve = [sys.executable, "-m", "ticketsim.cli", "serve", "--model", str(bundle), "--index", str(folder), "--port", str(free_port()),
             "--feedback", str(tmp_path / "judgments.jsonl")]
    tickets = folder / "gen-000002" / "seg-000002" / "tickets.arrow"
    whole = tickets.read_bytes()    # its first and last bytes kept: the parent's check passes it, the workers cannot read it
    tickets.write_bytes(whole[:8] + bytes(len(whole) - 18) + whole[-10:])
    done = subprocess.run(serve, capture_output=True, text=True, env=ENV, timeout=240)
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 2 and last.startswith(f"ticketsim serve: a worker cannot load, so nothing is served: {tickets}: "
                                                    "unreadable ("), done.stderr[-3000:]
    assert last.endswith(f"gen-000001 (60 tickets), is intact: `ticketsim index rollback --index {folder}` puts it in force")
    assert f"\nticketsim serve: a worker cannot load: {tickets}: unreadable (" in done.stderr     # each worker's own line
    damage_vectors(folder)      # found by the parent before it starts a worker
    done = subprocess.run(serve, capture_output=True, text=True, env=ENV, timeout=120)
    damaged = folder / "gen-000002" / "seg-000002" / "vectors.npy"
    assert done.returncode == 2 and done.stderr.startswith(f"ticketsim serve: {damaged}: cut short")


def index_files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file() and p.name != ".lock"}


@pytest.mark.parametrize("fail", ["numpy's short write", "ENOSPC reserving the vectors"])
def test_a_disk_that_fills_while_a_generation_is_written_is_one_line_and_the_index_stays_as_it_was(store, tmp_path,
                                                                                                  monkeypatch, fail):
    folder = tmp_path / "index"
    subprocess.run(["cp", "-a", str(store[1]), str(folder)], check=True)
    before, index = index_files(folder), TicketIndex.load(folder)
    if fail == "numpy's short write":    # what np.save raised on a full disk: no errno, no file name
        def save(self, scratch):
            (scratch / "indptr.npy").write_bytes(b"\x93NUMPY")
            raise OSError("80089 requested and 35312 written")
        monkeypatch.setattr(Postings, "save", save)
    else:
        def reserve(descriptor, offset, size):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        monkeypatch.setattr(os, "posix_fallocate", reserve)
    with pytest.raises(StepError) as full:
        append(folder, index.model_hash, renamed(index, [1, 2], "-new"))
    written = "indptr.npy" if fail == "numpy's short write" else "vectors.npy"
    assert re.fullmatch(rf"no space left on .+ \(mounted at .+\) while writing {re.escape(str(folder))}/\.gen-000002/seg-000002/{written}; "
                        r"free \d+ MB \(it needs about \d+ KB, [\d.,]+ [KMG]B free; the scratch folder is removed, "
                        r"gen-000001 still in force\)", str(full.value)), str(full.value)
    assert index_files(folder) == before and len(TicketIndex.load(folder)) == 60


def test_index_add_refuses_a_disk_without_room_before_it_encodes_a_ticket(store, tmp_path, monkeypatch, capsys):
    import shutil

    import ticketsim.search.index as index_module
    from ticketsim.cli import ERROR, main

    bundle, _, tickets = store
    folder = tmp_path / "index"
    subprocess.run(["cp", "-a", str(store[1]), str(folder)], check=True)
    tickets.slice(60, 5).write_csv(tmp_path / "new.csv")
    before = index_files(folder)
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=5_000))   # an add writes its segment only
    monkeypatch.setattr(index_module, "encoded_tickets", lambda *args, **kwargs: pytest.fail("encoded before the check"))
    assert main(["index", "add", str(tmp_path / "new.csv"), "--model", str(bundle), "--index", str(folder)]) == ERROR
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and re.fullmatch(
        rf"ticketsim index: no space left on .+ while writing {re.escape(str(folder))}/gen-000002; free 1 MB \(it needs "
        r"about \d+ KB, 5 KB free; nothing was written\)\n", err), err
    assert index_files(folder) == before
