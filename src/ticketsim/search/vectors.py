"""The index's flat ticket vectors: one row per ticket, stored as float32 (or float16) in one .npy file that a loaded
index memory-maps, and searched exactly under L1.

Why not a FAISS IndexFlat: it holds float32 in each process's own memory, so every gunicorn worker kept a copy of the
whole index, and FAISS's scalar quantizer (which stores float16) scores only L2 and inner products. Here the file's
pages are the operating system's page cache, shared by every worker that maps it. float32 vectors are scanned in place
by FAISS's brute-force L1 kernel (faiss.knn), SCAN rows at a time; float16 ones (half the bytes) are converted to
float32 block by block first: the distances are those of the float16 vectors, computed exactly, but the rounding
reorders near-ties (docs/performance.md#the-indexs-memory-per-ticket), so float16 is chosen, not the default.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import faiss
import numpy as np

Precision = Literal["float16", "float32"]
SCAN = 1 << 14      # rows per block (float16 converted: 25 MB of float32 at 384 dims, 126 MB at 1,920)
TORCH_FROM = 1 << 22    # float16 values from which a scan converts them with torch (see half_copy)


def half_copy(values: int) -> Callable[[np.ndarray, np.ndarray], object]:
    """copy(out float32, block float16) for a scan of `values` float16 values. numpy converts float16 without SIMD here
    (a 200k x 384 scan took 6-9 times FAISS's float32 scan); torch's copy uses the CPU's F16C instructions (6x faster).
    Below TORCH_FROM values numpy's few milliseconds are cheaper than importing torch in a cold search."""
    if values < TORCH_FROM:
        return np.copyto
    import torch

    def copy(out: np.ndarray, block: np.ndarray) -> object:
        with warnings.catch_warnings():     # a read-only mapping: torch warns, but the tensor is only read
            warnings.simplefilter("ignore", UserWarning)
            return torch.from_numpy(out).copy_(torch.from_numpy(np.asarray(block)))

    return copy


class TicketVectors:
    """(ntotal, d) vectors, row i of ticket i; `array` is memory-mapped after load(), in memory after add()."""

    def __init__(self, array: np.ndarray):
        if array.ndim != 2 or array.dtype not in (np.float16, np.float32):
            raise ValueError(f"ticket vectors must be (n, d) float16 or float32, not {array.shape} {array.dtype}")
        self.array = array

    @classmethod
    def of(cls, vectors: np.ndarray, precision: Precision) -> TicketVectors:
        return cls(np.ascontiguousarray(vectors, dtype=precision))

    @classmethod
    def load(cls, path: str | Path) -> TicketVectors:
        """Map the file read-only: its pages load on first touch and are shared with every process mapping it."""
        return cls(np.load(path, mmap_mode="r"))

    def save(self, path: str | Path) -> None:
        with open(path, "wb") as stream:    # np.save(path) would append .npy to a scratch name
            np.save(stream, self.array)

    @property
    def ntotal(self) -> int:
        return self.array.shape[0]

    @property
    def d(self) -> int:
        return self.array.shape[1]

    @property
    def precision(self) -> Precision:
        return str(self.array.dtype)  # type: ignore[return-value]

    def take(self, rows: np.ndarray) -> np.ndarray:
        return self.array[rows]

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(distances, rows), each (n_queries, k), nearest first under L1, as IndexFlat.search; queries float32."""
        k = min(k, self.ntotal)
        distances, rows = np.zeros((len(queries), 0), np.float32), np.zeros((len(queries), 0), np.int64)
        converted = np.empty((min(SCAN, self.ntotal), self.d), np.float32) if self.array.dtype != np.float32 else None
        copy = half_copy(self.array.size) if converted is not None else None    # float32 is scanned in place: no torch
        for start in range(0, self.ntotal, SCAN):
            block = self.array[start:start + SCAN]
            if converted is not None:   # into one reused buffer: a fresh one per block costs its page faults again
                copy(converted[:len(block)], block)
                block = converted[:len(block)]
            d, i = faiss.knn(queries, block, min(k, len(block)), metric=faiss.METRIC_L1)
            distances, rows = np.hstack([distances, d]), np.hstack([rows, i + start])
            keep = np.argsort(distances, axis=1, kind="stable")[:, :k]
            distances, rows = np.take_along_axis(distances, keep, 1), np.take_along_axis(rows, keep, 1)
        return distances, rows
