"""benchmarks/gpu_check.py runs where only torch, transformers, sentence-transformers and numpy are installed: here,
tiny, in a process where polars, MLflow, DVC and the project's other heavy imports cannot load (issue 33)."""
import subprocess
import sys
from pathlib import Path

import torch
from test_device import ABSENT
from tiny_encoder import tiny_encoder

REPO = Path(__file__).resolve().parents[1]


def test_gpu_check_runs_bare_and_prints_its_figures(tmp_path):
    folder = tiny_encoder(tmp_path / "tiny", ["the pump leaks oil at the seal", "my printer jams in tray 2"] * 5, positions=256)
    blocked = "; ".join(f"sys.modules[{name!r}] = None" for name in ABSENT)
    script = (f"import runpy, sys; {blocked}; sys.argv = ['gpu_check.py', {str(folder)!r}, '--pairs', '24', '--passages', '10']; "
              f"runpy.run_path({str(REPO / 'benchmarks' / 'gpu_check.py')!r}, run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert any(line.startswith("cpu: F epoch of 24 pairs ") and "10 passages at" in line for line in lines), done.stdout
    if torch.cuda.is_available():
        assert any(line.startswith("cuda vs cpu vectors: largest absolute difference") for line in lines), done.stdout
    else:
        assert "cuda: skipped, torch sees no CUDA device here" in lines, done.stdout
