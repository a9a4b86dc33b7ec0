"""The stage helper: a script's declared inputs and outputs become its command line; the run, raw path and metrics
file come with it."""
import json

import mlflow
import pytest
import yaml

from ticketsim import cli
from ticketsim.stage import Arg, Stage

STAGE = Stage("demo", "Stage demo: what a stage script declares.\n\nMore words.", reads=("corpus", "tokens"),
              writes=("metrics", "plots", "reports"),
              options={"inputs": Arg("metrics files", many=True), "variant_file": Arg("optional YAML", required=False)})


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({
        "seed": 1, "datasets": {"tiny": {"source": "csv", "raw": "raw/tiny"}},
        "tracking": {"uri": f"sqlite:///{tmp_path / 'mlflow.db'}", "experiment": "stage-test",
                     "artifact_location": str(tmp_path / "art")}}))
    return tmp_path


def argv(*extra):
    return ["tiny", "--corpus", "prepared", "--tokens", "tok", "--inputs", "a.json", "b.json",
            "--metrics", "m/demo.json", "--plots", "p", "--reports", "r", *extra]


def test_the_declared_options_are_the_command_line(workspace):
    stage = STAGE.start(argv())
    assert (stage.dataset, stage.dataset_config.raw, stage.params.seed) == ("tiny", "raw/tiny", 1)
    assert (stage.args.tokens, stage.args.inputs, stage.args.variant_file) == ("tok", ["a.json", "b.json"], None)
    with pytest.raises(SystemExit):
        STAGE.start(["tiny", "--corpus", "prepared"])   # a required output is missing


def test_a_dataset_params_yaml_lacks_ends_the_stage_with_one_line_naming_it(workspace):
    with pytest.raises(SystemExit) as stopped:
        STAGE.start(["other", *argv()[1:]])
    assert str(stopped.value).startswith("demo@other: params: datasets.other: no such dataset (have: tiny)")


@pytest.mark.parametrize("text, message", [
    ("seed: 1\ndatasets:\n  tiny: {source: csv, raw: raw/tiny}\nserve:\n  port: 80: 81\n",
     "broken.yaml:5: not valid YAML: mapping values are not allowed here (column 11); fix the params file there"),
    ("- seed\n- datasets\n", "broken.yaml: the top level is a list, not a mapping of keys (seed, datasets, ...)"),
    (None, "broken.yaml: no such params file"),
])
def test_a_params_file_that_is_no_mapping_of_yaml_ends_a_stage_and_the_cli_with_one_line(workspace, capsys, text, message):
    if text is not None:
        (workspace / "broken.yaml").write_text(text)
    with pytest.raises(SystemExit) as stopped:
        STAGE.start([*argv(), "--params", "broken.yaml"])
    assert str(stopped.value) == f"demo@tiny: {message}"
    assert cli.main(["validate", "tiny", "--params", "broken.yaml"]) == cli.ERROR
    assert capsys.readouterr().err == f"ticketsim validate: {message}\n"


def test_the_run_logs_params_raw_source_metrics_file_and_the_declared_outputs_that_exist(workspace):
    stage = STAGE.start(argv())
    (workspace / "p").mkdir()
    (workspace / "p" / "plot.png").write_bytes(b"png")
    (workspace / "prepared").mkdir()
    (workspace / "prepared" / "intake.json").write_text("{}")
    with stage.run({"seed": 1}, tags={"variant": "x"}, context="eval") as run:
        stage.metrics({"dev": {"map@10": 0.5}, "note": "text"}, logged={"dev": {"map@10": 0.25}})
    assert json.loads((workspace / "m" / "demo.json").read_text()) == {"dev": {"map@10": 0.5}, "note": "text"}
    stored = mlflow.MlflowClient(stage.params.tracking.uri).get_run(run.info.run_id)
    assert stored.info.run_name == "demo@tiny" and stored.data.tags["stage"] == "demo" and stored.data.tags["variant"] == "x"
    assert stored.data.params == {"seed": "1"} and stored.data.metrics == {"dev.map_at_10": 0.25}
    [logged] = stored.inputs.dataset_inputs   # the declared corpus, read from the dataset's raw files
    assert logged.dataset.name == "tiny" and "raw/tiny" in logged.dataset.source
    artifacts = {path.name for path in (workspace / "art").rglob("*") if path.is_file()}
    assert artifacts == {"demo.json", "plot.png"}   # reports (r) was declared but not written


def test_a_run_can_be_another_stage_tag_and_log_other_artifacts(workspace):
    stage = STAGE.start(argv())
    (workspace / "own.txt").write_text("x")
    with stage.run(stage="demo_E", artifacts=("own.txt",)) as run:
        stage.metrics({"n": 3})
    stored = mlflow.MlflowClient(stage.params.tracking.uri).get_run(run.info.run_id)
    assert stored.data.tags["stage"] == "demo_E" and stored.data.metrics == {"n": 3.0}
    assert {path.name for path in (workspace / "art").rglob("*") if path.is_file()} == {"own.txt"}
