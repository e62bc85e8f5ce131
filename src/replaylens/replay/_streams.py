"""One planned stream, encoded: its records in slot order and its future tasks (what both replay paths read)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..agents import TaskInput
from ..records import FutureTask, History

__all__ = ["StreamData"]


@dataclass(frozen=True, eq=False)
class StreamData:
    """One stream's records in slot order, encoded, plus its future tasks."""

    name: str
    history: History
    rows: slice                # the stream's rows in ``history``
    codes: np.ndarray          # (T,) label codes
    outcomes: np.ndarray       # (T,)
    block_local: np.ndarray    # (T,) block index within the stream (by first slot)
    block_global: np.ndarray   # (T,) block code in the run's block vocabulary
    slots: np.ndarray          # (T,)
    futures: tuple[FutureTask, ...]
    prefix: np.ndarray         # (J,) number of visible records for each future task
    menus: np.ndarray          # (J, M) canonical label codes of each menu (−1 padding)
    stratum_code: np.ndarray   # (J,) block-vocabulary code of each task's stratum

    @property
    def length(self) -> int:
        return int(self.codes.shape[0])

    @cached_property
    def task_inputs(self) -> tuple[TaskInput, ...]:
        """x_t for every position (built only for the per-record path)."""
        return tuple(TaskInput(r.stream, r.family, r.context, r.slot, r.task, r.event_time, r.event_id, r.metadata)
                     for r in self.history.records(self.name))

    @cached_property
    def prefixes(self) -> np.ndarray:
        return np.unique(self.prefix)
