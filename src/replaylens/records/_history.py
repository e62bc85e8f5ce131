"""Typed, columnar agent histories, future task sets and the counterfactual evaluator.

* :class:`History` — the logged records D = ((x_t, a_t, y_t)) of every stream, one numpy
  column per field, sorted by (stream, slot).
* :class:`FutureTasks` — the held-fixed future task set X⁺ with each task's menu.
* :class:`Evaluator` — the counterfactual utility table g̃(x, a) and the oracle a*(x)
  (first maximum in the menu's canonical order).  Writers and policies never see it.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._memory import release_freed_memory
from ..errors import InputError
from ._coded_table import CodedTable
from ._futures import FutureTask, FutureTasks
from ._memo import memoized

__all__ = ["Evaluator", "FutureTask", "FutureTasks", "History", "Record", "block_name"]

StrArray = np.ndarray


def block_name(family: str, context: str) -> str:
    """The display name ``family/context`` of a block or stratum."""
    return f"{family}/{context}"


def _str_array(values: Sequence[str] | np.ndarray) -> np.ndarray:
    if isinstance(values, np.ndarray) and values.dtype.kind == "U":
        return values  # already fixed-width text: no per-element Python objects (the history keeps a copy)
    arr = np.asarray(list(values), dtype=object)
    return arr.astype(str) if arr.size else np.zeros(0, dtype="<U1")


def _stream_ranks(st: np.ndarray) -> tuple[tuple[str, ...], np.ndarray]:
    """The distinct streams in first-appearance order and each row's rank among them; when each stream's rows
    are one run (a file written stream by stream), read off the runs without sorting the text."""
    n = st.shape[0]
    starts = np.flatnonzero(np.r_[True, st[1:] != st[:-1]])
    names = st[starts]
    if np.unique(names).size == names.size:
        return tuple(names.tolist()), np.repeat(np.arange(starts.size, dtype=np.int64), np.diff(np.r_[starts, n]))
    uniq, first, inverse = np.unique(st, return_index=True, return_inverse=True)
    by_first = np.argsort(first, kind="stable")
    rank = np.empty(by_first.size, dtype=np.int64)
    rank[by_first] = np.arange(by_first.size)
    return tuple(uniq[by_first].tolist()), rank[inverse.reshape(-1)]


def _joined_text(col: np.ndarray) -> bytes:
    """``"\\x1f".join(col.tolist()).encode()`` of a text column; for ASCII fixed-width text, built from the
    array's code points at once (no per-value ``str``)."""
    if col.dtype.kind != "U" or col.size == 0 or col.dtype.itemsize == 0:
        return "\x1f".join(col.tolist()).encode()
    width = col.dtype.itemsize // 4
    points = np.ascontiguousarray(col).view(np.uint32).reshape(col.size, width)
    if points.max(initial=0) >= 128:
        return "\x1f".join(col.tolist()).encode()
    buf = np.full((col.size, width + 1), 0x1F, dtype=np.uint8)
    buf[:, :width] = points
    keep = np.arange(width + 1) < np.char.str_len(col)[:, None]   # the text; trailing NULs are not text
    keep[:-1, width] = True                                        # a separator after every value but the last
    return bytes(buf[keep])


@dataclass(frozen=True, slots=True)
class Record:
    """One logged record (x_t, a_t, y_t) at a slot of a stream and block."""

    stream: str
    family: str
    context: str
    slot: int
    task: str
    key: str
    outcome: float
    event_time: float | None = None
    event_id: str | None = None
    metadata: Mapping[str, Any] | None = None

    @property
    def block(self) -> tuple[str, str]:
        return (self.family, self.context)

    @property
    def masked(self) -> bool:
        return math.isnan(self.outcome)


class _Lines:
    """Maps row positions to the source line numbers used in error messages."""

    def __init__(self, source: str, lines: Sequence[int] | None, n: int, word: str = "line") -> None:
        self.source = source
        self.lines = list(lines) if lines is not None else list(range(1, n + 1))
        self.word = word

    def err(self, i: int, fld: str | None, msg: str) -> InputError:
        return InputError(self.source, self.lines[i], fld, msg)


