"""CDSSM (Shen et al. 2014) and CGRU: letter trigrams of a sliding 3-word window, convolution, (a bi-GRU,) max pooling."""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from ticketsim.model.comparators.base import Comparator
from ticketsim.model.comparators.dssm import CosineScore, WordHashing
from ticketsim.model.comparators.inputs import mask, rnn_states
from ticketsim.model.siamese import Texts

WINDOW = 3


@dataclass(frozen=True)
class CDSSMConfig:
    n_trigrams: int              # trigram vocabulary + 1 (id 0 pads)
    filters: int = 64            # convolution filters over each 3-word window (the paper: 300)
    out: int = 64                # the semantic layer (the paper: 128)
    gru: int = 0                 # CGRU: hidden size per direction of a bi-GRU over the convolved sequence; 0 = CDSSM
    dropout: float = 0.2
    shared: bool = False         # one tower for both sides | one per side
    trigram_min_count: int = 1
    query_tokens: int = 30
    ticket_tokens: int = 200


class CDSSM(Comparator):
    def __init__(self, cfg: CDSSMConfig, word_trigrams: torch.Tensor):
        super().__init__()
        self.cfg = cfg
        self.register_buffer("word_trigrams", word_trigrams)
        towers = 1 if cfg.shared else 2
        # The window's input is 3 trigram bags side by side (3 x n_trigrams): its convolution is the sum of one
        # projection per window position, so each word is hashed once into 3 x filters values.
        self.hashing = nn.ModuleList(WordHashing(cfg.n_trigrams, WINDOW * cfg.filters, WINDOW * cfg.n_trigrams)
                                     for _ in range(towers))
        self.conv_bias = nn.Parameter(torch.zeros(towers, cfg.filters))
        self.gru = nn.ModuleList(nn.GRU(cfg.filters, cfg.gru, batch_first=True, bidirectional=True)
                                 for _ in range(towers if cfg.gru else 0))
        self.semantic = nn.ModuleList(nn.Linear(2 * cfg.gru if cfg.gru else cfg.filters, cfg.out) for _ in range(towers))
        self.drop = nn.Dropout(cfg.dropout)
        self.score = CosineScore()

    def convolved(self, texts: Texts, tower: int) -> torch.Tensor:
        """(n, L, filters): tanh of the convolution over (w_t-1, w_t, w_t+1), the text padded with empty words."""
        n, length = texts.ids.shape
        parts = F.pad(self.hashing[tower](texts.ids, self.word_trigrams), (0, 0, 1, 1))   # (n, L + 2, 3 filters)
        parts = parts.view(n, length + 2, WINDOW, self.cfg.filters)
        window = sum(parts[:, k : k + length, k] for k in range(WINDOW))
        return torch.tanh(window + self.conv_bias[tower])

    def encode(self, texts: Texts, side: int) -> torch.Tensor:
        tower = 0 if self.cfg.shared else side
        x = self.drop(self.convolved(texts, tower))
        if self.cfg.gru:
            x, _ = rnn_states(self.gru[tower], x, texts.lengths)
        real = mask(texts.lengths.clamp(min=1), x.shape[1]).unsqueeze(-1)     # an empty text keeps one position
        pooled = x.masked_fill(~real, float("-inf")).amax(1)
        return torch.tanh(self.semantic[tower](self.drop(pooled)))

    def match(self, query: torch.Tensor, ticket: torch.Tensor) -> torch.Tensor:
        return self.score(query, ticket)
