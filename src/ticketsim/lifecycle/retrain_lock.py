"""One `ticketsim retrain` at a time in a workspace: an exclusive flock on LOCK (in the folder it runs in), taken before
its first step that writes (`dvc pull`) and held to its end. A second retrain refuses at once, in one line naming the
holder, or waits for it up to `--wait` seconds.

The kernel releases a flock when the last descriptor of it closes, however its process ended (SIGKILL too); the
descriptor is inheritable, so the `dvc` commands a retrain starts hold the lock with it: a killed retrain's `dvc repro`
that runs on keeps the workspace until it ends. The file says who took it (pid, when); it is never removed, as a lock
file taken by flock must not be (a remover and a newcomer would lock two different files).
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from ticketsim.data.locks import taken
from ticketsim.errors import StepError

LOCK = Path(".ticketsim/retrain.lock")
POLL_SECONDS = 0.2


@contextmanager
def retrain_lock(wait: float | None) -> Iterator[None]:
    """Hold the workspace's retrain lock for the block; StepError if another process holds it past `wait` seconds
    (None: do not wait)."""
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    handle = os.open(LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + (wait or 0.0)
        while not taken(handle):
            if time.monotonic() >= deadline:
                waited = f"; waited {wait:g} s: wait longer (--wait SECONDS)" if wait else "; wait for it or pass --wait SECONDS"
                raise StepError(f"another retrain holds {LOCK}{holder()}{waited}")
            time.sleep(POLL_SECONDS)
        os.ftruncate(handle, 0)
        os.pwrite(handle, json.dumps({"pid": os.getpid(), "since": datetime.now(timezone.utc).isoformat(timespec="seconds")})
                  .encode(), 0)
        os.set_inheritable(handle, True)
        yield
    finally:
        os.close(handle)


def holder() -> str:
    """' since <when> (pid N)' from the lock file; '' while its holder has not written it yet."""
    try:
        taker = json.loads(LOCK.read_text())
    except (OSError, ValueError):
        return ""
    gone = "" if alive(taker["pid"]) else ", ended: a dvc command it started still runs"
    return f" since {taker['since']} (pid {taker['pid']}{gone})"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:     # another user's process
        pass
    return True
