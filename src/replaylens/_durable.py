"""Private: durable file writes shared by the run journals (replay shards, LLM acquisition runs)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["atomic_write", "fsync_dir"]


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
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)
