"""What a stage script's process is told, and how it ends (its command line is ticketsim.stage's): params that do not
fit end it with one line naming the key; a stage skipped on a dataset says why and ends it with success; a SIGTERM that
stopped the work (ticketsim.errors.Terminated, raised once the side-by-side workers are dead) ends it with the shell's
status for the signal, after the runs and files above it have closed."""
from __future__ import annotations

import sys
from collections.abc import Callable
from typing import NoReturn

from ticketsim.errors import Terminated


def refused(line: str) -> NoReturn:
    sys.exit(line)


def skipped(line: str) -> NoReturn:
    print(line)
    sys.exit(0)


def script(main: Callable[[], None]) -> None:
    """The entry of a stage script whose work runs side-by-side workers: `if __name__ == "__main__": script(main)`."""
    try:
        main()
    except Terminated as stopped:
        sys.exit(stopped.status)
