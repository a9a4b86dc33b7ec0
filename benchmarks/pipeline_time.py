"""The pipeline's time, the working tree beside a baseline revision in one run, each side in one clean clone: `dvc repro`
of the fast path from nothing, then of the rest, then again with nothing to do, with each stage's seconds within those
runs; each stage's process again on its own (what a process costs around its work: interpreter, imports, params, the
MLflow run); the speed goals no test asserts (a wall-clock limit fails on busy cores, not on slow code). Apart: the
test suite's CPU, per test and per process.

    python -m benchmarks.pipeline_time repro [--baseline main] [--small | --params FILE] [--fast-target register@default]
                                             [--stages 2] [--goals] [--workdir DIR]
    python -m benchmarks.pipeline_time suite [pytest arguments]     e.g. suite -m "not slow"

repro: a clone is the revision's tracked files without outputs or dvc.lock (benchmarks.common.clone; for the working
tree its new files too), its own src/ on PYTHONPATH and its own MLflow and Optuna files. --small gives every stage the
tests' small params (benchmarks.common.small_params: each stage's own work a fraction of a second, so a stage's time is
its process's cost), --params FILE a params.yaml of your own; the figures are then not the pipeline's. The baseline
goes first; a busy machine slows both, so compare ratios. The whole default pipeline takes about 25 minutes per side on
2 cores. --stages N: each stage's command (from dvc.lock) and `ticketsim --help` again N times, the fastest counted.
--goals: the default synthetic corpus generated (goal: 2 s); `ticketsim retrain` against a tracking server that is
down fails before any training (exit 2, goal: 30 s); `ticketsim tune` with two workers on one study against one, each
study its own (goal: faster).

suite: a pytest run (the whole suite, or any selection) with the CPU of every test (getrusage around it in its worker:
itself and the children it reaped) and of every Python process (each logs its own when it exits, through a
`sitecustomize` put first on PYTHONPATH, with the test that ran when it started); the costliest printed. On 2 cores the
suite's wall time follows its CPU. A process killed by a signal logs nothing, nor one started with a PYTHONPATH of its
own: the run's total (every descendant pytest reaped) counts them anyway.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import yaml

from benchmarks.common import PARAMS_FILES, REPO, RESEARCH, clone, cold, edit_params, free_port, load_average, small_params, table

WORKING_TREE = "working tree"


# ------------------------------------------------------------------------------------------------------------ repro
def side(revision: str | None, root: Path, params: str) -> Path:
    """A clean clone of `revision` (None: the working tree) with `params`: 'own', 'small' or a params.yaml's path."""
    repo = clone(root, revision)
    if params == "small":
        edit_params(repo, small_params)
    elif params != "own":       # with the params-research.yaml beside it, where there is one
        for source in (Path(params), Path(params).with_name(RESEARCH)):
            if source.is_file():
                shutil.copy2(source, repo / source.name)
    return repo


def environment(repo: Path, **more: str) -> dict[str, str]:
    """The side's own package first on the path; no tracking server or URI of the caller's leaks in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "TICKETSIM_"))}
    return {**env, "PYTHONPATH": str(repo / "src"), "DVC_NO_ANALYTICS": "1", "HF_HUB_OFFLINE": "1", **more}


def shell(command: str, repo: Path, **env: str):
    """`command` through the shell in the clone: common.Cold; a failure stops the benchmark."""
    done = cold(["bash", "-c", command], env=environment(repo, **env), cwd=repo)
    if done.code:
        sys.exit(f"{command} failed in {repo}:\n{done.output[-4000:]}")
    return done


# Each line of dvc's output as it comes, after the seconds since the stamper started: when each stage began.
STAMP = "import sys, time\nfor line in sys.stdin: print(f'{time.perf_counter():.2f} {line}', end='', flush=True)"
STAGE_START = re.compile(r"^(\d+\.\d+) Running stage '([^']+)'", flags=re.MULTILINE)


def repro(repo: Path, target: str = "") -> tuple[float, dict[str, float]]:
    """Seconds of `dvc repro [target]`, and of each stage it ran (stage_times)."""
    python = shlex.quote(sys.executable)
    done = shell(f"set -o pipefail; {python} -m dvc repro {target} 2>&1 | {python} -u -c {shlex.quote(STAMP)}", repo)
    return done.seconds, stage_times(done.output)


def stage_times(stamped: str) -> dict[str, float]:
    """Each stage's seconds in a stamped `dvc repro` output: from its start to the next one's, the last to the last line."""
    starts = [(float(t), name) for t, name in STAGE_START.findall(stamped)]
    end = float(stamped.strip().splitlines()[-1].split(" ", 1)[0]) if starts else 0.0
    return {name: round(after - t, 1) for (t, name), after in zip(starts, [t for t, _ in starts[1:]] + [end])}


def stage_commands(repo: Path) -> dict[str, str]:
    """Each stage's command as dvc.lock has it (every stage of the matrix, expanded)."""
    return {name: stage["cmd"] for name, stage in yaml.safe_load((repo / "dvc.lock").read_text())["stages"].items()}


