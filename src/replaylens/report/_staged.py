"""decisions.parquet written on a thread from the moment the decisions exist (issue 27).

The decision table is the largest artifact of an audit (one row per decision) and pyarrow encodes it mostly
outside the GIL, so it is written beside the statistics, the state-response readouts and the manifest instead
of after them.  The file is staged in OUT under a ``.writing-`` name (removed by
:func:`~replaylens._durable.clean_stale` after a killed run, and here when the run fails) and moved into the
result set just before it is published: a reader still sees the whole set or none of it.  The writer thread also
flushes the file to disk, so publishing (which syncs every file of the set) finds nothing left to write.
"""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..replay import Decisions

__all__ = ["StagedDecisions"]

#: seconds between the flushes of a decision table being written
FLUSH_EVERY = 0.5


def _flush_until(fd: int, done: threading.Event) -> None:
    """Hand the file's written pages to the disk every :data:`FLUSH_EVERY` seconds until ``done``: the kernel
    would otherwise hold a ~1 GB table in memory until the final fsync, which then waits for all of it (~2 s
    on the critical path of a 10^6-record audit); flushed while the encoder still works, little is left."""
    while not done.wait(FLUSH_EVERY):
        with contextlib.suppress(OSError):   # a failing disk shows in the final fsync, which raises
            os.fdatasync(fd)


class StagedDecisions:
    """``decisions.to_parquet`` running on its own thread into a staging file in ``root``."""

    def __init__(self, decisions: Decisions, root: Path) -> None:
        self.path = root / f".writing-decisions-{uuid.uuid4().hex}.parquet"
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="replaylens-decisions")
        self._written = self._pool.submit(self._write, decisions)

    def _write(self, decisions: Decisions) -> None:
        self.path.touch(exist_ok=False)
        with self.path.open("rb") as fh:   # flushed to disk here, off the publishing thread's path
            done = threading.Event()
            flusher = threading.Thread(target=_flush_until, args=(fh.fileno(), done), daemon=True,
                                       name="replaylens-decisions-flush")
            flusher.start()
            try:
                decisions.to_parquet(self.path)   # (pyarrow truncates and writes this same file)
            finally:
                done.set()
                flusher.join()
            os.fsync(fh.fileno())

    def _wait(self) -> None:
        try:
            self._written.result()   # the writer's error, if it had one
        finally:
            self._pool.shutdown()

    def move_to(self, dest: Path) -> None:
        """Wait for the writer, then move the finished file to ``dest`` (same file system: one rename)."""
        self._wait()
        os.replace(self.path, dest)

    def discard(self) -> None:
        """Wait for the writer (nothing is left writing) and remove the staging file, whatever happened (a no-op
        once the file is moved; safe to call twice)."""
        try:
            with contextlib.suppress(Exception):  # the run already failed for its own reason
                self._wait()
        finally:
            self.path.unlink(missing_ok=True)
