"""The trained channels beside the LSTM's h: each is one module shared by every component on both sides (the replicated
Siamese branch), registered in BRANCHES with what it reads, what it starts from and how it is built.

- F, the fine-tuned encoder: a pretrained sentence-transformers model trained end to end through the metric. It reads
  a component's raw text (the words the encoder was pretrained on, not our tokens), cut at `max_tokens` word pieces.
- Fq, the query tower: F trained on the query side only. Its ticket side is channel S as cached, the pretrained
  encoder's vectors that the sentence_encoder stage and the index hold already: training encodes queries alone, and
  neither a training nor a retrain re-encodes a ticket (docs/retraining.md: the two roads).
- A, the adapter: a trained linear map over the cached channel S (x -> x + xM, M starting at 0, so A starts as S). It
  needs no re-encoding after a retrain: seconds on a CPU.

A new trained channel is a module here and one line in BRANCHES.
"""
from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn as nn

from ticketsim.config import (
    EncoderConfig,
    SentenceConfig,
)
from ticketsim.device import inference_precision, resolve_device, training_precision
from ticketsim.scoring.weights import PAIR_CHANNELS, MetricConfig


@dataclass(frozen=True, eq=False)
class BranchStart:
    """Where the started branches (F, Fq, A) begin: the pretrained encoder (copied into each model, which then trains its
    own copy), its settings, and channel S's scale and width (F and A start as S: the same scale keeps W comparable)."""

    encoder: Any | None             # a SentenceTransformer, or None when no variant weighs a pretrained branch
    cfg: EncoderConfig              # its device named (EncoderConfig.on): where each model's copy runs
    scale: float
    dim: int


@dataclass(frozen=True)
class Branch:
    """A trained channel: what Encoded.take hands its branch ("words": our token ids; "strings": raw component text;
    a cached channel's name: its vectors), on the ticket side too unless `ticket_reads` says otherwise, the cached
    channel it starts from, and how a BranchStart builds it (`own`: the start's encoder is this model's alone, no copy).
    No `build`: h, the LSTM that SiameseLSTM makes itself."""

    reads: str
    starts_from: str | None = None
    build: Callable[[BranchStart, bool], nn.Module] | None = None
    pretrained: bool = False        # holds the start's encoder: needs it to build, saves it as a folder of its own
    ticket_reads: str | None = None

    def source(self, tickets: bool) -> str:
        """What the branch reads on one side."""
        return self.ticket_reads if tickets and self.ticket_reads else self.reads


def transformer_branch(start: BranchStart, own: bool) -> TransformerBranch:
    if start.encoder is None:
        raise ValueError("channel F needs the pretrained encoder in its BranchStart")
    encoder = start.encoder if own else copy.deepcopy(start.encoder)    # several models start from one loaded encoder
    return TransformerBranch(encoder, start.cfg.max_tokens, start.cfg.frozen_layers, start.scale,
                             start.cfg.device or SentenceConfig.device, start.cfg.batch_size)


BRANCHES = {
    "h": Branch("words"),
    "F": Branch("strings", "S", transformer_branch, pretrained=True),
    "Fq": Branch("strings", "S", lambda start, own: QueryTower(transformer_branch(start, own)), pretrained=True,
                 ticket_reads="S"),
    "A": Branch("S", "S", lambda start, own: Adapter(start.dim)),
}
STARTED = frozenset(c for c, b in BRANCHES.items() if b.build)    # the channels a BranchStart builds
TOWERS = ("F", "Fq")    # the fine-tuned encoders: the costliest rows to train, started first


def query_tower_refusal(weighed: set[str]) -> str | None:
    """Why a variant weighing these channels cannot have its query side retrained alone, None when it can: only Fq's
    ticket side is what the index holds (F's is trained too), and every other channel with vectors would be trained or
    built again on both sides (A, h) or needs its own cache (E, T, S)."""
    if "Fq" not in weighed:
        return ("it weighs F, whose ticket side trains too: its index is re-encoded by the full road" if "F" in weighed
                else "it weighs no query tower (channel Fq)")
    others = weighed - {"Fq"} - set(PAIR_CHANNELS)
    return f"it also weighs {', '.join(sorted(others))}, which a query tower does not keep" if others else None