def stage_seconds(repo: Path, repeat: int) -> dict[str, float]:
    """The fastest of `repeat` runs of `ticketsim --help` and of each stage's command, in the clone after its repro."""
    commands = {"ticketsim --help": f"{shlex.quote(sys.executable)} -m ticketsim.cli --help", **stage_commands(repo)}
    return {name: min(shell(command, repo).seconds for _ in range(repeat)) for name, command in commands.items()}


def goals(repo: Path, trials: int) -> list[tuple[str, str, str]]:
    """(goal, measured, ratio to the goal) of each speed goal, in the clone after its repro."""
    python = shlex.quote(sys.executable)
    generate = shell(f"{python} -c 'import time; from ticketsim.config import SyntheticConfig; from ticketsim.data.synthetic "
                     f"import generate; t = time.perf_counter(); generate(SyntheticConfig(), seed=1); print(time.perf_counter() - t)'",
                     repo)
    seconds = float(generate.output.split()[-1])
    rows = [("the default synthetic corpus generated in 2 s", f"{seconds:.2f} s", f"{seconds / 2:.2f}")]
    down = cold([sys.executable, "-m", "ticketsim.cli", "retrain"], cwd=repo,
                env=environment(repo, TICKETSIM_TRACKING_URI=f"http://127.0.0.1:{free_port()}"))   # nothing listens there
    rows.append(("`ticketsim retrain`, tracking server down: exit 2 within 30 s", f"exit {down.code} in {down.seconds:.1f} s",
                 f"{down.seconds / 30:.2f}"))
    took = {}
    for workers in (1, 2):
        folder = repo / f"goals-{workers}"      # both params files, and a study of its own each
        folder.mkdir()
        for name in PARAMS_FILES:
            shutil.copy2(repo / name, folder / name)
        edit_params(folder, lambda p: p["tune"].update(n_trials=trials, storage=f"sqlite:///{folder}/study.db"))
        took[workers] = shell(f"{python} -m ticketsim.cli tune default --workers {workers} --params {folder}/params.yaml "
                              f"--out {folder}/tuned.yaml --metrics {folder}/tune.json --plots {folder}/plots", repo).seconds
    rows.append((f"`ticketsim tune`, {trials} trials: two workers faster than one", f"{took[1]:.1f} s / {took[2]:.1f} s",
                 f"speed-up {took[1] / took[2]:.2f}"))
    return rows


def measure(revision: str | None, args: argparse.Namespace, workdir: Path) -> dict:
    label = revision or WORKING_TREE
    repo = side(revision, workdir / re.sub(r"\W+", "-", label), args.params)
    found = {"fast": repro(repo, args.fast_target), "rest": repro(repo), "no-op": repro(repo)}
    for name, (seconds, ran) in found.items():
        print(f"{label}: {name} {seconds:.1f} s, {len(ran)} stages", flush=True)
    found["stages"] = stage_seconds(repo, args.stages) if args.stages else {}
    found["goals"] = goals(repo, args.trials) if args.goals else []
    return found


