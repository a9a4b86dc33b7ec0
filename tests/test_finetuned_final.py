"""A final that fine-tunes the encoder, the road where a GPU is (the rule picks `Fc+S+L-relpos` on SemEval there: F,
with zero-shot S kept beside it, docs/model.md): `siamese.final` names it, and the pipeline's tune, final, bundle,
index and register stages search, train, index and register it on the bare-clone pipeline's files. A tiny random
encoder stands in for MiniLM as F's start (`siamese.encoder.model`), so it takes seconds on 2 cores; docs/datasets.md
has the road's real figures."""
import json
import shutil

import mlflow
import pytest
import yaml
from benchmarks.common import edit_params, tiny_encoder
from conftest import run

from ticketsim.search.index import read_generation_manifest

pytestmark = pytest.mark.slow   # a copy of the session's bare-clone `dvc repro`, then its last five stages again

FINAL = "Fc+S+L-relpos"


def test_siamese_final_may_fine_tune_the_encoder_through_tune_final_bundle_index_and_register(repro_workspace, tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(repro_workspace, ws, ignore=lambda folder, names: ["tmp"] if folder.endswith(".dvc") else [])  # its locks
    start = tiny_encoder(tmp_path / "tiny", ["the pump leaks oil at the seal", "my printer jams in tray 2"] * 5, positions=256)

    def change(params: dict) -> None:
        params["siamese"]["final"] = FINAL
        params["siamese"]["encoder"]["model"] = str(start)
        params["tune"].update(n_trials=2, folds=3)   # folds: its least
    edit_params(ws, change)

    done = run("dvc", "repro", "register@default", cwd=ws).stdout
    ran = [line.split("'")[1] for line in done.splitlines() if line.startswith("Running stage")]
    assert ran == [f"{stage}@default" for stage in ("sources", "tune", "final", "bundle", "index", "register")], done[-3000:]

    tuned = yaml.safe_load((ws / "tuned/default.yaml").read_text())
    assert set(tuned["channels"]) == {"F", "S", "L"} and tuned["loss"] == "contrastive" and tuned["rel"] == "positive"
    assert json.loads((ws / "metrics/default/tune.json").read_text())["trials"]["complete"] == 2
    assert f"#{FINAL}-tuned" in json.dumps(json.loads((ws / "metrics/default/final.json").read_text()))
    # the index holds the tickets as the fine-tuned F encodes them (the tiny encoder's width) beside channel S's vectors
    before, after = (read_generation_manifest(w / "models/default/index") for w in (repro_workspace, ws))
    assert {b["channel"] for b in after["layout"]["blocks"]} == {"F", "S"} and "F" not in {b["channel"] for b in before["layout"]["blocks"]}
    width = before["dim"] // len(before["layout"]["blocks"])     # each block of the registered adapter is S's width
    assert after["dim"] == 16 + width and after["model_hash"] != before["model_hash"]   # F at the tiny encoder's 16
    # a query reads both encoders without torch: the bundle stage exported the fine-tuned one beside S
    assert "runs without torch" in done and (ws / "models/default/bundle/query/encoder-F/model.onnx").is_file()
    client = mlflow.MlflowClient(f"sqlite:///{ws / 'mlflow.db'}")
    versions = sorted(client.search_model_versions("name='ticketsim-siamese-default'"), key=lambda v: int(v.version))
    assert [int(v.version) for v in versions] == [1, 2] and client.get_run(versions[-1].run_id).data.tags.get("variant") == FINAL
