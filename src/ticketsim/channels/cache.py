"""One format for a channel's cached vectors: every ticket and query component, one .npz file per channel.

Components are the paper's text levels and their merges: SUB, DESC, SOL, SUB+DESC, SUB+DESC+SOL
(queries have no SOL). A later stage never recomputes a channel: it loads this cache.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from ticketsim.text.tokenize import Tokens

# component -> the fields whose tokens it concatenates
COMPONENTS = {
    "sub": ("subject",),
    "desc": ("description",),
    "sol": ("solution",),
    "sub+desc": ("subject", "description"),
    "sub+desc+sol": ("subject", "description", "solution"),
}
QUERY_COMPONENTS = ("sub", "desc", "sub+desc")
TICKET_COMPONENTS = tuple(COMPONENTS)


def component_tokens(frame: pl.DataFrame, component: str) -> list[list[str]]:
    """The token list of `component` for each row of a Tokens table (tickets or queries)."""
    return frame.select(pl.concat_list(COMPONENTS[component])).to_series().to_list()


def component_strings(frame: pl.DataFrame, component: str) -> list[str]:
    """The raw text of `component` for each row of a prepared tickets or queries table: its non-empty fields joined
    by a newline (the encoders' tokenizers read it as a space; no punctuation is invented)."""
    columns = [frame[name].fill_null("").to_list() for name in COMPONENTS[component]]
    return ["\n".join(part.strip() for part in parts if part and part.strip()) for parts in zip(*columns)]


def component_texts(tokens: Tokens) -> tuple[dict[str, list[list[str]]], dict[str, list[list[str]]]]:
    """(query component -> token lists, ticket component -> token lists)."""
    return ({c: component_tokens(tokens.queries, c) for c in QUERY_COMPONENTS},
            {c: component_tokens(tokens.tickets, c) for c in TICKET_COMPONENTS})


def cache_path(channels: str | Path, name: str) -> Path:
    """Channel `name`'s cached vectors in a dataset's channels folder (data/<dataset>/channels)."""
    return Path(channels) / f"{name}.npz"


def models_folder(channels: str | Path, name: str) -> Path:
    """Channel `name`'s fitted models in a dataset's channels folder, beside its cache."""
    return Path(channels) / name


@dataclass(frozen=True, eq=False)
class ChannelVectors:
    """One channel's vectors: queries[component] is (n_queries, dim), tickets[component] is (n_tickets, dim)."""

    channel: str
    query_ids: tuple[str, ...]
    ticket_ids: tuple[str, ...]
    queries: dict[str, np.ndarray]
    tickets: dict[str, np.ndarray]

    def __post_init__(self) -> None:
        for side, ids, vectors in (("queries", self.query_ids, self.queries), ("tickets", self.ticket_ids, self.tickets)):
            for component, array in vectors.items():
                if array.ndim != 2 or array.shape[0] != len(ids):
                    raise ValueError(f"channel {self.channel}: {side}[{component}] has shape {array.shape}, expected ({len(ids)}, dim)")

    @property
    def dim(self) -> int:
        return next(iter(self.tickets.values())).shape[1]

    def save(self, path: str | Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        arrays = {f"queries/{c}": v for c, v in self.queries.items()} | {f"tickets/{c}": v for c, v in self.tickets.items()}
        np.savez(path, channel=np.array(self.channel), query_ids=np.array(self.query_ids),
                 ticket_ids=np.array(self.ticket_ids), **arrays)

    @classmethod
    def load(cls, path: str | Path) -> ChannelVectors:
        with np.load(path) as data:
            side = {s: {k.split("/", 1)[1]: data[k] for k in data.files if k.startswith(f"{s}/")} for s in ("queries", "tickets")}
            return cls(str(data["channel"]), tuple(data["query_ids"].tolist()), tuple(data["ticket_ids"].tolist()),
                       side["queries"], side["tickets"])
