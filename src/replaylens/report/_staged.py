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
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..replay import Decisions

__all__ = ["StagedDecisions"]


class StagedDecisions:
    """``decisions.to_parquet`` running on its own thread into a staging file in ``root``."""

    def __init__(self, decisions: Decisions, root: Path) -> None:
        self.path = root / f".writing-decisions-{uuid.uuid4().hex}.parquet"
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="replaylens-decisions")
        self._written = self._pool.submit(self._write, decisions)

    def _write(self, decisions: Decisions) -> None:
        decisions.to_parquet(self.path)
        with self.path.open("rb") as fh:   # flushed to disk here, off the publishing thread's path
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
