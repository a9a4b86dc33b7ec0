"""A parent of two sleeping workers, started as ticketsim starts its workers, for tests/test_workers.py.

`python tests/sleeping_workers.py FOLDER pool|process`: two workers of ticketsim.side_by_side (pool: a stage's side by
side jobs; process: the tune stage's study workers), each writing FOLDER/<its pid> and then sleeping for a minute, run as
a stage script runs (workflows.stage_process.script).
"""
import os
import sys
import time
from pathlib import Path

from ticketsim.side_by_side import reaped, side_by_side, spawn
from ticketsim.workflows.stage_process import script


def sleep(folder: str, job: object = None) -> None:
    Path(folder, str(os.getpid())).touch()
    time.sleep(60)


def main() -> None:
    folder, how = sys.argv[1:]
    if how == "pool":
        list(side_by_side(sleep, folder, [1, 2], workers=2))
    else:
        processes = [spawn(sleep, folder) for _ in range(2)]
        with reaped():
            for process in processes:
                process.start()
            for process in processes:
                process.join()


if __name__ == "__main__":
    script(main)     # as a stage script ends: SIGTERM's status once the workers are dead