@dataclass(frozen=True, eq=False)
class History:
    """Columnar history D of every stream, sorted by (stream, slot).

    ``slot`` is the record's position in its stream's ingestion order and is unique within a
    stream; a block is the set of a stream's records sharing (family, context).  ``outcome``
    is the utility in [0, 1], NaN when masked.  Build with :meth:`from_columns`,
    :func:`~replaylens.records.history_from_records` or :func:`replaylens.read_history`; instances are immutable.
    """

    stream: np.ndarray
    family: np.ndarray
    context: np.ndarray
    slot: np.ndarray
    task: np.ndarray
    key: np.ndarray
    outcome: np.ndarray
    event_time: np.ndarray
    event_id: np.ndarray
    metadata: np.ndarray
    source: str = "<memory>"
    _stream_order: tuple[str, ...] = field(default=(), repr=False)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_columns(
        cls,
        *,
        stream: Sequence[str] | np.ndarray,
        family: Sequence[str] | np.ndarray,
        context: Sequence[str] | np.ndarray,
        slot: Sequence[int] | np.ndarray,
        task: Sequence[str] | np.ndarray,
        key: Sequence[str] | np.ndarray,
        outcome: Sequence[float] | np.ndarray,
        event_time: Sequence[float] | np.ndarray | None = None,
        event_id: Sequence[str] | np.ndarray | None = None,
        metadata: Sequence[str] | np.ndarray | None = None,
        source: str = "<memory>",
        lines: Sequence[int] | None = None,
        line_word: str = "line",
        copy: bool = True,
    ) -> History:
        """Validate and build a history from equal-length columns.

        Errors name ``source``, the row's line (``lines[i]`` or i+1) and the field.  ``copy=False``: the
        columns are fresh arrays nobody else changes, kept as they are when already in canonical order
        (a reader's own columns: no second copy of the text at the read's peak).
        """
        n = len(stream)
        cols = {"family": family, "context": context, "slot": slot, "task": task, "key": key, "outcome": outcome}
        for name, col in cols.items():
            if len(col) != n:
                raise InputError(source, None, name, f"has {len(col)} values, expected {n} (one per record)")
        if n == 0:
            raise InputError(source, None, None, "the history has no records")
        lin = _Lines(source, lines, n, line_word)
        st = _str_array(stream)
        fam = _str_array(family)
        ctx = _str_array(context)
        tk = _str_array(task)
        ky = _str_array(key)
        for name, arr in (("stream", st), ("family", fam), ("context", ctx), ("task", tk), ("key", ky)):
            bad = np.flatnonzero((arr == "") | np.char.isspace(arr))   # empty or blank (no stripped copy)
            if bad.size:
                raise lin.err(int(bad[0]), name, "must not be empty")
        sl_raw = np.asarray(slot)
        if sl_raw.dtype.kind in "iu":
            sl_i = sl_raw.astype(np.int64)
            bad = np.flatnonzero(sl_i < 0)
            if bad.size:
                raise lin.err(int(bad[0]), "slot", f"must be a non-negative integer, got {int(sl_i[bad[0]])}")
        else:
            try:
                sl = np.asarray(slot, dtype=np.float64)
            except (TypeError, ValueError):
                raise InputError(source, None, "slot", "must be integers") from None
            bad = np.flatnonzero(~np.isfinite(sl) | (sl != np.round(sl)) | (sl < 0) | (np.abs(sl) >= 2.0**53))
            if bad.size:
                raise lin.err(int(bad[0]), "slot", f"must be a non-negative integer, got {sl[bad[0]]}")
            sl_i = sl.astype(np.int64)
        try:
            y = np.asarray(outcome, dtype=np.float64)
        except (TypeError, ValueError):
            raise InputError(source, None, "outcome", "must be numbers") from None
        bad = np.flatnonzero(~np.isnan(y) & ((y < 0) | (y > 1) | ~np.isfinite(y)))
        if bad.size:
            raise lin.err(int(bad[0]), "outcome", f"must be a utility in [0, 1] or NaN (masked), got {y[bad[0]]}")
        et = np.full(n, np.nan) if event_time is None else np.asarray(event_time, dtype=np.float64)
        if et.shape != (n,):
            raise InputError(source, None, "event_time", f"expected {n} values")
        bad = np.flatnonzero(np.isinf(et))
        if bad.size:
            raise lin.err(int(bad[0]), "event_time", "must be finite")
        eid = np.full(n, "", dtype="<U1") if event_id is None else _str_array(event_id)
        meta = np.full(n, "", dtype="<U1") if metadata is None else _str_array(metadata)
        if eid.shape != (n,) or meta.shape != (n,):
            raise InputError(source, None, "event_id" if eid.shape != (n,) else "metadata", f"expected {n} values")
        # stream order = first appearance; canonical sort = (stream order, slot)
        order_streams, srank = _stream_ranks(st)
        s_run = srank[1:] == srank[:-1]
        if bool((srank[1:] >= srank[:-1]).all() and (~s_run | (sl_i[1:] > sl_i[:-1])).all()):
            perm = np.arange(n)   # already sorted (a file written stream by stream, slots in order)
        else:
            perm = np.lexsort((sl_i, srank))
        # duplicate (stream, slot)
        s2, l2 = srank[perm], sl_i[perm]
        dup = np.flatnonzero((s2[1:] == s2[:-1]) & (l2[1:] == l2[:-1]))
        if dup.size:
            j = int(perm[dup[0] + 1])
            raise lin.err(j, "slot", f"duplicate slot {int(sl_i[j])} in stream {str(st[j])!r}")
        seen: dict[tuple[str, str], int] = {}
        for j in np.flatnonzero(eid != "").tolist():
            k = (str(st[j]), str(eid[j]))
            if k in seen:
                raise lin.err(j, "event_id", f"duplicate event_id {k[1]!r} in stream {k[0]!r}")
            seen[k] = j
        if bool((perm == np.arange(n)).all()):   # already in canonical order: copies (or the arrays), not gathers
            def own(a: np.ndarray) -> np.ndarray:
                return a.copy() if copy else a
            return cls(
                stream=own(st), family=own(fam), context=own(ctx), slot=own(sl_i), task=own(tk), key=own(ky),
                outcome=own(y), event_time=own(et), event_id=own(eid), metadata=own(meta), source=source,
                _stream_order=order_streams,
            )
        return cls(
            stream=st[perm], family=fam[perm], context=ctx[perm], slot=sl_i[perm], task=tk[perm], key=ky[perm],
            outcome=y[perm], event_time=et[perm], event_id=eid[perm], metadata=meta[perm], source=source,
            _stream_order=order_streams,
        )

    # ------------------------------------------------------------------ access
    def __len__(self) -> int:
        return int(self.stream.shape[0])

    @property
    def streams(self) -> tuple[str, ...]:
        """Stream ids in first-appearance order."""
        return self._stream_order

    @property
    def labels(self) -> tuple[str, ...]:
        """Distinct keys in first-appearance order (canonical order of the history alone)."""
        return tuple(dict.fromkeys(self.key.tolist()))

    def stream_slice(self, stream: str) -> slice:
        """Positions of ``stream``'s records (contiguous because rows are sorted)."""
        idx = np.flatnonzero(self.stream == stream)
        if idx.size == 0:
            raise KeyError(stream)
        return slice(int(idx[0]), int(idx[-1]) + 1)

    def blocks(self, stream: str) -> tuple[tuple[str, str], ...]:
        """The (family, context) blocks of ``stream`` ordered by their first slot."""
        s = self.stream_slice(stream)
        return tuple(dict.fromkeys(zip(self.family[s].tolist(), self.context[s].tolist(), strict=True)))

    def records(self, stream: str | None = None) -> Iterator[Record]:
        """Iterate the records (optionally of one stream) in (stream, slot) order."""
        rng = range(len(self)) if stream is None else range(*self.stream_slice(stream).indices(len(self)))
        for i in rng:
            et = float(self.event_time[i])
            meta = str(self.metadata[i])
            yield Record(
                stream=str(self.stream[i]), family=str(self.family[i]), context=str(self.context[i]),
                slot=int(self.slot[i]), task=str(self.task[i]), key=str(self.key[i]),
                outcome=float(self.outcome[i]), event_time=None if math.isnan(et) else et,
                event_id=str(self.event_id[i]) or None, metadata=json.loads(meta) if meta else None,
            )

    def select(self, streams: Sequence[str]) -> History:
        """A history restricted to ``streams`` (kept in the given order)."""
        mask = np.isin(self.stream, list(streams))
        if not mask.any():
            raise KeyError(f"none of the streams {list(streams)!r} is in the history")
        return History.from_columns(
            stream=self.stream[mask], family=self.family[mask], context=self.context[mask], slot=self.slot[mask],
            task=self.task[mask], key=self.key[mask], outcome=self.outcome[mask], event_time=self.event_time[mask],
            event_id=self.event_id[mask], metadata=self.metadata[mask], source=self.source,
        )

    def to_pandas(self) -> Any:
        """A pandas DataFrame with the documented columns."""
        import pandas as pd

        return pd.DataFrame(self.to_columns())

    def to_columns(self) -> dict[str, np.ndarray]:
        return {
            "stream": self.stream, "family": self.family, "context": self.context, "slot": self.slot,
            "task": self.task, "key": self.key, "outcome": self.outcome, "event_time": self.event_time,
            "event_id": self.event_id, "metadata": self.metadata,
        }

    def fingerprint(self) -> str:
        """sha256 of the canonical content (independent of file format and row order); computed once."""
        return str(memoized(self, "fingerprint", self._fingerprint))

    def _fingerprint(self) -> str:
        h = hashlib.sha256()
        for name, col in self.to_columns().items():
            h.update(name.encode())
            h.update(np.ascontiguousarray(col).tobytes() if col.dtype.kind in "fi" else _joined_text(col))
        return h.hexdigest()

    def equals(self, other: History) -> bool:
        """Content equality (NaN equals NaN)."""
        return self.fingerprint() == other.fingerprint()

    def __repr__(self) -> str:
        return f"History(records={len(self)}, streams={len(self.streams)}, source={self.source!r})"


