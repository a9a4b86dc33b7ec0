"""Shared fixtures: the SemEval-2016 Task 3 files (in ../shared beside the repo, never in it), one real pipeline run, and
the small data many tests train on (a tiny synthetic corpus with its tokens, random cached channel vectors).

`repro_workspace` is what a user who clones the repo has (its tracked files, no outputs, no ../shared beside it) after
`dvc repro` with small params: built once per session, read by every test of the real pipeline, never modified. Its
`dvc repro` starts when the session's tests are collected, if a test needs it, and runs beside the rest meanwhile.

A test marked `starts_early(start)` gets its long subprocess started when the session's tests are collected
(`start(root)`, root a fresh folder beside the tests' tmp_path): stage processes use one core, and the suite the other meanwhile.
"""
import os
import shlex
import shutil
import signal
import subprocess
import sys
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import yaml

from ticketsim.channels.cache import QUERY_COMPONENTS, TICKET_COMPONENTS, ChannelVectors
from ticketsim.config import SyntheticConfig, TextConfig
from ticketsim.data.synthetic import generate
from ticketsim.text.tokenize import make_tokenizer, tokenize_corpus

REPO = Path(__file__).resolve().parents[1]
SEMEVAL_DIR = REPO.parent / "shared" / "data" / "semeval2016-task3"
OUTPUTS = ("data/", "metrics/", "plots/", "reports/", "models/", "tuned/")


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


STARTED = pytest.StashKey[object]()     # what a starts_early test's start returned
REPRO = pytest.StashKey[tuple]()         # the bare clone and its `dvc repro`, started at collection (repro_workspace)


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return
    mktemp = session.config._tmp_path_factory.mktemp      # folders kept as tmp_path's are
    for item in session.items:
        marker = item.get_closest_marker("starts_early")
        if marker is not None:
            item.stash[STARTED] = marker.args[0](mktemp("starts-early"))
    if any("repro_workspace" in item.fixturenames for item in session.items):
        session.stash[REPRO] = start_repro(mktemp("clone"))


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A session that ends before repro_workspace was read (-x, ^C, a deselecting -k) stops its `dvc repro`."""
    if REPRO in session.stash and session.stash[REPRO][1].poll() is None:
        os.killpg(session.stash[REPRO][1].pid, signal.SIGKILL)


@pytest.fixture
def started(request):
    """What the test's starts_early start returned at collection, or None (it runs the start itself then)."""
    return request.node.stash.get(STARTED, None)


def run(*args: str, cwd: Path, check: bool = True, module: bool = True) -> subprocess.CompletedProcess:
    """`python -m <args>` (or `python <script> ...` with module=False) in `cwd`; with check, a failure shows its output."""
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    done = subprocess.run([sys.executable, *(["-m"] if module else []), *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert not check or done.returncode == 0, f"{' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def small_params(params: dict) -> dict:
    """Every stage runs, each briefly: the pipeline's wiring is under test, not the models."""
    params["synthetic"].update(n_tickets=120, n_labeled_queries=40, n_enduser_queries=8, n_lay_queries=10)
    params["embedding"]["word2vec"]["epochs"] = 2
    params["embedding"]["char_blstm"]["epochs"] = 2
    params["topics"].update(n_topics=8, heldout=10)
    params["topics"]["docnade"]["epochs"] = 3
    params["topics"]["lda"].update(passes=2, particles=5)
    params["siamese"]["train"]["epochs"] = 2
    params["tune"].update(n_trials=4, epochs=2)
    # siamese.unlabelled too: the zero-shot reference `ticketsim select` always compares (training.shift)
    kept = ("15", "22", params["siamese"]["final"], params["siamese"]["unlabelled"])
    params["siamese"]["variants"] = {k: params["siamese"]["variants"][k] for k in kept}
    params["comparators"]["train"]["epochs"] = 1
    # Models this small train in less time than a worker process takes to start; the Siamese rows keep two workers,
    # so the pipeline's worker path runs through DVC (tests/test_siamese_rows.py compares one worker with two).
    params["topics"]["workers"] = params["comparators"]["workers"] = 1
    params["comparators"]["max_tokens"] = {"query": 10, "ticket": 40}
    return params


def clone(root: Path) -> Path:
    """The repo's tracked files (and new ones not yet committed) in `root`, as `git clone` gives them: no outputs."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout.split()
    for name in listed:
        if (REPO / name).is_file() and not name.startswith(OUTPUTS) and name != "dvc.lock":
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, root / name)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root


FAST_PATH = "=== register@default: a bundle, no table 5"     # said between the two commands when the fast path did so


def start_repro(root: Path) -> tuple[Path, subprocess.Popen, Path]:
    """`dvc repro register@default` (the README's fast path to the model to deploy) on a bare clone in `root` with small
    params, then, once it left a bundle and no table 5, `dvc repro` (the rest): in its own process group, its output in
    a file (a pipe that nobody reads until the first test needs the workspace would fill and stop it)."""
    repo = clone(root / "repo")
    assert not (root / "shared").exists()   # as on a user's machine: no SemEval files beside the clone
    params = small_params(yaml.safe_load((repo / "params.yaml").read_text()))
    assert set(params["datasets"]) == {"default"}, "the default datasets must need no file outside the repo"
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    dvc = f"{shlex.quote(sys.executable)} -m dvc"
    script = (f"{dvc} repro register@default && test -d models/default/bundle && test ! -e metrics/default/table5.json "
              f"&& echo '{FAST_PATH}' && {dvc} repro")
    with (root / "repro.log").open("w") as log:
        return repo, subprocess.Popen(script, shell=True, cwd=repo, stdout=log, stderr=subprocess.STDOUT,
                                      env={**os.environ, "DVC_NO_ANALYTICS": "1"}, start_new_session=True), root / "repro.log"


@pytest.fixture(scope="session")
def repro_workspace(request, tmp_path_factory) -> Path:
    repo, running, log = request.session.stash.get(REPRO, None) or start_repro(tmp_path_factory.mktemp("clone"))
    running.wait(timeout=3600)
    said = log.read_text()
    assert FAST_PATH in said and running.returncode == 0, said[-6000:]
    return repo


@pytest.fixture(scope="session")
def search_parts(tmp_path_factory):
    """The trained pieces of the tiny bundles the search tests build (tests/search_bundle.py), trained once."""
    from search_bundle import train_parts

    return train_parts(tmp_path_factory.mktemp("search-parts"))
