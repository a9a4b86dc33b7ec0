"""A dataset's own final variant (datasets.<name>.final): what the stages of that dataset tune, train and register,
refused when it cannot be deployed, tuned over its own channels and levels only, and kept as configured when it
learns from no labelled pair (the zero-shot reference that `ticketsim select` picks on SemEval on 2 cores)."""
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from benchmarks.common import PARAMS_FILES, edit_params

from ticketsim.config import ConfigError, DatasetConfig, SiameseParams, TuneConfig, VariantConfig, load_params, load_tuned
from ticketsim.stage import Stage
from ticketsim.tuning.tuner import run

REPO = Path(__file__).resolve().parents[1]
MULTI = {"sub-sub": 0.2, "sub+desc-sub+desc": 0.3}
VARIANTS = {"A+L": VariantConfig(channels={"A": 1.0, "L": 0.5}, levels=MULTI, learn=True),
            "Szs+L": VariantConfig(channels={"S": 1.0, "L": 0.5}, levels=MULTI, labels=False),
            "best+R": VariantConfig(channels={"S": 1.0, "L": 0.5, "R": 0.5}, levels=MULTI, learn=True)}


def params_file(tmp_path: Path, **datasets) -> Path:
    """The repository's params files with these datasets (name -> its entry): the path of params.yaml."""
    for name in PARAMS_FILES:
        shutil.copy2(REPO / name, tmp_path / name)
    return edit_params(tmp_path, lambda params: params.update(datasets=datasets))


def test_a_datasets_final_overrides_siamese_final_for_its_stages_only(tmp_path):
    path = params_file(tmp_path, default={"source": "synthetic"},
                       semeval={"source": "semeval2016", "raw": "x", "final": "Ac+L-relpos"})
    params = load_params(path)
    assert params.siamese.final_of(params.dataset("semeval")) == "Ac+L-relpos"
    assert params.siamese.final_of(params.dataset("default")) == params.siamese.final == "Szs+L"
    assert params.for_dataset("semeval").siamese.final == "Ac+L-relpos" and params.for_dataset("default").siamese.final == "Szs+L"
    # a stage of the dataset reads it as siamese.final; the row the final stage trains is the tuned variant's, and keeps
    # the variant's name where nothing is tuned (a variant that learns from no labelled pair)
    stage = Stage("final", "doc").start(["semeval", "--params", str(path)])
    assert stage.params.siamese.final == "Ac+L-relpos" and stage.params.siamese.final_row(stage.dataset_config) == "Ac+L-relpos-tuned"
    assert params.siamese.final_row(params.dataset("default")) == "Szs+L"


@pytest.mark.parametrize("entry, message", [
    ({"final": "nope"}, "datasets.semeval.final: no variant 'nope'"),
    ({"final": "best+R"}, "datasets.semeval.final: best\\+R weighs R"),
])
def test_a_final_that_cannot_be_deployed_is_refused_when_the_params_are_read(tmp_path, entry, message):
    path = params_file(tmp_path, semeval={"source": "semeval2016", "raw": "x", **entry})
    with pytest.raises(ConfigError, match=message) as refused:
        load_params(path)
    assert str(refused.value).startswith(str(path))


def test_a_dataset_without_labels_refuses_a_final_that_learns_from_them():
    siamese = SiameseParams(variants=VARIANTS)
    desk = DatasetConfig("desk", "csv", "x", labels=False)
    assert siamese.final_of(desk) == "Szs+L" and siamese.final_row(desk) == "Szs+L"
    with pytest.raises(ConfigError, match="datasets.desk.final: variant 'A\\+L' learns from labelled pairs"):
        siamese.final_of(replace(desk, final="A+L"))


def test_the_study_weighs_the_final_variants_channels_and_levels_only_and_names_a_missing_range():
    tune = TuneConfig(ranges=TuneConfig().ranges)
    space = tune.space(VARIANTS["A+L"])
    assert space.channels == {"A": (0.5, 8.0), "L": (0.0, 4.0)} and set(space.levels) == set(MULTI)
    assert tune.space(replace(VARIANTS["A+L"], channels={"A": 5.0, "S": 1.0})).channels["S"] == (0.0, 8.0)   # S beside
    with pytest.raises(ConfigError, match="tune.ranges.channels.E: the final variant weighs it"):
        tune.space(replace(VARIANTS["A+L"], channels={"A": 1.0, "E": 0.5}))


def test_a_final_that_learns_from_no_labelled_pair_is_written_as_configured_not_tuned(tmp_path):
    params = load_params(params_file(tmp_path, semeval={"source": "semeval2016", "raw": "x", "final": "Szs+L"}))
    params = replace(params, tracking=replace(params.tracking, uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
                                              artifact_location=str(tmp_path / "art")))
    result = run(params.for_dataset("semeval"), "semeval", lambda: pytest.fail("tuned"), tmp_path / "tuned.yaml",
                 tmp_path / "tune.json", tmp_path / "plots")
    assert result == {"skipped": "#Szs+L learns from no labelled pair (labels: false)"}
    szs = params.siamese.variant("Szs+L")
    assert load_tuned(tmp_path / "tuned.yaml") == replace(szs, hidden=params.siamese.hidden)
