"""One planned stream, encoded: its records in slot order and its future tasks (what both replay paths read)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..agents import TaskInput
from ..records import FutureColumns, FutureRows, FutureTask, History

__all__ = ["EncodedStreams", "StreamData", "future_column", "task_columns", "task_rows"]


@dataclass(frozen=True, eq=False)
class EncodedStreams:
    """Every planned stream's encoding, run-wide: each stream owns a range of the record arrays and a range of
    the task arrays (:class:`StreamData` is a view of its ranges)."""

    codes: np.ndarray          # (T,) label codes
    outcomes: np.ndarray       # (T,)
    block_local: np.ndarray    # (T,) block index within the stream (by first slot)
    block_global: np.ndarray   # (T,) block code in the run's block vocabulary
    slots: np.ndarray          # (T,)
    prefix: np.ndarray         # (J,) number of visible records for each future task
    menus: np.ndarray          # (J, M) canonical label codes of each menu (−1 padding)
    stratum_code: np.ndarray   # (J,) block-vocabulary code of each task's stratum


class StreamData:
    """One stream's records in slot order, encoded, plus its future tasks.

    The arrays (``codes``, ``outcomes``, ``block_local``, ``block_global``, ``slots`` over the stream's T
    records; ``prefix``, ``menus``, ``stratum_code`` over its J future tasks) are views of run-wide arrays,
    sliced when read: a stream costs a few slots, not a dozen array objects (50,000 streams: ~60 MB less).
    Read-only by convention, as the frozen dataclass it replaces.
    """

    __slots__ = ("_enc", "_f0", "_f1", "_prefixes", "_r0", "_r1", "_task_inputs", "futures", "history", "name",
                 "rows")
    name: str
    history: History
    rows: slice                        # the stream's rows in ``history``
    futures: Sequence[FutureTask]      # a lazy :class:`FutureRows` view when prepared from columns

    def __init__(self, *, name: str, history: History, rows: slice, codes: np.ndarray, outcomes: np.ndarray,
                 block_local: np.ndarray, block_global: np.ndarray, slots: np.ndarray,
                 futures: Sequence[FutureTask], prefix: np.ndarray, menus: np.ndarray,
                 stratum_code: np.ndarray) -> None:
        enc = EncodedStreams(codes, outcomes, block_local, block_global, slots, prefix, menus, stratum_code)
        self._set(name, history, rows, futures, enc, 0, int(codes.shape[0]), 0, int(prefix.shape[0]))

    def _set(self, name: str, history: History, rows: slice, futures: Sequence[FutureTask], enc: EncodedStreams,
             r0: int, r1: int, f0: int, f1: int) -> None:
        self.name, self.history, self.rows, self.futures = name, history, rows, futures
        self._enc, self._r0, self._r1, self._f0, self._f1 = enc, r0, r1, f0, f1
        self._task_inputs: tuple[TaskInput, ...] | None = None
        self._prefixes: np.ndarray | None = None

    @classmethod
    def view(cls, name: str, history: History, rows: slice, futures: Sequence[FutureTask], enc: EncodedStreams,
             records: tuple[int, int], tasks: tuple[int, int]) -> StreamData:
        """Stream ``name`` as records ``records`` and tasks ``tasks`` (half-open ranges) of ``enc``."""
        sd = cls.__new__(cls)
        sd._set(name, history, rows, futures, enc, *records, *tasks)
        return sd

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore, (self.name, self.history, self.rows, self.futures, self._enc,
                           (self._r0, self._r1), (self._f0, self._f1)))

    @property
    def codes(self) -> np.ndarray:
        return self._enc.codes[self._r0:self._r1]

    @property
    def outcomes(self) -> np.ndarray:
        return self._enc.outcomes[self._r0:self._r1]

    @property
    def block_local(self) -> np.ndarray:
        return self._enc.block_local[self._r0:self._r1]

    @property
    def block_global(self) -> np.ndarray:
        return self._enc.block_global[self._r0:self._r1]

    @property
    def slots(self) -> np.ndarray:
        return self._enc.slots[self._r0:self._r1]

    @property
    def prefix(self) -> np.ndarray:
        return self._enc.prefix[self._f0:self._f1]

    @property
    def menus(self) -> np.ndarray:
        return self._enc.menus[self._f0:self._f1]

    @property
    def stratum_code(self) -> np.ndarray:
        return self._enc.stratum_code[self._f0:self._f1]

    @property
    def length(self) -> int:
        return self._r1 - self._r0

    @property
    def task_inputs(self) -> tuple[TaskInput, ...]:
        """x_t for every position (built only for the per-record path; kept)."""
        if self._task_inputs is None:
            self._task_inputs = tuple(
                TaskInput(r.stream, r.family, r.context, r.slot, r.task, r.event_time, r.event_id, r.metadata)
                for r in self.history.records(self.name))
        return self._task_inputs

    @property
    def prefixes(self) -> np.ndarray:
        if self._prefixes is None:
            self._prefixes = np.unique(self.prefix)
        return self._prefixes

    def __repr__(self) -> str:
        return f"StreamData(name={self.name!r}, records={self.length}, tasks={self._f1 - self._f0})"


def task_rows(sds: Sequence[StreamData], name: str) -> np.ndarray:
    """The per-task encoded array ``name`` (``prefix``, ``menus`` or ``stratum_code``) of streams ``sds``,
    concatenated in order: the run-wide array itself (read-only, no copy) when the streams are its ranges in
    order, as a run prepared by columns lays them out."""
    enc = sds[0]._enc   # (streams given: the callers ask for none otherwise)
    if all(sd._enc is enc for sd in sds):
        whole: np.ndarray = getattr(enc, name)
        f0 = np.fromiter((sd._f0 for sd in sds), dtype=np.int64, count=len(sds))
        f1 = np.fromiter((sd._f1 for sd in sds), dtype=np.int64, count=len(sds))
        if f0[0] == 0 and f1[-1] == whole.shape[0] and np.array_equal(f0[1:], f1[:-1]):
            return whole
    return np.concatenate([getattr(sd, name) for sd in sds])


def _restore(name: str, history: History, rows: slice, futures: Sequence[FutureTask], enc: EncodedStreams,
             records: tuple[int, int], tasks: tuple[int, int]) -> StreamData:
    return StreamData.view(name, history, rows, futures, enc, records, tasks)


def task_columns(sds: Sequence[StreamData]) -> tuple[FutureColumns, np.ndarray]:
    """The future-task columns of streams ``sds`` and the positions of their tasks in them, concatenated in
    stream order: the columns every stream's tasks are a view of (no task objects), else columns built from
    the streams' task objects (the per-stream loop's streams)."""
    views = [sd.futures for sd in sds]
    rows = [v for v in views if isinstance(v, FutureRows)]
    if rows and len(rows) == len(views) and all(v.columns is rows[0].columns for v in rows):
        return rows[0].columns, np.concatenate([v.rows for v in rows])
    tasks = [f for v in views for f in v]
    return FutureColumns.of_tasks(tasks), np.arange(len(tasks), dtype=np.int64)


def future_column(sds: Sequence[StreamData], name: str) -> np.ndarray:
    """The future tasks' ``task`` ids (text), ``task_text`` (the ids as held: bytes when ASCII) or per-stratum
    ``index`` of streams ``sds``, concatenated in order (:func:`task_columns`)."""
    cols, at = task_columns(sds)
    if name == "task":   # only these tasks' ids decoded
        return cols.task_at(at)
    column = getattr(cols, name)
    if at.size == column.shape[0] and (at.size == 0 or (at[0] == 0 and (np.diff(at) == 1).all())):
        return np.asarray(column)   # every task, in order: the column itself (read-only), not a copy
    return np.asarray(column[at])
