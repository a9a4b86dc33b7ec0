"""Params out of their range are refused when read, naming file:key and the range (the range is declared on the field,
ticketsim.config.param), instead of a server that refuses every search or a trainer that never trains."""
import dataclasses
import re
import shutil
import typing
from pathlib import Path

import pytest
from benchmarks.common import PARAMS_FILES, edit_params

from ticketsim import cli
from ticketsim.config import BM25Config, ConfigError, Params, ServeConfig, build, homes, load_params

REPO = Path(__file__).resolve().parents[1]


def params_with(tmp_path: Path, block: str, values: dict) -> Path:
    """The repository's params files with keys of one block (dotted for a nested one) set to `values`: the path of the
    file that sets the block (params.yaml where neither did)."""
    def change(params: dict) -> None:
        target = params
        for key in block.split("."):
            target = target.setdefault(key, {})
        target.update(values)

    for name in PARAMS_FILES:
        shutil.copy2(REPO / name, tmp_path / name)
    home = homes(tmp_path / "params.yaml")
    edit_params(tmp_path, change)
    return tmp_path / next((home[k] for k in (block, block.split(".")[0]) if k in home), "params.yaml")


@pytest.mark.parametrize("block, values, message", [
    ("serve", {"max_k": -5}, "serve.max_k: -5 is out of range; allowed: at least 1"),
    ("serve", {"port": 70000}, "serve.port: 70000 is out of range; allowed: from 1 to 65535"),
    ("bm25", {"b": 1.5}, "bm25.b: 1.5 is out of range; allowed: from 0 to 1"),
    ("siamese.train", {"epochs": 0}, "siamese.train.epochs: 0 is out of range; allowed: at least 1"),
])
def test_a_value_out_of_its_range_is_refused_naming_the_file_the_key_and_the_range(tmp_path, block, values, message):
    path = params_with(tmp_path, block, values)
    with pytest.raises(ConfigError) as refused:
        load_params(path)
    assert str(refused.value) == f"{path}:{message}"


def test_ticketsim_serve_refuses_a_max_k_below_1_before_it_starts(tmp_path, capsys):
    path = params_with(tmp_path, "serve", {"max_k": -5})
    assert cli.main(["serve", "--params", str(path), "--model", str(tmp_path / "none"), "--index", str(tmp_path / "none")]) \
        == cli.ERROR
    assert f"{path}:serve.max_k: -5 is out of range; allowed: at least 1" in capsys.readouterr().err


def test_every_default_and_every_value_of_params_yaml_lies_in_its_range():
    load_params(REPO / "params.yaml")       # would raise on a value out of its range
    bounded = [(cls, f) for cls in classes(Params) for f in dataclasses.fields(cls) if "range" in f.metadata]
    assert {(cls, f.name) for cls, f in bounded} >= {(ServeConfig, "max_k"), (BM25Config, "b")}
    for cls, f in bounded:
        build(cls, {f.name: f.default}, cls.__name__)


def classes(cls: type) -> set[type]:
    """cls and every config dataclass it holds, however deep."""
    found = {cls}
    for hint in typing.get_type_hints(cls).values():
        for inner in (hint, *typing.get_args(hint)):
            if dataclasses.is_dataclass(inner) and inner not in found:
                found |= classes(inner)
    return found


@pytest.mark.parametrize("block, values, message", [
    ("siamese", {"final": "NoSuchVariant-xyz"}, "siamese.final: no variant 'NoSuchVariant-xyz' in siamese.variants"),
    ("siamese", {"unlabelled": "Szs+X"}, "siamese.unlabelled: no variant 'Szs+X' in siamese.variants"),
    ("retrain", {"query_tower": "Fq+X"}, "retrain.query_tower: no variant 'Fq+X' in siamese.variants"),
    ("siamese.variants.22.channels", {"Q": 1.0}, "siamese.variants.22.channels.Q: no channel of that name (have: h, A"),
    ("siamese.variants.22.levels", {"sub-foo": 0.2}, "siamese.variants.*.levels.sub-foo: no level pair (query part-ticket"),
    ("siamese.variants.22.channels", {"E": -0.5}, "siamese.variants.22.channels.E: -0.5 is out of range; allowed: at least 0"),
    ("finetune", {"datasets": ["nope"]}, "finetune.datasets: no dataset 'nope' in datasets (have: default)"),
    ("retrain", {"targets": ["register@nope"]}, "retrain.targets: no dataset 'nope' in datasets (have: default)"),
    ("rows.Q", {"levels": {"1": "sub-sub"}}, "rows.Q: no channel with cached vectors of that name (have: E, T, S)"),
])
def test_a_name_that_names_nothing_is_refused_when_the_params_are_read_in_one_line(tmp_path, capsys, block, values, message):
    params_with(tmp_path, block, values)
    home = homes(REPO / "params.yaml")
    path = tmp_path / next((home[k] for k in (".".join(block.split(".")[:n]) for n in (2, 1)) if k in home), "params.yaml")
    said = re.escape(f"{path}: {message}").replace(r"\*", r"[^.]+")   # *: a variant sharing 22's levels (a YAML anchor)
    with pytest.raises(ConfigError) as refused:
        load_params(tmp_path / "params.yaml")
    assert re.match(said, str(refused.value)), str(refused.value)
    assert cli.main(["params", "--params", str(tmp_path / "params.yaml")]) == cli.ERROR
    out, err = capsys.readouterr()
    assert not out and re.match("ticketsim params: " + said, err) and len(err.splitlines()) == 1


def test_a_bad_siamese_final_stops_the_pipelines_first_stage_before_it_writes(tmp_path):
    """sources runs first in every `dvc repro` (each stage follows it): refused there, no stage's outputs are removed."""
    import subprocess
    import sys

    path = params_with(tmp_path, "siamese", {"final": "NoSuchVariant-xyz"})
    out = tmp_path / "data" / "default" / "source.json"
    done = subprocess.run([sys.executable, str(REPO / "stages" / "sources.py"), "default", "--out", str(out), "--params",
                           str(path)], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 1 and done.stderr == (f"sources@default: {path}: siamese.final: no variant "
                                                    f"'NoSuchVariant-xyz' in siamese.variants or siamese.finetuned (have: "
                                                    f"{done.stderr.split('(have: ')[1]}")
    assert len(done.stderr.splitlines()) == 1 and not out.exists()


def test_the_names_the_params_are_checked_against_are_the_models():
    from ticketsim.channels.cache import QUERY_COMPONENTS, TICKET_COMPONENTS
    from ticketsim.channels.registry import CHANNELS
    from ticketsim.config import cached as names
    from ticketsim.model.branches import BRANCHES
    from ticketsim.scoring.weights import PAIR_CHANNELS

    assert [CHANNELS[name].name for name in names.CACHED] == list(names.CACHED)   # each line's module declares its channel
    assert set(names.channel_names()) == set(BRANCHES) | set(names.CACHED) | set(PAIR_CHANNELS)
    assert names.QUERY_COMPONENTS == QUERY_COMPONENTS and names.TICKET_COMPONENTS == TICKET_COMPONENTS
