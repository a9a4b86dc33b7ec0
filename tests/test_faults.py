"""Fault injection: writers of labelled data and `ticketsim retrain` SIGKILLed at random points (several seeds), then
checked: every record a command reported is there exactly once, a batch is in whole or not at all, nothing is there
twice, and every later command works. (A served journal killed under load: tests/test_feedback_server.py.)"""
import fcntl
import json
import os
import random
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import mlflow
import polars as pl
import pytest
from retrain_workspace import make_workspace
from test_workers import running

from ticketsim.data.csvsource import read_corpus
from ticketsim.data.feedback import Journal, Judgment
from ticketsim.data.validate import IntakeReport
from ticketsim.lifecycle.registry import CHAMPION
from ticketsim.lifecycle.retrain_lock import LOCK

REPO = Path(__file__).resolve().parents[1]
NOW = datetime(2026, 3, 4, 5, 6, 7, tzinfo=timezone.utc)
TICKETS = {"T1": {"ticket_id": "T1", "subject": "Pump leak", "description": "Seal leaks", "solution": "Replace seal"},
           "T2": {"ticket_id": "T2", "subject": "Fan noise", "description": "Bearing noise", "solution": "Grease bearing"}}
FRACTIONS = {"train": 0.7, "dev": 0.3}
# Judges one new query after another, as a served worker does, and says each judgment the journal took.
WRITER = """import sys
from datetime import datetime, timezone
from ticketsim.data.feedback import Journal, Judgment
journal, ticket = Journal(sys.argv[1]), {"ticket_id": "T1", "subject": "Pump leak", "description": "Seal leaks", "solution": "Replace seal"}
print("ready", flush=True)
for i in range(10**6):
    done = journal.record(Judgment(f"{sys.argv[2]} {i}", "water under the pump", "T1", "YES", "api"), ticket, datetime.now(timezone.utc))
    print(done.status, done.query_id, flush=True)
"""


def wait_for(done, seconds: float, what: str, poll: float = 0.1) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(poll)


def test_journal_writers_killed_at_random_keep_every_judgment_they_reported_once(tmp_path):
    path, reported = tmp_path / "judgments.jsonl", []
    for seed in range(4):
        rng = random.Random(seed)
        writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), f"writer {seed}.{w}"], stdout=subprocess.PIPE,
                                    text=True) for w in range(2)]    # two at once, as two gunicorn workers
        for writer in writers:
            assert writer.stdout.readline() == "ready\n"
        time.sleep(rng.uniform(0.05, 0.4))
        for writer in writers:
            time.sleep(rng.uniform(0, 0.1))
            writer.kill()
            writer.wait()
            reported += [line.split()[1] for line in writer.stdout.read().splitlines() if line.startswith("recorded ")]
    assert len(reported) > 8, "the writers were killed before they wrote: nothing was tested"

    after = Journal(path).record(Judgment("after the kills", "pump wet", "T1", "YES", "api"), TICKETS["T1"], NOW)
    written = [json.loads(line)["query_id"] for line in path.read_text().splitlines()]    # every line whole JSON
    assert after.status == "recorded" and after.where == f"{path}:{len(written)}"
    assert len(written) == len(set(written)), "a judgment was written twice"
    assert set(reported) <= set(written), "a judgment its writer reported is missing"


def intake_workspace(root: Path, command: str) -> tuple[Path, list[str], set[str]]:
    """A csv dataset's folder, params.yaml naming it, and 30 judgments to add: in a journal for `feedback export`, in a
    batch file for `pairs add`. The folder, the command, the ids of the judged queries."""
    folder = root / "labeled"
    folder.mkdir(parents=True)
    pl.DataFrame(list(TICKETS.values())).write_csv(folder / "tickets.csv")
    (folder / "queries.csv").write_text("query_id,subject,description\nQ1,fan loud,fan makes noise\n")
    (folder / "pairs.csv").write_text("query_id,ticket_id,label,split\nQ1,T2,YES,train\n")
    params = (REPO / "params.yaml").read_text().replace("    source: synthetic", "    source: csv\n    raw: labeled")
    (root / "params.yaml").write_text(params)
    judged = [Judgment(f"query {i}", "water under the pump", f"T{i % 2 + 1}", "YES", "api") for i in range(30)]
    if command == "feedback export":
        journal = Journal(root / "judgments.jsonl")
        for judgment in judged:
            journal.record(judgment, TICKETS[judgment.ticket_id], NOW)
        args = ["feedback", "export", "--journal", str(journal.path)]
    else:
        rows = [{"subject": j.subject, "description": j.description, "ticket_id": j.ticket_id, "label": j.label} for j in judged]
        pl.DataFrame(rows).write_csv(root / "batch.csv")
        args = ["pairs", "add", str(root / "batch.csv")]
    return folder, [sys.executable, "-m", "ticketsim.cli", *args], {j.query_id() for j in judged}


