"""What the benchmarks compute (benchmarks/), on tiny data: an index tiled to any size by its own writer, a cold search's
own cost, `index add`, a graph's recall against the exact search, the page's figures under concurrent clients and a
server's memory, channel S per backend and what it does to a ranking, a small clean clone and its stage commands, and
the suite's CPU per test and per process."""
import http.server
import importlib.util
import os
import re
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from benchmarks import approximate, encoding, index_writes, ingest, lexical_engines, pipeline_time, search_scale, shards
from benchmarks.common import REPO, alternate, end_user_queries, make_bundle, page_load, percentiles, tile, tiny_encoder

from ticketsim.bundle.loader import Scorer
from ticketsim.config import SyntheticConfig, load_params
from ticketsim.search.index import TicketIndex, build_index, model_hash

TEXTS = ["pump leaking oil at the seal", "printer jams in tray 2", "vpn drops every ten minutes", "server disk full"]


def test_p50_and_p95_and_sides_taken_in_turns_after_one_untimed_run_each():
    assert percentiles([i / 100 for i in range(100, 0, -1)]) == (0.505, 0.95)
    calls = []
    found = alternate({side: lambda side=side: calls.append(side) or len(calls) for side in "ab"}, 2)
    assert calls == ["a", "b"] * 3 and found == {"a": [3, 5], "b": [4, 6]}


# ------------------------------------------------------------------------------------------------------ search_scale
@pytest.fixture(scope="module")
def tiny_index(search_parts, tmp_path_factory):
    """A bundle of h, E and T (no sentence encoder to load) and its index of the 80 tickets."""
    root = tmp_path_factory.mktemp("tiny-index")
    bundle = make_bundle(root / "bundle", search_parts, "22")
    build_index(Scorer.load(bundle), model_hash(bundle), search_parts.corpus.tickets, root / "index")
    return bundle, root / "index"


def test_an_index_tiled_by_its_writer_holds_its_tickets_again_under_new_ids_near_their_vectors_and_answers(tiny_index, tmp_path):
    bundle, index = tiny_index
    assert tile(index, 200, tmp_path / "tiled", np.random.default_rng(0)) > 0
    base, tiled = TicketIndex.load(index), TicketIndex.load(tmp_path / "tiled")
    ids, first = tiled.tickets["ticket_id"].to_list(), base.tickets["ticket_id"].to_list()
    assert len(tiled) == 200 and len(set(ids)) == 200
    assert ids[:80] == first and ids[80] == f"{first[0]}~1" and ids[199] == f"{first[39]}~2"
    original, copies = (np.asarray(i.vectors.take(range(len(i))), np.float32) for i in (base, tiled))
    nearest = np.median(base.vectors.search(original, 2)[0][:, 1])
    # two copies as far apart as a ticket from its nearest neighbour: a copy from its ticket about 1 / sqrt(2) of that
    assert 0.4 * nearest < np.median(np.abs(copies[80:160] - original).sum(1)) < nearest
    assert search_scale.disk_bytes(tmp_path / "tiled")["vectors.npy"] >= 200 * tiled.vectors.d * np.dtype(tiled.vectors.precision).itemsize
    seconds = search_scale.warm_seconds(bundle, tmp_path / "tiled", end_user_queries(3))
    assert len(seconds) == 3 and min(seconds) > 0
    lexical = search_scale.lexical_seconds(bundle, tmp_path / "tiled", end_user_queries(3))    # stops if top 10s differ
    assert {way: len(times) for way, times in lexical.items()} == {"every": 3, "pruned": 3}


# ------------------------------------------------------------------------------------------------------- approximate
def test_the_approximate_benchmark_sets_a_graphs_recall_and_time_beside_the_exact_search(tiny_index, monkeypatch, capsys):
    bundle, index = tiny_index
    monkeypatch.setattr(sys, "argv", ["approximate", "--model", str(bundle), "--index", str(index), "--sizes", "300",
                                      "--breadths", "2", "64", "--queries", "6", "--add", "40"])
    approximate.main()
    printed = capsys.readouterr().out
    rows = {size: [line.split(" | ") for line in printed.splitlines() if line.startswith(f"| {size} | ")]
            for size in ("80 (its own)", "300 (tiled)")}
    for size, (built, *walked) in rows.items():     # the graph's build, then one row per breadth
        assert float(built[4]) > 0 and float(built[3].replace(",", "")) > TicketIndex.load(index).vectors.d * 4  # a float32 copy
        recalls = {int(cells[1]): (float(cells[2]), float(cells[3])) for cells in walked}
        assert set(recalls) == {2, 64} and recalls[64][0] >= 0.9 and 0 <= recalls[2][0] <= recalls[64][0] <= recalls[64][1]
    assert "float16 vectors against float32 on the 80 tickets:" in printed and "of 6 top 10s in the same order" in printed


