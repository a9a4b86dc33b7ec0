"""Reading the params files into Params: params.yaml (what a user sets) and params-research.yaml beside it (the model
and the research catalogue), each key in one of them; the tune stage's file; a column mapping file."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import yaml

from ticketsim.config.coerce import ConfigError, build
from ticketsim.config.names import name_problems
from ticketsim.config.schema import ColumnMapping, DatasetConfig, Params, VariantConfig

RESEARCH = "params-research.yaml"   # beside the params file; dvc.yaml lists the keys its stages read from it


def load_params(path: str | Path = "params.yaml") -> Params:
    """The params file and, where there is one beside it, params-research.yaml, over the schema's defaults. A key the
    schema lacks is refused naming the file it is written in; a top-level section may be split over the two files,
    but each of its keys is set in one (dvc.yaml names the file it reads a key from)."""
    files = params_files(path)
    raw: dict[str, Any] = {}
    for file in files:
        values = read_yaml(file, "params file") or {}
        if not isinstance(values, dict):
            found = "a list" if isinstance(values, list) else f"the one value {str(values)[:40]!r}"
            raise ConfigError(f"{file}: the top level is {found}, not a mapping of keys (seed, datasets, ...)")
        build(Params, {"seed": 0, **values, "datasets": {}}, str(file))   # each key checked in the file that sets it
        raw = merged(raw, values, files[0], file)
    datasets = raw.pop("datasets", None) or {}
    if not isinstance(datasets, dict) or not datasets:
        raise ConfigError(f"{path}: datasets: at least one dataset is required, as a mapping of name -> settings")
    built = {name: build(DatasetConfig, {"name": name, **with_default_files(spec or {})}, f"{path}: datasets.{name}")
             for name, spec in datasets.items()}
    for name, dataset in built.items():
        for key, check in (("encoding", text_encoding), ("delimiter", csv_delimiter)):   # "tab" becomes a tab
            if getattr(dataset, key) is None:
                continue
            if dataset.source != "csv":
                raise ConfigError(f"{path}: datasets.{name}.{key}: reads `source: csv` exports, not {dataset.source!r}")
            try:
                built[name] = dataset = dataclasses.replace(dataset, **{key: check(getattr(dataset, key))})
            except ValueError as error:
                raise ConfigError(f"{path}: datasets.{name}.{key}: {error}") from None
        if dataset.columns is not None and dataset.source != "csv":
            raise ConfigError(f"{path}: datasets.{name}.columns: a column mapping reads `source: csv` exports, "
                              f"not {dataset.source!r}")
        if not dataset.labels and dataset.source != "csv":
            raise ConfigError(f"{path}: datasets.{name}.labels: false is for `source: csv` (a folder of tickets only), "
                              f"not {dataset.source!r}")
    params = build(Params, {**raw, "datasets": built}, str(path))
    named = name_problems(params, raw)     # every variant, channel and dataset named: refused now, not at its stage
    if named:
        key, home = named[0].split(":")[0], homes(path)
        file = next((home[k] for k in (".".join(key.split(".")[:n]) for n in (2, 1)) if k in home), Path(path).name)
        raise ConfigError(f"{Path(path).with_name(file)}: {named[0]}")
    return params


def params_files(path: str | Path) -> list[Path]:
    """The params file and params-research.yaml beside it, where there is one."""
    research = Path(path).with_name(RESEARCH)
    return [Path(path), *([research] if research.is_file() else [])]


def homes(path: str | Path) -> dict[str, str]:
    """The file (its name) that sets each section, or each key of a section split over the two files."""
    sections = [(file.name, read_yaml(file, "params file") or {}) for file in params_files(path)]
    split = {section for _, values in sections for section in values if sum(section in v for _, v in sections) > 1}
    found: dict[str, str] = {}
    for name, values in sections:
        for section, value in values.items():
            found.update({f"{section}.{key}": name for key in value} if section in split else {section: name})
    return found


def merged(first: dict[str, Any], second: dict[str, Any], first_file: Path, second_file: Path) -> dict[str, Any]:
    """The sections of both files: a section in both is joined key by key; a key in both is refused."""
    out = dict(first)
    for section, values in second.items():
        if section in out:
            both = isinstance(out[section], dict) and isinstance(values, dict)
            twice = sorted(set(out[section]) & set(values)) if both else []
            if not both or twice:
                keys = ", ".join(f"{section}.{key}" for key in twice) or section
                raise ConfigError(f"{second_file}: {keys} also set in {first_file}; set each key in one of the two files "
                                  "(dvc.yaml lists it from one)")
            values = {**out[section], **values}
        out[section] = values
    return out


def load_tuned(path: str | Path) -> VariantConfig:
    """The tune stage's file: the final variant with its tuned W, V and LSTM size."""
    return build(VariantConfig, read_yaml(path, "tuned variant file") or {}, str(path))


def load_columns(path: str | Path) -> ColumnMapping:
    """A column mapping file: the keys of ColumnMapping, as under `datasets.<name>.columns`."""
    return build(ColumnMapping, read_yaml(path, "column mapping file") or {}, str(path))


def read_yaml(path: str | Path, what: str) -> Any:
    """A YAML file's content, or a ConfigError of one line: the file missing or unreadable, or file:line of the first
    syntax error (what: the kind of file, for the message)."""
    try:
        return yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such {what}") from None
    except OSError as error:
        raise ConfigError(f"{path}: the {what} cannot be read ({error.strerror or error})") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: not UTF-8 (byte 0x{error.object[error.start]:02x} at offset {error.start}); "
                          "save it as UTF-8") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        column = f" (column {mark.column + 1})" if mark else ""
        raise ConfigError(f"{where}: not valid YAML: {problem}{column}; fix the {what} there") from None


def text_encoding(name: str) -> str:
    """An encoding Python decodes text with (cp1252, latin-1, utf-16, ...), or a ValueError (argparse names the option)."""
    try:
        b"a".decode(name, "ignore")    # LookupError: an unknown name, or a codec that is no text encoding (rot13)
    except LookupError:
        raise ValueError(f"{name!r}: not a text encoding Python knows (cp1252, latin-1, utf-16, ...)") from None
    return name


def csv_delimiter(text: str) -> str:
    """One character that separates CSV fields ("tab" or \\t: a tab), or a ValueError (argparse names the option)."""
    delimiter = "\t" if text in ("tab", "\\t") else text
    if len(delimiter) != 1 or delimiter in "\"\r\n":
        raise ValueError(f"{text!r}: a delimiter is one character other than a quote or a line break (\";\", tab)")
    return delimiter


# The file names of the organizers' distribution (v3.2), with train part 1 rebuilt from a public dump (its related
# questions have no subject and no comments: docs/datasets.md): `source: semeval2016` and a folder is enough.
SEMEVAL_FILES = {"train": ["SemEval2016-Task3-CQA-QL-train-part1-nocomments.xml", "SemEval2016-Task3-CQA-QL-train-part2.xml"],
                 "dev": "SemEval2016-Task3-CQA-QL-dev.xml"}


def with_default_files(spec: dict) -> dict:
    if spec.get("source") == "semeval2016" and not any(spec.get(key) for key in ("train", "dev", "test")):
        return {**SEMEVAL_FILES, **spec}
    return spec
