"""Where the test suite's CPU goes: a pytest run (the whole suite, or any selection) with the CPU of every test and
of every Python process recorded, then the costliest printed.

    python benchmarks/suite_cpu.py [pytest arguments]        e.g. python benchmarks/suite_cpu.py -m "not slow"

On 2 cores the suite's wall time follows its CPU: the two xdist workers and the jobs conftest starts at collection
(the bare-clone `dvc repro`, the day-one quick start) keep both cores full, so a shorter suite means less CPU
somewhere. Three places: a test's own process, the processes a test starts and waits for (stages, servers,
benchmarks), and the jobs started at collection, which belong to no test. Each test's CPU is read by getrusage around
it in its worker (itself, and the children it reaped); each Python process logs its own CPU when it exits, through a
`sitecustomize` module put first on PYTHONPATH, with the test that ran when it started (PYTEST_CURRENT_TEST, which
subprocesses inherit), or none. A process killed by a signal logs nothing, nor one started with a PYTHONPATH of its
own: the run's total (every descendant pytest reaped) counts them anyway.
"""
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

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


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def command(argv: list[str]) -> str:
    """A process's short name: its script (a stage, a benchmark, dvc, ticketsim) and first argument."""
    if not argv or argv[0] in ("-c", ""):
        return "python -c (a spawned worker, or code)"
    script = Path(argv[0])
    name = f"{script.parent.name}/{script.name}" if script.parent.name in ("stages", "benchmarks") else script.name
    return " ".join([name, *argv[1:2]])


def table(title: str, rows: list[tuple], header: tuple[str, ...], top: int) -> None:
    print(f"\n{title}\n\n| {' | '.join(header)} |\n|{'|'.join(['---:'] * (len(header) - 1) + ['---'])}|")
    for row in rows[:top]:
        print("| " + " | ".join(f"{v:.1f}" if isinstance(v, float) else str(v) for v in row) + " |")


def main(pytest_args: list[str], top: int = 15) -> int:
    with tempfile.TemporaryDirectory(prefix="suite-cpu-") as scratch:
        folder = Path(scratch)
        (folder / "sitecustomize.py").write_text(PROCESS_HOOK)
        (folder / "suite_cpu_plugin.py").write_text(TEST_PLUGIN)
        logs = {"SUITE_CPU_PROCESSES": folder / "processes.jsonl", "SUITE_CPU_TESTS": folder / "tests.jsonl"}
        path = os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH", "")) if p)
        inherited = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}   # run from inside a test
        env = {**inherited, "PYTHONPATH": path, **{k: str(v) for k, v in logs.items()}}
        before, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        code = subprocess.run([sys.executable, "-m", "pytest", "-p", "suite_cpu_plugin", *pytest_args], env=env).returncode
        wall, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_CHILDREN)
        processes, tests = read(logs["SUITE_CPU_PROCESSES"]), read(logs["SUITE_CPU_TESTS"])

    total = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    own, children = sum(t["own"] for t in tests), sum(t["children"] for t in tests)
    # Outside every test: processes started by no test, less pytest and its xdist workers (their CPU inside the tests
    # is the tests' own; the rest is collection and start-up).
    outside = [p for p in processes if not p["test"] and not p["pytest"]]
    jobs: dict[str, float] = defaultdict(float)
    for p in outside:
        jobs[command(p["argv"])] += p["cpu"]
    files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for t in tests:
        files[t["test"].split("::")[0]][0] += t["own"] + t["children"]
        files[t["test"].split("::")[0]][1] += t["wall"]

    print(f"pytest {' '.join(pytest_args)}: exit {code}, {len(tests)} tests, {wall:.0f} s wall, {total:.0f} s CPU "
          f"({total / wall:.2f} cores)")
    print(f"inside tests: {own:.0f} s in the test processes, {children:.0f} s in the processes they started; "
          f"outside any test (the jobs started at collection): {sum(jobs.values()):.0f} s; "
          f"the rest (collection, start-up, processes that logged nothing): {total - own - children - sum(jobs.values()):.0f} s")
    table("Tests by CPU, s", sorted(((t["own"] + t["children"], t["own"], t["children"], t["wall"], t["test"]) for t in tests),
                                    reverse=True), ("CPU", "own", "started", "wall", "test"), top)
    table("Files by CPU, s", sorted(((cpu, wall, name) for name, (cpu, wall) in files.items()), reverse=True),
          ("CPU", "wall", "file"), top)
    table("Processes outside any test, by command, s", sorted(((cpu, name) for name, cpu in jobs.items()), reverse=True),
          ("CPU", "command"), top)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
