"""A full disk in one line: `no space left on DEVICE while writing FILE; free N MB`, said before minutes of encoding
where the size of what is to be written can be estimated, and for a write the disk refuses (ENOSPC, a quota, or the
short write numpy and FAISS report without an errno), so that no traceback stands for a full disk."""
from __future__ import annotations

import errno
import math
import os
import re
import shutil
from pathlib import Path

from ticketsim.errors import StepError

MB = 1_000_000
FULL = (errno.ENOSPC, errno.EDQUOT)
SAID = re.compile("|".join([*map(re.escape, map(os.strerror, FULL)), r"\d+ requested and \d+ written"]))    # numpy's short write


def is_full(error: BaseException) -> bool:
    """Whether a write failed for want of space: its errno, or the words of a library that reports none."""
    return isinstance(error, OSError) and error.errno in FULL or \
        isinstance(error, (OSError, RuntimeError)) and SAID.search(str(error)) is not None


def existing(path: Path) -> Path:
    """`path`, or its nearest folder that exists (a folder not made yet is on its parent's disk)."""
    path = Path(path).absolute()
    return next(p for p in (path, *path.parents) if p.exists())


def device(path: Path) -> str:
    """The device that holds `path` and where it is mounted, as the mount table names them (else the path's mount point)."""
    target = os.path.realpath(existing(path))
    mounted = target
    while not os.path.ismount(mounted):
        mounted = os.path.dirname(mounted)
    try:
        table = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        table = []
    sources = [line.split()[0] for line in table if len(line.split()) > 1 and line.split()[1].replace("\\040", " ") == mounted]
    return f"{sources[-1]} (mounted at {mounted})" if sources else f"the disk mounted at {mounted}"


def free_bytes(path: Path) -> int:
    return shutil.disk_usage(existing(path)).free


def sized(n: int) -> str:
    """Bytes for people: 340 KB, 45 MB, 7.7 GB."""
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{math.ceil(n / MB):,} MB" if n >= MB else f"{math.ceil(n / 1000):,} KB"


def no_space(path: Path, writing: Path | str, needed: int, free: int, after: str) -> StepError:
    """The one line for a write of about `needed` bytes to `path`'s disk, which has `free`; after: what was kept."""
    short = max(1, math.ceil((needed - free) / MB))
    return StepError(f"no space left on {device(path)} while writing {writing}; free {short:,} MB (it needs about "
                     f"{sized(needed)}, {sized(free)} free; {after})")


def room(path: Path, needed: int, writing: Path | str) -> None:
    """StepError (no_space) now, before the work, where `path`'s disk has less than `needed` bytes free."""
    free = free_bytes(path)
    if needed > free:
        raise no_space(path, writing, needed, free, "nothing was written")


def tree_bytes(folder: Path) -> int:
    """The bytes of every file under `folder` (0 where it is gone)."""
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file()) if Path(folder).is_dir() else 0


def written_last(error: BaseException, folder: Path) -> Path:
    """The file a failed write was writing: the error's own, else the newest file in `folder` (numpy names none)."""
    if isinstance(error, OSError) and error.filename:
        return Path(error.filename)
    files = [p for p in Path(folder).rglob("*") if p.is_file()] if Path(folder).is_dir() else []
    return max(files, key=lambda p: p.stat().st_mtime_ns) if files else Path(folder)


def allocate(path: Path) -> None:
    """Reserve a file's blocks now (it was made sparse to be memory-mapped): a mapped write to a full disk kills the
    process with SIGBUS, where this raises ENOSPC. File systems that cannot reserve are left as they are."""
    descriptor = os.open(path, os.O_RDWR)
    try:
        os.posix_fallocate(descriptor, 0, os.fstat(descriptor).st_size)
    except OSError as error:
        if error.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
            raise
    finally:
        os.close(descriptor)
