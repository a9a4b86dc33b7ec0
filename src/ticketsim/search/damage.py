"""A damaged index in one line: which file is missing, cut short or unreadable, and what is wrong with it.

ticketsim.search.index adds the remedy that exists (an earlier generation that is intact and loads, which `ticketsim
index rollback` puts in force). The checks of whole files here read headers and sizes with numpy and plain reads
only, no pyarrow or FAISS, whose thread pools would not survive a fork: `ticketsim serve`'s parent runs them before
it starts its workers.
"""
from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np

from ticketsim.errors import StepError

ARROW_MAGIC = b"ARROW1"     # an Arrow IPC file begins and ends with it
T = TypeVar("T")


class Damaged(StepError):
    """A file of an index that cannot be read as written: `path`, `problem`, and `below`, the number of the generation
    it belongs to (or that CURRENT names), so that an earlier one can be offered instead; None where CURRENT names none."""

    def __init__(self, path: Path, problem: str, below: int | None, remedy: str = ""):
        self.path, self.problem, self.below = Path(path), problem, below
        super().__init__(f"{path}: {problem}" + (f"; {remedy}" if remedy else ""))

    def with_remedy(self, remedy: str) -> Damaged:
        return Damaged(self.path, self.problem, self.below, remedy)


def one_line(error: BaseException) -> str:
    """An exception's message on one line, cut to 200 characters (a library's may span several)."""
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def npy_problem(path: Path) -> str | None:
    """What is wrong with a .npy file (missing, not one, shorter or longer than its header says), or None."""
    try:
        with open(path, "rb") as stream:
            version = np.lib.format.read_magic(stream)
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, _, dtype = read_header(stream)
            expected = stream.tell() + math.prod(shape) * dtype.itemsize
    except FileNotFoundError:
        return "missing"
    except (OSError, ValueError) as error:
        return f"not a .npy file ({one_line(error)})"
    size = os.path.getsize(path)
    if dtype.hasobject or size == expected:
        return None
    return f"cut short: {size:,} of its {expected:,} bytes" if size < expected else \
        f"{size:,} bytes where its header says {expected:,}"


def arrow_problem(path: Path) -> str | None:
    """What is wrong with an Arrow IPC file that its first and last bytes show (missing, cut short), or None."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as stream:
            head = stream.read(len(ARROW_MAGIC))
            stream.seek(max(size - len(ARROW_MAGIC), 0))
            tail = stream.read(len(ARROW_MAGIC))
    except FileNotFoundError:
        return "missing"
    except OSError as error:
        return f"unreadable ({error.strerror or one_line(error)})"
    if head != ARROW_MAGIC:
        return "not an Arrow file (it does not begin with ARROW1)"
    if size < 2 * len(ARROW_MAGIC) + 2 or tail != ARROW_MAGIC:
        return f"cut short: {size:,} bytes, without the end an Arrow file has"
    return None


def whole(npy: list[Path], arrow: list[Path], below: int | None) -> None:
    """Damaged naming the first of these files that is missing or cut short."""
    for path, problem in ((p, npy_problem(p)) for p in npy):
        if problem:
            raise Damaged(path, problem, below)
    for path, problem in ((p, arrow_problem(p)) for p in arrow):
        if problem:
            raise Damaged(path, problem, below)


def opened(path: Path, below: int | None, read: Callable[[], T]) -> T:
    """read(), which opens the file at `path`; what a damaged file makes a reader raise (pyarrow's, FAISS's, json's
    errors) as Damaged naming it."""
    try:
        return read()
    except FileNotFoundError:
        raise Damaged(path, "missing", below) from None
    except (OSError, ValueError, RuntimeError) as error:    # ArrowInvalid and JSONDecodeError are ValueErrors
        raise Damaged(path, f"unreadable ({one_line(error)})", below) from None
