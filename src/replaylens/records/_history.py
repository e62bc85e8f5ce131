"""Typed, columnar agent histories, future task sets and the counterfactual evaluator.

* :class:`History` — the logged records D = ((x_t, a_t, y_t)) of every stream, one numpy
  column per field (the text ones as integer codes into their distinct values), sorted by (stream, slot).
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
from ._text_codes import (
    TextCodes,
    blank_rows,
    compact,
    decode,
    decode_bytes,
    encode_text,
    first_appearance,
    pack,
    readonly,
)

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


def _joined_text(col: np.ndarray) -> bytes:
    """``"\x1f".join(col.tolist()).encode()`` of a text column (numpy ``<U`` text, or ``S`` bytes read as
    ASCII); for ASCII fixed-width text, built from the array's code points at once (no per-value ``str``).  A lone
    surrogate (text built through the API; a file's is refused where it is read) is encoded as ``surrogatepass``
    writes it, so such text is hashed too; every other text's bytes are its UTF-8."""
    if col.dtype.kind not in "US" or col.size == 0 or col.dtype.itemsize == 0:
        return "\x1f".join(col.tolist()).encode("utf-8", "surrogatepass")
    width = col.dtype.itemsize if col.dtype.kind == "S" else col.dtype.itemsize // 4
    points: np.ndarray = np.ascontiguousarray(col).view(np.uint8 if col.dtype.kind == "S" else np.uint32)
    points = points.reshape(col.size, width)
    if points.max(initial=0) >= 128:
        return "\x1f".join(decode_bytes(col).tolist()).encode("utf-8", "surrogatepass")
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
        self.lines = lines if isinstance(lines, range) else list(lines) if lines is not None else range(1, n + 1)
        self.word = word

    def err(self, i: int, fld: str | None, msg: str) -> InputError:
        return InputError(self.source, self.lines[i], fld, msg)


def _check_lengths(source: str, n: int, cols: Mapping[str, Any]) -> None:
    """InputError unless every column of ``cols`` has ``n`` values and ``n`` > 0 (the history's shape checks)."""
    for name, col in cols.items():
        if len(col) != n:
            raise InputError(source, None, name, f"has {len(col)} values, expected {n} (one per record)")
    if n == 0:
        raise InputError(source, None, None, "the history has no records")


#: the history's text columns, each held as (vocab, codes)
TEXT_COLUMNS = ("stream", "family", "context", "task", "key")


@dataclass(frozen=True, eq=False)
class History:
    """Columnar history D of every stream, sorted by (stream, slot).

    ``slot`` is the record's position in its stream's ingestion order and is unique within a
    stream; a block is the set of a stream's records sharing (family, context).  ``outcome``
    is the utility in [0, 1], NaN when masked.  Build with :meth:`from_columns`,
    :func:`~replaylens.records.history_from_records` or :func:`replaylens.read_history`; instances are immutable.

    The text columns (stream, family, context, task, key) are held as integer codes into their distinct
    values (:meth:`text_codes`); the attributes ``stream`` … ``key`` give each as numpy fixed-width text,
    built anew on each access (bind it once rather than index it in a loop; :meth:`text` decodes some rows).
    """

    _text: Mapping[str, TextCodes]
    slot: np.ndarray
    outcome: np.ndarray
    event_time: np.ndarray
    event_id: np.ndarray
    metadata: np.ndarray
    source: str = "<memory>"
    _stream_order: tuple[str, ...] = field(default=(), repr=False)
    _stream_starts: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.int64), repr=False)

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
        (a reader's own columns: no second copy at the read's peak).
        """
        _check_lengths(source, len(stream), {"family": family, "context": context, "slot": slot, "task": task,
                                             "key": key, "outcome": outcome})
        text = {name: encode_text(_str_array(col)) for name, col in
                (("stream", stream), ("family", family), ("context", context), ("task", task), ("key", key))}
        return cls.from_coded(text=text, slot=slot, outcome=outcome, event_time=event_time, event_id=event_id,
                              metadata=metadata, source=source, lines=lines, line_word=line_word, copy=copy)

    @classmethod
    def from_coded(
        cls,
        *,
        text: Mapping[str, TextCodes],
        slot: Sequence[int] | np.ndarray,
        outcome: Sequence[float] | np.ndarray,
        event_time: Sequence[float] | np.ndarray | None = None,
        event_id: Sequence[str] | np.ndarray | None = None,
        metadata: Sequence[str] | np.ndarray | None = None,
        source: str = "<memory>",
        lines: Sequence[int] | None = None,
        line_word: str = "line",
        copy: bool = True,
    ) -> History:
        """:meth:`from_columns` with the text columns given as ``text[name] = (vocab, codes)`` for each of
        stream, family, context, task and key: ``vocab`` a 1-d numpy ``<U`` array of *distinct* values,
        ``codes`` an integer index into it per record (the readers' path: no fixed-width column is built).
        The same checks, messages and result as :meth:`from_columns` of the decoded columns."""
        if set(text) != set(TEXT_COLUMNS):
            raise ValueError(f"text must give exactly the columns {TEXT_COLUMNS}")
        n = int(np.asarray(text["stream"][1]).shape[0])
        _check_lengths(source, n, {"family": text["family"][1], "context": text["context"][1], "slot": slot,
                                   "task": text["task"][1], "key": text["key"][1], "outcome": outcome})
        lin = _Lines(source, lines, n, line_word)
        coded = {name: compact(decode_bytes(np.asarray(text[name][0])), np.asarray(text[name][1]))
                 for name in TEXT_COLUMNS}
        for name in TEXT_COLUMNS:
            bad = blank_rows(*coded[name])   # empty or blank, checked once per distinct value
            if bad.size:
                raise lin.err(int(bad[0]), name, "must not be empty")
        sl_raw = np.asarray(slot)
        if sl_raw.dtype.kind in "iu":
            sl_i = sl_raw.astype(np.int64, copy=copy)
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
        # stream order = first appearance: the stream vocab is put in that order, so a stream's code is its rank
        s_vocab, s_codes = coded["stream"]
        order = first_appearance(s_codes, s_vocab.size)
        rank_of = np.empty(order.size, dtype=np.int32)
        rank_of[order] = np.arange(order.size, dtype=np.int32)
        s_vocab, srank = s_vocab[order], rank_of[s_codes]
        coded["stream"] = (s_vocab, srank)
        # canonical sort = (stream order, slot)
        s_run = srank[1:] == srank[:-1]
        if bool((srank[1:] >= srank[:-1]).all() and (~s_run | (sl_i[1:] > sl_i[:-1])).all()):
            perm = None   # already sorted (a file written stream by stream, slots in order)
        else:
            perm = np.lexsort((sl_i, srank))
        # duplicate (stream, slot)
        s2, l2 = (srank, sl_i) if perm is None else (srank[perm], sl_i[perm])
        dup = np.flatnonzero((s2[1:] == s2[:-1]) & (l2[1:] == l2[:-1]))
        if dup.size:
            j = int(dup[0] + 1) if perm is None else int(perm[dup[0] + 1])
            raise lin.err(j, "slot", f"duplicate slot {int(sl_i[j])} in stream {str(s_vocab[srank[j]])!r}")
        del s2, l2
        seen: dict[tuple[str, str], int] = {}
        for j in np.flatnonzero(eid != "").tolist():
            k = (str(s_vocab[srank[j]]), str(eid[j]))
            if k in seen:
                raise lin.err(j, "event_id", f"duplicate event_id {k[1]!r} in stream {k[0]!r}")
            seen[k] = j
        if perm is not None and bool((perm == np.arange(n)).all()):
            perm = None

        def own(a: np.ndarray) -> np.ndarray:   # the canonical order's array: copied (or kept), else gathered
            return (a.copy() if copy else a) if perm is None else a[perm]

        def own_text(name: str, v: np.ndarray, c: np.ndarray) -> TextCodes:   # the caller's arrays are not kept
            given_v, given_c = text[name]
            v = v.copy() if copy and v is given_v else v
            c = c.copy() if copy and perm is None and c is given_c else c if perm is None else c[perm]
            return readonly(pack(v)), readonly(c.astype(np.int32, copy=False))

        text_out = {name: own_text(name, v, c) for name, (v, c) in coded.items()}
        starts = np.searchsorted(text_out["stream"][1], np.arange(s_vocab.size + 1)).astype(np.int64)
        return cls(
            _text=text_out, slot=own(sl_i), outcome=own(y), event_time=own(et), event_id=own(eid),
            metadata=own(meta), source=source, _stream_order=tuple(s_vocab.tolist()),
            _stream_starts=readonly(starts),
        )

    # ------------------------------------------------------------------ access
    def __len__(self) -> int:
        return int(self.slot.shape[0])

    def text_codes(self, name: str) -> TextCodes:
        """``(vocab, codes)`` of the text column ``name`` (stream, family, context, task or key): its distinct
        values (a 1-d numpy ``<U`` array, no value twice, every value used) and an int32 code per record, so
        that ``vocab[codes]`` is the column.  Equal codes ⇔ equal text; the vocab's order is internal, except
        for ``stream``, whose vocab is :attr:`streams` (a stream's code is its rank, and codes never decrease).
        The codes are read-only and shared; an ASCII vocab is held as bytes and decoded on each call (cheap for
        the few distinct streams, blocks and keys; for task ids, mostly distinct, as large as the column).
        Group, compare and count on the codes, decode only what is shown."""
        vocab, codes = self._held(name)
        return decode_bytes(vocab), codes

    def held_nbytes(self, name: str) -> int:
        """Bytes the text column ``name`` holds: its vocab as held (an ASCII vocab as bytes, 1 a character) and its
        int32 codes (what :func:`text` would decode to numpy fixed-width text, 4 bytes a character a row)."""
        vocab, codes = self._held(name)
        return int(vocab.nbytes + codes.nbytes)

    def _held(self, name: str) -> TextCodes:
        """(vocab, codes) as held: an ASCII vocab as numpy bytes (1 byte a character), else as numpy text."""
        try:
            return self._text[name]
        except KeyError:
            raise KeyError(f"{name!r} is not a text column of the history ({', '.join(TEXT_COLUMNS)})") from None

    def text(self, name: str, rows: slice | np.ndarray | None = None) -> np.ndarray:
        """The text column ``name`` (or its ``rows``: a slice or an index array) as numpy fixed-width text."""
        vocab, codes = self._held(name)
        return decode(vocab, codes if rows is None else codes[rows])

    @property
    def stream(self) -> np.ndarray:
        """Each record's stream id (numpy text, decoded on access)."""
        return self.text("stream")

    @property
    def family(self) -> np.ndarray:
        """Each record's block family (numpy text, decoded on access)."""
        return self.text("family")

    @property
    def context(self) -> np.ndarray:
        """Each record's block context (numpy text, decoded on access)."""
        return self.text("context")

    @property
    def task(self) -> np.ndarray:
        """Each record's task id x_t (numpy text, decoded on access)."""
        return self.text("task")

    @property
    def key(self) -> np.ndarray:
        """Each record's action key a_t (numpy text, decoded on access)."""
        return self.text("key")

    @property
    def streams(self) -> tuple[str, ...]:
        """Stream ids in first-appearance order."""
        return self._stream_order

    @property
    def labels(self) -> tuple[str, ...]:
        """Distinct keys in first-appearance order (canonical order of the history alone)."""
        vocab, codes = self.text_codes("key")
        return tuple(vocab[first_appearance(codes, vocab.size)].tolist())

    def stream_slice(self, stream: str) -> slice:
        """Positions of ``stream``'s records (contiguous because rows are sorted)."""
        index = memoized(self, "stream_index", lambda: {s: i for i, s in enumerate(self._stream_order)})
        i = index.get(stream) if isinstance(stream, str) else None
        if i is None:
            raise KeyError(stream)
        return slice(int(self._stream_starts[i]), int(self._stream_starts[i + 1]))

    def blocks(self, stream: str) -> tuple[tuple[str, str], ...]:
        """The (family, context) blocks of ``stream`` ordered by their first slot."""
        s = self.stream_slice(stream)
        return tuple(dict.fromkeys(zip(self.text("family", s).tolist(), self.text("context", s).tolist(),
                                       strict=True)))

    def records(self, stream: str | None = None) -> Iterator[Record]:
        """Iterate the records (optionally of one stream) in (stream, slot) order."""
        span = slice(0, len(self)) if stream is None else self.stream_slice(stream)
        for a in range(span.start, span.stop, _RECORD_CHUNK):   # text decoded a chunk at a time, not per record
            rows = slice(a, min(a + _RECORD_CHUNK, span.stop))
            st, fam, ctx, tk, ky = (self.text(name, rows).tolist() for name in TEXT_COLUMNS)
            slots, ys = self.slot[rows].tolist(), self.outcome[rows].tolist()
            times, ids, metas = self.event_time[rows].tolist(), self.event_id[rows].tolist(), self.metadata[rows]
            for i in range(len(slots)):
                et = float(times[i])
                meta = str(metas[i])
                yield Record(
                    stream=st[i], family=fam[i], context=ctx[i], slot=int(slots[i]), task=tk[i], key=ky[i],
                    outcome=float(ys[i]), event_time=None if math.isnan(et) else et,
                    event_id=str(ids[i]) or None, metadata=json.loads(meta) if meta else None,
                )

    def select(self, streams: Sequence[str]) -> History:
        """A history restricted to ``streams`` (kept in the given order)."""
        want = set(streams)
        wanted = np.array([s in want for s in self._stream_order], dtype=bool)
        mask = wanted[self._text["stream"][1]]
        if not mask.any():
            raise KeyError(f"none of the streams {list(streams)!r} is in the history")
        return History.from_coded(
            text={name: (v, c[mask]) for name, (v, c) in self._text.items()}, slot=self.slot[mask],
            outcome=self.outcome[mask], event_time=self.event_time[mask], event_id=self.event_id[mask],
            metadata=self.metadata[mask], source=self.source, copy=False,
        )

    def to_pandas(self) -> Any:
        """A pandas DataFrame with the documented columns."""
        import pandas as pd

        return pd.DataFrame(self.to_columns())

    def to_columns(self) -> dict[str, np.ndarray]:
        """Every column by name, the text ones decoded (fixed-width numpy text)."""
        return {name: self.text(name) if name in self._text else getattr(self, name) for name in _COLUMNS}

    def fingerprint(self) -> str:
        """sha256 of the canonical content (independent of file format, row order and how the text is held);
        computed once."""
        return str(memoized(self, "fingerprint", self._fingerprint))

    def _fingerprint(self) -> str:
        h = hashlib.sha256()
        for name in _COLUMNS:   # one decoded text column at a time
            if name in self._text:
                vocab, codes = self._held(name)
                col = vocab[codes]
            else:
                col = getattr(self, name)
            h.update(name.encode())
            h.update(np.ascontiguousarray(col).tobytes() if col.dtype.kind in "fi" else _joined_text(col))
            del col
        return h.hexdigest()

    def equals(self, other: History) -> bool:
        """Content equality (NaN equals NaN)."""
        return self.fingerprint() == other.fingerprint()

    def __repr__(self) -> str:
        return f"History(records={len(self)}, streams={len(self.streams)}, source={self.source!r})"


#: rows whose text :meth:`History.records` decodes at once
_RECORD_CHUNK = 65536

#: every column, in the order of :meth:`History.to_columns` (and of the fingerprint)
_COLUMNS = ("stream", "family", "context", "slot", "task", "key", "outcome", "event_time", "event_id", "metadata")


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
            i, _ = self.table.first_uncovered(self.table.rows_for(cols.streams, cols.stream, cols.task_text),
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

    def release(self) -> None:
        """Let go of a file-read table's columns once the caller is done looking utilities up (an audit's replay
        carries every utility its readouts use): the content fingerprint is kept (taken now if it was not), and
        any later lookup raises ``RuntimeError``.  A table given as a mapping is the caller's: left as it is."""
        if isinstance(self.table, CodedTable):
            self.fingerprint()
            self.table.release()

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