class TransformerBranch(nn.Module):
    """Channel F: `model` (a SentenceTransformer) as a branch of the Siamese network, its vectors divided by `scale`.

    Texts are deduplicated per call (a ranking batch repeats its query once per candidate) and encoded in chunks of
    similar length (less padding); the lowest `frozen_layers` transformer layers and the embeddings keep their
    pretrained weights, which halves the backward pass and guards a small training set from forgetting.
    `device`: where the transformer runs (auto, cpu, cuda, cuda:N: ticketsim.device), training under bfloat16 and
    encoding under float16 autocast on cuda; its vectors come back to the CPU as float32, where the metric runs.
    `exported`: the same encoder on ONNX Runtime (use_exported), which then encodes in eval mode: a bundle's tickets.
    """

    exported: Any | None = None

    def __init__(self, model: Any, max_tokens: int = 128, frozen_layers: int = 0, scale: float = 1.0,
                 device: str = SentenceConfig.device, batch_size: int = 32):
        super().__init__()
        device = resolve_device(device, "siamese.encoder.device")
        self.model = model.to(device)
        self.model.max_seq_length = max_tokens
        self.max_tokens, self.scale, self.device, self.batch_size = max_tokens, scale, device, batch_size
        self.frozen_layers = frozen_layers
        transformer = self.model[0].auto_model
        frozen = [transformer.embeddings, *transformer.encoder.layer[:frozen_layers]] if frozen_layers else []
        for module in frozen:
            module.requires_grad_(False)

    def forward(self, texts: Sequence[str]) -> torch.Tensor:
        unique = sorted(set(texts), key=lambda t: (len(t), t))
        encode = self.encode_exported if self.exported is not None and not self.training else self.encode_chunk
        out = [encode(unique[i:i + self.batch_size]) for i in range(0, len(unique), self.batch_size)]
        vectors = torch.cat(out) if out else torch.zeros(0, self.dim)
        row = {text: i for i, text in enumerate(unique)}
        return vectors[torch.tensor([row[t] for t in texts], dtype=torch.long)]

    def encode_chunk(self, texts: list[str]) -> torch.Tensor:
        features = {k: v.to(self.device) if isinstance(v, torch.Tensor) else v for k, v in self.model.preprocess(texts).items()}
        with (training_precision if self.training else inference_precision)(self.device):
            vectors = self.model(features)["sentence_embedding"]
        return self.scaled(vectors.float().cpu(), texts)

    def encode_exported(self, texts: list[str]) -> torch.Tensor:
        vectors = self.exported.encode(texts, batch_size=len(texts), convert_to_numpy=True, show_progress_bar=False)
        return self.scaled(torch.from_numpy(vectors), texts)

    def scaled(self, vectors: torch.Tensor, texts: list[str]) -> torch.Tensor:
        empty = torch.tensor([not t.strip() for t in texts])
        return (vectors / self.scale).masked_fill(empty.unsqueeze(1), 0.0)   # as channel S: an empty text is the zero vector

    def use_exported(self, folder: str | Path, sentence: SentenceConfig) -> None:
        """Encode through `folder`'s encoder (this branch's, saved) exported for sentence.backend (onnx; sentence.quantize
        int8 optional) on sentence.threads threads: exported once into sentence.cache (channels/encoder_backends.py)."""
        from ticketsim.channels.encoder_backends import load_backend

        exported = load_backend(str(folder), sentence.backend, sentence.quantize, sentence.threads, sentence.cache,
                                local_files_only=True)[0]
        exported.max_seq_length = self.max_tokens      # F reads max_tokens word pieces, as in training
        object.__setattr__(self, "exported", exported)  # not a submodule: no state of the model, not moved by .to()

    @property
    def dim(self) -> int:
        return int(self.model.get_embedding_dimension())

    def save(self, folder: str | Path) -> None:
        """An ordinary sentence-transformers folder: SentenceTransformer(folder) loads the fine-tuned encoder anywhere."""
        self.model.save(str(folder))

    def export(self, folder: str | Path) -> str | None:
        """Write the encoder's ONNX export for a query without torch (channels/onnx_encoder.py: the first max_tokens
        word pieces, unscaled) to `folder`, checked against this branch's own torch encoding on the CPU; None when written, else
        why not."""
        from ticketsim.channels.onnx_encoder import export_model

        cpu = TransformerBranch(copy.deepcopy(self.model).cpu(), self.max_tokens, device="cpu").eval()   # this one untouched

        def through_torch(texts: Sequence[str]) -> np.ndarray:
            with torch.no_grad():
                return cpu(list(texts)).numpy()

        return export_model(cpu.model, {"truncate": True}, folder, through_torch)


class QueryTower(nn.Module):
    """Channel Fq: a TransformerBranch on the query side; the ticket side passes channel S's cached vectors through (they
    are divided by S's scale, as the branch divides its own), so a ticket's vectors never move in training and are
    those the index holds."""

    def __init__(self, query: TransformerBranch):
        super().__init__()
        self.query, self.ticket = query, nn.Identity()

    def side(self, tickets: bool) -> nn.Module:
        """The tower of one side of a pair (SiameseLSTM.channels)."""
        return self.ticket if tickets else self.query

    def forward(self, texts: Sequence[str]) -> torch.Tensor:
        return self.query(texts)

    @property
    def dim(self) -> int:
        return self.query.dim

    def save(self, folder: str | Path) -> None:
        self.query.save(folder)

    def export(self, folder: str | Path) -> str | None:
        return self.query.export(folder)


class Adapter(nn.Module):
    """Channel A: x + x M over cached S vectors, M (dim, dim) trained from zero."""

    def __init__(self, dim: int):
        super().__init__()
        self.map = nn.Parameter(torch.zeros(dim, dim))

    def forward(self, vectors: torch.Tensor) -> torch.Tensor:
        return vectors + vectors @ self.map


def reads(metric: MetricConfig) -> set[str]:
    """The cached channels a metric needs: those it weighs and those its trained branches start from (S for F and A)."""
    weighed = {c for c, w in metric.channels.items() if w}
    return weighed | {BRANCHES[c].starts_from for c in weighed & STARTED}


def cached_components(metric: MetricConfig, channel: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(query side, ticket side): the components of cached `channel` the metric reads, weighed itself or through a
    branch (A reads S on both sides, Fq on the ticket side; F reads text): what an encoding of new texts computes."""
    def side(needs: dict[str, tuple[str, ...]], tickets: bool) -> tuple[str, ...]:
        return tuple(sorted({part for c, parts in needs.items()
                             if (BRANCHES[c].source(tickets) if c in BRANCHES else c) == channel for part in parts}))

    queries, tickets = metric.needs()
    return side(queries, False), side(tickets, True)


def ticket_cost(metric: MetricConfig) -> tuple[int, int]:
    """What indexing one ticket costs: (transformer passes, level blocks): S's components and the fine-tuned encoders'
    texts (each a pass of the encoder, the bulk of an index build), then the levels times the dense channels (the
    index's dimensions, in units of the channels' width)."""
    _, tickets = metric.needs()
    towers = sum(len(parts) for c, parts in tickets.items() if c in BRANCHES and BRANCHES[c].source(True) == "strings")
    return len(cached_components(metric, "S")[1]) + towers, len(metric.level_pairs()) * len(tickets)
