"""The speed goals the tests no longer assert (a wall-clock limit fails on busy cores, not on slow code), measured in
one run and printed beside their goals:

  generate   the embedded synthetic corpus (params' defaults, 1,000 tickets) is generated in under 2 s
  unreachable `ticketsim retrain` against a tracking server that is down fails (exit 2) before any training, within 30 s
  workers    two `ticketsim tune` workers on one SQLite study share the trials and finish them sooner than one worker

Each line: the figure, its goal, the ratio (below 1 meets the goal; for workers, the speed-up of two over one), and the
load average, since every figure moves with it. The behaviour itself stays in the tests (test_synthetic.py,
test_mlflow_server.py, test_tune.py).

Usage: python benchmarks/speed_goals.py [--only generate unreachable workers] [--trials 30]
"""
import argparse
import collections
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def load() -> str:
    return "load %.1f" % os.getloadavg()[0]


def generate_corpus() -> None:
    from ticketsim.config import SyntheticConfig
    from ticketsim.data.synthetic import generate

    started = time.perf_counter()
    corpus = generate(SyntheticConfig(), seed=1)
    seconds = time.perf_counter() - started
    print(f"generate: {corpus.tickets.height} tickets in {seconds:.2f} s; goal 2 s; ratio {seconds / 2:.2f} ({load()})")


def unreachable_server(folder: Path) -> None:
    from http_server import free_port
    from retrain_workspace import make_workspace

    uri = f"http://127.0.0.1:{free_port()}"       # nothing listens there
    ws = make_workspace(folder / "repo", tracking_uri=uri, remote=False)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "ticketsim.cli", "retrain"], cwd=ws.root, env=ws.env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    print(f"unreachable: `ticketsim retrain` exit {done.returncode} in {seconds:.1f} s (a new process); goal 30 s; "
          f"ratio {seconds / 30:.2f} ({load()})")


def two_workers(folder: Path, trials: int) -> None:
    from test_tune import make_params, make_problem

    from ticketsim.config import SyntheticConfig, TextConfig
    from ticketsim.data.synthetic import generate
    from ticketsim.text.tokenize import make_tokenizer, tokenize_corpus
    from ticketsim.tuning.rescore import with_rescore_vectors
    from ticketsim.tuning.tuner import run_study

    corpus = generate(SyntheticConfig(n_tickets=80, n_labeled_queries=40, pairs_per_query=3, n_enduser_queries=6), seed=0)
    tokens = tokenize_corpus(corpus, make_tokenizer(TextConfig(), corpus))
    seconds = {}
    for workers in (1, 2):
        params = make_params(folder / f"workers-{workers}", n_trials=trials)
        (folder / f"workers-{workers}").mkdir()
        problem = with_rescore_vectors(make_problem(params, corpus, tokens), params.tune)
        started = time.perf_counter()
        study = run_study(problem, params.tune, "bench", workers=workers)
        seconds[workers] = time.perf_counter() - started
        share = collections.Counter(t.user_attrs["worker"] for t in study.trials)
        print(f"workers: {workers} worker(s), {len(study.trials)} trials in {seconds[workers]:.1f} s, per worker "
              f"{sorted(share.values(), reverse=True)} ({load()})")
    print(f"workers: two over one, speed-up {seconds[1] / seconds[2]:.2f} (goal: above 1, and both workers ran trials)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", choices=("generate", "unreachable", "workers"),
                        default=("generate", "unreachable", "workers"))
    parser.add_argument("--trials", type=int, default=30, help="trials of the workers' study (default 30)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="speed-goals-") as scratch:
        if "generate" in args.only:
            generate_corpus()
        if "unreachable" in args.only:
            unreachable_server(Path(scratch))
        if "workers" in args.only:
            two_workers(Path(scratch), args.trials)


if __name__ == "__main__":
    main()
