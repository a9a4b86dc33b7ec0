"""Shared fixtures: the SemEval-2016 Task 3 files (in ../shared beside the repo, never in it), one real pipeline run, and
the small data many tests train on (a tiny synthetic corpus with its tokens, random cached channel vectors).

`repro_workspace` is what a user who clones the repo has (its tracked files, no outputs, no ../shared beside it) after
`dvc repro` with small params: built once per session, read by every test of the real pipeline, never modified. Its
`dvc repro` starts when the session's tests are collected, if a test needs it, and runs beside the rest meanwhile.

A test marked `starts_early(start)` gets its long subprocess started when the session's tests are collected
(`start(root)`, root a fresh folder of the session): stage processes use one core, and the suite the other meanwhile.

The suite runs on two xdist workers (pyproject's addopts). What starts early starts once per session, in whichever
worker claims its folder first, as a `Job` that any worker can wait for; the tests that wait for one run last, so the
workers do the rest meanwhile.
"""
from __future__ import annotations

import os

# One OpenMP (torch, faiss) thread per process unless a test or stage sets its own: the suite's processes (two xdist
# workers, the jobs started early, their stage processes) already fill 2 cores, where a second thread waiting on a busy
# core multiplies the CPU (test_retrain's real model: 386 s of CPU on two threads, 85 s on one, beside the suite).
# Set before torch is imported, here and in every subprocess, which inherits it.
os.environ.setdefault("OMP_NUM_THREADS", "1")
import pickle
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import yaml
from benchmarks.common import REPO, clone, edit_params, small_params

from ticketsim.channels.cache import QUERY_COMPONENTS, TICKET_COMPONENTS, ChannelVectors
from ticketsim.config import SyntheticConfig, TextConfig
from ticketsim.data.synthetic import generate
from ticketsim.text.tokenize import make_tokenizer, tokenize_corpus

SEMEVAL_DIR = REPO.parent / "shared" / "data" / "semeval2016-task3"


@cache
def tiny_corpus(n_tickets: int = 60, n_labeled_queries: int = 30, n_enduser_queries: int = 4, pairs_per_query: int = 3,
                seed: int = 0, n_lay_queries: int = 0):
    """A small synthetic corpus and its tokens, made once per process for each size (read-only: tests share it); a lay
    split only when a test asks for one."""
    corpus = generate(SyntheticConfig(n_tickets=n_tickets, n_labeled_queries=n_labeled_queries, pairs_per_query=pairs_per_query,
                                      n_enduser_queries=n_enduser_queries, n_lay_queries=n_lay_queries), seed=seed)
    return corpus, tokenize_corpus(corpus, make_tokenizer(TextConfig(), corpus))


def random_channel(name: str, corpus, seed: int, dim: int = 6) -> ChannelVectors:
    """A cached channel of random vectors for every query and ticket component of `corpus`: where only shapes matter."""
    rng = np.random.default_rng(seed)
    ids_q, ids_t = tuple(corpus.queries["query_id"]), tuple(corpus.tickets["ticket_id"])
    return ChannelVectors(name, ids_q, ids_t, {c: rng.random((len(ids_q), dim)) for c in QUERY_COMPONENTS},
                          {c: rng.random((len(ids_t), dim)) for c in TICKET_COMPONENTS})


@pytest.fixture(scope="session")
def semeval_dir() -> Path:
    if not (SEMEVAL_DIR / "SemEval2016-Task3-CQA-QL-dev.xml").is_file():
        pytest.skip(f"SemEval-2016 Task 3 files not found in {SEMEVAL_DIR}")
    return SEMEVAL_DIR


RUNNING: list[subprocess.Popen] = []      # the jobs this process started


@dataclass(frozen=True)
class Job:
    """A shell script in its own process group, its output in `log` and, once it ended, its exit status in `folder/exit`:
    any process of the session (each xdist worker) can wait for it. Its output goes to a file: a pipe that nobody reads
    until the test comes would fill and stop it."""

    folder: Path

    @property
    def log(self) -> Path:
        return self.folder / "job.log"

    @classmethod
    def start(cls, folder: Path, script: str, cwd: Path | None = None) -> Job:
        job, done = cls(folder), shlex.quote(str(folder / "exit"))
        wrapped = f"({script}) >{shlex.quote(str(job.log))} 2>&1; echo $? >{done}.part; mv {done}.part {done}"
        RUNNING.append(subprocess.Popen(wrapped, shell=True, cwd=cwd, env={**os.environ, "DVC_NO_ANALYTICS": "1"},
                                        start_new_session=True))
        return job

    def wait(self, timeout: float) -> int:
        """Its exit status, once it ended."""
        return int(appeared(self.folder / "exit", timeout, f"still running after {timeout} s: {self.log}").read_text())


