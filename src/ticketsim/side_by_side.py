"""Independent trainings run side by side on worker processes: the Siamese rows of a dataset, the comparator models,
DocNADE's two fits, the tune stage's study workers.

Each model trains on one torch thread (their matrices are small), so on a 2-core machine two of them at once take
about half the wall time of one after the other; each job seeds itself, so its result does not depend on the worker
it ran on or on what ran beside it. With one worker the jobs run in this process, in order (no pickling, plain
tracebacks).

Workers die with the process that spawned them, whatever stops it: each asks the kernel first thing for a SIGKILL when
its parent dies (Linux's PR_SET_PDEATHSIG, which a SIGKILLed parent cannot skip), and a parent stopped by SIGTERM or
Ctrl-C kills its workers itself before it exits. A stopped stage once left its two workers training, detached, for 20
minutes beside the next stage.
"""
from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from contextlib import contextmanager
from multiprocessing.process import BaseProcess
from typing import Any, TypeVar

from ticketsim.errors import Terminated
from ticketsim.threads import torch_threads

Job, Result = TypeVar("Job"), TypeVar("Result")

SPAWN = multiprocessing.get_context("spawn")   # a fork would copy torch's and polars' thread pools, which hang after it
PR_SET_PDEATHSIG = 1                           # <linux/prctl.h>

_shared: Any = None     # a worker's copy of the data every job reads, set once when the worker starts


def die_with_parent(parent: int) -> None:
    """What a worker runs first: the kernel SIGKILLs it when `parent` dies (on Linux; elsewhere the parent's `reaped`
    alone ends it). A parent that died before the call left the worker to another process: it exits now."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


def _terminated(signum: int, frame: object) -> None:
    raise Terminated(signum)


@contextmanager
def reaped() -> Iterator[None]:
    """While the block runs, SIGTERM raises ticketsim.errors.Terminated (in the main thread, the one signals reach) as
    Ctrl-C raises KeyboardInterrupt; when either, or the close of a generator, ends the block, this process's workers
    are killed before it unwinds further (the command line ends with Terminated's status). Start the workers in the
    thread that runs the block: the kernel's parent of a worker is the thread that started it."""
    main = threading.current_thread() is threading.main_thread()
    before = signal.signal(signal.SIGTERM, _terminated) if main else None
    try:
        yield
    except (KeyboardInterrupt, Terminated, GeneratorExit):
        for process in multiprocessing.active_children():
            process.kill()
        raise
    finally:
        if main:
            signal.signal(signal.SIGTERM, before)


def _bound(parent: int, target: Callable[..., None], args: tuple) -> None:
    die_with_parent(parent)
    target(*args)


def spawn(target: Callable[..., None], *args: Any) -> BaseProcess:
    """A spawned process (not started) that runs target(*args) and dies with this one; start and join it in `reaped`."""
    return SPAWN.Process(target=_bound, args=(os.getpid(), target, args))


def _start_worker(parent: int, shared: Any, threads: int) -> None:
    global _shared
    die_with_parent(parent)
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
    pool = ProcessPoolExecutor(min(workers, len(jobs)), mp_context=SPAWN, initializer=_start_worker,
                               initargs=(os.getpid(), shared, threads))
    try:
        with reaped():
            running = {pool.submit(_run, work, job): job for job in jobs}
            while running:
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    yield running.pop(future), future.result()
    finally:
        pool.shutdown(cancel_futures=True)


def whole_groups(finished: Iterable[tuple[Job, Result]], group: Callable[[Job], Hashable],
                 size: int) -> Iterator[list[tuple[Job, Result]]]:
    """side_by_side's (job, result) pairs gathered by group(job) (a model's seeds): each group once its `size` jobs
    have finished, in the order they finished."""
    waiting: dict[Hashable, list[tuple[Job, Result]]] = {}
    for job, result in finished:
        gathered = waiting.setdefault(group(job), [])
        gathered.append((job, result))
        if len(gathered) == size:
            yield waiting.pop(group(job))
