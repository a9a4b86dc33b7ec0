"""Model inputs: every query and ticket as padded token ids per component (channel h), its raw component texts (channel F)
and its cached channel vectors (E, T, S; A reads S)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import polars as pl
import torch

from ticketsim.channels.cache import ChannelVectors, component_strings, component_tokens
from ticketsim.model.branches import BRANCHES
from ticketsim.model.siamese import Side, Texts

PAD = 0


def vocabulary_index(words: Sequence[str]) -> dict[str, int]:
    """word -> row of the embedding table; row 0 is padding."""
    return {word: i for i, word in enumerate(words, start=1)}


def padded(token_lists: list[list[str]], index: Mapping[str, int], max_tokens: int) -> Texts:
    """Ids of the first max_tokens known words of each text, right-padded."""
    ids = [[index[w] for w in tokens if w in index][:max_tokens] for tokens in token_lists]
    lengths = torch.tensor([len(x) for x in ids], dtype=torch.long)
    table = torch.full((len(ids), max([1, *map(len, ids)])), PAD, dtype=torch.long)
    for row, x in enumerate(ids):
        table[row, : len(x)] = torch.tensor(x, dtype=torch.long)
    return Texts(table, lengths)


@dataclass(frozen=True)
class Encoded:
    """One side (queries or tickets): row i is ids[i]; texts[component], strings[component] and
    cached[channel][component] share the rows."""

    ids: tuple[str, ...]
    texts: dict[str, Texts]
    cached: dict[str, dict[str, torch.Tensor]]
    strings: dict[str, list[str]] = field(default_factory=dict)

    def take(self, rows: torch.Tensor, needs: Mapping[str, Sequence[str]]) -> Side:
        """The rows' inputs for the channels and components the metric needs (channel -> components)."""
        side: dict[str, dict[str, object]] = {}
        for channel, components in needs.items():
            source = BRANCHES[channel].reads if channel in BRANCHES else channel
            if source == "words":
                side[channel] = {c: self.trimmed(self.texts[c], rows) for c in components}
            elif source == "strings":
                side[channel] = {c: [self.strings[c][i] for i in rows.tolist()] for c in components}
            else:
                side[channel] = {c: self.cached[source][c][rows] for c in components}
        return side

    @staticmethod
    def trimmed(texts: Texts, rows: torch.Tensor) -> Texts:
        lengths = texts.lengths[rows]
        return Texts(texts.ids[rows, : max(1, int(lengths.max()))], lengths)

    def row(self, ids: Sequence[str]) -> torch.Tensor:
        position = {x: i for i, x in enumerate(self.ids)}
        return torch.tensor([position[x] for x in ids], dtype=torch.long)


def encode_side(frame: pl.DataFrame, id_column: str, components: Sequence[str], index: Mapping[str, int],
                max_tokens: int, channels: Sequence[ChannelVectors], side: str, raw: pl.DataFrame | None = None,
                string_components: Sequence[str] = ()) -> Encoded:
    """`side` is 'queries' or 'tickets': which half of each ChannelVectors to take (rows aligned by id); `raw`: the
    prepared table of the same side, whose texts of `string_components` channel F reads."""
    ids = tuple(frame[id_column])
    texts = {c: padded(component_tokens(frame, c), index, max_tokens) for c in components}
    strings = {}
    if string_components:
        if raw is None or tuple(raw[id_column]) != ids:
            raise ValueError(f"channel F reads the raw {side}: pass their prepared table, in the tokens' order")
        strings = {c: component_strings(raw, c) for c in string_components}
    cached = {}
    for vectors in channels:
        cache_ids = vectors.query_ids if side == "queries" else vectors.ticket_ids
        position = {x: i for i, x in enumerate(cache_ids)}
        order = np.array([position[x] for x in ids], dtype=np.intp) if cache_ids != ids else slice(None)
        arrays = vectors.queries if side == "queries" else vectors.tickets
        cached[vectors.channel] = {c: torch.from_numpy(np.asarray(a[order], dtype=np.float32)) for c, a in arrays.items()}
    return Encoded(ids, texts, cached, strings)
