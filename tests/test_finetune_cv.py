"""benchmarks/finetune_cv.py as docs/model.md shows it, smaller: pack the bare-clone pipeline's prepared corpus and
tokens, run select's cross-validation from the pickle with a tiny random encoder (F's rows then train on it), and merge
the per-seed reports with `ticketsim select --merge`."""
import json

import pytest
from benchmarks.common import tiny_encoder
from conftest import REPO, run
from test_docs_commands import COMMANDS

PACK = "python benchmarks/finetune_cv.py pack default prepared.pkl --variants Szs+L A+L F+L Fc+L"
RUN = "python benchmarks/finetune_cv.py run prepared.pkl minilm-fp16 --seeds 0 1 2 --folds 5 --out cv"
MERGE = "ticketsim select --merge cv/seed0.json cv/seed1.json cv/seed2.json"


@pytest.mark.slow
def test_pack_run_and_merge_give_one_select_report(repro_workspace, tmp_path):
    assert all(COMMANDS[command].startswith("run by tests/test_finetune_cv.py") for command in (PACK, RUN, MERGE))
    packed = tmp_path / "prepared.pkl"
    run(str(REPO / "benchmarks/finetune_cv.py"), "pack", "default", str(packed), "--variants", "Szs+L", "Fc+L",
        cwd=repro_workspace, module=False)
    encoder = tiny_encoder(tmp_path / "tiny", ["the pump leaks oil at the seal", "my printer jams in tray 2"] * 5, positions=256)
    out = tmp_path / "cv"
    done = run(str(REPO / "benchmarks/finetune_cv.py"), "run", str(packed), str(encoder), "--seeds", "0", "1", "--folds", "3",
               "--out", str(out), "--resamples", "200", cwd=tmp_path, module=False)
    assert "| Fc+L |" in done.stdout and "| BM25 |" in done.stdout, done.stdout[-2000:]
    merged = run("ticketsim.cli", "select", "--merge", str(out / "seed0.json"), str(out / "seed1.json"), "--out",
                 str(tmp_path / "merged.json"), "--resamples", "200", cwd=tmp_path)
    report = json.loads((tmp_path / "merged.json").read_text())
    assert report["cv_seeds"] == [0, 1] and set(report["configurations"]) == {"Szs+L", "Fc+L", "BM25", "S#14 zero-shot (cosine)"}
    assert len(report["configurations"]["Fc+L"]["cv_map"]["values"]) == 6      # 3 folds x 2 seeds
    assert "| Fc+L | Szs+L |" in merged.stdout
