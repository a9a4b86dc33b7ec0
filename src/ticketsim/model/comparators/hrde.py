"""RDE, HRDE and HRDE-LTC (Yoon et al. 2018): shared GRU encoders, the ticket by chunks, a latent topic memory, bilinear p."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
import torch.nn as nn

from ticketsim.model.comparators.base import QUERY, Comparator
from ticketsim.model.comparators.inputs import Chunks, mask, rnn_states, word_embedding
from ticketsim.model.siamese import Texts


@dataclass(frozen=True)
class HRDEConfig:
    vocab_size: int
    word_dim: int = 350                 # the project's word vectors: word2vec 300 ++ char-BLSTM 50
    hidden: int = 64
    hierarchical: bool = True           # HRDE: a ticket's chunks word-level, then the chunk sequence | RDE: one pass
    topics: int = 0                     # LTC: K latent topic clusters on the ticket side; 0 = none
    pooling: Literal["last", "mean"] = "last"   # the paper's last GRU state | the mean of the states
    dropout: float = 0.2
    finetune: bool = False              # pretrained word vectors train with the model
    query_tokens: int = 30
    ticket_tokens: int = 200            # RDE's ticket
    chunk_tokens: int = 30              # HRDE: a sentence longer than this is cut into several chunks
    max_chunks: int = 16


class HRDE(Comparator):
    def __init__(self, cfg: HRDEConfig, word_table: np.ndarray | torch.Tensor | None = None):
        super().__init__()
        self.cfg = cfg
        self.embed = word_embedding(cfg.vocab_size, cfg.word_dim, word_table, cfg.finetune)
        self.drop = nn.Dropout(cfg.dropout)
        self.words = nn.GRU(cfg.word_dim, cfg.hidden, batch_first=True)        # shared by query and ticket
        self.chunks = nn.GRU(cfg.hidden, cfg.hidden, batch_first=True) if cfg.hierarchical else None
        self.memory = nn.Parameter(torch.randn(cfg.topics, cfg.hidden) / cfg.hidden**0.5) if cfg.topics else None
        ticket_dim = cfg.hidden * (2 if cfg.topics else 1)                       # e = [x; x_K]
        self.M = nn.Parameter(torch.eye(cfg.hidden, ticket_dim))               # starts as the dot product u_Q . x
        self.b = nn.Parameter(torch.zeros(()))

    def pooled(self, rnn: nn.GRU, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        states, last = rnn_states(rnn, x, lengths)
        return last if self.cfg.pooling == "last" else states.sum(1) / lengths.clamp(min=1).unsqueeze(1)

    def encode_words(self, texts: Texts) -> torch.Tensor:
        """(n, hidden): the word-level encoder, the same for queries, RDE's tickets and HRDE's chunks."""
        return self.pooled(self.words, self.drop(self.embed(texts.ids)), texts.lengths)

    def encode_chunks(self, chunks: Chunks) -> torch.Tensor:
        """(n, hidden): each real chunk word-level, then the chunk-level GRU over them (an empty ticket: one empty chunk)."""
        n, c, _ = chunks.ids.shape
        counts = chunks.counts.clamp(min=1)
        real = mask(counts, c)
        x = torch.zeros(n, c, self.cfg.hidden)
        x[real] = self.encode_words(Texts(chunks.ids[real], chunks.lengths[real]))
        return self.pooled(self.chunks, x, counts)

    def topic_weights(self, x: torch.Tensor) -> torch.Tensor:
        """(n, K): p_k = softmax_k(x . m_k)."""
        return torch.softmax(x @ self.memory.T, dim=-1)

    def encode(self, texts: Texts | Chunks, side: int) -> torch.Tensor:
        """u_Q (n, hidden) of queries; e (n, hidden, or 2 hidden with LTC) of tickets."""
        if side == QUERY:
            return self.encode_words(texts)
        x = self.encode_chunks(texts) if self.cfg.hierarchical else self.encode_words(texts)
        if self.memory is not None:
            x = torch.cat([x, self.topic_weights(x) @ self.memory], dim=-1)    # e = [x; x_K], x_K = sum_k p_k m_k
        return x

    def match(self, query: torch.Tensor, ticket: torch.Tensor) -> torch.Tensor:
        assert query.shape[1] == self.M.shape[0] and ticket.shape[1] == self.M.shape[1], (query.shape, ticket.shape)
        return torch.sigmoid(((query @ self.M) * ticket).sum(-1) + self.b)
