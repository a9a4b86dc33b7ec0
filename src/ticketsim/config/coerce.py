"""A mapping -> a frozen dataclass: keys checked, values coerced to the field types, ranges enforced. Every refusal is a
ConfigError naming the file and the key."""
from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Literal


class ConfigError(ValueError):
    """A params file that does not fit the schema: names the key and what is wrong."""


def build(cls: type, values: dict[str, Any], where: str) -> Any:
    """Instantiate dataclass `cls` from a mapping, checking keys and coercing nested dataclasses, tuples and literals."""
    if not isinstance(values, dict):
        raise ConfigError(f"{where}: expected a mapping, got {values!r}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = set(values) - set(fields)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}; allowed: {sorted(fields)}")
    built = {key: coerce(hints[key], value, key_of(where, key)) for key, value in values.items()}
    for key, value in built.items():
        if "range" in fields[key].metadata and value is not None:
            check_range(value, *fields[key].metadata["range"], key_of(where, key))
    return cls(**built)


def key_of(where: str, key: str) -> str:
    """A key as messages name it: below a file's top level file:key (params.yaml:serve.max_k), below that dotted."""
    return f"{where}:{key}" if where.endswith((".yaml", ".yml")) else f"{where}.{key}"


def check_range(value: float, low: float | None, high: float | None, where: str) -> None:
    if (low is not None and value < low) or (high is not None and value > high):
        allowed = f"from {low} to {high}" if low is not None and high is not None else \
            f"at least {low}" if low is not None else f"at most {high}"
        raise ConfigError(f"{where}: {value!r} is out of range; allowed: {allowed}")


def coerce(hint: Any, value: Any, where: str) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if dataclasses.is_dataclass(hint):
        return value if isinstance(value, hint) else build(hint, value or {}, where)
    if origin in (types.UnionType, typing.Union):
        if value is None and type(None) in args:
            return None
        errors = []
        for option in (a for a in args if a is not type(None)):   # the first that fits: 'jira' a str, {...} a mapping
            try:
                return coerce(option, value, where)
            except ConfigError as error:
                errors.append(str(error))
        raise ConfigError(errors[0] if len(errors) == 1 else f"{where}: {value!r} fits none of: " + "; ".join(errors))
    if origin is Literal:
        if value not in args:
            raise ConfigError(f"{where}: {value!r} is not one of {list(args)}")
        return value
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        return tuple(coerce(args[0], item, where) for item in value)
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return {key: coerce(args[1], item, f"{where}.{key}") for key, item in value.items()}
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if hint in (int, float, str, bool) and not isinstance(value, hint) or (hint is int and isinstance(value, bool)):
        raise ConfigError(f"{where}: expected {hint.__name__}, got {value!r}")
    return value