# ------------------------------------------------------------------------------------------------------ index_writes
def test_the_writes_benchmark_adds_only_a_segment_deletes_and_compacts_at_each_size_and_prints_the_ratios(
        tiny_index, monkeypatch, capsys):
    bundle, index = tiny_index
    monkeypatch.setattr(sys, "argv", ["index_writes", "--model", str(bundle), "--index", str(index), "--sizes", "100", "400",
                                      "--add", "20", "--delete", "30"])
    index_writes.main()
    out = capsys.readouterr().out
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]] for line in out.splitlines()
            if line.startswith("| ") and line.split("|")[1].strip() in ("100", "400")}
    assert set(rows) == {"100", "400"} and all(min(map(float, r[1:5])) > 0 and r[6] == "2" for r in rows.values())
    written = {n: int(r[5].replace(",", "")) for n, r in rows.items()}
    assert 0 < written["400"] < 1.5 * written["100"]      # the new tickets' segment, not a copy of the 400
    ratio = r"takes \d+\.\d\dx the time"
    assert re.search(rf"400 / 100 tickets: the append {ratio}, the add {ratio}, the compact {ratio}, the delete {ratio}$", out.strip())


# ------------------------------------------------------------------------------------------------------------ shards
def test_the_shards_benchmark_sets_the_shards_beside_the_whole_index_and_their_top_10s_equal_its(search_parts, tmp_path,
                                                                                               monkeypatch, capsys):
    bundle = make_bundle(tmp_path / "bundle", search_parts, "FL")     # with BM25: the shards read the summed counts
    build_index(Scorer.load(bundle), model_hash(bundle), search_parts.corpus.tickets, tmp_path / "index")
    monkeypatch.setattr(sys, "argv", ["shards", "--model", str(bundle), "--index", str(tmp_path / "index"), "--shards", "3",
                                      "--queries", "6"])
    shards.main()
    out = capsys.readouterr().out
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]] for line in out.splitlines()
            if line.startswith("| ") and line.split("|")[1].strip() in ("the whole index", "3 shards, here")}
    assert set(rows) == {"the whole index", "3 shards, here"} and all(r[2] == "6 of 6" for r in rows.values())
    assert "80 tickets in 3 shards" in out and re.search(r"3 shards, here: \d+\.\d\dx the whole index's p50$", out.strip())


# --------------------------------------------------------------------------------------------------- lexical_engines
def test_the_lexical_engines_benchmark_sets_the_postings_beside_the_installed_libraries(monkeypatch, capsys):
    docs = lexical_engines.documents(50, 30, np.random.default_rng(0))
    assert all(20 <= len(d) <= 120 for d in docs) and {w for d in docs for w in d} <= \
        {f"w{i}" for i in range(1, 31)} and sum(d.count("w1") for d in docs) > sum(d.count("w30") for d in docs)
    monkeypatch.setattr(sys, "argv", ["lexical_engines", "--tickets", "300", "--queries", "5", "--add", "20"])
    lexical_engines.main()
    printed = capsys.readouterr().out
    rows = {cells[0]: [float(c) for c in cells[1:]] for line in printed.splitlines() if line.startswith("| ")
            for cells in [[c.strip() for c in line.strip("|").split("|")]] if cells[1][:1].isdigit()}
    installed = [name for name in ("bm25s", "tantivy") if importlib.util.find_spec(name)]
    assert list(rows) == ["channels/bm25.py", *installed]      # write, open, every ticket, top 10, share, add
    assert all(v >= 0 for row in rows.values() for v in row)     # times, some under the 0.1 ms printed
    assert rows["channels/bm25.py"][4] == 1 and rows.get("bm25s", [1] * 5)[4] == 1   # the same BM25, in float32
    assert 0.5 <= rows.get("tantivy", [1] * 5)[4] <= 1                                # its lengths quantised
    assert all(f"{name} is not installed" in printed for name in {"bm25s", "tantivy"} - set(installed))


