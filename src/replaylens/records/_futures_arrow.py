"""Columnar fast path for a plainly valid future-task table (Parquet or JSONL read by pyarrow).

Text columns are dictionary-encoded, the per-stratum task index and the canonical order are computed on
integer codes, and menus are shared tuples; only the :class:`FutureTask` records themselves are built per
row.  Anything that the row reader would transform or reject (whitespace to trim, empty labels, nulls,
duplicates, metadata) makes this return ``None``, and the row reader then runs with its usual messages,
so both give the same tasks in the same order.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from ._arrow_rows import is_text, text_codes
from ._codes import has_duplicates
from ._history import FutureTask, FutureTasks

__all__ = ["futures_from_arrow"]

_REQUIRED = ("stream", "family", "context", "task", "menu")
_ALLOWED = (*_REQUIRED, "feeds_family", "feeds_context", "metadata")


def _clean(words: list[Any]) -> bool:
    """Every distinct value is a non-empty string that the row reader would keep as it is."""
    return all(isinstance(w, str) and w and w == w.strip() for w in words)


def _codes(table: Any, name: str) -> tuple[list[str], np.ndarray] | None:
    col = table.column(name)
    if not is_text(col.type) or col.null_count:
        return None
    vocab, codes = text_codes(col)
    return (vocab, codes) if _clean(vocab) else None


def _first_rank(key: np.ndarray) -> np.ndarray:
    """Rank of each row's key by the key's first appearance (0 for the first key seen)."""
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    return rank[inverse.reshape(-1)]


def _menus(table: Any, n: int) -> list[tuple[str, ...]] | None:
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
    row = np.repeat(np.arange(n, dtype=np.int64), lengths)
    if has_duplicates(row * max(len(vocab), 1) + codes):
        return None  # a label repeated within a menu
    words = [vocab[c] for c in codes.tolist()]
    shared: dict[tuple[str, ...], tuple[str, ...]] = {}
    bounds = offsets.tolist()
    return [shared.setdefault(m, m) for m in (tuple(words[a:b]) for a, b in itertools.pairwise(bounds))]


def futures_from_arrow(table: Any, source: str) -> FutureTasks | None:
    """The future tasks of ``table`` as :func:`futures_from_rows` would build them, or ``None``."""
    names = set(table.column_names)
    n = table.num_rows
    if n == 0 or not names <= set(_ALLOWED) or not set(_REQUIRED) <= names:
        return None
    if "metadata" in names and table.column("metadata").null_count != n:
        return None
    cols = {name: _codes(table, name) for name in ("stream", "family", "context", "task")}
    feeds: list[tuple[str, str] | None] = [None] * n
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
        feeds = [None if a < 0 else (vf[a], vc[b]) for a, b in zip(cf.tolist(), cc.tolist(), strict=True)]
    menus = _menus(table, n)
    stream, family, context, task = (cols[k] for k in ("stream", "family", "context", "task"))
    if menus is None or stream is None or family is None or context is None or task is None:
        return None
    (s_vocab, s), (f_vocab, f), (c_vocab, c), (t_vocab, t) = stream, family, context, task
    if has_duplicates(s * len(t_vocab) + t):
        return None  # a duplicate (stream, task): the row reader names it
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
    tasks = tuple(
        FutureTask(s_vocab[a], f_vocab[b], c_vocab[d], t_vocab[e], menus[i], x, feeds[i], None)
        for i, a, b, d, e, x in zip(canon.tolist(), s[canon].tolist(), f[canon].tolist(), c[canon].tolist(),
                                    t[canon].tolist(), index[canon].tolist(), strict=True)
    )
    return FutureTasks(tasks, source=source)
