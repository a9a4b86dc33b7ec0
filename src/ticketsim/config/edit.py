"""Editing params.yaml's text in place (`ticketsim export --set-params`): only the values' characters change, every
comment and line around them stays."""
from __future__ import annotations

import json
import re
from pathlib import Path

from ticketsim.config.coerce import ConfigError


def set_dataset(path: str | Path, name: str, values: dict[str, str]) -> None:
    """Set keys of `datasets.<name>` in the params file by editing just their text: existing values are replaced, new
    keys are added as lines below the entry's last key (a block mapping; the default `source: synthetic` has no raw).

    ruamel (DVC's YAML library) finds where each value is written; a ruamel round trip would keep comments but
    reflow long flow mappings, so only the value's characters are replaced and every other byte stays.
    """
    from ruamel.yaml import YAML  # here: the encoder and training core load the config package where only torch is installed

    text = Path(path).read_text(encoding="utf-8")
    entry = (YAML().load(text).get("datasets") or {}).get(name)
    if entry is None:
        raise ConfigError(f"{path}: datasets.{name}: no such dataset")
    missing = [key for key in values if key not in entry]
    if missing and entry.fa.flow_style():
        raise ConfigError(f"{path}: datasets.{name} is written inline ({{...}}); write it as one key per line to add {missing}")

    def written(key: str) -> str:
        return values[key] if re.fullmatch(r"[\w./-]+", values[key]) else json.dumps(values[key])

    lines = text.splitlines(keepends=True)
    last_line, column = max(entry.lc.key(key) for key in entry)
    lines[last_line + 1:last_line + 1] = [f"{' ' * column}{key}: {written(key)}\n" for key in missing]
    for line, column, key in sorted(((*entry.lc.value(key), key) for key in values if key not in missing), reverse=True):
        found = re.match(r"\"(?:[^\"\\]|\\.)*\"|'(?:[^']|'')*'|[^\s,#}\]]+", lines[line][column:])
        lines[line] = lines[line][:column] + written(key) + lines[line][column + (found.end() if found else 0):]
    Path(path).write_text("".join(lines), encoding="utf-8")
