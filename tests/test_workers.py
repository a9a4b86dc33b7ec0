"""Worker processes die with the process that started them, whatever stops it: a parent SIGTERMed, SIGKILLed or
interrupted leaves no worker behind (ticketsim.side_by_side; a stopped siamese stage once left two training for 20
minutes). Each case starts a real parent of two spawned workers (tests/sleeping_workers.py)."""
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

HELPER = Path(__file__).with_name("sleeping_workers.py")


def running(pid: int) -> bool:
    """The process exists and is not a zombie (a dead child its parent has not reaped yet)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("how, stop, status", [
    ("pool", signal.SIGTERM, 128 + signal.SIGTERM),     # the parent kills its workers, then exits as SIGTERM's status
    ("pool", signal.SIGKILL, -signal.SIGKILL),          # the kernel kills them: the parent had no say
    ("pool", signal.SIGINT, -signal.SIGINT),            # Ctrl-C
    ("process", signal.SIGTERM, 128 + signal.SIGTERM),
    ("process", signal.SIGKILL, -signal.SIGKILL),
])
def test_workers_die_with_their_parent(tmp_path, how, stop, status):
    parent = subprocess.Popen([sys.executable, str(HELPER), str(tmp_path), how], stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while len(list(tmp_path.iterdir())) < 2:
            assert parent.poll() is None and time.monotonic() < deadline, "the workers did not start"
            time.sleep(0.05)
        workers = [int(p.name) for p in tmp_path.iterdir()]
        parent.send_signal(stop)
        assert parent.wait(timeout=10) == status
        deadline = time.monotonic() + 3
        while any(map(running, workers)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [pid for pid in workers if running(pid)], f"workers outlived their parent ({stop.name})"
    finally:
        parent.kill()