def print_repro(sides: dict[str, dict], args: argparse.Namespace) -> None:
    names = list(sides)
    ratio = lambda key, f: f"{f(sides[names[-1]][key]) / f(sides[names[0]][key]):.2f}" if len(names) > 1 else "-"  # noqa: E731
    rows = [(label, *(f"{s[key][0]:.1f} s ({len(s[key][1])} stages)" for s in sides.values()), ratio(key, lambda v: v[0]))
            for key, label in (("fast", f"fast path: dvc repro {args.fast_target}"), ("rest", "the rest: dvc repro"),
                               ("no-op", "no-op: dvc repro, nothing changed"))]
    print(f"\nparams: {args.params}; load average at the end: {load_average()}\n")
    print(table(("dvc repro", *names, "after / before"), rows))
    ran = {label: {**s["fast"][1], **s["rest"][1]} for label, s in sides.items()}   # sources (always changed): the rest's
    print("\nseconds of each stage within those runs (the fast path's, then the rest's)\n")
    print(table(("stage", *names), [(stage, *(ran[label].get(stage, "-") for label in names))
                                    for stage in dict.fromkeys(n for r in ran.values() for n in r)]))
    if args.stages:
        stages = list(dict.fromkeys(name for s in sides.values() for name in s["stages"]))
        cell = lambda s, name: f"{s['stages'][name]:.1f}" if name in s["stages"] else "-"  # noqa: E731
        both = [n for n in stages if " " not in n and all(n in s["stages"] for s in sides.values())]    # stages only
        sums = {label: sum(s["stages"][n] for n in both) for label, s in sides.items()}
        print(f"\nseconds, the fastest of {args.stages}\n")
        print(table(("stage", *names, "after / before"),
                    [(name, *(cell(s, name) for s in sides.values()),
                      ratio("stages", lambda v, name=name: v[name]) if name in both else "-") for name in stages]
                    + [(f"sum of the {len(both)} stages every side has", *(f"{v:.1f}" for v in sums.values()),
                        f"{sums[names[-1]] / sums[names[0]]:.2f}" if len(names) > 1 else "-")]))
    for label, found in sides.items():
        if found["goals"]:
            print(f"\nspeed goals, {label}\n")
            print(table(("goal", "measured", "ratio"), found["goals"]))


# ------------------------------------------------------------------------------------------------------------ suite
PROCESS_HOOK = '''
import atexit, json, os, resource, sys

def _log_cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    record = {"test": os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0], "argv": sys.argv[:3],
              "pytest": "_pytest" in sys.modules, "cpu": usage.ru_utime + usage.ru_stime}
    with open(os.environ["SUITE_CPU_PROCESSES"], "a") as log:
        log.write(json.dumps(record) + "\\n")

atexit.register(_log_cpu)
'''
TEST_PLUGIN = '''
import json, os, resource, time
import pytest

def _cpu(who):
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    own, children, started = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN), time.perf_counter()
    yield
    record = {"test": item.nodeid, "wall": time.perf_counter() - started, "own": _cpu(resource.RUSAGE_SELF) - own,
              "children": _cpu(resource.RUSAGE_CHILDREN) - children}
    with open(os.environ["SUITE_CPU_TESTS"], "a") as log:
        log.write(json.dumps(record) + "\\n")
'''


@dataclass(frozen=True)
class SuiteCPU:
    code: int                       # pytest's exit status
    wall: float
    cpu: float                      # every descendant pytest reaped
    tests: list[dict]               # test, wall, own (CPU in its process), children (in the processes it started)
    outside: dict[str, float]       # CPU of the processes started outside any test (at collection), by command


def process_name(argv: list[str]) -> str:
    """A process's short name: its script (a stage, a benchmark, dvc, ticketsim) or module, and first argument."""
    if not argv or argv[0] in ("-c", ""):
        return "python -c (a spawned worker, or code)"
    script = Path(argv[0])
    name = f"{script.parent.name}/{script.name}" if script.parent.name in ("stages", "benchmarks") else script.name
    return " ".join([name, *argv[1:2]])


def suite_cpu(pytest_args: list[str], cwd: Path | None = None) -> SuiteCPU:
    """`python -m pytest pytest_args` in `cwd`, every test's and every Python process's CPU recorded."""
    with tempfile.TemporaryDirectory(prefix="suite-cpu-") as scratch:
        folder = Path(scratch)
        (folder / "sitecustomize.py").write_text(PROCESS_HOOK)
        (folder / "suite_cpu_plugin.py").write_text(TEST_PLUGIN)
        logs = {"SUITE_CPU_PROCESSES": folder / "processes.jsonl", "SUITE_CPU_TESTS": folder / "tests.jsonl"}
        pythonpath = os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH", "")) if p)
        inherited = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}   # run from inside a test
        env = {**inherited, "PYTHONPATH": pythonpath, **{k: str(v) for k, v in logs.items()}}
        before, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        code = subprocess.run([sys.executable, "-m", "pytest", "-p", "suite_cpu_plugin", *pytest_args], env=env, cwd=cwd).returncode
        wall, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_CHILDREN)
        processes, tests = ([json.loads(line) for line in log.read_text().splitlines()] if log.is_file() else []
                            for log in logs.values())
    outside: dict[str, float] = defaultdict(float)
    for p in processes:     # started by no test, less pytest and its xdist workers (their CPU in tests is the tests')
        if not p["test"] and not p["pytest"]:
            outside[process_name(p["argv"])] += p["cpu"]
    total = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return SuiteCPU(code, wall, total, tests, dict(outside))


