"""Params out of their range are refused when read, naming file:key and the range (the range is declared on the field,
ticketsim.config.param), instead of a server that refuses every search or a trainer that never trains."""
import dataclasses
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
