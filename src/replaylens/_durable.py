"""Private: durable file writes shared by the run journals (replay shards, LLM acquisition runs)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from .errors import ConfigError

__all__ = ["MARKER", "LockedError", "atomic_write", "clean_stale", "fsync_dir", "holds_lock", "is_ours",
           "locked_dir", "make_dir", "mark", "remove_ours", "umask_mode"]

MARKER = ".replaylens"
"""The file ReplayLens writes into every directory it makes and may later remove (a result set, a run, a
staging directory): a directory without it is the user's and is never removed."""

_HELD: dict[tuple[int, int], int] = {}      # (st_dev, st_ino) of directories this process holds -> owner thread
_HELD_GUARD = threading.Lock()


def umask_mode(mode: int = 0o666) -> int:
    """``mode`` less the process umask (what ``open`` would give a new file), read without changing it."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return mode & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    with _HELD_GUARD:  # no /proc: the classic set-and-restore (serialized within this process)
        mask = os.umask(0o022)
        os.umask(mask)
    return mode & ~mask


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
    """Write ``data`` to a temporary sibling, fsync it, rename it over ``path`` and fsync the directory.

    The file gets the user's umask (``mkstemp`` alone would make it 0600); a symbolic link (a published
    result, see :func:`replaylens.report.write_results`) is amended at the file it names."""
    if path.is_symlink():
        path = path.resolve()
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    tmp = Path(name)  # unique per call: two writers never share (or delete) each other's temp file
    try:
        os.fchmod(fd, umask_mode())
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def _dir_key(root: Path) -> tuple[int, int]:
    st = os.stat(root)
    return st.st_dev, st.st_ino


def holds_lock(root: Path) -> bool:
    """This thread holds :func:`locked_dir` on ``root`` (so a nested writer need not, and cannot, take it)."""
    try:
        key = _dir_key(root)
    except OSError:
        return False
    with _HELD_GUARD:
        return _HELD.get(key) == threading.get_ident()


@contextlib.contextmanager
def locked_dir(root: Path) -> Iterator[Path]:
    """Hold an exclusive ``fcntl.flock`` on the directory ``root`` itself for the block; raise
    :class:`LockedError` at once when another holder (another process, or another ``locked_dir`` in this
    one) has it. The lock lives on the directory's inode, so it leaves no file behind and dies with its
    process (a killed run never blocks the next)."""
    fd = os.open(make_dir(root), os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LockedError(f"{root} is in use by another run") from None
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino)
        with _HELD_GUARD:
            _HELD[key] = threading.get_ident()
        try:
            yield root
        finally:
            with _HELD_GUARD:
                _HELD.pop(key, None)
    finally:
        os.close(fd)


def make_dir(root: Path) -> Path:
    """``root`` as a directory (made with its parents when missing); a :class:`ConfigError` of one line naming
    what is in the way (a file, a broken symbolic link) otherwise."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        if root.is_dir():
            return root
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
    else:
        reason = "not a directory"
    for p in (root, *root.parents):
        if p.is_symlink() and not p.exists():
            raise ConfigError(f"{p} is a symbolic link to {os.readlink(p)}, which does not exist; remove the link "
                              "or create its target")
        if p.exists() and not p.is_dir():
            raise ConfigError(f"{p} is a file, not a directory; move it away or choose another output directory")
    raise ConfigError(f"{root}: cannot make this directory ({reason})")


def mark(root: Path, kind: str) -> None:
    """Write :data:`MARKER` into ``root``, a directory ReplayLens made (``kind``: what it holds)."""
    (root / MARKER).write_text(kind + "\n", encoding="utf-8")


def is_ours(root: Path, kind: str | None = None) -> bool:
    """``root`` is a real directory ReplayLens made (it holds :data:`MARKER`, of ``kind`` when given)."""
    if root.is_symlink() or not root.is_dir():
        return False
    try:
        text = (root / MARKER).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return False
    return kind is None or text.split("\n", 1)[0] == kind


def remove_ours(root: Path, kind: str | None = None) -> bool:
    """Remove ``root`` when ReplayLens made it (:func:`is_ours`); a directory of the user's stays.  Whether removed."""
    if not is_ours(root, kind):
        return False
    shutil.rmtree(root, ignore_errors=True)
    return True


def clean_stale(root: Path, pattern: str = ".writing-*") -> int:
    """Remove leftovers of a killed run (call it while holding :func:`locked_dir`): the files matching ``pattern``
    and the directories among them that ReplayLens made (:func:`is_ours`); returns how many."""
    n = 0
    for p in root.glob(pattern):
        if p.is_dir() and not p.is_symlink():
            n += remove_ours(p)
        else:
            p.unlink(missing_ok=True)
            n += 1
    return n
