"""docs/params.md and docs/params-research.md: every key of each params file with its type, default and help text,
written from the schema (`ticketsim params --markdown <file>`), each section with the file that sets it."""
from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal

import yaml

from ticketsim.config.schema import Params

PAGES = {"params.yaml": "docs/params.md", "params-research.yaml": "docs/params-research.md"}   # one page per file
HEAD = {"params.yaml": "# Params\n\nEvery key of `params.yaml`: what a user sets (the research catalogue and the model: "
        "[params-research.md](params-research.md)).",
        "params-research.yaml": "# Research params\n\nEvery key of `params-research.yaml`: the model and the research "
        "catalogue (what a user sets: [params.md](params.md))."}
ABOUT = """
Each key with its type, its default (what a key that no file sets reads) and its meaning; a key is set in one of the
two files, and dvc.yaml lists, per stage, the keys it reads from each. This page is written from the schema
(`src/ticketsim/config/schema.py`), never by hand:

```bash
ticketsim params --markdown {file} > {page}
```
"""


def reference_markdown(homes: dict[str, str], file: str = "params.yaml") -> str:
    """The reference page of one params file (PAGES): each section it sets, of a section split over both files the keys
    it sets; `homes`: section (or section.key, for a split section) -> the file setting it. A section no file sets is
    a user's (params.yaml)."""
    seen: dict[type, tuple[str, Any]] = {}
    parts = [HEAD[file], ABOUT.format(file=file, page=PAGES[file])]
    for f in dataclasses.fields(Params):
        hint, help = typing.get_type_hints(Params)[f.name], f.metadata["help"]
        nested = any(dataclasses.is_dataclass(a) for a in (hint, *typing.get_args(hint)))
        rows = rows_of(hint, default_of(f), f.metadata, "" if nested else f.name, f.name, seen)
        where = home(f.name, homes)
        if f.name not in homes:     # split over both files (or set in none): the rows of the keys this file sets
            rows = [r for r in rows if homes.get(f"{f.name}.{r[3:].split('`')[0].split('.')[0]}", "params.yaml") == file]
        elif where != file:
            rows = []
        if rows:
            parts.append(f"\n## `{f.name}`\n\n{help[0].upper()}{help[1:]}; set in {where}.\n\n"
                         "| key | type | default | meaning |\n| --- | --- | --- | --- |\n" + "".join(rows))
    return "".join(parts)


def home(section: str, homes: dict[str, str]) -> str:
    """The file a section is set in; for one split over both, the file of most of its keys, and the others' keys."""
    if section in homes:
        return homes[section]
    keys = {file: [k.split(".", 1)[1] for k in homes if k.startswith(f"{section}.") and homes[k] == file]
            for file in set(homes.values())}
    files = sorted((file for file in keys if keys[file]), key=lambda file: -len(keys[file]))
    if not files:
        return "params.yaml (no key set: every one at its default)"
    return files[0] + "".join(f", but {', '.join(f'`{k}`' for k in keys[file])} in {file}" for file in files[1:])


def rows_of(hint: Any, default: Any, about: Mapping[str, Any], key: str, path: str,
            seen: dict[type, tuple[str, Any]]) -> list[str]:
    """Table rows of one key (`about`: its field's help and range; `key` as the section's table names it, "" for the
    section itself; `path` dotted from the top) and of the keys below it: the fields of a nested mapping, of each entry
    of a mapping of them (`<name>`), or of a mapping a key may hold instead of a name. A dataclass met before is
    referred to where it was written out (its default shown where it differs from there); a field without help (the
    loader sets it) is no key of the files."""
    inner = next((a for a in (hint, *typing.get_args(hint)) if dataclasses.is_dataclass(a)), None)
    if inner is None:
        return [row(key, hint, default, about)]
    if inner in seen:
        first, first_default = seen[inner]
        same = dataclasses.is_dataclass(default) and default == first_default
        return [row(key, hint, ... if same else default, {**about, "help": f"{about['help']}; keys as `{first}`"})]
    below = "<name>." if typing.get_origin(hint) is dict else ""
    seen[inner] = f"{path}.{below}".rstrip("."), default
    instance = default if isinstance(default, inner) else None
    rows = [row(key, hint, ... if instance else default, about)] if key else []
    for f in (f for f in dataclasses.fields(inner) if f.metadata["help"]):
        value = getattr(instance, f.name) if instance else default_of(f)
        rows += rows_of(typing.get_type_hints(inner)[f.name], value, f.metadata, f"{key}.{below}".lstrip(".") + f.name,
                        f"{path}.{below}{f.name}", seen)
    return rows


def row(key: str, hint: Any, default: Any, about: Mapping[str, Any]) -> str:
    low, high = about.get("range", (None, None))
    bounds = f" in [{low}, {high}]" if None not in (low, high) else f" >= {low}" if low is not None else \
        f" <= {high}" if high is not None else ""
    return f"| `{key}` | {type_name(hint)}{bounds} | {shown(default)} | {cell(about['help'])} |\n"


def cell(text: str) -> str:
    """Text in a table cell: its pipes escaped."""
    return text.replace("|", "\\|")


def default_of(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else dataclasses.MISSING


DOCUMENT_END = "\n..."      # what PyYAML writes after a lone scalar


def shown(value: Any) -> str:
    if value is dataclasses.MISSING:
        return "required"
    if value is ...:            # a nested mapping: its keys below show theirs
        return ""
    plain = yaml.safe_dump(plain_data(value), default_flow_style=True, sort_keys=False, width=10**6).strip()
    return cell(f"`{plain.removesuffix(DOCUMENT_END)}`")


def plain_data(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return plain_data(dataclasses.asdict(value))
    if isinstance(value, (tuple, list)):
        return [plain_data(item) for item in value]
    if isinstance(value, dict):
        return {key: plain_data(item) for key, item in value.items()}
    return value


def type_name(hint: Any) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if dataclasses.is_dataclass(hint):
        return "mapping"
    if origin is Literal:
        return cell(" | ".join(f"`{str(a).lower() if isinstance(a, bool) else a}`" for a in args))
    if origin in (types.UnionType, typing.Union):
        return " or ".join("null" if a is type(None) else type_name(a) for a in args)
    if origin is tuple:
        return f"list of {type_name(args[0])}"
    if origin is dict:
        return f"{type_name(args[0])} -> {type_name(args[1])}"
    return getattr(hint, "__name__", str(hint)).replace("Any", "any")
