"""One `ticketsim retrain` at a time in a workspace (ticketsim.lifecycle.retrain_lock): while another process holds the
lock a retrain refuses in one line before its first step and writes nothing, or waits with --wait; the kernel frees
the lock when its holder dies, SIGKILL included, unless a command the holder started (its `dvc`) still runs."""
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import ticketsim.workflows.retrain as retrain_module
from ticketsim import cli
from ticketsim.errors import StepError
from ticketsim.lifecycle.retrain_lock import LOCK

REPO = Path(__file__).resolve().parents[1]
# Takes the lock as `ticketsim retrain` does, says so, and holds it until its stdin closes; `child` also starts a
# process that inherits it (as retrain's dvc commands do) and sleeps, and says its pid.
HOLDER = """import subprocess, sys
from ticketsim.lifecycle.retrain_lock import retrain_lock
with retrain_lock(None):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], close_fds=False) if sys.argv[1:] else None
    print("held", child.pid if child else "", flush=True)
    sys.stdin.read()
"""


@pytest.fixture
def workspace(tmp_path, monkeypatch) -> list[str]:
    """A folder with params.yaml, as the working directory; the retrain loop's first step only records that it ran."""
    shutil.copy2(REPO / "params.yaml", tmp_path / "params.yaml")
    monkeypatch.chdir(tmp_path)
    steps = []

    def first_step(cfg):
        steps.append("tracking check")
        raise StepError("the loop's first step ran")
    monkeypatch.setattr(retrain_module, "check_reachable", first_step)
    monkeypatch.setattr(retrain_module, "dvc", lambda *args: pytest.fail(f"dvc {' '.join(args)} ran"))
    return steps


def hold(*args: str) -> tuple[subprocess.Popen, str]:
    """The holder, and what it said after 'held' (its child's pid, with `child`)."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    said, _, child = holder.stdout.readline().strip().partition(" ")
    assert said == "held"
    return holder, child


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.rglob("*") if p.is_file()}


def test_a_second_retrain_refuses_in_one_line_and_writes_nothing(workspace, tmp_path, capsys):
    holder, _ = hold()
    try:
        before = snapshot(tmp_path)
        assert cli.main(["retrain"]) == cli.ERROR
        lines = capsys.readouterr().err.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"ticketsim retrain: another retrain holds {LOCK} since "), lines
        assert f"(pid {holder.pid}); wait for it or pass --wait SECONDS" in lines[0]
        assert workspace == [] and snapshot(tmp_path) == before     # no step ran, no file changed

        started = time.monotonic()
        assert cli.main(["retrain", "--wait", "1"]) == cli.ERROR
        assert time.monotonic() - started >= 1 and "waited 1 s: wait longer" in capsys.readouterr().err
        assert workspace == [] and snapshot(tmp_path) == before
    finally:
        holder.kill()
        holder.wait()


def test_with_wait_a_retrain_goes_on_once_the_other_ends(workspace, capsys):
    holder, _ = hold()
    threading.Timer(1, holder.stdin.close).start()      # the holder's work ends in a second
    started = time.monotonic()
    assert cli.main(["retrain", "--wait", "30"]) == cli.ERROR
    assert "the loop's first step ran" in capsys.readouterr().err and workspace == ["tracking check"]
    assert time.monotonic() - started >= 1
    holder.wait()


def test_a_killed_holder_frees_the_lock_unless_a_command_it_started_still_runs(workspace, capsys):
    holder, _ = hold()
    holder.kill()
    holder.wait()
    assert cli.main(["retrain"]) == cli.ERROR and workspace == ["tracking check"]     # no --wait needed
    capsys.readouterr()

    holder, child = hold("child")
    holder.kill()
    holder.wait()
    assert cli.main(["retrain"]) == cli.ERROR and workspace == ["tracking check"]
    assert f"(pid {holder.pid}, ended: a dvc command it started still runs)" in capsys.readouterr().err
    os.kill(int(child), signal.SIGKILL)
    assert cli.main(["retrain", "--wait", "10"]) == cli.ERROR and workspace == ["tracking check"] * 2
