"""Columnar fast path for a plainly valid future-task table (Parquet or JSONL read by pyarrow).

Text columns are dictionary-encoded, the per-stratum task index and the canonical order are computed on
integer codes, and the result is kept as :class:`FutureColumns` (no object per task).  Anything that the
row reader would transform or reject (whitespace to trim, empty labels, nulls, duplicates, metadata) makes
this return ``None``, and the row reader then runs with its usual messages, so both give the same tasks in
the same order.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._arrow_rows import ASCII_SPACE, arrow_codes, ascii_text_array, clean_words, is_coded_text, is_text, text_codes
from ._codes import distinct_rows, has_duplicates
from ._futures import FutureColumns, FutureTasks, text_array
from ._text_codes import pack

__all__ = ["futures_from_arrow"]

_REQUIRED = ("stream", "family", "context", "task", "menu")
_ALLOWED = (*_REQUIRED, "feeds_family", "feeds_context", "metadata")


def _clean(words: list[Any]) -> bool:
    """Every distinct value is a non-empty string that the row reader would keep as it is."""
    return all(isinstance(w, str) and w and w == w.strip() for w in words)


def _codes(table: Any, name: str) -> tuple[list[str], np.ndarray] | None:
    col = table.column(name)
    if not (is_text(col.type) or is_coded_text(col.type)) or col.null_count:
        return None
    vocab, codes = arrow_codes(col)
    return (vocab.to_pylist(), codes) if clean_words(vocab) else None


def _distinct_ascii_ids(col: Any, n: int) -> np.ndarray | None:
    """A task-id column of ``n`` distinct, non-empty plain-ASCII values that ``str.strip`` keeps as they are, as
    fixed-width text laid out from the arrow buffers (no ``str`` per value); ``None`` otherwise."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not is_text(col.type) or col.null_count:
        return None
    chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
    if any(not pa.types.is_string(c.type) for c in chunks):
        return None
    if pc.count_distinct(col).as_py() != n:
        return None
    laid = ascii_text_array(col)
    if laid is None:
        return None
    for c in chunks:   # ASCII (checked by the layout): the first and last byte tell whether strip() changes it
        offsets = np.frombuffer(c.buffers()[1], dtype=np.int32)[c.offset : c.offset + len(c) + 1].astype(np.int64)
        lengths = np.diff(offsets)
        if (lengths == 0).any():
            return None
        buf = c.buffers()[2]
        data = np.frombuffer(buf, dtype=np.uint8) if buf is not None else np.zeros(0, dtype=np.uint8)
        ends = np.r_[data[offsets[:-1]], data[offsets[1:] - 1]] if lengths.size else data[:0]
        if np.isin(ends, ASCII_SPACE).any():
            return None
    return laid


def _first_rank(key: np.ndarray) -> np.ndarray:
    """Rank of each row's key by the key's first appearance (0 for the first key seen)."""
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    return rank[inverse.reshape(-1)]


def _menus(table: Any, n: int) -> tuple[tuple[tuple[str, ...], ...], np.ndarray] | None:
    """The distinct menus (first-appearance order) and each row's menu code, or ``None``."""
    import pyarrow as pa

    col = table.column("menu")
    kind = col.type
    if not (pa.types.is_list(kind) or pa.types.is_large_list(kind)) or not is_text(kind.value_type):
        return None
    if col.null_count:
        return None
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    offsets = np.asarray(arr.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
    values = arr.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    offsets = offsets - offsets[0]
    if values.null_count:
        return None
    vocab, codes = text_codes(values)
    lengths = np.diff(offsets)
    if not _clean(vocab) or (lengths == 0).any():
        return None
    # distinct menus through their code sequences (a menu is its labels' codes, padded to the widest)
    width = int(lengths.max())
    if (lengths == width).all():   # menus of one length: the codes are the rows
        padded = codes.reshape(n, width)
    else:
        padded = np.full((n, width), -1, dtype=np.int64)
        row = np.repeat(np.arange(n, dtype=np.int64), lengths)
        padded[row, np.arange(codes.size) - np.repeat(offsets[:-1], lengths)] = codes
    first, inverse = distinct_rows(padded)
    order = np.argsort(first, kind="stable")                 # distinct menus by first appearance
    rank = np.empty(first.size, dtype=np.int64)
    rank[order] = np.arange(first.size)
    menus = tuple(tuple(vocab[c] for c in padded[first[j]].tolist() if c >= 0) for j in order.tolist())
    if any(len(set(m)) != len(m) for m in menus):
        return None  # a label repeated within a menu (a task's menu is one of the distinct menus)
    return menus, rank[inverse]


def futures_from_arrow(table: Any, source: str) -> FutureTasks | None:
    """The future tasks of ``table`` as :func:`futures_from_rows` would build them, or ``None``."""
    names = set(table.column_names)
    n = table.num_rows
    if n == 0 or not names <= set(_ALLOWED) or not set(_REQUIRED) <= names:
        return None
    if "metadata" in names and table.column("metadata").null_count != n:
        return None
    ids = _distinct_ascii_ids(table.column("task"), n)   # the usual case: no per-value str, no duplicate
    cols = {name: _codes(table, name) for name in ("stream", "family", "context", *(("task",) if ids is None else ()))}
    feed_names: tuple[tuple[str, str], ...] = ()
    feed = np.full(n, -1, dtype=np.int64)
    if names & {"feeds_family", "feeds_context"}:
        if not {"feeds_family", "feeds_context"} <= names:
            return None
        ff, fc = table.column("feeds_family"), table.column("feeds_context")
        if not (is_text(ff.type) and is_text(fc.type)):
            return None
        vf, cf = text_codes(ff)
        vc, cc = text_codes(fc)
        if not (_clean(vf) and _clean(vc)) or ((cf < 0) != (cc < 0)).any():
            return None
        pair = np.where(cf < 0, -1, cf * max(len(vc), 1) + cc)
        used = np.unique(pair[pair >= 0])
        feed_names = tuple((vf[p // max(len(vc), 1)], vc[p % max(len(vc), 1)]) for p in used.tolist())
        feed = np.where(pair < 0, -1, np.searchsorted(used, pair))
    menus = _menus(table, n)
    stream, family, context = (cols[k] for k in ("stream", "family", "context"))
    task = cols.get("task")
    if menus is None or stream is None or family is None or context is None or (ids is None and task is None):
        return None
    (s_vocab, s), (f_vocab, f), (c_vocab, c) = stream, family, context
    if ids is None:
        assert task is not None
        t_vocab, t = task
        if has_duplicates(s * len(t_vocab) + t):
            return None  # a duplicate (stream, task): the row reader names it
        ids = text_array(t_vocab)[t]
    stratum = (s * len(f_vocab) + f) * len(c_vocab) + c
    # index: order of appearance within (stream, family, context)
    order = np.argsort(stratum, kind="stable")
    sorted_key = stratum[order]
    starts = np.flatnonzero(np.r_[True, sorted_key[1:] != sorted_key[:-1]])
    run = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
    index = np.empty(n, dtype=np.int64)
    index[order] = run
    # canonical order: stream first appearance, then stratum first appearance, then index
    canon = np.lexsort((index, _first_rank(stratum), _first_rank(s)))
    menu_names, menu = menus
    columns = FutureColumns(
        streams=tuple(s_vocab), families=tuple(f_vocab), contexts=tuple(c_vocab), menus=menu_names,
        feeds=feed_names, stream=s[canon], family=f[canon], context=c[canon],
        task_text=pack(ids)[canon], menu=menu[canon], feed=feed[canon], index=index[canon])
    return FutureTasks(source=source, columns=columns)