def appeared(path: Path, timeout: float, late: str) -> Path:
    """`path` once another process has written it (each writes a file whole, then renames it into place)."""
    deadline = time.monotonic() + timeout
    while not path.is_file():
        assert time.monotonic() < deadline, late
        time.sleep(0.5)
    return path


def session_folder(config: pytest.Config) -> Path:
    """A folder of this test session that every xdist worker sees (each worker's own tmp folders are inside it)."""
    base = config._tmp_path_factory.getbasetemp()
    return base.parent if hasattr(config, "workerinput") else base


def start_once(config: pytest.Config, name: str, start) -> None:
    """`start(folder)` in the first worker to claim `name`'s folder; what it returned is left there for every worker."""
    folder = session_folder(config) / name
    try:
        folder.mkdir()
    except FileExistsError:
        return
    (folder / "started.part").write_bytes(pickle.dumps(start(folder)))
    (folder / "started.part").rename(folder / "started.pkl")


def started_value(config: pytest.Config, name: str, timeout: float = 600):
    """What `start_once(config, name, ...)`'s start returned (in whichever worker), or None where nothing started it."""
    folder = session_folder(config) / name
    if not folder.is_dir():
        return None
    return pickle.loads(appeared(folder / "started.pkl", timeout, f"{name} was claimed but not started in {timeout} s").read_bytes())


def early_name(item: pytest.Item) -> str:
    return "early-" + "".join(c if c.isalnum() else "-" for c in item.nodeid)


def waits(item: pytest.Item) -> bool:
    return "repro_workspace" in item.fixturenames or item.get_closest_marker("starts_early") is not None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests that wait for a job started at collection run last (the same order in every worker, as xdist needs)."""
    items.sort(key=waits)


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return
    for item in session.items:
        marker = item.get_closest_marker("starts_early")
        if marker is not None:
            start_once(session.config, early_name(item), marker.args[0])
    if any("repro_workspace" in item.fixturenames for item in session.items):
        start_once(session.config, "clone", start_repro)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The jobs this process started: stopped when the session was cut short (-x, ^C), else waited for (under xdist
    another worker may still need one)."""
    for process in RUNNING:
        if process.poll() is None and (session.shouldstop or exitstatus == pytest.ExitCode.INTERRUPTED):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@pytest.fixture
def started(request):
    """What the test's starts_early start returned at collection, or None (it runs the start itself then)."""
    return started_value(request.config, early_name(request.node))


def run(*args: str, cwd: Path, check: bool = True, module: bool = True) -> subprocess.CompletedProcess:
    """`python -m <args>` (or `python <script> ...` with module=False) in `cwd`; with check, a failure shows its output."""
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    done = subprocess.run([sys.executable, *(["-m"] if module else []), *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert not check or done.returncode == 0, f"{' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


FAST_PATH = "=== register@default: a bundle, no table 5"     # said between the two commands when the fast path did so


def start_repro(root: Path) -> tuple[Path, Job]:
    """`dvc repro register@default` (the README's fast path to the model to deploy) on a bare clone in `root` with small
    params, then, once it left a bundle and no table 5, `dvc repro` (the rest)."""
    repo = clone(root / "repo")
    assert not (root / "shared").exists()   # as on a user's machine: no SemEval files beside the clone
    params = yaml.safe_load((repo / "params.yaml").read_text())
    assert set(params["datasets"]) == {"default"}, "the default datasets must need no file outside the repo"
    edit_params(repo, small_params)
    dvc = f"{shlex.quote(sys.executable)} -m dvc"
    script = (f"{dvc} repro register@default && test -d models/default/bundle && test ! -e metrics/default/table5.json "
              f"&& echo '{FAST_PATH}' && {dvc} repro")
    return repo, Job.start(root, script, cwd=repo)


@pytest.fixture(scope="session")
def repro_workspace(request, tmp_path_factory) -> Path:
    repo, job = started_value(request.config, "clone") or start_repro(tmp_path_factory.mktemp("clone"))
    code = job.wait(timeout=3600)
    said = job.log.read_text()
    assert FAST_PATH in said and code == 0, said[-6000:]
    return repo


@pytest.fixture(scope="session")
def search_parts(tmp_path_factory):
    """The trained pieces of the tiny bundles the search tests build (benchmarks/common.py), trained once."""
    from benchmarks.common import train_parts

    return train_parts(tmp_path_factory.mktemp("search-parts"))
