"""One writer at a time across processes: an exclusive flock on an open lock file, waited for with one line saying so
(a warning of this module's logger: with no logging configured, as in `ticketsim` and the stage scripts, Python writes
it to stderr as it is).

The kernel releases a flock when the last descriptor of its open file closes, however its process ended (SIGKILL too),
so no lock outlives its writer. A lock file is never removed: a remover and a newcomer would lock two different files.
It lives in data/, the lowest folder, so every writer above shares it (the intake, the journal, the index's
generations, retrain), with the fsync each needs before it says a write or a rename is done.
"""
from __future__ import annotations

import fcntl
import logging
import os
from pathlib import Path
from typing import IO

log = logging.getLogger(__name__)


def taken(handle: int | IO) -> bool:
    """Whether an exclusive flock on the open file `handle` was taken at once (False: another process holds it)."""
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def take(handle: int | IO, waiting: str) -> None:
    """An exclusive flock on the open file `handle`; where another process holds it, `waiting` is said once (logged)
    and this waits for it."""
    if not taken(handle):
        log.warning(waiting)
        fcntl.flock(handle, fcntl.LOCK_EX)


def fsync(path: Path) -> None:
    """Flush a file, or a folder's entries (after a rename in it), to the disk."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
