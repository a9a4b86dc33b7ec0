"""MV-LSTM (Wan et al. 2016) and aMV-LSTM (Belkacem et al. 2019): bi-LSTM positions of both texts, their interaction
matrix, k-max pooling, an MLP; aMV-LSTM first weighs each word embedding by an attention gate."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ticketsim.model.comparators.base import Comparator
from ticketsim.model.comparators.inputs import mask, rnn_states, word_embedding
from ticketsim.model.siamese import Texts


@dataclass(frozen=True)
class MVLSTMConfig:
    vocab_size: int
    word_dim: int = 350
    hidden: int = 32                     # per direction (MatchZoo's default)
    interaction: Literal["cosine", "bilinear"] = "cosine"
    top_k: int = 10
    mlp: int = 32
    attention: int = 0                   # aMV-LSTM: hidden size of the attention gate; 0 = MV-LSTM
    dropout: float = 0.2
    finetune: bool = False
    query_tokens: int = 30               # MatchZoo cuts at 10 and 40: a ticket's solution starts later than that
    ticket_tokens: int = 200


class MVLSTM(Comparator):
    def __init__(self, cfg: MVLSTMConfig, word_table: np.ndarray | torch.Tensor | None = None):
        super().__init__()
        self.cfg = cfg
        self.embed = word_embedding(cfg.vocab_size, cfg.word_dim, word_table, cfg.finetune)
        self.drop = nn.Dropout(cfg.dropout)
        self.lstm = nn.LSTM(cfg.word_dim, cfg.hidden, batch_first=True, bidirectional=True)   # shared by both texts
        self.gate = (nn.Sequential(nn.Linear(cfg.word_dim, cfg.attention), nn.Tanh(), nn.Linear(cfg.attention, 1, bias=False))
                     if cfg.attention else None)
        self.bilinear = nn.Parameter(torch.eye(2 * cfg.hidden)) if cfg.interaction == "bilinear" else None
        self.mlp = nn.Sequential(nn.Linear(cfg.top_k, cfg.mlp), nn.ReLU(), nn.Linear(cfg.mlp, 1))

    def attention_weights(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """(n, L) softmax of the gate over each text's real tokens: they sum to 1, padding gets exactly 0."""
        logits = self.gate(x).squeeze(-1)
        return torch.softmax(logits.masked_fill(~mask(lengths.clamp(min=1), x.shape[1]), float("-inf")), dim=-1)

    def encode(self, texts: Texts, side: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(n, L, 2 hidden) bi-LSTM states, zeros past each text's end (unit length for the cosine), and the (n,) lengths;
        the same LSTM and gate for both sides."""
        x = self.embed(texts.ids)
        if self.gate is not None:
            # weights sum to 1; times the length, a uniform gate leaves the embeddings as they are (long tickets
            # would otherwise reach the LSTM hundreds of times smaller than short queries)
            weights = self.attention_weights(x, texts.lengths) * texts.lengths.clamp(min=1).unsqueeze(1)
            x = x * weights.unsqueeze(-1)
        states, _ = rnn_states(self.lstm, self.drop(x), texts.lengths)
        return (F.normalize(states, dim=-1) if self.bilinear is None else states), texts.lengths

    def interactions(self, query: tuple[torch.Tensor, torch.Tensor], ticket: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """(n, Lq, Lt) cosine or bilinear matches of every query position with every ticket position, -inf off the texts."""
        (q, q_lengths), (t, t_lengths) = query, ticket
        matches = (q if self.bilinear is None else q @ self.bilinear) @ t.transpose(1, 2)
        real = mask(q_lengths, q.shape[1]).unsqueeze(2) & mask(t_lengths, t.shape[1]).unsqueeze(1)
        return matches.masked_fill(~real, float("-inf"))

    def match(self, query: tuple[torch.Tensor, torch.Tensor], ticket: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        flat = self.interactions(query, ticket).flatten(1)
        flat = F.pad(flat, (0, max(0, self.cfg.top_k - flat.shape[1])), value=float("-inf"))
        top = flat.topk(self.cfg.top_k, dim=1).values
        top = top.masked_fill(top.isinf(), 0.0)                 # fewer real matches than k: the rest count as 0
        return torch.sigmoid(self.mlp(self.drop(top)).squeeze(-1))
