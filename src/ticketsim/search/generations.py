"""An index folder as a store with one writer at a time and readers that never see a half-written index.

The folder holds generations, `gen-000001/`, `gen-000002/`, ..., each a whole index (its segments' files hard-linked
from the generation before where it keeps them: search/segments.py), and `CURRENT`, the name of the one
in force. A writer takes the folder's lock (it waits for another writer, and says so), writes the next generation in a
hidden scratch folder, renames it into place and then switches `CURRENT` by one atomic rename. A kill at any instant
leaves the previous generation or the new one in force, never a mix: the scratch folder is only a leftover, removed by
the next writer. Readers read `CURRENT` once and then only that generation's files, which no writer changes; the
generation before the one in force is kept, so a reader that has just read `CURRENT` still finds its files (except
after an erasing write, `index delete`, which keeps none: such a reader loads the new one instead).
"""
from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ticketsim.data.locks import fsync, take
from ticketsim.errors import StepError
from ticketsim.search.damage import Damaged
from ticketsim.search.space import free_bytes, is_full, no_space, room, tree_bytes, written_last

POINTER, LOCK = "CURRENT", ".lock"
GENERATION = re.compile(r"gen-(\d{6})")
GENERATION_NAME = re.compile(rb"gen-\d{6}")     # CURRENT's bytes, stripped


def current(directory: str | Path) -> Path | None:
    """The generation in force, or None where the folder holds no index (no CURRENT). Damaged where CURRENT names no
    generation: read as bytes, it must be a generation's name (`../gen-000001` is none), and that generation a folder."""
    pointer = Path(directory) / POINTER
    try:
        named = pointer.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as error:
        raise Damaged(pointer, f"unreadable ({error.strerror or error})", None) from None
    if not GENERATION_NAME.fullmatch(named.strip()):
        shown = repr(named[:40]) + ("..." if len(named) > 40 else "")
        raise Damaged(pointer, f"holds {shown}, which names no generation (gen-000001, ...)", None)
    generation = Path(directory) / named.strip().decode()
    if not generation.is_dir():
        raise Damaged(pointer, f"names {generation.name}, which is missing", number(generation))
    return generation


def number(generation: Path) -> int:
    """The number of a generation folder (gen-000007: 7)."""
    return int(GENERATION.fullmatch(generation.name)[1])


def scratch_number(scratch: Path) -> int:
    """The number of the generation a scratch folder of next_generation becomes (.gen-000007: 7)."""
    return number(scratch.with_name(scratch.name.removeprefix(".")))


def generations(directory: str | Path) -> list[Path]:
    """The generation folders of an index, oldest first (scratch folders are hidden: none of them)."""
    found = [p for p in Path(directory).iterdir() if GENERATION.fullmatch(p.name) and p.is_dir()] \
        if Path(directory).is_dir() else []
    return sorted(found, key=number)


def switch(directory: Path, name: str) -> None:
    """Put the generation `name` in force: CURRENT replaced by one atomic rename, on disk when this returns."""
    (directory / f".{POINTER}").write_text(name + "\n")
    fsync(directory / f".{POINTER}")
    os.replace(directory / f".{POINTER}", directory / POINTER)
    fsync(directory)


@contextmanager
def locked(directory: Path) -> Iterator[None]:
    """The folder's writer lock, held until the block ends (or the process dies: flock is released with it)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        stream = open(directory / LOCK, "a")
    except OSError as error:
        raise StepError(f"{directory}: cannot write the index there ({error.strerror}); choose a folder you can write") from None
    with stream:
        take(stream, f"{directory}: another writer holds the index; waiting for it to finish")
        yield


def writable(directory: str | Path) -> None:
    """StepError now, before minutes of encoding, where the index cannot be written (nothing is created here)."""
    directory = Path(directory).absolute()
    existing = next(p for p in (directory, *directory.parents) if p.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise StepError(f"{directory}: cannot write the index there ({existing} is "
                        f"{'not a folder' if not existing.is_dir() else 'not writable'}); choose a folder you can write")


def previous_of(directory: Path) -> Path | None:
    """The generation in force for a writer: None where there is none, or where CURRENT is damaged (a writer that
    replaces the index, `index build --force`, needs none; one that adds to it has refused already when it loaded)."""
    try:
        return current(directory)
    except Damaged:
        return None


def next_name(directory: Path) -> str:
    """The name the next generation of the folder gets: one past the highest there (also past one set aside)."""
    numbers = [int(m[1]) for p in directory.iterdir() if (m := GENERATION.fullmatch(p.name))] if directory.is_dir() else []
    return f"gen-{max(numbers, default=0) + 1:06d}"


@contextmanager
def next_generation(directory: str | Path, needs: int = 0, erase: bool = False) -> Iterator[tuple[Path | None, Path]]:
    """(the generation in force or None, a scratch folder to write the next one in), under the lock; when the block
    ends the scratch folder becomes the generation in force. An exception leaves the one in force and no scratch; one
    for want of space (refused at once where the disk lacks `needs`, the bytes the generation will take about) is a
    StepError of one line saying how much to free. erase: once the new one is in force, no earlier generation is kept
    (an `index delete`: no file of the folder holds what it removed); a reader that has one loaded keeps its mapped
    files (POSIX keeps an unlinked file's pages), one that read CURRENT just before the switch loads again
    (index.TicketIndex.load)."""
    directory = Path(directory)
    with locked(directory):
        for leftover in directory.glob(".gen-*"):
            shutil.rmtree(leftover)
        name = next_name(directory)
        scratch = directory / f".{name}"
        room(directory, needs, directory / name)
        previous = previous_of(directory)
        try:
            scratch.mkdir()
            yield previous, scratch
            for path in scratch.rglob("*"):    # its segments' files and folders, the linked ones' entries
                fsync(path)
            fsync(scratch)
            os.rename(scratch, directory / name)
            switch(directory, name)
        except BaseException as error:
            written, writing = tree_bytes(scratch), written_last(error, scratch)
            shutil.rmtree(scratch, ignore_errors=True)
            (directory / f".{POINTER}").unlink(missing_ok=True)
            if previous_of(directory) != directory / name:     # renamed, but CURRENT was not switched to it
                shutil.rmtree(directory / name, ignore_errors=True)
            if is_full(error):
                raise no_space(directory, writing, max(needs, written), free_bytes(directory),
                               f"the scratch folder is removed, {previous.name if previous else 'no generation'} "
                               "still in force") from None
            raise
        keep = {name} if erase else {name, previous.name if previous else name}
        for old in (p for p in directory.iterdir() if GENERATION.fullmatch(p.name) and p.name not in keep):
            shutil.rmtree(old)
