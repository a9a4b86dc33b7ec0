"""`ticketsim select --merge`: reports of seeds run side by side make the report of one run of every seed."""
import json
import subprocess
import sys

import numpy as np
import polars as pl
import pytest

from ticketsim.training import select_report as select_config
from ticketsim.training.selection import with_folds

SELECT = [sys.executable, "-m", "ticketsim.cli", "select"]

IDS = [f"Q{i:03d}" for i in range(40)]


def run(seed: int, offset: float) -> pl.DataFrame:
    """A per-query run of one seed: APs drawn by the seed (one query without a relevant candidate), its folds."""
    ap = np.clip(np.random.default_rng(seed).uniform(0.2, 1.0, len(IDS)) + offset, 0, 1).tolist()
    frame = pl.DataFrame({"query_id": IDS, "ap": [None] + ap[1:], "rr": ap, "acc@1": [1.0] * len(IDS)})
    return with_folds(frame, 5, seed)


def report(seeds: list[int]) -> dict:
    """What main() writes for these seeds: a trained configuration 3 points above an untrained baseline."""
    configurations = {"A+L": select_config.summary([run(s, 0.03) for s in seeds], [run(s, 0.03) for s in seeds], "trained", 10.0),
                      "BM25": select_config.summary([run(s, 0.0) for s in seeds], [run(0, 0.0)], "untrained", 1.0)}
    return {"dataset": "default", "workspace": "/w", "command": f"--seeds {seeds}", "queries": len(IDS), "folds": 5,
            "seeds": seeds, "cv_seeds": seeds, "epochs": None, "compared": 1, "configurations": configurations,
            "tests": select_config.tests(configurations, ["A+L"], ["BM25"], 1000), "seconds": 11.0}


def test_merging_seeds_run_apart_gives_the_figures_of_one_run_of_all_of_them(tmp_path):
    paths = []
    for seeds in ([13], [1, 2]):
        paths.append(tmp_path / f"{seeds[0]}.json")
        paths[-1].write_text(json.dumps(report(seeds)))
    done = subprocess.run([*SELECT, "--merge", *map(str, paths), "--out", str(tmp_path / "all.json"),
                           "--resamples", "1000"], capture_output=True, text=True, check=True)
    merged, whole = json.loads((tmp_path / "all.json").read_text()), report([13, 1, 2])
    assert merged["cv_seeds"] == [13, 1, 2] and "5 folds x 3 seeds" in done.stdout
    for name in ("A+L", "BM25"):
        got, want = merged["configurations"][name], whole["configurations"][name]
        assert got["cv_map"]["values"] == pytest.approx(want["cv_map"]["values"])
        assert got["cv_map"]["mean"] == pytest.approx(want["cv_map"]["mean"])
        # a report's APs are a mean over its own seeds: the merge weighs them by their seed counts
        assert got["query_ap"] == pytest.approx(want["query_ap"], nan_ok=True) and got["query_ap"]["Q000"] is None
    assert merged["configurations"]["A+L"]["dev_map"]["values"] == pytest.approx(whole["configurations"]["A+L"]["dev_map"]["values"])
    assert [(t["a"], t["b"]) for t in merged["tests"]] == [("A+L", "BM25")]
    assert merged["tests"][0]["mean_difference"] == pytest.approx(whole["tests"][0]["mean_difference"])


def test_a_seed_in_two_reports_other_configurations_or_a_broken_file_are_refused_and_nothing_is_written(tmp_path):
    first, again, other, broken = (tmp_path / f"{name}.json" for name in "abcd")
    first.write_text(json.dumps(report([13])))
    again.write_text(json.dumps(report([13, 2])))
    changed = report([2])
    changed["configurations"].pop("BM25")
    other.write_text(json.dumps(changed))
    broken.write_text(json.dumps(report([2]))[:-40])
    for pair, why in (((first, again), "a seed is in more than one report"), ((first, other), f"{other} and {first} differ in"),
                      ((first, broken), f"{broken}: not a readable JSON report"),
                      ((first, tmp_path / "none.json"), "none.json: not a readable JSON report")):
        done = subprocess.run([*SELECT, "--merge", *map(str, pair), "--out", str(tmp_path / "out.json")],
                              capture_output=True, text=True)
        assert done.returncode != 0 and why in done.stderr
        assert not (tmp_path / "out.json").exists()
