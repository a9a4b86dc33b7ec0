"""The shape every comparator shares: encode each side on its own, then match the two encodings row by row.

forward(query, ticket) scores a batch of pairs for training. A pool (every query against every ticket) encodes each
text once and matches the encodings: scoring 77 queries against 1,000 tickets costs 1,077 encodings, not 77,000.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn as nn

from ticketsim.model.comparators.inputs import Chunks
from ticketsim.model.siamese import Texts

Encoding = torch.Tensor | tuple[torch.Tensor, ...]   # a vector per text, or per-position states with their lengths

QUERY, TICKET = 0, 1


class Comparator(nn.Module):
    """A subclass defines encode (one side's texts -> an Encoding whose rows are the texts) and match (row-aligned query
    and ticket encodings -> (n,) scores in (0, 1)); neither may look at the other side."""

    def encode(self, texts: Texts | Chunks, side: int) -> Encoding:
        raise NotImplementedError

    def match(self, query: Encoding, ticket: Encoding) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, query: Texts, ticket: Texts | Chunks) -> torch.Tensor:
        n = query.ids.shape[0]
        assert ticket.ids.shape[0] == n, (query.ids.shape, ticket.ids.shape)
        score = self.match(self.encode(query, QUERY), self.encode(ticket, TICKET))
        assert score.shape == (n,), score.shape
        return score


def take(encoding: Encoding, rows: torch.Tensor) -> Encoding:
    return tuple(part[rows] for part in encoding) if isinstance(encoding, tuple) else encoding[rows]


def concatenated(parts: Sequence[Encoding]) -> Encoding:
    if isinstance(parts[0], tuple):
        return tuple(torch.cat(column) for column in zip(*parts))
    return torch.cat(list(parts))
