"""The benchmarks of issue 33 items 3 and 4 at toy size: benchmarks/encode_backends.py (passages/s per backend),
benchmarks/int8_ranking.py (MAP per backend) on the tiny random encoder, benchmarks/million.py on a tiny bundle."""
import subprocess
import sys

import pytest
from benchmarks.common import make_bundle, tiny_encoder
from conftest import REPO

pytest.importorskip("onnxruntime")
TEXTS = ["pump leaking oil at the seal", "printer jams in tray 2", "vpn drops every ten minutes", "server disk full"]


def run(script: str, *args: str) -> str:
    done = subprocess.run([sys.executable, f"benchmarks/{script}", *args], capture_output=True, text=True, timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    return tiny_encoder(tmp_path_factory.mktemp("encoder") / "tiny", TEXTS * 20, positions=256)   # params' overlap fits


def table(output: str) -> dict[str, list[str]]:
    """First cell -> the other cells of each Markdown table row."""
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in output.splitlines() if line.startswith("| ")]
    return {row[0]: row[1:] for row in rows}


@pytest.mark.slow   # 38 s (and 24 s for the tiny encoder) at load 10
def test_encode_backends_prints_passages_per_second_of_each_backend(encoder, tmp_path):
    rows = table(run("encode_backends.py", "--passages", "12", "--rounds", "2", "--model", str(encoder), "--cache", str(tmp_path)))
    assert {"torch", "onnx", "onnx int8"} <= rows.keys()
    assert rows["torch"][1] == "1.00" and all(float(rows[name][0]) > 0 and float(rows[name][2]) > 0 for name in ("onnx", "onnx int8"))
    assert float(rows["onnx"][3]) < 1e-4     # the float32 export gives torch's vectors


@pytest.mark.slow   # 52 s at load 10: 350 queries and 30 tickets encoded three times
def test_int8_ranking_prints_map_and_the_paired_test_per_backend(encoder):
    rows = table(run("int8_ranking.py", "--tickets", "30", "--model", str(encoder)))
    assert rows["onnx"][0] == rows["torch"][0] and rows["torch"][2] == "-"     # float32: the same MAP
    assert 0 < float(rows["onnx int8"][0]) <= 1 and 0 < float(rows["onnx int8"][4]) <= 1     # MAP, p


@pytest.mark.slow   # a tiny bundle, a page started, index add as a new process: 570 s at load 20
def test_million_reports_every_stage_size_latency_and_add(search_parts, tmp_path):
    bundle = make_bundle(tmp_path / "bundle", search_parts, "22")    # h, E, T: no sentence encoder to load
    out = run("million.py", "--bundle", str(bundle), "--tickets", "500", "--measure", "20", "--queries", "3", "--requests", "6",
              "--clients", "3", "--workers", "1", "--add", "30")
    rows = table(out)
    tiled = "tiled and written by the index's writer (append, doubling)"
    assert {"table: tokens", "encoding: every channel, folded, topic activity", tiled, "vectors.npy", "tickets.arrow",
            "RSS after load (fresh process)"} <= rows.keys()
    assert "extrapolated" in rows["table: tokens"][1] and rows[tiled][1] == "measured at 500"
    assert "exact top 10, one query at a time" in out and "0 errors" in out
    assert "index add` of 30 tickets" in out and "exit 0: added 30 tickets" in out


@pytest.mark.slow   # a tiny bundle, its index tiled fivefold by the index's writer, cold searches, index add as a new process
def test_index_scale_compares_a_cold_search_of_an_index_and_of_it_tiled(search_parts, tmp_path):
    from ticketsim.bundle.loader import Scorer
    from ticketsim.search.index import build_index, model_hash

    bundle = make_bundle(tmp_path / "bundle", search_parts, "22")
    build_index(Scorer.load(bundle), model_hash(bundle), search_parts.corpus.tickets, tmp_path / "index")
    out = run("index_scale.py", "--model", str(bundle), "--index", str(tmp_path / "index"), "--tickets", "400", "--repeat", "1",
              "--requests", "0", "--add", "5")
    rows = table(out)
    assert rows["small"][0] == "80" and rows["large"][0] == "400"     # tiled by the writer to the size asked
    assert all(float(rows[side][1]) > 0 and float(rows[side][3]) > 0 for side in ("small", "large"))
    assert "exit 0: added 5 tickets" in out and "405 in all" in out
