"""The Replicated Siamese network: one LSTM shared by every text branch gives channel h, and further trained branches
(model/branches.py: the fine-tuned encoder F, the adapter A) give theirs, each one set of weights for every component on
both sides; the fused score (scoring/fused.py) mixes them with the cached channels (E, T, S) and the pair channels (L, R),
by fixed weights or by weights it learns."""
from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from typing import Literal

import torch
import torch.nn as nn
import torch.nn.functional as F

from ticketsim.model.branches import QueryTower
from ticketsim.scoring.fused import FusedScore, PairDistances
from ticketsim.scoring.weights import MetricConfig


@dataclass(frozen=True)
class SiameseConfig:
    vocab_size: int
    word_dim: int = 300            # the word2vec part of each input vector
    char_dim: int = 50             # the char-BLSTM part
    hidden: int = 50
    dropout: float = 0.2
    finetune: Literal["none", "char", "all"] = "none"   # params siamese.trainable (this name: saved weights.pt record it)
    pooling: Literal["mean", "last"] = "mean"           # h: mean of the LSTM states over the text | the last one (the paper)


@dataclass(frozen=True)
class Texts:
    """Padded token ids (n, length) and true lengths (n,) of one component for a batch of texts."""

    ids: torch.Tensor
    lengths: torch.Tensor


Side = Mapping[str, Mapping[str, object]]  # channel -> component -> Texts (channel h) or (n, dim) tensor (E, T, ...)


class LearnedWeights(nn.Module):
    """W and V trained with the model, from the variant's values: softplus of free parameters keeps them positive.
    A zero weight stays zero, so a channel or level pair takes part by a positive starting weight."""

    def __init__(self, start: MetricConfig):
        super().__init__()
        self.start = start
        self.channel_names = [c for c, w in start.channels.items() if w]
        self.level_names = [k for k, w in start.levels.items() if w]
        inverse_softplus = lambda w: torch.tensor(w).expm1().log()  # noqa: E731
        self.w = nn.Parameter(inverse_softplus([float(start.channels[c]) for c in self.channel_names]))
        self.v = nn.Parameter(inverse_softplus([float(start.levels[k]) for k in self.level_names]))

    def forward(self) -> MetricConfig:
        return replace(self.start, channels=dict(zip(self.channel_names, F.softplus(self.w))),
                       levels=dict(zip(self.level_names, F.softplus(self.v))))


class SiameseLSTM(nn.Module):
    def __init__(self, cfg: SiameseConfig, word_vectors: torch.Tensor | None = None, learn: MetricConfig | None = None,
                 branches: Mapping[str, nn.Module] | None = None):
        """learn: the starting W and V when the model learns them (else every call passes its fixed metric);
        branches: trained channel -> module (F, A), each called on one component's inputs of a batch."""
        super().__init__()
        self.cfg = cfg
        self.weights = LearnedWeights(learn) if learn is not None else None
        self.branches = nn.ModuleDict(branches or {})
        # Row 0 is padding; word_vectors (vocab_size, word_dim + char_dim) initialise both parts.
        self.word = nn.Embedding(cfg.vocab_size, cfg.word_dim, padding_idx=0)
        self.char = nn.Embedding(cfg.vocab_size, cfg.char_dim, padding_idx=0)
        if word_vectors is not None:
            assert word_vectors.shape == (cfg.vocab_size, cfg.word_dim + cfg.char_dim), word_vectors.shape
            self.word.weight.data.copy_(word_vectors[:, : cfg.word_dim])
            self.char.weight.data.copy_(word_vectors[:, cfg.word_dim :])
        self.word.weight.requires_grad_(cfg.finetune == "all")
        self.char.weight.requires_grad_(cfg.finetune in ("char", "all"))
        self.drop = nn.Dropout(cfg.dropout)
        self.lstm = nn.LSTM(cfg.word_dim + cfg.char_dim, cfg.hidden, batch_first=True)

    def encode(self, texts: Texts) -> torch.Tensor:
        """Channel h of the shared LSTM, (n, hidden): its states averaged over the text, or its last state.

        An empty text reads one padding step. The mean is the default: the last state of a 100-token ticket and of a
        10-token query differ by their length before they differ by their meaning, and from a few hundred pairs the
        LSTM learnt nothing but the label mean that way (docs/model.md: `siamese.pooling`).
        """
        x = self.drop(torch.cat([self.word(texts.ids), self.char(texts.ids)], dim=-1))
        lengths = texts.lengths.clamp(min=1)
        # Over the padded batch, not a packed one: a forward LSTM's state at a text's step t reads its steps up to t
        # only, so the states within each text are a packed run's, and row 22 trains a fifth faster on the CPU.
        states, _ = self.lstm(x[:, : int(lengths.max())])
        if self.cfg.pooling == "last":
            return states[torch.arange(len(lengths)), lengths - 1]
        within = (torch.arange(states.shape[1]) < lengths.unsqueeze(1)).unsqueeze(2)
        return (states * within).sum(1) / lengths.unsqueeze(1).to(states.dtype)

    def channels(self, side: Side, tickets: bool = False) -> dict[str, Mapping[str, torch.Tensor]]:
        """Every channel of one side (`tickets`: the ticket side) as vectors: h and the other trained branches computed
        here (a two-tower branch, Fq, by its tower of that side), cached ones passed through."""
        trained = {"h": self.encode, **{c: b.side(tickets) if isinstance(b, QueryTower) else b for c, b in self.branches.items()}}
        return {c: ({k: trained[c](x) for k, x in comps.items()} if c in trained else comps) for c, comps in side.items()}

    def metric(self, fixed: MetricConfig) -> MetricConfig:
        """The W and V in force: the learned ones, or `fixed`."""
        return self.weights() if self.weights is not None else fixed

    def forward(self, queries: Side, tickets: Side, metric: MetricConfig, pool: bool = False,
                pair: PairDistances | None = None, only: Collection[str] | None = None) -> torch.Tensor:
        """g for paired rows (n,), or for every query against every ticket (n_q, n_t) with pool=True; only: of these
        channels alone (None: every one weighed)."""
        score = FusedScore.of(self.metric(metric))
        return (score if only is None else score.only(only)).similarity(self.channels(queries), self.channels(tickets, tickets=True),
                                                                        pool, pair)
