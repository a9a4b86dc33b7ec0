"""benchmarks/suite_cpu.py, on a pytest run of its own: a test's CPU is its own or its subprocesses', and a process
started at collection is counted outside every test (docs/testing.md#time)."""
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BURN = "sum(i * i for i in range(2 * 10**6))"
SESSION = f'''
import subprocess, sys
def test_burns_in_a_child():
    subprocess.run([sys.executable, "-c", "{BURN}"], check=True)
def test_burns_here():
    {BURN}
'''
CONFTEST = f'''
import subprocess, sys
def pytest_configure(config):
    config.early = subprocess.Popen([sys.executable, "-c", "{BURN}"])   # as conftest starts its jobs at collection
def pytest_unconfigure(config):
    config.early.wait()
'''


def rows(out: str, title: str) -> dict[str, list[str]]:
    """A printed table's rows by their last cell."""
    block = out.split(title, 1)[1].split("\n\n")[1]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in block.splitlines()[2:]]
    return {row[-1]: row[:-1] for row in cells}


@pytest.mark.slow   # a pytest run inside the test: 28 s at load 4
def test_a_tests_cpu_is_its_own_or_its_subprocesses_and_collection_jobs_are_outside_every_test(tmp_path):
    (tmp_path / "test_session.py").write_text(SESSION)
    (tmp_path / "conftest.py").write_text(CONFTEST)
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "suite_cpu.py"), "-q", "-p", "no:cacheprovider"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "exit 0, 2 tests" in done.stdout
    tests = rows(done.stdout, "Tests by CPU, s")
    own, started = (float(v) for v in tests["test_session.py::test_burns_in_a_child"][1:3])
    assert started > 0.05 and own < started
    own, started = (float(v) for v in tests["test_session.py::test_burns_here"][1:3])
    assert own > 0.05 and started == 0
    outside = rows(done.stdout, "Processes outside any test, by command, s")
    assert float(outside["python -c (a spawned worker, or code)"][0]) > 0.05
