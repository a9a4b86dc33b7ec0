"""params.yaml -> typed, frozen dataclasses. The only module that reads the params file."""
from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml


class ConfigError(ValueError):
    """A params file that does not fit the schema: names the key and what is wrong."""


@dataclass(frozen=True)
class TrackingConfig:
    uri: str = "sqlite:///mlflow.db"
    experiment: str = "ticketsim"
    artifact_location: str = "mlartifacts"


@dataclass(frozen=True)
class SyntheticConfig:
    n_tickets: int = 1000
    n_labeled_queries: int = 150
    pairs_per_query: int = 3
    n_enduser_queries: int = 30
    split: dict[str, float] = field(default_factory=lambda: {"train": 0.7, "dev": 0.3})


@dataclass(frozen=True)
class DatasetConfig:
    """One dataset: where its raw files are and how to read them. Paths in train/dev/test are relative to raw."""

    name: str
    source: Literal["synthetic", "semeval2016", "csv"]
    raw: str
    train: tuple[str, ...] = ()
    dev: str | None = None
    test: str | None = None
    test_gold: str | None = None
    split: dict[str, float] = field(default_factory=lambda: {"train": 0.7, "dev": 0.3})

    def path(self, name: str) -> Path:
        return Path(self.raw) / name


@dataclass(frozen=True)
class TextConfig:
    sentences: Literal["pretrained", "trained"] = "pretrained"
    lowercase: bool = True
    numbers: Literal["keep", "mask"] = "mask"


@dataclass(frozen=True)
class EvaluationConfig:
    cutoffs: tuple[int, ...] = (1, 5, 10)

    @property
    def depth(self) -> int:
        return max(self.cutoffs)


@dataclass(frozen=True)
class BM25Config:
    k1: float = 1.5
    b: float = 0.75


@dataclass(frozen=True)
class ChannelRows:
    """Unsupervised Table 5 rows of one channel: row number -> level pair 'query_component-ticket_component'."""

    levels: dict[str, str]
    distances: tuple[Literal["l1", "cosine"], ...] = ("l1",)


@dataclass(frozen=True)
class Params:
    seed: int
    datasets: dict[str, DatasetConfig]
    tracking: TrackingConfig = TrackingConfig()
    synthetic: SyntheticConfig = SyntheticConfig()
    text: TextConfig = TextConfig()
    evaluation: EvaluationConfig = EvaluationConfig()
    bm25: BM25Config = BM25Config()
    rows: dict[str, ChannelRows] = field(default_factory=dict)

    def dataset(self, name: str) -> DatasetConfig:
        if name not in self.datasets:
            raise ConfigError(f"params: datasets.{name}: no such dataset (have: {', '.join(self.datasets)})")
        return self.datasets[name]


def load_params(path: str | Path = "params.yaml") -> Params:
    raw = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    datasets = raw.pop("datasets", None) or {}
    if not datasets:
        raise ConfigError(f"{path}: datasets: at least one dataset is required")
    built = {name: build(DatasetConfig, {"name": name, **(spec or {})}, f"{path}: datasets.{name}") for name, spec in datasets.items()}
    return build(Params, {**raw, "datasets": built}, str(path))


def build(cls: type, values: dict[str, Any], where: str) -> Any:
    """Instantiate dataclass `cls` from a mapping, checking keys and coercing nested dataclasses, tuples and literals."""
    if not isinstance(values, dict):
        raise ConfigError(f"{where}: expected a mapping, got {values!r}")
    hints = typing.get_type_hints(cls)
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = set(values) - fields
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}; allowed: {sorted(fields)}")
    return cls(**{key: coerce(hints[key], value, f"{where}.{key}") for key, value in values.items()})


def coerce(hint: Any, value: Any, where: str) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if dataclasses.is_dataclass(hint):
        return value if isinstance(value, hint) else build(hint, value or {}, where)
    if origin in (types.UnionType, typing.Union):
        if value is None and type(None) in args:
            return None
        return coerce(next(a for a in args if a is not type(None)), value, where)
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