def print_suite(found: SuiteCPU, pytest_args: list[str], top: int = 15) -> None:
    own, children = sum(t["own"] for t in found.tests), sum(t["children"] for t in found.tests)
    files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for t in found.tests:
        files[t["test"].split("::")[0]][0] += t["own"] + t["children"]
        files[t["test"].split("::")[0]][1] += t["wall"]
    print(f"pytest {' '.join(pytest_args)}: exit {found.code}, {len(found.tests)} tests, {found.wall:.0f} s wall, "
          f"{found.cpu:.0f} s CPU ({found.cpu / found.wall:.2f} cores)")
    print(f"inside tests: {own:.0f} s in the test processes, {children:.0f} s in the processes they started; outside any "
          f"test (the jobs started at collection): {sum(found.outside.values()):.0f} s; the rest (collection, start-up, "
          f"processes that logged nothing): {found.cpu - own - children - sum(found.outside.values()):.0f} s")
    tests = sorted(found.tests, key=lambda t: t["own"] + t["children"], reverse=True)[:top]
    print("\nTests by CPU, s\n\n" + table(("test", "CPU", "own", "started", "wall"), [
        (t["test"], f"{t['own'] + t['children']:.1f}", f"{t['own']:.1f}", f"{t['children']:.1f}", f"{t['wall']:.1f}") for t in tests]))
    print("\nFiles by CPU, s\n\n" + table(("file", "CPU", "wall"), [
        (name, f"{cpu:.1f}", f"{wall:.1f}") for name, (cpu, wall) in sorted(files.items(), key=lambda f: -f[1][0])[:top]]))
    print("\nProcesses outside any test, by command, s\n\n" + table(("command", "CPU"), [
        (name, f"{cpu:.1f}") for name, cpu in sorted(found.outside.items(), key=lambda p: -p[1])[:top]]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 2)[2])
    commands = parser.add_subparsers(dest="command", required=True)
    timing = commands.add_parser("repro", help="dvc repro, stage processes and speed goals in a clean clone per side")
    timing.add_argument("--baseline", help="a revision to compare with (default: none, the working tree alone)")
    chosen = timing.add_mutually_exclusive_group()
    chosen.add_argument("--small", dest="params", action="store_const", const="small", default="own",
                        help="the tests' small params on both sides")
    chosen.add_argument("--params", help="a params.yaml (and the params-research.yaml beside it) for both sides "
                        "instead of each side's own")
    timing.add_argument("--fast-target", default="register@default", help="the fast path's dvc repro target")
    timing.add_argument("--stages", type=int, default=0, help="runs of each stage's process on its own (0: none)")
    timing.add_argument("--goals", action="store_true", help="the speed goals, after the repro")
    timing.add_argument("--trials", type=int, default=30, help="the goals' tune trials")
    timing.add_argument("--workdir", type=Path, help="where the clones go (default: a temporary folder, removed after)")
    commands.add_parser("suite", help="a pytest run with its CPU per test and per process; the rest goes to pytest")
    args, rest = parser.parse_known_args()
    if args.command == "suite":
        found = suite_cpu(rest)
        print_suite(found, rest)
        return found.code
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.params not in ("own", "small"):
        args.params = str(Path(args.params).resolve())
    with tempfile.TemporaryDirectory(prefix="pipeline-time-") as scratch:
        workdir = args.workdir or Path(scratch)
        sides = {f"{args.baseline} ({git_short(args.baseline)})": measure(args.baseline, args, workdir)} if args.baseline else {}
        sides[WORKING_TREE] = measure(None, args, workdir)
    print_repro(sides, args)
    return 0


def git_short(revision: str) -> str:
    return subprocess.run(["git", "rev-parse", "--short", revision], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()


if __name__ == "__main__":
    sys.exit(main())
