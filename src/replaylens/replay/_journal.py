"""Run journal: each finished shard is written atomically and logged, so an interrupted run resumes.

Whatever is found in a journal directory is read defensively: a line of ``done.jsonl`` that is not a
well-formed record of a shard (a torn or binary line, a shard number that is not a small whole number, streams
that are not a list of names, a digest that is not one) is skipped, so that shard is simply replayed again;
a journal directory, head or shard file that is not what ReplayLens writes is a one-line :class:`JournalError`.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .._durable import atomic_write
from ..errors import JournalError
from ._layout import ShardActions, action_dtype

__all__ = ["Journal", "key_digest", "stored_key"]

MAX_SHARD = 10**9   # a shard number beyond any layout: a line naming one is not ours
_HEX = frozenset("0123456789abcdef")


def _narrow(a: np.ndarray) -> np.dtype[Any]:
    """The label codes' type (:func:`action_dtype`) for the codes ``a`` holds (its own type if it holds none, or
    a value that is not a code)."""
    if not a.size or a.dtype.kind != "i" or int(a.min()) < 0:
        return a.dtype
    return action_dtype(int(a.max()) + 1)


def stored_key(key: Mapping[str, Any]) -> dict[str, Any]:
    """``key`` as the journal stores it (values that are not JSON scalars, lists or tables as text)."""
    plain = {k: (v if isinstance(v, (str, int, float, list, dict)) else str(v)) for k, v in key.items()}
    return dict(json.loads(json.dumps(plain, sort_keys=True)))


def key_digest(key: Mapping[str, Any]) -> str:
    """The sha256 of a journal key (as stored): two runs with one digest decide the same decisions."""
    text = json.dumps(stored_key(key), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _record(line: bytes) -> tuple[int, list[str], str] | None:
    """(shard, streams, sha256) of one ``done.jsonl`` line, or None when it is not a well-formed record."""
    try:
        rec = json.loads(line.decode("utf-8"))
    except (ValueError, RecursionError):   # torn, binary, not JSON, a number past the digit limit
        return None
    if not isinstance(rec, dict):
        return None
    shard, streams, sha = rec.get("shard"), rec.get("streams"), rec.get("sha256")
    if type(shard) is not int or not 0 <= shard < MAX_SHARD:
        return None
    if not isinstance(streams, list) or not all(isinstance(s, str) for s in streams):
        return None
    if not isinstance(sha, str) or len(sha) != 64 or not set(sha) <= _HEX:
        return None
    return shard, streams, sha


class Journal:
    """An append-only journal in ``root``: ``journal.json`` (the run key) + ``shard-*.npz`` + ``done.jsonl``.

    ``key`` identifies the run (plan digest, input hashes, agent spec); resuming with a different
    key is refused.  A shard counts as done only when its line in ``done.jsonl`` names its sha256.
    """

    def __init__(self, root: str | os.PathLike[str], key: dict[str, Any], *, restart: bool = False) -> None:
        self.root = Path(root)
        self.key = key
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError:
            raise JournalError(f"{self.root} cannot be the journal directory (a file or a broken link is in its "
                               "place); move it away or use a new --out directory") from None
        head = self.root / "journal.json"
        text = json.dumps(key, sort_keys=True, indent=1)
        if restart:
            self.discard()
        if head.exists() or head.is_symlink():
            try:
                old = json.loads(head.read_bytes().decode("utf-8"))
            except (OSError, ValueError, RecursionError):
                raise JournalError(f"{head} is not a valid journal (corrupt JSON or unreadable); rerun with --restart "
                                   "to discard the journal, or use a new --out directory") from None
            if not isinstance(old, dict):
                raise JournalError(f"{head} is not a valid journal (not a JSON object); rerun with --restart "
                                   "to discard the journal, or use a new --out directory")
            new = json.loads(text)
            if old != new:
                from ._fingerprint import describe_change

                raise JournalError(f"{self.root} holds the journal of a different run: {describe_change(old, new)}; "
                                   "rerun with --restart to discard the journal, or use a new --out directory")
        else:
            atomic_write(head, text.encode())
        self._done = self._load()

    @staticmethod
    def digest(key: Mapping[str, Any]) -> str:
        """:func:`key_digest` of ``key``: the identity of the run it journals."""
        return key_digest(key)

    @staticmethod
    def stored(root: str | os.PathLike[str]) -> dict[str, Any] | None:
        """The key the journal in ``root`` was made for, or None when there is none or it cannot be read."""
        try:
            key = json.loads((Path(root) / "journal.json").read_bytes().decode("utf-8"))
        except (OSError, ValueError, RecursionError):
            return None
        return key if isinstance(key, dict) else None

    @staticmethod
    def change(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
        """A short phrase naming what differs between two journal keys ("agent code changed (a.py)")."""
        from ._fingerprint import describe_change

        return describe_change(dict(old), dict(new))

    def discard(self) -> None:
        """Delete the journal's files (``--restart``); a directory in a file's place is an error, never removed."""
        for p in [self.root / "journal.json", self.root / "done.jsonl", *self.root.glob("shard-*.npz"),
                  *self.root.glob(".*.tmp")]:
            if p.is_dir() and not p.is_symlink():
                raise JournalError(f"{p} is a directory, not a journal file; move it away or use a new --out "
                                   "directory")
            p.unlink(missing_ok=True)

    @property
    def n_done(self) -> int:
        return len(self._done)

    def _shard_path(self, shard: int) -> Path:
        return self.root / f"shard-{shard:05d}.npz"

    def _load(self) -> dict[int, list[str]]:
        done: dict[int, list[str]] = {}
        log = self.root / "done.jsonl"
        if not log.exists():
            return done
        try:
            data = log.read_bytes()
        except OSError:
            raise JournalError(f"{log} is not a readable file; rerun with --restart to discard the journal, or use "
                               "a new --out directory") from None
        for line in data.splitlines():
            rec = _record(line)
            if rec is None:
                continue  # a torn last line from a kill, or a line not ours: that shard is simply redone
            shard, streams, sha = rec
            p = self._shard_path(shard)
            try:
                ok = p.is_file() and hashlib.sha256(p.read_bytes()).hexdigest() == sha
            except OSError:
                ok = False
            if ok:
                done[shard] = streams
        return done

    def done(self, shard: int) -> bool:
        return shard in self._done

    def load(self, shard: int) -> list[np.ndarray]:
        p = self._shard_path(shard)
        try:
            with np.load(p, allow_pickle=False) as z:
                return self._arrays(z)
        except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as exc:
            raise JournalError(f"{p}: not a shard ReplayLens wrote ({type(exc).__name__}); rerun with --restart "
                               "to discard the journal, or use a new --out directory") from None

    @staticmethod
    def _arrays(z: Any) -> list[np.ndarray]:
        if "block" in z.files:  # the shard's (cells, maps, draws, repeats, tasks) block and each stream's tasks
            return ShardActions.from_block(z["block"], z["tasks"])
        if "flat" in z.files:  # one flat array and the shapes (one zip entry, not one per stream)
            shapes = z["shapes"]
            ends = np.cumsum([int(np.prod(sh)) for sh in shapes.tolist()])
            parts = np.split(z["flat"], ends[:-1]) if len(ends) else []
            return [p.reshape(tuple(sh)) for p, sh in zip(parts, shapes.tolist(), strict=True)]
        return [z[f"arr_{i}"] for i in range(len(z.files))]

    def record(self, shard: int, streams: list[str], arrays: list[np.ndarray]) -> None:
        buf = io.BytesIO()
        if isinstance(arrays, ShardActions) and arrays.block is not None:   # one copy of the block, in the
            block = arrays.block                                              # narrowest type holding its codes
            np.savez(buf, block=block.astype(_narrow(block), copy=False),
                     tasks=np.array(arrays.tasks(), dtype=np.int64))
        elif arrays and len({(a.dtype.str, a.ndim) for a in arrays}) == 1:
            np.savez(buf, flat=np.concatenate([a.reshape(-1) for a in arrays]),
                     shapes=np.array([a.shape for a in arrays], dtype=np.int64).reshape(len(arrays), -1))
        else:
            np.savez(buf, *arrays)
        data = buf.getvalue()
        line = json.dumps({"shard": shard, "streams": streams, "sha256": hashlib.sha256(data).hexdigest()})
        log = self.root / "done.jsonl"
        try:
            atomic_write(self._shard_path(shard), data)
            torn = False
            if log.exists() and log.stat().st_size > 0:
                with log.open("rb") as fh:
                    fh.seek(-1, os.SEEK_END)
                    torn = fh.read(1) != b"\n"
            with log.open("ab") as fh:
                fh.write((("\n" if torn else "") + line + "\n").encode())
                fh.flush()
                os.fsync(fh.fileno())
        except IsADirectoryError as exc:
            raise JournalError(f"{exc.filename or self.root} is a directory, not a journal file; move it away or "
                               "use a new --out directory") from None
        self._done[shard] = streams