def batch_pairs(folder: Path, ours: set[str]) -> int:
    """How many of the batch's pairs the folder holds: all or none, each once, and the folder valid as a whole."""
    pairs = read_corpus(folder, FRACTIONS, IntakeReport()).pairs.filter(pl.col("query_id").is_in(list(ours)))
    assert pairs.height == pairs.select("query_id", "ticket_id").n_unique(), "a pair was added twice"
    assert pairs.height in (0, len(ours)), f"a part of the batch was added: {pairs.height} of {len(ours)} pairs"
    return pairs.height


@pytest.mark.parametrize("command", [pytest.param("feedback export", marks=pytest.mark.slow),  # MLflow's import: 5 s a run
                                     "pairs add"])
def test_intake_killed_at_random_adds_a_batch_whole_or_not_at_all_and_once(tmp_path, command):
    """`ticketsim feedback export` and `ticketsim pairs add` write one batch each (all or nothing), killed a random few
    milliseconds after they staged their first file in the folder, or at a random time of their run: the folder stays
    valid and holds all of the batch's pairs or none, and the next run leaves each exactly once and no staged file."""
    folder, ticketsim, _ = intake_workspace(tmp_path / "whole", command)
    started = time.monotonic()
    assert subprocess.run(ticketsim, cwd=folder.parent, capture_output=True).returncode == 0
    took = time.monotonic() - started   # a whole run's seconds, the span of the kills at a random time
    for seed in range(2 if command == "feedback export" else 4):    # each kind of kill at least once; MLflow's import is slow
        rng = random.Random(seed)
        folder, ticketsim, ours = intake_workspace(tmp_path / str(seed), command)

        process = subprocess.Popen(ticketsim, cwd=folder.parent, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if seed % 2 == 0:   # the writes themselves: a temporary file beside the one it replaces
            wait_for(lambda: process.poll() is not None or any(n.endswith(".tmp") for n in os.listdir(folder)), 60,
                     "the command neither staged a file nor ended", poll=0.001)
            time.sleep(rng.uniform(0, 0.005))
        else:
            time.sleep(rng.uniform(0.2, 1.0) * took)
        process.kill()
        process.wait()
        batch_pairs(folder, ours)
        done = subprocess.run(ticketsim, cwd=folder.parent, capture_output=True, text=True)
        assert done.returncode == 0 and batch_pairs(folder, ours) == len(ours), done.stderr
        assert not [n for n in os.listdir(folder) if n.endswith(".tmp")], "a killed run's staged file is still there"


PHASES = (None, "==> dvc pull", "Running stage")    # from its start (before the lock, or just after), in a dvc command


def lock_free(root: Path) -> bool:
    if not (root / LOCK).exists():
        return True
    handle = os.open(root / LOCK, os.O_RDONLY)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(handle)


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
        except (FileNotFoundError, ProcessLookupError):
            continue
    return found


@pytest.mark.slow   # a workspace, three retrains killed at random and the dvc commands they leave, one whole: ~60 s
def test_retrain_killed_at_random_frees_its_lock_once_its_dvc_ends_and_the_next_retrain_works(tmp_path):
    ws = make_workspace(tmp_path / "repo")
    log = tmp_path / "retrain.log"
    for seed, phase in enumerate(PHASES):
        rng = random.Random(seed)
        with log.open("w") as out:
            retrain = subprocess.Popen([sys.executable, "-u", "-m", "ticketsim.cli", "retrain", "--full"], cwd=ws.root,
                                       env=ws.env, stdout=out, stderr=subprocess.STDOUT)
        if phase:
            wait_for(lambda: phase in log.read_text() or retrain.poll() is not None, 60, f"no {phase!r}: {log.read_text()}")
        time.sleep(rng.uniform(0.0, 1.0) if phase else rng.uniform(0.5, 3.0))
        dvc = children(retrain.pid)
        retrain.kill()
        assert retrain.wait() == -signal.SIGKILL, f"the retrain ended before its kill ({phase}): {log.read_text()}"
        # The dvc command it started holds the lock on: free only once that ended too.
        wait_for(lambda: lock_free(ws.root), 60, f"the lock stays held after a kill {phase or 'at the start'}")
        wait_for(lambda: not any(map(running, dvc)), 2, f"the lock was freed while its dvc command runs ({phase})")

    done = ws.ticketsim("retrain", "--full")
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    uri = f"sqlite:///{ws.root / 'mlflow.db'}"
    client, model = mlflow.MlflowClient(uri, uri), f"{ws.params()['siamese']['registered_model']}-default"
    versions = [str(v.version) for v in client.search_model_versions(f"name='{model}'")]
    assert versions == ["1"], f"one training, registered once: {versions}"    # the killed ones' repro ran to its end once
    assert {a: str(v) for a, v in client.get_registered_model(model).aliases.items()} == {CHAMPION: "1"}
    assert ws.ticketsim("gate").returncode == 0 and lock_free(ws.root)