# ------------------------------------------------------------------------------------------------------------ ingest
@pytest.mark.slow   # three new processes that load torch and the bundle
def test_ingest_splits_a_builds_time_by_part_and_indexes_a_csv_then_adds_to_it(search_parts, tmp_path, monkeypatch, capsys):
    bundle = make_bundle(tmp_path / "bundle", search_parts, "SL")      # S on one level pair: MiniLM encodes every ticket
    monkeypatch.setattr(sys, "argv", ["ingest", "--model", str(bundle), "--tickets", "30", "--add", "4", "--profile", "8"])
    ingest.main()
    printed = capsys.readouterr().out
    assert "1 encoder pass(es) and 384 flat dims per ticket" in printed
    parts = {line.split(" | ")[0].strip("| "): float(line.split(" | ")[1]) for line in printed.splitlines()
             if line.startswith(("| channel S", "| tokens", "| the rest", "| all"))}
    assert parts["channel S: passages and encoding"] > 0 and parts["tokens"] >= 0      # 8 tickets: tokens in 0.0x s
    assert sum(s for name, s in parts.items() if name != "all") == pytest.approx(parts["all"], abs=0.3)   # printed to 0.1 s
    assert "| index build from a CSV (a new process) | 30 |" in printed and "not at the goal's size (100,000 tickets)" in printed
    assert "| 4 into 30 |" in printed and "| cold search of the result | 34 |" in printed     # index add grew the index
    search = next(line for line in printed.splitlines() if line.startswith("| cold search of the result"))
    cpu, peak_mb = (float(cell.replace(",", "")) for cell in search.split(" | ")[3:6:2])    # CPU s, peak RSS MB
    assert 0 < cpu and 100 < peak_mb < 8000        # its own, measured in the child (common.cold)


