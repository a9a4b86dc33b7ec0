"""DSSM (Huang et al. 2013): each text's bag of letter trigrams through an MLP per side, cosine of the two ends."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from ticketsim.model.comparators.base import Comparator
from ticketsim.model.siamese import Texts


@dataclass(frozen=True)
class DSSMConfig:
    n_trigrams: int                        # trigram vocabulary + 1 (id 0 pads)
    hidden: tuple[int, ...] = (300, 300)   # the paper's 30k -> 300 -> 300 -> 128, tanh throughout
    out: int = 128
    shared: bool = False                   # one tower for both sides | one per side (a query is not a ticket)
    trigram_min_count: int = 1             # trigrams seen fewer times in the training texts are dropped
    query_tokens: int = 30
    ticket_tokens: int = 200


class WordHashing(nn.Module):
    """Each word's letter-trigram bag times one weight matrix: (n, L) word ids -> (n, L, dim), zeros at padding.

    The same as multiplying the text's (n, L, n_trigrams) count vectors by a Linear layer without ever building them:
    each distinct word of the batch sums its trigram rows once.
    """

    def __init__(self, n_trigrams: int, dim: int, fan_in: int):
        super().__init__()
        self.bag = nn.EmbeddingBag(n_trigrams, dim, mode="sum", padding_idx=0)
        nn.init.uniform_(self.bag.weight, -1 / math.sqrt(fan_in), 1 / math.sqrt(fan_in))   # nn.Linear's scale, not N(0, 1)
        self.bag.weight.data[0] = 0

    def forward(self, ids: torch.Tensor, word_trigrams: torch.Tensor) -> torch.Tensor:
        words, inverse = torch.unique(ids, return_inverse=True)
        return self.bag(word_trigrams[words])[inverse]


class CosineScore(nn.Module):
    """sigmoid(gamma cos + beta): the paper's smoothing factor gamma, learnt here, and an offset, so that the score is in
    (0, 1) and a per-query softmax over logit(score) is the paper's softmax over gamma cos."""

    def __init__(self, gamma: float = 5.0):
        super().__init__()
        self.gamma, self.beta = nn.Parameter(torch.tensor(gamma)), nn.Parameter(torch.tensor(0.0))

    def forward(self, query: torch.Tensor, ticket: torch.Tensor) -> torch.Tensor:
        assert query.shape == ticket.shape and query.dim() == 2, (query.shape, ticket.shape)
        return torch.sigmoid(self.gamma * F.cosine_similarity(query, ticket, dim=-1) + self.beta)


class DSSM(Comparator):
    def __init__(self, cfg: DSSMConfig, word_trigrams: torch.Tensor):
        super().__init__()
        self.cfg = cfg
        self.register_buffer("word_trigrams", word_trigrams)   # (words + 1, T) trigram ids per word row: the hashing
        towers = 1 if cfg.shared else 2
        self.hashing = nn.ModuleList(WordHashing(cfg.n_trigrams, cfg.hidden[0], cfg.n_trigrams) for _ in range(towers))
        self.first_bias = nn.Parameter(torch.zeros(towers, cfg.hidden[0]))
        sizes = (*cfg.hidden, cfg.out)
        self.mlp = nn.ModuleList(nn.Sequential(*(m for a, b in zip(sizes, sizes[1:]) for m in (nn.Linear(a, b), nn.Tanh())))
                                 for _ in range(towers))
        self.score = CosineScore()

    def encode(self, texts: Texts, side: int) -> torch.Tensor:
        """(n, out) semantic vector of each text; side 0 = queries, 1 = tickets."""
        tower = 0 if self.cfg.shared else side
        bag = self.hashing[tower](texts.ids, self.word_trigrams).sum(1)    # padding words hash to zeros
        return self.mlp[tower](torch.tanh(bag + self.first_bias[tower]))

    def match(self, query: torch.Tensor, ticket: torch.Tensor) -> torch.Tensor:
        return self.score(query, ticket)
