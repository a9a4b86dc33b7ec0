"""A sorted list of strings on disk, looked up without reading it: the UTF-8 bytes of every string in one array and
where each begins in another, both memory-mapped. A lookup is a binary search (about 20 probes at a million strings),
so opening an index costs no Python per string: BM25's vocabulary and the tickets' ids are stored so."""
from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from pathlib import Path

import numpy as np


class SortedStrings:
    """Strings in UTF-8 byte order (which is code point order: Python's own order of str)."""

    def __init__(self, blob: np.ndarray, offsets: np.ndarray):
        self.blob, self.offsets = blob, offsets

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> bytes:
        return self.blob[self.offsets[i]:self.offsets[i + 1]].tobytes()

    def find(self, text: str) -> int | None:
        """The position of `text`, or None."""
        key = text.encode()
        i = bisect_left(self, key)
        return i if i < len(self) and self[i] == key else None

    def strings(self) -> list[str]:
        """Every string, in order (a writer's: it costs Python per string)."""
        blob, offsets = self.blob.tobytes(), self.offsets.tolist()
        return [blob[a:b].decode() for a, b in zip(offsets, offsets[1:])]

    @classmethod
    def of(cls, strings: Iterable[str]) -> SortedStrings:
        """In memory, from strings already sorted and unique."""
        encoded = [s.encode() for s in strings]
        offsets = np.zeros(len(encoded) + 1, np.int64)
        np.cumsum([len(e) for e in encoded], out=offsets[1:])
        return cls(np.frombuffer(b"".join(encoded), np.uint8), offsets)

    @staticmethod
    def files(path: Path) -> list[Path]:
        """The files save(path) writes: path.blob.npy and path.offsets.npy."""
        return [Path(f"{path}.blob.npy"), Path(f"{path}.offsets.npy")]

    def save(self, path: Path) -> None:
        blob, offsets = self.files(path)
        np.save(blob, self.blob)
        np.save(offsets, self.offsets)

    @classmethod
    def load(cls, path: Path) -> SortedStrings:
        blob, offsets = cls.files(path)
        # plain views of the mappings: numpy's memmap subclass costs microseconds per probe's slice
        return cls(*(np.load(path, mmap_mode="r").view(np.ndarray) for path in (blob, offsets)))
