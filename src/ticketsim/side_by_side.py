"""Independent trainings run side by side on worker processes: the Siamese rows of a dataset, the comparator models.

Each model trains on one torch thread (their matrices are small), so on a 2-core machine two of them at once take
about half the wall time of one after the other; each job seeds itself, so its result does not depend on the worker
it ran on or on what ran beside it. With one worker the jobs run in this process, in order (no pickling, plain
tracebacks).
"""
from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Any, TypeVar

from ticketsim.threads import torch_threads

Job, Result = TypeVar("Job"), TypeVar("Result")

_shared: Any = None     # a worker's copy of the data every job reads, set once when the worker starts


def _start_worker(shared: Any, threads: int) -> None:
    global _shared
    import torch

    torch.set_num_threads(threads)
    _shared = shared


def _run(work: Callable[[Any, Job], Result], job: Job) -> Result:
    return work(_shared, job)


def side_by_side(work: Callable[[Any, Job], Result], shared: Any, jobs: Sequence[Job], workers: int,
                 threads: int = 1) -> Iterator[tuple[Job, Result]]:
    """(job, work(shared, job)) for every job, as each finishes, on `workers` spawned processes of `threads` torch
    threads each. `work` must be a module-level function and `shared` and the jobs picklable: each worker gets one
    copy of `shared`. Jobs start in the order given (longest first keeps both cores busy to the end). A failed job
    cancels those not started and raises its error once the running ones end."""
    if workers <= 1 or len(jobs) <= 1:
        for job in jobs:
            with torch_threads(threads):
                result = work(shared, job)
            yield job, result
        return
    pool = ProcessPoolExecutor(min(workers, len(jobs)), mp_context=multiprocessing.get_context("spawn"),
                               initializer=_start_worker, initargs=(shared, threads))
    try:
        running = {pool.submit(_run, work, job): job for job in jobs}
        while running:
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                yield running.pop(future), future.result()
    finally:
        pool.shutdown(cancel_futures=True)
