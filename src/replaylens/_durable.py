"""Private: durable file writes shared by the run journals (replay shards, LLM acquisition runs)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["LockedError", "atomic_write", "clean_stale", "fsync_dir", "locked_dir"]


class LockedError(OSError):
    """Another process holds the directory's lock."""


def fsync_dir(path: Path) -> None:
    """Flush a directory entry (so a rename survives a crash); a no-op where directories cannot be opened."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary sibling, fsync it, rename it over ``path`` and fsync the directory."""
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    tmp = Path(name)  # unique per call: two writers never share (or delete) each other's temp file
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


@contextlib.contextmanager
def locked_dir(root: Path) -> Iterator[Path]:
    """Hold an exclusive ``fcntl.flock`` on the directory ``root`` itself for the block; raise
    :class:`LockedError` at once when another process holds it. The lock lives on the directory's inode,
    so it leaves no file behind and dies with its process (a killed run never blocks the next)."""
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LockedError(f"{root} is in use by another run") from None
        yield root
    finally:
        os.close(fd)


def clean_stale(root: Path, pattern: str = ".writing-*") -> int:
    """Remove leftovers of a killed run (call it while holding :func:`locked_dir`); returns how many."""
    n = 0
    for p in root.glob(pattern):
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
        n += 1
    return n
