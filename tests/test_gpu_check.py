"""benchmarks/gpu_check.py runs where only torch, transformers, sentence-transformers and numpy are installed: here,
tiny, in a process where polars, MLflow, DVC and the project's other heavy imports cannot load; and the commands the
docs show for it run as shown: the float16 copy of MiniLM, and the check, smaller, on a tiny encoder's copy."""
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from benchmarks.common import tiny_encoder
from benchmarks.encoding import half_copy
from test_device import ABSENT

REPO = Path(__file__).resolve().parents[1]
HALF = "python -m benchmarks.encoding half minilm-fp16"
CHECK = "python -m benchmarks.gpu_check minilm-fp16 --pairs 3000 --passages 100000 --cpu-passages 2000"


def bare(command: str) -> subprocess.CompletedProcess:
    """`python -m benchmarks.<module> args` run with polars, MLflow, DVC and the rest of ABSENT unimportable."""
    module, *args = command.split()[2:]
    blocked = "; ".join(f"sys.modules[{name!r}] = None" for name in ABSENT)
    code = (f"import runpy, sys; {blocked}; sys.argv = {[module, *args]!r}; "
            f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=REPO)


def smaller(folder: Path, pairs: int, passages: int, cpu_passages: int) -> str:
    """The documented check on `folder` with fewer pairs and passages."""
    return (CHECK.replace("minilm-fp16", str(folder)).replace("--pairs 3000", f"--pairs {pairs}")
            .replace("--passages 100000", f"--passages {passages}").replace("--cpu-passages 2000", f"--cpu-passages {cpu_passages}"))


def check_output(done: subprocess.CompletedProcess, pairs: int, passages: int) -> None:
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert any(line.startswith(f"cpu: F epoch of {pairs} pairs ") and f"{passages} passages at" in line for line in lines), done.stdout
    if torch.cuda.is_available():
        assert any(line.startswith("cuda vs cpu vectors: largest absolute difference") for line in lines), done.stdout
    else:
        assert "cuda: skipped, torch sees no CUDA device here" in lines, done.stdout


def test_a_float16_copy_of_an_encoder_is_half_its_size_near_its_vectors_and_checked_bare(tmp_path):
    folder = tiny_encoder(tmp_path / "tiny", ["the pump leaks oil at the seal", "my printer jams in tray 2"] * 5, positions=256)
    size, difference = half_copy(str(folder), tmp_path / "half")
    weights = (folder / "model.safetensors").stat().st_size
    assert 0.4 * weights < (tmp_path / "half" / "model.safetensors").stat().st_size < 0.6 * weights and size > 0
    assert difference < 1e-2
    check_output(bare(smaller(tmp_path / "half", 24, 10, 6)), 24, 6)


@pytest.mark.slow
def test_the_documented_commands_copy_minilm_as_float16_and_check_it(tmp_path):
    copy = tmp_path / "minilm-fp16"
    done = subprocess.run([sys.executable, *HALF.replace("minilm-fp16", str(copy)).split()[1:]], capture_output=True, text=True,
                          cwd=REPO)
    assert done.returncode == 0 and "MB, float16 weights; vectors within" in done.stdout, done.stderr[-3000:]
    assert 40e6 < (copy / "model.safetensors").stat().st_size < 50e6   # the check on a copy: the test above, on a tiny one
