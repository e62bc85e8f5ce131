"""The future task set X⁺, kept by columns.

A future-task file of 600,000 tasks read into one :class:`FutureTask` object per task costs a few hundred bytes
and about a microsecond of Python a task, and every later pass over the set (its fingerprint, the input checks,
the replay's encoding, the utility lookup) walks those objects again.  :class:`FutureColumns` keeps the same set
as integer codes into the distinct texts (streams, families, contexts, menus, feeds blocks), the task ids as one
text array and the per-stratum index as integers, in the canonical order; :class:`FutureTasks` holds either the
objects or the columns, gives the other on demand (built once), and answers its summaries from the columns.
:class:`FutureRows` is a lazy sequence of some tasks (one stream's, for the replay) built on first use.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

import numpy as np

from .._memory import release_freed_memory
from ..errors import InputError
from ._layout import concat, json_strings, replace_rows, text_of
from ._memo import memoized
from ._text_codes import decode_bytes, pack

__all__ = ["FutureColumns", "FutureRows", "FutureTask", "FutureTasks", "future_dict"]


@dataclass(frozen=True, slots=True)
class FutureTask:
    """One future task x ∈ X⁺_{r,R}: its stream, stratum, id and menu (canonical order)."""

    stream: str
    family: str
    context: str
    task: str
    menu: tuple[str, ...]
    index: int
    feeds: tuple[str, str] | None = None
    metadata: Mapping[str, Any] | None = None

    @property
    def stratum(self) -> tuple[str, str]:
        return (self.family, self.context)

    @property
    def feed_block(self) -> tuple[str, str] | None:
        """The block whose prefix feeds this stratum (None: the whole stream)."""
        return self.feeds


def future_dict(t: FutureTask) -> dict[str, Any]:
    d: dict[str, Any] = {
        "stream": t.stream, "family": t.family, "context": t.context, "task": t.task, "menu": list(t.menu),
    }
    if t.feeds is not None:
        d["feeds_family"], d["feeds_context"] = t.feeds
    if t.metadata is not None:
        d["metadata"] = dict(t.metadata)
    return d


def text_array(values: list[str]) -> np.ndarray:
    """``values`` as numpy fixed-width text, or as an object array when a value ends in NUL (which fixed-width
    text would drop)."""
    if any(v.endswith("\x00") for v in values):
        return np.array(values, dtype=object)
    return np.array(values, dtype=str) if values else np.zeros(0, dtype="<U1")


def _vocab(values: Iterable[Any], n: int) -> tuple[tuple[Any, ...], np.ndarray]:
    """Distinct values in first-appearance order and each value's code."""
    seen: dict[Any, int] = {}
    codes = np.fromiter((seen.setdefault(v, len(seen)) for v in values), dtype=np.int64, count=n)
    return tuple(seen), codes


def first_appearance(codes: np.ndarray) -> np.ndarray:
    """The distinct codes in order of first appearance."""
    uniq, first = np.unique(codes, return_index=True)
    return np.asarray(uniq[np.argsort(first, kind="stable")], dtype=np.int64)