class Page(http.server.BaseHTTPRequestHandler):
    """Answers 200, or 500 to a query whose subject is 'fail'."""

    def do_GET(self):
        self.send_response(500 if "subject=fail" in self.path else 200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


def test_the_page_under_concurrent_clients_gives_requests_per_second_percentiles_and_errors():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        queries = [{"subject": "pump", "description": "hot"}] * 8 + [{"subject": "fail", "description": ""}] * 2
        found = page_load(f"http://127.0.0.1:{server.server_port}", queries, clients=3)
    finally:
        server.shutdown()
    assert found["errors"] == 2 and found["per_s"] > 0 and 0 < found["p50"] <= found["p95"]


def test_a_servers_memory_is_its_largest_workers_rss_and_the_pss_of_all_its_processes():
    worker = "import time; held = b'x' * (40 * 2**20); time.sleep(60)"
    code = f"import subprocess, sys, time; [subprocess.Popen([sys.executable, '-c', {worker!r}]) for _ in range(2)]; time.sleep(60)"
    master = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        deadline, found = time.monotonic() + 30, {"worker_rss": 0, "pss": 0}
        while not (found["worker_rss"] > 40e6 and found["pss"] > 80e6) and time.monotonic() < deadline:   # both workers hold theirs
            time.sleep(0.2)
            try:
                found = search_scale.server_memory(master.pid)
            except (ValueError, FileNotFoundError):     # no worker yet, or one still starting
                pass
    finally:
        os.killpg(master.pid, signal.SIGKILL)
        master.wait()
    assert 40e6 < found["worker_rss"] < 200e6 and found["pss"] > 80e6


# ---------------------------------------------------------------------------------------------------------- encoding
@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    pytest.importorskip("onnxruntime")
    return tiny_encoder(tmp_path_factory.mktemp("encoder") / "tiny", TEXTS * 20, positions=256)   # params' overlap fits


def test_every_backend_encodes_the_same_passages_and_onnx_float32_gives_torchs_vectors(encoder, tmp_path):
    other = tiny_encoder(tmp_path / "other", TEXTS * 20, seed=1, positions=256)
    rows, load, failed, first, others = encoding.speed_rows(["torch:1", "onnx:1", "int8:1", f"torch:1@{other}"], str(encoder),
                                                            str(tmp_path), "cpu")
    assert others == {f"torch, 1 thread, {other}"}
    sets = encoding.text_sets(first, 12, 3)
    assert len(sets["ticket passages"]) == 12 and len(sets["long passages"]) == 3 and not failed
    found = encoding.timed_rounds(rows, sets["ticket passages"], 2)
    torch_own = "torch, 1 thread"
    assert set(found) == {torch_own, f"{torch_own}, batches in the texts' order", f"{torch_own}, tokenizer alone", "onnx, 1 thread",
                          "int8, 1 thread", *others} and set(load) == {torch_own, "onnx, 1 thread", "int8, 1 thread", *others}
    assert all(wall > 0 and cpu > 0 for wall, cpu, _ in found.values())
    reference = found[torch_own][2]
    assert reference.shape == (12, 16) and found[f"{torch_own}, tokenizer alone"][2] is None
    assert encoding.gap(found[f"{torch_own}, batches in the texts' order"][2], reference)[0] < 1e-5   # the order changes no vector
    assert encoding.gap(found["onnx, 1 thread"][2], reference)[0] < 1e-4
    difference, cosine = encoding.gap(found["int8, 1 thread"][2], reference)
    assert 0 < difference and cosine > 0.9


def test_the_ranking_of_a_variant_is_torchs_with_s_from_the_float32_export(encoder):
    synthetic = SyntheticConfig(n_tickets=30, n_labeled_queries=12, pairs_per_query=3, n_enduser_queries=4, n_lay_queries=0)
    rows = encoding.ranking(load_params(REPO / "params.yaml"), synthetic, "Szs+L", 1, str(encoder))
    assert rows["onnx"]["map"] == pytest.approx(rows["torch"]["map"]) and 0 < rows["int8"]["map"] <= 1
    assert set(rows["int8"]["ap"]) == set(rows["torch"]["ap"]) and len(rows["torch"]["ap"]) > 0
    assert encoding.gap(rows["onnx"]["vectors"], rows["torch"]["vectors"])[0] < 1e-4


# ----------------------------------------------------------------------------------------------------- pipeline_time
def test_a_small_clean_clone_of_a_revision_has_no_outputs_and_small_params(tmp_path):
    repo = pipeline_time.side("HEAD", tmp_path / "clone", "small")
    assert (repo / "src/ticketsim/cli.py").is_file() and (repo / ".git").is_dir()
    assert not (repo / "dvc.lock").exists() and not (repo / "metrics").exists()
    params = load_params(repo / "params.yaml")       # with params-research.yaml, where the catalogue lives
    assert params.synthetic.n_tickets == 120 and params.tune.n_trials == 4
    commands = pipeline_time.stage_commands(REPO)       # the committed dvc.lock: every stage of the matrix, expanded
    assert commands["prepare@default"].startswith("python stages/prepare.py default")


def test_each_stage_runs_from_its_start_to_the_next_stage_start_and_the_last_to_the_last_line():
    stamped = ("0.50 Running stage 'sources@default':\n0.60 > python stages/sources.py\n2.00 \n"
               "2.25 Running stage 'prepare@default':\n9.75 Updating lock file 'dvc.lock'\n")
    assert pipeline_time.stage_times(stamped) == {"sources@default": 1.8, "prepare@default": 7.5}
    assert pipeline_time.stage_times("0.40 Data and pipelines are up to date.\n") == {}


def test_a_process_is_named_by_its_script_or_module_and_first_argument():
    assert pipeline_time.process_name(["/repo/stages/prepare.py", "default", "--x"]) == "stages/prepare.py default"
    assert pipeline_time.process_name(["/usr/bin/dvc", "repro", "x"]) == "dvc repro"
    assert pipeline_time.process_name(["-c"]) == "python -c (a spawned worker, or code)"


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


@pytest.mark.slow   # a pytest run inside the test: 28 s at load 4
def test_a_tests_cpu_is_its_own_or_its_subprocesses_and_collection_jobs_are_outside_every_test(tmp_path):
    (tmp_path / "test_session.py").write_text(SESSION)
    (tmp_path / "conftest.py").write_text(CONFTEST)
    found = pipeline_time.suite_cpu(["-q", "-p", "no:cacheprovider"], cwd=tmp_path)
    tests = {t["test"]: t for t in found.tests}
    assert found.code == 0 and set(tests) == {"test_session.py::test_burns_in_a_child", "test_session.py::test_burns_here"}
    child, here = tests["test_session.py::test_burns_in_a_child"], tests["test_session.py::test_burns_here"]
    assert child["children"] > 0.05 and child["own"] < child["children"]
    assert here["own"] > 0.05 and here["children"] == 0
    assert found.outside["python -c (a spawned worker, or code)"] > 0.05 and found.cpu >= child["children"] + here["own"]


def test_the_retrieval_cost_benchmark_times_both_cv_objectives_on_the_same_fold_models_and_trials(tmp_path):
    from benchmarks import retrieval_cost
    from conftest import tiny_corpus
    from test_tune import cv_params, cv_problem

    params = cv_params(tmp_path, folds=3)
    corpus, tokens = tiny_corpus(n_tickets=80, n_labeled_queries=40, n_enduser_queries=6)
    problem = cv_problem(params, corpus, tokens)
    weights = retrieval_cost.trial_weights(problem, 3)
    assert len({tuple(w.channels.values()) for w in weights}) == 3 and weights == retrieval_cost.trial_weights(problem, 3)
    figures = retrieval_cost.measure(problem, 3)
    assert set(figures) == {"cv_map", "cv_retrieve"} and all(v > 0 for f in figures.values() for v in f.values())
    table = retrieval_cost.table(figures, "tiny")
    assert "| per fold |" in table and "| per trial |" in table and table.count("x |") == 2
