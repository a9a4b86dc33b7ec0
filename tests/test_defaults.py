"""Each default lives in one place: where params.yaml sets a key, the dataclass default in config.py says the same."""
import dataclasses
import typing
from pathlib import Path
from typing import Any, Iterator

import yaml

from ticketsim.config import Params, SiameseParams, coerce

REPO = Path(__file__).resolve().parents[1]


def disagreements(defaults: Any, given: dict, where: str) -> Iterator[str]:
    """Keys of `given` (params.yaml at `where`) whose value is not the default in the dataclass instance `defaults`.

    An empty mapping or list as default means "no default" (siamese.variants, rows, comparators.models): params.yaml
    gives every entry. A key the dataclass has no default for is not compared.
    """
    hints = typing.get_type_hints(type(defaults))
    for field in dataclasses.fields(defaults):
        if field.name not in given or not hasattr(defaults, field.name):
            continue
        default, value, here = getattr(defaults, field.name), given[field.name], f"{where}.{field.name}"
        if dataclasses.is_dataclass(default) and isinstance(value, dict):
            yield from disagreements(default, value, here)
        elif default in ({}, ()):
            continue
        elif coerce(hints[field.name], value, here) != default:
            yield f"{here}: config.py says {default!r}, params.yaml {value!r}"


class Defaults:
    """Params' fields that have defaults (seed and datasets have none), as attributes, for disagreements()."""

    def __init__(self):
        for field in dataclasses.fields(Params):
            if field.default is not dataclasses.MISSING:
                setattr(self, field.name, field.default)
            elif field.default_factory is not dataclasses.MISSING:
                setattr(self, field.name, field.default_factory())


def test_config_defaults_are_the_params_yaml_values():
    given = yaml.safe_load((REPO / "params.yaml").read_text())
    defaults = Defaults()
    found = [line for field in dataclasses.fields(Params) if hasattr(defaults, field.name) and field.name in given
             for line in (disagreements(getattr(defaults, field.name), given[field.name], field.name)
                          if dataclasses.is_dataclass(getattr(defaults, field.name)) else [])]
    assert not found, "defaults live twice and disagree; make config.py say what params.yaml says:\n" + "\n".join(found)


def test_a_default_that_disagrees_is_named():
    given = {"final": "22", "hidden": 50, "variants": {"22": {}}, "train": {"epochs": 7, "lr": 1.0}}
    assert sorted(disagreements(SiameseParams(), given, "siamese")) == [
        "siamese.final: config.py says 'Ac+L-relpos', params.yaml '22'",
        "siamese.train.epochs: config.py says 30, params.yaml 7"]