@dataclass(frozen=True, eq=False)
class FutureColumns:
    """X⁺ by columns, in canonical order: each text field as codes into its distinct values.

    ``feed`` is −1 where the task names no feeds block; ``metadata`` is ``None`` when no task has any.
    """

    streams: tuple[str, ...]
    families: tuple[str, ...]
    contexts: tuple[str, ...]
    menus: tuple[tuple[str, ...], ...]
    feeds: tuple[tuple[str, str], ...]
    stream: np.ndarray    # (N,) int64 codes into ``streams``
    family: np.ndarray    # (N,) into ``families``
    context: np.ndarray   # (N,) into ``contexts``
    task_text: np.ndarray  # (N,) task ids: numpy bytes (1 byte a character) when all ASCII, else text
    menu: np.ndarray      # (N,) into ``menus``
    feed: np.ndarray      # (N,) into ``feeds``, −1: none
    index: np.ndarray     # (N,) order within (stream, family, context)
    metadata: tuple[Mapping[str, Any] | None, ...] | None = None

    def __post_init__(self) -> None:
        if self.task_text.dtype.kind == "U":   # held as bytes where it can be (task ids: as many as the tasks)
            object.__setattr__(self, "task_text", pack(self.task_text))
        for a in (self.stream, self.family, self.context, self.task_text, self.menu, self.feed, self.index):
            a.flags.writeable = False   # shared with views and results: never changed in place

    @property
    def task(self) -> np.ndarray:
        """(N,) task ids as numpy text (decoded on each access: bind it once)."""
        return decode_bytes(self.task_text)

    def task_at(self, rows: np.ndarray | slice) -> np.ndarray:
        """The ids of the tasks at ``rows`` as numpy text (only those decoded)."""
        return decode_bytes(self.task_text[rows])

    def __len__(self) -> int:
        return int(self.stream.shape[0])

    @classmethod
    def of_tasks(cls, tasks: Sequence[FutureTask]) -> FutureColumns:
        """The columns of ``tasks`` (in their order)."""
        n = len(tasks)
        streams, stream = _vocab((t.stream for t in tasks), n)
        families, family = _vocab((t.family for t in tasks), n)
        contexts, context = _vocab((t.context for t in tasks), n)
        menus, menu = _vocab((t.menu for t in tasks), n)
        fed = [t.feeds for t in tasks]
        feeds, feed = _vocab((f for f in fed if f is not None), sum(f is not None for f in fed))
        feed_all = np.full(n, -1, dtype=np.int64)
        feed_all[[i for i, f in enumerate(fed) if f is not None]] = feed
        meta = tuple(t.metadata for t in tasks)
        return cls(streams, families, contexts, menus, feeds, stream, family, context,
                   text_array([t.task for t in tasks]), menu, feed_all,
                   np.fromiter((t.index for t in tasks), dtype=np.int64, count=n),
                   meta if any(m is not None for m in meta) else None)

    def build(self, rows: np.ndarray | None = None) -> tuple[FutureTask, ...]:
        """The tasks at ``rows`` (all when ``None``) as :class:`FutureTask` objects."""
        at = np.arange(len(self)) if rows is None else np.asarray(rows, dtype=np.int64)
        s, f, c, m = self.streams, self.families, self.contexts, self.menus
        feeds: list[tuple[str, str] | None] = [*self.feeds, None]   # code −1 reads the last entry
        meta = self.metadata
        return tuple(
            FutureTask(s[a], f[b], c[d], task, m[e], x, feeds[g], None if meta is None else meta[i])
            for i, a, b, d, task, e, x, g in zip(
                at.tolist(), self.stream[at].tolist(), self.family[at].tolist(), self.context[at].tolist(),
                self.task_at(at).tolist(), self.menu[at].tolist(), self.index[at].tolist(), self.feed[at].tolist(),
                strict=True))

    def stratum_codes(self) -> tuple[tuple[tuple[str, str], ...], np.ndarray]:
        """The distinct strata (family, context) in first-appearance order and each task's code."""
        width = max(len(self.contexts), 1)
        pair = self.family * width + self.context
        order = first_appearance(pair)
        rank = np.empty(int(order.max(initial=-1)) + 1, dtype=np.int64)
        rank[order] = np.arange(order.size)
        strata = tuple((self.families[p // width], self.contexts[p % width]) for p in order.tolist())
        return strata, rank[pair]

    def json_document(self, chunk: int = 65536) -> Iterator[bytes]:
        """``json.dumps([future_dict(t) for t in tasks], sort_keys=True, separators=(",", ":"))`` in pieces (the
        same bytes), ``chunk`` tasks at a time; laid out by columns (:mod:`._layout`) from the JSON of each
        distinct text and menu and of each task id (a task with metadata is written by ``json.dumps``)."""
        import pyarrow as pa

        def js(vocab: Sequence[str]) -> Any:   # each text's JSON (by columns), then "" for code −1
            return pa.concat_arrays([json_strings(list(vocab)), pa.array([""], type=pa.string())])

        s, f, c = js(self.streams), js(self.families), js(self.contexts)
        m = pa.array([json.dumps(list(v), separators=(",", ":")) for v in self.menus] + [""], type=pa.string())
        ff = pa.array([f'"feeds_context":{json.dumps(b)},"feeds_family":{json.dumps(a)},' for a, b in self.feeds]
                      + [""], type=pa.string())
        feed = np.where(self.feed < 0, len(self.feeds), self.feed)   # code −1 reads the last entry ("")
        n = len(self)
        yield b"["
        for lo in range(0, n, chunk):
            sl = slice(lo, min(n, lo + chunk))
            text = concat('{"context":', c.take(pa.array(self.context[sl])),
                          ',"family":', f.take(pa.array(self.family[sl])), ",", ff.take(pa.array(feed[sl])),
                          '"menu":', m.take(pa.array(self.menu[sl])), ',"stream":', s.take(pa.array(self.stream[sl])),
                          ',"task":', json_strings(self.task_at(sl)), "},")
            if self.metadata is not None and any(x is not None for x in self.metadata[sl]):
                at = [j for j, x in enumerate(self.metadata[sl]) if x is not None]
                mask = np.zeros(len(text), dtype=bool)
                mask[at] = True
                rows = [json.dumps(future_dict(t), sort_keys=True, separators=(",", ":")) + ","
                        for t in self.build(np.array(at, dtype=np.int64) + lo)]
                text = replace_rows(text, mask, rows)
            yield (b"," if lo else b"") + text_of(text)[:-1]
        yield b"]"


class FutureRows(Sequence[FutureTask]):
    """Some tasks of a :class:`FutureColumns` (``rows``, in that order), built as objects on first use."""

    __slots__ = ("_built", "_n", "columns", "rows")

    def __init__(self, columns: FutureColumns, rows: np.ndarray) -> None:
        self.columns, self.rows = columns, rows
        self._n = int(rows.shape[0])
        self._built: tuple[FutureTask, ...] | None = None

    def _tasks(self) -> tuple[FutureTask, ...]:
        if self._built is None:
            self._built = self.columns.build(self.rows)
        return self._built

    @property
    def task_ids(self) -> np.ndarray:
        """The tasks' ids (text), without building the tasks."""
        return self.columns.task_at(self.rows)

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> FutureTask: ...
    @overload
    def __getitem__(self, i: slice) -> FutureRows: ...

    def __getitem__(self, i: int | slice) -> FutureTask | FutureRows:
        if isinstance(i, slice):
            return FutureRows(self.columns, self.rows[i])
        return self._tasks()[i]

    def __iter__(self) -> Iterator[FutureTask]:
        return iter(self._tasks())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return tuple(self) == tuple(other)

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Callable[..., FutureRows], tuple[FutureColumns, np.ndarray]]:
        return (FutureRows, (self.columns, self.rows))

    def __repr__(self) -> str:
        return f"FutureRows(tasks={len(self)})"


class FutureTasks:
    """The future task set X⁺: tasks per (stream, stratum) with their menus.

    ``feeds`` names the block whose prefix feeds the stratum (the prefix rule T_{r,R});
    when absent the stratum's own block feeds it if the stream has one, else the whole stream.
    Built from :class:`FutureTask` objects or (``columns=``, as the file readers do) from
    :class:`FutureColumns`; either form gives the other on demand.  Immutable.
    """

    __slots__ = ("__weakref__", "_columns", "_tasks", "source")
    _tasks: tuple[FutureTask, ...] | None
    _columns: FutureColumns | None
    source: str

    def __init__(self, tasks: Iterable[FutureTask] = (), source: str = "<memory>", *,
                 columns: FutureColumns | None = None) -> None:
        kept = None if columns is not None else tuple(tasks)
        if (len(columns) if columns is not None else len(kept or ())) == 0:
            raise InputError(source, None, None, "the future task set is empty")
        object.__setattr__(self, "_tasks", kept)
        object.__setattr__(self, "_columns", columns)
        object.__setattr__(self, "source", source)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"FutureTasks is immutable (cannot set {name!r})")

    def __reduce__(self) -> tuple[Callable[..., FutureTasks], tuple[Any, ...]]:
        return (_restore, (self._tasks, self.source, self._columns))

    @property
    def tasks(self) -> tuple[FutureTask, ...]:
        if self._tasks is not None:
            return self._tasks
        cols = self._columns
        assert cols is not None
        return memoized(self, "tasks", cols.build)

    @property
    def columns(self) -> FutureColumns:
        if self._columns is not None:
            return self._columns
        tasks = self._tasks
        assert tasks is not None
        return memoized(self, "columns", lambda: FutureColumns.of_tasks(tasks))

    def __len__(self) -> int:
        return len(self._tasks) if self._tasks is not None else len(self.columns)

    def __iter__(self) -> Iterator[FutureTask]:
        return iter(self.tasks)

    @property
    def streams(self) -> tuple[str, ...]:
        """Streams in first-appearance order."""
        def compute() -> tuple[str, ...]:
            cols = self.columns
            return tuple(cols.streams[i] for i in first_appearance(cols.stream).tolist())
        return memoized(self, "streams", compute)

    @property
    def strata(self) -> tuple[tuple[str, str], ...]:
        """Strata in first-appearance order."""
        return memoized(self, "strata", lambda: self.columns.stratum_codes()[0])

    def _menus_in_order(self) -> list[tuple[str, ...]]:
        cols = self.columns
        return [cols.menus[i] for i in first_appearance(cols.menu).tolist()]

    @property
    def labels(self) -> tuple[str, ...]:
        """The action vocabulary: union of menus in first-appearance (canonical) order."""
        return memoized(self, "labels", lambda: tuple(dict.fromkeys(a for m in self._menus_in_order() for a in m)))

    @property
    def menu_width(self) -> int:
        """The longest menu's length."""
        return int(memoized(self, "menu_width", lambda: max(len(m) for m in self._menus_in_order())))

    def rows_of(self, stream: str) -> np.ndarray:
        """The positions of stream ``stream``'s tasks (in order; empty for an unknown stream)."""
        def compute() -> dict[str, np.ndarray]:
            cols = self.columns
            order = np.argsort(cols.stream, kind="stable")
            bounds = np.r_[0, np.cumsum(np.bincount(cols.stream, minlength=len(cols.streams)))].tolist()
            return {s: order[bounds[i]:bounds[i + 1]] for i, s in enumerate(cols.streams)}
        by_stream: dict[str, np.ndarray] = memoized(self, "rows_of", compute)
        return by_stream.get(stream, np.zeros(0, dtype=np.int64))

    def view(self, rows: np.ndarray) -> FutureRows:
        """The tasks at ``rows`` as a lazy sequence."""
        return FutureRows(self.columns, rows)

    def of(self, stream: str, stratum: tuple[str, str] | None = None) -> tuple[FutureTask, ...]:
        rows = self.view(self.rows_of(stream))
        return tuple(t for t in rows if stratum is None or t.stratum == stratum)

    def to_pandas(self) -> Any:
        import pandas as pd

        return pd.DataFrame([future_dict(t) for t in self.tasks])

    def fingerprint(self) -> str:
        """sha256 of ``json.dumps([future_dict(t) for t in tasks], sort_keys=True)`` (compact), the same bytes
        laid out from the columns; computed once."""
        return str(memoized(self, "fingerprint", self._fingerprint))

    def _fingerprint(self) -> str:
        h = hashlib.sha256()
        for piece in self.columns.json_document():
            h.update(piece)
        release_freed_memory()   # the layout's arrow pages go back, not kept by the pool through the replay
        return h.hexdigest()

    def __repr__(self) -> str:
        return f"FutureTasks(tasks={len(self)}, streams={len(self.streams)}, strata={len(self.strata)})"


def _restore(tasks: tuple[FutureTask, ...] | None, source: str, columns: FutureColumns | None) -> FutureTasks:
    return FutureTasks(tasks or (), source, columns=columns)
