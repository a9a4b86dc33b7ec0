"""Each default lives in one place, the schema (ticketsim.config.schema): params.yaml and params-research.yaml set only
keys the schema has, each in one of the two files, and repeat a default only where a stage reads the key (DVC sees a
value change in a params file, never in the schema). dvc.yaml lists each key a stage reads from the file that sets it."""
import dataclasses
import typing
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml
from dvc.dependency.param import ParamsDependency
from dvc.repo import Repo

from ticketsim.config import RESEARCH, ConfigError, Params, coerce, load_params

REPO = Path(__file__).resolve().parents[1]
FILES = ("params.yaml", RESEARCH)


def listed() -> set[tuple[str, str]]:
    """(file, dotted key) of every param a stage of dvc.yaml lists, foreach resolved."""
    with Repo(str(REPO)) as repo:
        return {(Path(dep.def_path).name, key) for stage in repo.index.stages for dep in stage.deps
                if isinstance(dep, ParamsDependency) and Path(dep.def_path).name in FILES for key in dep.params}


def leaves(values: dict, defaults: Any, where: str) -> Iterator[tuple[str, Any, Any]]:
    """(dotted key, value as the schema reads it, its default) of every value a file sets below a dataclass of the
    schema; a mapping of entries (variants, models, ...) is one value."""
    hints, fields = typing.get_type_hints(type(defaults)), {f.name: f for f in dataclasses.fields(defaults)}
    for key, value in values.items():
        default, here = getattr(defaults, key), f"{where}{key}"
        if dataclasses.is_dataclass(default) and isinstance(value, dict):
            yield from leaves(value, default, f"{here}.")
        elif fields[key].default is fields[key].default_factory is dataclasses.MISSING:     # seed, datasets: no default
            yield here, value, dataclasses.MISSING
        else:
            yield here, coerce(hints[key], value, here), default


def defaults() -> Params:
    return Params(0, {})


def test_the_params_files_load_and_set_only_keys_the_schema_has():
    load_params(REPO / "params.yaml")       # refuses a key the schema lacks, naming the file that sets it
    for name in FILES:
        assert list(leaves(yaml.safe_load((REPO / name).read_text()), defaults(), "")), name


@pytest.mark.parametrize(("name", "change", "message"), [
    ("params.yaml", lambda text: text + "serve: {port: 8000, colour: blue}\n", ":serve: unknown key(s) ['colour']"),
    (RESEARCH, lambda text: text.replace("  trainable: none", "  finetune: none"), ":siamese: unknown key(s) ['finetune']"),
    (RESEARCH, lambda text: text + "bogus: 1\n", ": unknown key(s) ['bogus']"),
    (RESEARCH, lambda text: text.replace("  trainable: none", "  trainable: none\n  final: '22'"), ": siamese.final also set in"),
])
def test_an_unknown_key_or_one_set_in_both_files_is_refused_naming_the_file_and_the_key(tmp_path, name, change, message):
    for file in FILES:
        text = (REPO / file).read_text()
        (tmp_path / file).write_text(change(text) if file == name else text)
    with pytest.raises(ConfigError) as refused:
        load_params(tmp_path / "params.yaml")
    assert str(refused.value).startswith(f"{tmp_path / name}{message}"), str(refused.value)


def test_no_file_repeats_a_default_that_no_stage_reads():
    """A value at its default is written only where dvc.yaml lists it (or a section above it) from that file."""
    stages = listed()
    repeated = [f"{name}: {key}: {value!r} is the schema's default" for name in FILES
                for key, value, default in leaves(yaml.safe_load((REPO / name).read_text()), defaults(), "")
                if value == default and not any((name, key) == (file, listed_key) or (file == name and key.startswith(f"{listed_key}."))
                                                for file, listed_key in stages)]
    assert not repeated, "remove these lines (docs/params.md shows every default):\n" + "\n".join(repeated)


def test_dvc_yaml_lists_each_key_from_the_file_that_sets_it():
    """DVC refuses a listed key its file lacks; a key set under it in the other file would change the stage's output
    unseen."""
    sets = {name: yaml.safe_load((REPO / name).read_text()) for name in FILES}

    def found(values: Any, key: str) -> bool:
        for part in key.split("."):
            if not isinstance(values, dict) or part not in values:
                return False
            values = values[part]
        return True

    wrong = [f"{file}: {key}" + ("" if found(sets[file], key) else " is not set there") for file, key in sorted(listed())
             if not found(sets[file], key) or any(found(sets[other], key) for other in FILES if other != file)]
    assert not wrong, "dvc.yaml lists keys from a file that does not hold them alone:\n" + "\n".join(wrong)