def record_dict(r: Record) -> dict[str, Any]:
    return {
        "stream": r.stream, "family": r.family, "context": r.context, "slot": r.slot, "task": r.task,
        "key": r.key, "outcome": r.outcome, "event_time": r.event_time, "event_id": r.event_id,
        "metadata": dict(r.metadata) if r.metadata is not None else None,
    }


@dataclass(frozen=True, eq=False)
class Evaluator:
    """Counterfactual utility table g̃(x, a) for every future task and menu action.

    Kept apart from the agent: the replay engine gives writers and policies only the history
    and the menu.  ``oracle`` is the first maximum in the task's menu (canonical) order.
    """

    table: Mapping[tuple[str, str], Mapping[str, float]]
    source: str = "<memory>"

    def utilities(self, task: FutureTask) -> np.ndarray:
        """g̃(x, a) for a in the task's menu (menu order)."""
        row = self.table[(task.stream, task.task)]
        return np.array([row[a] for a in task.menu], dtype=np.float64)

    def oracle(self, task: FutureTask) -> str:
        """a*(x): the first maximum in canonical (menu) order."""
        return task.menu[int(np.argmax(self.utilities(task)))]

    def check_covers(self, futures: FutureTasks) -> None:
        """Raise InputError unless every menu action of every future task has a utility."""
        if isinstance(self.table, CodedTable):  # on codes: only the first uncovered task is looked at
            cols = futures.columns
            i, _ = self.table.first_uncovered(self.table.rows_for(cols.streams, cols.stream, cols.task),
                                              cols.menus, cols.menu)
            tasks: Sequence[FutureTask] = () if i < 0 else cols.build(np.array([i]))
            first = max(i, 0)
        else:
            tasks, first = futures.tasks, 0
        for i, t in enumerate(tasks, start=first):
            row = self.table.get((t.stream, t.task))
            if row is None:
                raise InputError(self.source, None, "task",
                                 f"no utilities for future task {t.task!r} of stream {t.stream!r} "
                                 f"(future task #{i + 1} in {futures.source})")
            missing = [a for a in t.menu if a not in row]
            if missing:
                raise InputError(self.source, None, "key",
                                 f"no utility for action {missing[0]!r} of task {t.task!r} in stream {t.stream!r}")

    def fingerprint(self) -> str:
        """sha256 of ``json.dumps({"stream\x1ftask": {key: utility}}, sort_keys=True)`` (compact), hashed a
        task at a time (the same bytes, without the whole document in memory); computed once for a file-read
        (immutable) table."""
        if isinstance(self.table, CodedTable):
            return str(memoized(self, "fingerprint", self._coded_fingerprint))
        h = hashlib.sha256(b"{")
        sep = b""
        for k, (s, t) in sorted((f"{s}\x1f{t}", (s, t)) for s, t in self.table):
            h.update(sep + (json.dumps(k) + ":" + json.dumps(dict(self.table[(s, t)]), sort_keys=True,
                                                               separators=(",", ":"))).encode())
            sep = b","
        h.update(b"}")
        return h.hexdigest()

    def _coded_fingerprint(self) -> str:
        assert isinstance(self.table, CodedTable)
        h = hashlib.sha256()
        for piece in self.table.json_document():
            h.update(piece)
        release_freed_memory()   # the layout's arrow pages go back, not kept by the pool through the replay
        return h.hexdigest()

    def to_pandas(self) -> Any:
        import pandas as pd

        return pd.DataFrame([
            {"stream": s, "task": t, "key": k, "utility": u}
            for (s, t), row in self.table.items() for k, u in row.items()
        ])
