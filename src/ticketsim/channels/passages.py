"""A long text cut into passages an encoder reads whole, and one vector pooled from its passages' vectors: the steps of
channel S around the encoder itself, shared by its torch path (channels/sentence.py) and its exported one
(channels/onnx_encoder.py), so both read exactly the same passages. Numpy only."""
from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Literal

import numpy as np

Pooling = Literal["max", "mean", "first"]


def windows(text: str, offsets: Sequence[tuple[int, int]], words: Sequence[int | None], size: int, overlap: int) -> list[str]:
    """`text` (stripped, non-empty) cut into passages of whole words of at most `size` tokens, consecutive ones sharing
    about `overlap` tokens; offsets and words: each token's character span and word number, from the encoder's
    tokenizer without special tokens. A text that fits is one passage; only one word longer than a window is cut inside.
    Windows end at the tokenizer's word boundaries, so a passage tokenizes back to exactly its window (WordPiece)."""
    n = len(offsets)
    if n <= size:
        return [text]
    starts = [t for t in range(n) if t == 0 or words[t] != words[t - 1]]   # tokens that begin a word
    found, start = [], 0
    while True:
        end = min(start + size, n)
        if end < n:     # back off to the last word start inside the window, unless one word fills it
            last = starts[bisect.bisect_right(starts, end) - 1]
            end = last if last > start else end
        found.append(text[offsets[start][0]:offsets[end - 1][1]])
        if end == n:
            return found
        at = bisect.bisect_left(starts, end - overlap)     # the first word start in the overlap
        start = starts[at] if at < len(starts) and start < starts[at] <= end else end


def check_overlap(overlap: int, size: int) -> None:
    if not 0 <= overlap < size // 2:
        raise ValueError(f"sentence.overlap: {overlap} must be at least 0 and below half a passage ({size // 2} tokens)")


def pool(vectors: np.ndarray, pooling: Pooling, normalize: bool) -> np.ndarray:
    """One text's vector from its passages' vectors (rows)."""
    if pooling == "max":
        pooled = vectors.max(0)
    elif pooling == "mean":
        pooled = vectors.mean(0)
    elif pooling == "first":
        pooled = vectors[0]
    else:
        raise ValueError(f"sentence.pooling: {pooling!r} is not one of max, mean, first")
    if normalize:
        pooled = pooled / max(float(np.linalg.norm(pooled)), 1e-12)
    return pooled
