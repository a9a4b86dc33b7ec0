"""docs/params.md: every key of the params files with its type, default and help text, written from the schema
(`ticketsim params --markdown`), each section with the file that sets it."""
from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Literal

import yaml

from ticketsim.config.schema import Params

HEAD = """# Params

Every key of `params.yaml` (what a user sets) and `params-research.yaml` (the model and the research catalogue): its
type, its default (what a key that neither file sets reads) and its meaning. A key is set in one of the two files, the
one its section names; dvc.yaml lists, per stage, the keys it reads from each. This page is written from the schema
(`src/ticketsim/config/schema.py`), never by hand:

```bash
ticketsim params --markdown > docs/params.md
```
"""


def markdown(homes: dict[str, str]) -> str:
    """The reference page; `homes`: section (or section.key, for a section split over the files) -> the file setting it."""
    seen: dict[type, str] = {}
    parts = [HEAD]
    for f in dataclasses.fields(Params):
        hint, help = typing.get_type_hints(Params)[f.name], f.metadata["help"]
        split = {file: [k.split(".", 1)[1] for k in homes if k.startswith(f"{f.name}.") and homes[k] == file]
                 for file in sorted(set(homes.values()))}
        home = homes.get(f.name) or "; ".join(f"{', '.join(f'`{k}`' for k in keys)} in {file}" for file, keys in split.items() if keys) \
            or "params.yaml, where a value other than the default is set"
        rows = rows_of(hint, default_of(f), help, f.name, f.name, seen)
        parts.append(f"\n## `{f.name}`\n\n{help[0].upper()}{help[1:]}: {home}.\n\n| key | type | default | meaning |\n"
                     "| --- | --- | --- | --- |\n" + "".join(rows[1:] if dataclasses.is_dataclass(hint) else rows))
    return "".join(parts)


def rows_of(hint: Any, default: Any, help: str, key: str, path: str, seen: dict[type, str]) -> list[str]:
    """Table rows of one key (`key` as the table shows it, `path` dotted from the top) and of the keys below it: the
    fields of a nested mapping, of each entry of a mapping of them (`<name>`), or of a mapping a key may hold instead of
    a name; a dataclass met before is referred to where it was written out."""
    inner = next((a for a in (hint, *typing.get_args(hint)) if dataclasses.is_dataclass(a)), None)
    if inner is None:
        return [row(key, hint, default, help)]
    if inner in seen:
        return [row(key, hint, default, f"{help}; keys as `{seen[inner]}`")]
    below = ".<name>." if typing.get_origin(hint) is dict else "."
    seen[inner] = path + below.rstrip(".")
    instance = default if isinstance(default, inner) else None
    rows = [row(key, hint, ... if instance else default, help)]
    for f in dataclasses.fields(inner):
        value = getattr(instance, f.name) if instance else default_of(f)
        rows += rows_of(typing.get_type_hints(inner)[f.name], value, f.metadata["help"], key + below + f.name,
                        path + below + f.name, seen)
    return rows


def row(key: str, hint: Any, default: Any, help: str) -> str:
    return f"| `{key}` | {type_name(hint)} | {shown(default)} | {help} |\n"


def default_of(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else dataclasses.MISSING


def shown(value: Any) -> str:
    if value is dataclasses.MISSING:
        return "required"
    if value is ...:            # a nested mapping: its keys below show theirs
        return ""
    plain = yaml.safe_dump(plain_data(value), default_flow_style=True, width=10**6).strip().removesuffix("\n...")
    return f"`{plain}`".replace("|", "\\|")


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
        return " \\| ".join(f"`{a}`" if not isinstance(a, bool) else f"`{str(a).lower()}`" for a in args)
    if origin in (types.UnionType, typing.Union):
        return " or ".join("null" if a is type(None) else type_name(a) for a in args)
    if origin is tuple:
        return f"list of {type_name(args[0])}"
    if origin is dict:
        return f"{type_name(args[0])} -> {type_name(args[1])}"
    return getattr(hint, "__name__", str(hint)).replace("Any", "any")
