"""Run journal: each finished shard is written atomically and logged, so an interrupted run resumes."""

from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from .._durable import atomic_write
from ..errors import JournalError
from ._layout import ShardActions, action_dtype

__all__ = ["Journal"]


def _narrow(a: np.ndarray) -> np.dtype[Any]:
    """The label codes' type (:func:`action_dtype`) for the codes ``a`` holds (its own type if it holds none, or
    a value that is not a code)."""
    if not a.size or a.dtype.kind != "i" or int(a.min()) < 0:
        return a.dtype
    return action_dtype(int(a.max()) + 1)


class Journal:
    """An append-only journal in ``root``: ``journal.json`` (the run key) + ``shard-*.npy`` + ``done.jsonl``.

    ``key`` identifies the run (plan digest, input hashes, agent spec); resuming with a different
    key is refused.  A shard counts as done only when its line in ``done.jsonl`` names its sha256.
    """

    def __init__(self, root: str | os.PathLike[str], key: dict[str, Any], *, restart: bool = False) -> None:
        self.root = Path(root)
        self.key = key
        self.root.mkdir(parents=True, exist_ok=True)
        head = self.root / "journal.json"
        text = json.dumps(key, sort_keys=True, indent=1)
        if restart:
            self.discard()
        if head.exists():
            try:
                old = json.loads(head.read_text())
            except (json.JSONDecodeError, UnicodeDecodeError):
                raise JournalError(f"{head} is not a valid journal (corrupt JSON); rerun with --restart to "
                                   "discard the journal, or use a new --out directory") from None
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

    def discard(self) -> None:
        """Delete the journal's files (``--restart``)."""
        for p in [self.root / "journal.json", self.root / "done.jsonl", *self.root.glob("shard-*.npz"),
                  *self.root.glob(".*.tmp")]:
            p.unlink(missing_ok=True)

    @property
    def n_done(self) -> int:
        return len(self._done)

    def _load(self) -> dict[int, list[str]]:
        done: dict[int, list[str]] = {}
        log = self.root / "done.jsonl"
        if not log.exists():
            return done
        for line in log.read_text().splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn last line from a kill: that shard is simply redone
            if not isinstance(rec, dict) or not {"shard", "streams", "sha256"} <= set(rec):
                continue
            p = self.root / f"shard-{rec['shard']:05d}.npz"
            if p.exists() and hashlib.sha256(p.read_bytes()).hexdigest() == rec["sha256"]:
                done[int(rec["shard"])] = list(rec["streams"])
        return done

    def done(self, shard: int) -> bool:
        return shard in self._done

    def load(self, shard: int) -> list[np.ndarray]:
        with np.load(self.root / f"shard-{shard:05d}.npz") as z:
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
        atomic_write(self.root / f"shard-{shard:05d}.npz", data)
        line = json.dumps({"shard": shard, "streams": streams, "sha256": hashlib.sha256(data).hexdigest()})
        log = self.root / "done.jsonl"
        torn = False
        if log.exists() and log.stat().st_size > 0:
            with log.open("rb") as fh:
                fh.seek(-1, os.SEEK_END)
                torn = fh.read(1) != b"\n"
        with log.open("a") as fh:
            fh.write(("\n" if torn else "") + line + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self._done[shard] = streams
