"""What the comparators read: letter-trigram hashing, word ids, sentence chunks, and the shared word-level input layers."""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ticketsim.model.inputs import PAD, padded, vocabulary_index

SENTENCE_ENDS = frozenset({".", "!", "?"})   # the tokenizer splits a sentence's final mark off as its own token


def letter_trigrams(word: str) -> list[str]:
    """Huang et al.'s word hashing: '#good#' -> ['#go', 'goo', 'ood', 'od#'] (a one-letter word is one trigram)."""
    marked = f"#{word}#"
    return [marked[i : i + 3] for i in range(len(marked) - 2)]


def trigram_index(texts: Iterable[Sequence[str]], min_count: int = 1) -> dict[str, int]:
    """trigram -> id (1..n, 0 pads) over the words of `texts` (the training texts), most frequent first."""
    counts = Counter(trigram for words in texts for word in words for trigram in letter_trigrams(word))
    kept = sorted((t for t, n in counts.items() if n >= min_count), key=lambda t: (-counts[t], t))
    return vocabulary_index(kept)


def word_trigrams(words: Sequence[str], index: Mapping[str, int]) -> torch.Tensor:
    """(len(words) + 1, T) trigram ids of each word row (row 0 pads); trigrams outside `index` are dropped, so an unseen
    word keeps the trigrams it shares with training words and a word with none hashes to nothing."""
    return padded([[], *map(letter_trigrams, words)], index, max_tokens=10**6).ids


@dataclass(frozen=True)
class Chunks:
    """Texts cut into chunks: ids (n, C, L), lengths (n, C) of each chunk, counts (n,) of real chunks."""

    ids: torch.Tensor
    lengths: torch.Tensor
    counts: torch.Tensor

    def take(self, rows: torch.Tensor) -> Chunks:
        counts, lengths = self.counts[rows], self.lengths[rows]
        c, n = max(1, int(counts.max())), max(1, int(lengths.max()))
        return Chunks(self.ids[rows, :c, :n], lengths[:, :c], counts)


def sentence_chunks(tokens: Sequence[str], max_tokens: int) -> list[list[str]]:
    """The text's sentences (split after '.', '!', '?'), a sentence longer than max_tokens cut into several chunks."""
    chunks, current = [], []
    for token in tokens:
        current.append(token)
        if token in SENTENCE_ENDS or len(current) == max_tokens:
            chunks.append(current)
            current = []
    return chunks + ([current] if current else [])


def chunked(components: Sequence[list[list[str]]], index: Mapping[str, int], max_chunks: int, max_tokens: int) -> Chunks:
    """Each text's chunks: the sentences of each of its components in turn (a component boundary ends a chunk), the
    first max_chunks of them; a word outside `index` is dropped like in `padded`."""
    per_text = [[chunk for tokens in parts for chunk in sentence_chunks(tokens, max_tokens)][:max_chunks]
                for parts in zip(*components)]
    flat = padded([chunk for chunks in per_text for chunk in chunks], index, max_tokens)
    counts = torch.tensor([len(chunks) for chunks in per_text], dtype=torch.long)
    ids = torch.full((len(per_text), max([1, *counts.tolist()]), flat.ids.shape[1]), PAD, dtype=torch.long)
    lengths = torch.zeros(ids.shape[:2], dtype=torch.long)
    real = torch.arange(ids.shape[1]) < counts.unsqueeze(1)
    ids[real], lengths[real] = flat.ids, flat.lengths
    return Chunks(ids, lengths, counts)


def word_embedding(vocab_size: int, dim: int, table: np.ndarray | torch.Tensor | None, finetune: bool) -> nn.Embedding:
    """Row 0 pads. A pretrained table (vocab_size, dim) is copied and trains only with finetune; without one the random
    rows always train (frozen random vectors would carry no meaning)."""
    embedding = nn.Embedding(vocab_size, dim, padding_idx=PAD)
    if table is not None:
        table = torch.as_tensor(np.asarray(table, dtype=np.float32))
        assert table.shape == (vocab_size, dim), f"word table {tuple(table.shape)}, expected {(vocab_size, dim)}"
        embedding.weight.data.copy_(table)
    embedding.weight.requires_grad_(table is None or finetune)
    return embedding


def rnn_states(rnn: nn.RNNBase, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Run a batch_first RNN over padded x (n, L, d) without reading the padding: states (n, L', H·dirs), zeros past each
    text's end, and the last state (n, H·dirs) (both directions' final states). An empty text reads one padding step."""
    packed = pack_padded_sequence(x, lengths.clamp(min=1).cpu(), batch_first=True, enforce_sorted=False)
    states, last = rnn(packed)
    last = last[0] if isinstance(last, tuple) else last           # an LSTM returns (h, c)
    states, _ = pad_packed_sequence(states, batch_first=True, total_length=x.shape[1])
    dirs = 2 if rnn.bidirectional else 1
    return states, torch.cat(list(last[-dirs:]), dim=-1)


def mask(lengths: torch.Tensor, length: int) -> torch.Tensor:
    """(n, length) True on each text's real tokens."""
    return torch.arange(length) < lengths.unsqueeze(1)
