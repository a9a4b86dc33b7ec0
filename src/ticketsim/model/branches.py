"""The trained channels beside the LSTM's h: each is one module shared by every component on both sides (the replicated
Siamese branch), registered here with the input it reads.

- F, the fine-tuned encoder: a pretrained sentence-transformers model trained end to end through the metric. It reads
  a component's raw text (the words the encoder was pretrained on, not our tokens), cut at `max_tokens` word pieces.
- A, the adapter: a trained linear map over the cached channel S (x -> x + xM, M starting at 0, so A starts as S). It
  needs no re-encoding after a retrain: seconds on a CPU.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn

# Trained channel -> what Encoded.take hands its branch: "words" (our token ids, channel h), "strings" (raw component
# text, F) or a cached channel's name (its vectors, A).
INPUT_OF = {"h": "words", "F": "strings", "A": "S"}
# Trained channel -> the cached channel it starts from: A maps S's vectors; F is S's encoder and takes S's scale.
STARTS_FROM = {"F": "S", "A": "S"}


class TransformerBranch(nn.Module):
    """Channel F: `model` (a SentenceTransformer) as a branch of the Siamese network, its vectors divided by `scale`.

    Texts are deduplicated per call (a ranking batch repeats its query once per candidate) and encoded in chunks of
    similar length (less padding); the lowest `frozen_layers` transformer layers and the embeddings keep their
    pretrained weights, which halves the backward pass and guards a small training set from forgetting.
    `device`: where the transformer runs (cpu, cuda); its vectors come back to the CPU, where the metric runs.
    """

    def __init__(self, model: Any, max_tokens: int = 128, frozen_layers: int = 0, scale: float = 1.0,
                 device: str = "cpu", batch_size: int = 32):
        super().__init__()
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
        out = [self.encode_chunk(unique[i:i + self.batch_size]) for i in range(0, len(unique), self.batch_size)]
        vectors = torch.cat(out) if out else torch.zeros(0, self.dim)
        row = {text: i for i, text in enumerate(unique)}
        return vectors[torch.tensor([row[t] for t in texts], dtype=torch.long)]

    def encode_chunk(self, texts: list[str]) -> torch.Tensor:
        features = {k: v.to(self.device) if isinstance(v, torch.Tensor) else v for k, v in self.model.preprocess(texts).items()}
        vectors = self.model(features)["sentence_embedding"].float().cpu() / self.scale
        empty = torch.tensor([not t.strip() for t in texts])
        return vectors.masked_fill(empty.unsqueeze(1), 0.0)     # as channel S: an empty text is the zero vector

    @property
    def dim(self) -> int:
        return int(self.model.get_embedding_dimension())

    def save(self, folder: str | Path) -> None:
        """An ordinary sentence-transformers folder: SentenceTransformer(folder) loads the fine-tuned encoder anywhere."""
        self.model.save(str(folder))


class Adapter(nn.Module):
    """Channel A: x + x M over cached S vectors, M (dim, dim) trained from zero."""

    def __init__(self, dim: int):
        super().__init__()
        self.map = nn.Parameter(torch.zeros(dim, dim))

    def forward(self, vectors: torch.Tensor) -> torch.Tensor:
        return vectors + vectors @ self.map
