"""The counterfactual utility table kept as columns: (stream, task) → {key: utility} built per lookup.

A utility file of a million tasks read into nested dicts holds a dict, a tuple key and a float object per
cell (several hundred bytes a task); :class:`CodedTable` keeps the text columns as codes into their
distinct values and the utilities as one float array, grouped by task in first-appearance order, and is
a read-only ``Mapping`` with exactly the keys, order and values of the nested dicts it replaces.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ._codes import has_duplicates
from ._layout import concat, joined, json_floats, json_strings, text_of, to_arrow_text
from ._text_codes import decode_bytes

__all__ = ["CodedTable"]

#: tasks whose menu actions are looked up at once (:meth:`CodedTable.values_at`, ``first_uncovered``)
_LOOKUP_TASKS = 1 << 16
#: rows of at most this many keys are scanned for a key in place; longer ones are searched in sorted entries
_SCAN_KEYS = 32


class CodedTable(Mapping[tuple[str, str], Mapping[str, float]]):
    """``(stream, task) -> {key: utility}`` over code columns (a row's keys in file order)."""

    def __init__(self, streams: list[str], tasks: Sequence[str] | Any, keys: list[str], s: np.ndarray,
                 t: np.ndarray, k: np.ndarray, u: np.ndarray) -> None:
        """``tasks``: the task names (a list, or a pyarrow string array, kept as one: no ``str`` per name)."""
        pair = s.astype(np.int64) * max(len(tasks), 1) + t
        starts = np.flatnonzero(np.r_[True, pair[1:] != pair[:-1]]) if pair.size else np.zeros(0, dtype=np.int64)
        g_pair = pair[starts]
        self._keys = keys
        if not has_duplicates(g_pair):   # each task's rows are one run (a file written task by task): no regrouping
            self._k = k.astype(np.int32)
            self._u = np.ascontiguousarray(u, dtype=np.float64)
            self._start = np.r_[starts, pair.size].astype(np.int64)
        else:
            uniq, first, inverse = np.unique(pair, return_index=True, return_inverse=True)
            by_first = np.argsort(first, kind="stable")            # groups in first-appearance order
            rank = np.empty(uniq.size, dtype=np.int64)
            rank[by_first] = np.arange(uniq.size)
            group = rank[inverse.reshape(-1)]
            order = np.argsort(group, kind="stable")                # rows grouped, file order within a group
            self._k = k[order].astype(np.int32)
            self._u = np.ascontiguousarray(u[order], dtype=np.float64)
            self._start = np.r_[0, np.cumsum(np.bincount(group, minlength=uniq.size))].astype(np.int64)
            g_pair = uniq[by_first]
        del pair
        self._g_stream = (g_pair // max(len(tasks), 1)).astype(np.int32)
        self._g_task = (g_pair % max(len(tasks), 1)).astype(np.int32)
        self._streams, self._tasks = streams, to_arrow_text(tasks)
        self._index_built: dict[str, dict[str, int]] | None = None
        self._last_rows: tuple[Sequence[str], np.ndarray, np.ndarray, np.ndarray] | None = None
        self._sorted: tuple[np.ndarray, np.ndarray] | None = None
        self._released = False

    def release(self) -> None:
        """Let go of the columns (the caller is done looking utilities up); every later lookup raises
        ``RuntimeError``.  Used through :meth:`~replaylens.records.Evaluator.release`."""
        self._k = self._g_stream = self._g_task = np.zeros(0, dtype=np.int32)
        self._start, self._u = np.zeros(1, dtype=np.int64), np.zeros(0)
        self._streams, self._keys, self._tasks = [], [], to_arrow_text([])
        self._index_built = self._last_rows = self._sorted = None
        self._released = True

    def _live(self) -> None:
        if self._released:
            raise RuntimeError("this utility table was released after its audit's replay (Evaluator.release)")

    @property
    def _index(self) -> dict[str, dict[str, int]]:
        """``stream -> task -> row``, built on the first lookup by name (a columnar audit asks by codes only)."""
        self._live()
        if self._index_built is None:
            streams, tasks = self._streams, self._tasks.to_pylist()
            index: dict[str, dict[str, int]] = {}
            for g, (a, b) in enumerate(zip(self._g_stream.tolist(), self._g_task.tolist(), strict=True)):
                index.setdefault(streams[a], {})[tasks[b]] = g
            self._index_built = index
        return self._index_built

    def _row(self, g: int) -> dict[str, float]:
        a, b = int(self._start[g]), int(self._start[g + 1])
        keys = self._keys
        return {keys[c]: u for c, u in zip(self._k[a:b].tolist(), self._u[a:b].tolist(), strict=True)}

    def __getitem__(self, key: tuple[str, str]) -> dict[str, float]:
        try:
            s, t = key
            return self._row(self._index[s][t])
        except (KeyError, TypeError, ValueError):
            raise KeyError(key) from None

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, tuple) or len(key) != 2:
            return False
        inner = self._index.get(key[0])
        return inner is not None and key[1] in inner

    def __iter__(self) -> Iterator[tuple[str, str]]:
        self._live()
        streams, tasks = self._streams, self._tasks.to_pylist()
        for a, b in zip(self._g_stream.tolist(), self._g_task.tolist(), strict=True):
            yield (streams[a], tasks[b])

    def __len__(self) -> int:
        self._live()
        return int(self._g_stream.size)

    def key_at(self, g: int) -> tuple[str, str]:
        """The ``(stream, task)`` of row ``g`` (the ``g``-th key in iteration order)."""
        self._live()
        return self._streams[int(self._g_stream[g])], str(self._tasks[int(self._g_task[g])])

    def rows_for(self, streams: Sequence[str], stream: np.ndarray, tasks: np.ndarray) -> np.ndarray:
        """The row number of each task (``streams[stream[i]]``, ``tasks[i]``) in iteration order (−1: none);
        ``tasks`` is text or the ids as held (``FutureColumns.task_text``: packed bytes, compared without
        decoding where the order is the table's); the answer for the last arguments is kept (an audit asks for
        the same future-task columns three times: checking coverage, strictness and the utilities)."""
        self._live()
        last = self._last_rows
        if last is not None and last[0] is streams and last[1] is stream and last[2] is tasks:
            return last[3]
        n = int(stream.shape[0])
        if n == len(self) and self._same_order(streams, stream, tasks):
            g = np.arange(n, dtype=np.int64)   # the tasks are the table's, in its order (a file written task by task)
            g.flags.writeable = False
            self._last_rows = (streams, stream, tasks, g)
            return g
        inner = [self._index.get(s, {}) for s in streams]
        names = decode_bytes(tasks).tolist()
        g = np.fromiter((inner[a].get(t, -1) for a, t in zip(stream.tolist(), names, strict=True)),
                        dtype=np.int64, count=int(stream.shape[0]))
        g.flags.writeable = False
        self._last_rows = (streams, stream, tasks, g)
        return g

    def _same_order(self, streams: Sequence[str], stream: np.ndarray, tasks: np.ndarray) -> bool:
        """Whether task ``i`` (``streams[stream[i]]``, ``tasks[i]``) is the table's row ``i`` for every ``i``."""
        pos = {s: i for i, s in enumerate(self._streams)}
        code = np.array([pos.get(s, -1) for s in streams], dtype=np.int64)
        if not np.array_equal(code[stream], self._g_stream):
            return False
        import pyarrow as pa
        import pyarrow.compute as pc

        try:
            given = to_arrow_text(tasks)
        except (pa.ArrowException, TypeError, ValueError):   # not all text: compared one by one
            names = self._tasks.to_pylist()
            return all(a == names[b] for a, b in zip(decode_bytes(tasks).tolist(), self._g_task.tolist(), strict=True))
        return bool(pc.all(pc.equal(given, self._tasks.take(pa.array(self._g_task)))).as_py())

    def _wanted(self, menus: Sequence[tuple[str, ...]], menu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Tasks with menus ``menus[menu[i]]`` on codes: each task's menu length and the menu actions' key codes
        concatenated in task order (−1: a key no row has)."""
        self._live()
        k_pos = {k: j for j, k in enumerate(self._keys)}
        m_len = np.array([len(x) for x in menus], dtype=np.int64)
        table = np.full((len(menus), int(m_len.max(initial=0))), -1, dtype=np.int64)   # one row per menu
        for j, x in enumerate(menus):
            table[j, : len(x)] = [k_pos.get(a, -1) for a in x]
        lens = m_len[menu]
        # each task's menu codes, concatenated in task order (row-major over the padded rows)
        return lens, table[menu][np.arange(table.shape[1]) < lens[:, None]]

    def first_uncovered(self, g: np.ndarray, menus: Sequence[tuple[str, ...]], menu: np.ndarray
                        ) -> tuple[int, str | None]:
        """The first task (row ``g[i]``, see :meth:`rows_for`; menu ``menus[menu[i]]``) without a row
        (``(i, None)``) or with a menu action the row lacks (``(i, action)``, the first such action in menu
        order); ``(-1, None)`` when every task is covered."""
        no_row = np.flatnonzero(g < 0)   # (a task with no row and an empty menu has no action to look up)
        lacking = next(self._lookups(g, *self._wanted(menus, menu), missing_only=True), None)
        found = ([int(no_row[0])] if no_row.size else []) + ([lacking[0]] if lacking is not None else [])
        i = min(found, default=-1)
        if i < 0 or g[i] < 0:
            return i, None
        row = self._row(int(g[i]))
        return i, next(a for a in menus[int(menu[i])] if a not in row)

    def values_at(self, g: np.ndarray, menus: Sequence[tuple[str, ...]], menu: np.ndarray) -> np.ndarray:
        """``[row(g[i])[a] for i in tasks for a in menus[menu[i]]]`` as one float array, looked up on codes (a
        key listed twice in a row gives its last value, as the row's dict does); ``KeyError`` naming the first
        task position without a row or the first missing action, like the row lookup."""
        lens, want_k = self._wanted(menus, menu)
        out = np.empty(int(lens.sum()), dtype=np.float64)
        for i, a, at in self._lookups(g, lens, want_k):
            if i >= 0:   # task i has no row, or lacks its menu's action number a
                raise KeyError(i if g[i] < 0 else menus[int(menu[i])][a])
            out[a : a + at.size] = self._u[at]
        return out

    def _lookups(self, g: np.ndarray, lens: np.ndarray, want_k: np.ndarray, *,
                 missing_only: bool = False) -> Iterator[tuple[int, int, np.ndarray]]:
        """The table entries of every task's menu actions (task ``i``: row ``g[i]``, its menu's ``lens[i]`` key
        codes next in ``want_k``, as :meth:`_wanted` gives them), :data:`_LOOKUP_TASKS` tasks at a time (the
        temporaries stay a few MB whatever the number of tasks): ``(-1, a, entries)`` for a chunk whose values
        start at position ``a``, or, at the first action without an entry, ``(i, j, entries)`` (task ``i``, its
        ``j``-th menu action) and nothing after; ``missing_only``: only that."""
        ends = np.cumsum(lens)
        for i0 in range(0, int(g.shape[0]), _LOOKUP_TASKS):
            i1 = min(i0 + _LOOKUP_TASKS, int(g.shape[0]))
            a, b = int(ends[i0] - lens[i0]), int(ends[i1 - 1])
            at = self._entries(np.repeat(g[i0:i1], lens[i0:i1]), want_k[a:b])
            missing = np.flatnonzero(at < 0)
            if missing.size:
                bad = a + int(missing[0])
                i = int(np.searchsorted(ends, bad, side="right"))
                yield i, bad - int(ends[i] - lens[i]), at
                return
            if not missing_only:
                yield -1, a, at

    def _entries(self, rows: np.ndarray, keys: np.ndarray) -> np.ndarray:
        """The entry (position in the table's columns) of each (row, key code), the row's last with that key;
        −1 where there is none (no row: −1, or a key code −1, or a key the row lacks).  A row of at most
        :data:`_SCAN_KEYS` keys is scanned in place; longer rows are searched in the entries sorted by (row, key)."""
        valid = (rows >= 0) & (keys >= 0)
        r = np.where(valid, rows, 0)
        first = self._start[r]
        count = np.where(valid, self._start[r + 1] - first, 0)
        at = np.full(rows.shape[0], -1, dtype=np.int64)
        longest = int(count.max(initial=0))
        if longest <= _SCAN_KEYS:
            for j in range(longest):   # later entries override earlier ones: the row's last with that key
                idx = first + j
                hit = count > j
                hit[hit] = self._k[idx[hit]] == keys[hit]
                at[hit] = idx[hit]
            return at
        width = len(self._keys) + 1
        have, order = self._by_row_key()
        want = r * width + keys
        pos = np.searchsorted(have, want, side="right") - 1
        ok = valid & (pos >= 0)
        ok[ok] = have[pos[ok]] == want[ok]
        at[ok] = order[pos[ok]]
        return at

    def _by_row_key(self) -> tuple[np.ndarray, np.ndarray]:
        """Every entry's ``row * width + key``, sorted (stably: file order among a row's repeated key), and the
        sorting order; made on first use (a table with rows of more than :data:`_SCAN_KEYS` keys)."""
        if self._sorted is None:
            width = len(self._keys) + 1
            have = np.repeat(np.arange(len(self), dtype=np.int64), np.diff(self._start)) * width + self._k
            order = np.argsort(have, kind="stable")
            self._sorted = (have[order], order)
        return self._sorted

    def _sorted_keys(self, rows: np.ndarray, lens: np.ndarray, key_rank: np.ndarray) -> np.ndarray:
        """``rows`` (tasks of ``lens`` rows each, one after another) with each task's rows in key order."""
        width = int(lens[0])
        k = self._k[rows]
        if (lens == width).all() and (k.reshape(-1, width) == k[:width]).all():   # the same keys in every task
            return rows.reshape(-1, width)[:, np.argsort(key_rank[k[:width]], kind="stable")].reshape(-1)
        grp = np.repeat(np.arange(lens.size), lens)
        return rows[np.lexsort((key_rank[k], grp))]

    def json_document(self, chunk: int = 65536) -> Iterator[bytes]:
        """``json.dumps({"stream\\x1ftask": {key: utility}}, sort_keys=True, separators=(",", ":"))`` in pieces
        (the same bytes), ``chunk`` tasks at a time so that only one chunk's text is held; laid out by columns
        (:mod:`._layout`): each text's JSON made once, the tasks sorted by name and each task's keys by key."""
        self._live()
        import pyarrow as pa
        import pyarrow.compute as pc

        keys_json = pa.array([json.dumps(k) + ":" for k in self._keys], type=pa.string())
        key_rank = np.empty(len(self._keys), dtype=np.int64)
        key_rank[sorted(range(len(self._keys)), key=self._keys.__getitem__)] = np.arange(len(self._keys))
        gs, gt = pa.array(self._g_stream), pa.array(self._g_task)
        streams = to_arrow_text(self._streams)
        # sorted by the name text (UTF-8 byte order is code point order, as Python sorts str)
        by_name = np.asarray(pc.sort_indices(concat(streams.take(gs), "\x1f", self._tasks.take(gt))))
        names = concat('"', json_strings(streams, quoted=False).take(gs), "\\u001f",
                       json_strings(self._tasks, quoted=False).take(gt), '"')
        start = self._start
        yield b"{"
        for c0 in range(0, by_name.size, chunk):
            g = by_name[c0:c0 + chunk]
            lens = start[g + 1] - start[g]
            ends = np.cumsum(lens)
            rows = np.repeat(start[g] - (ends - lens), lens) + np.arange(int(ends[-1]))   # each task's rows
            order = self._sorted_keys(rows, lens, key_rank)
            cells = concat(keys_json.take(pa.array(self._k[order])), json_floats(self._u[order]))
            text = concat(names.take(pa.array(g)), ":{", joined(cells, np.r_[0, ends], ","), "},")
            yield (b"," if c0 else b"") + text_of(text)[:-1]
        yield b"}"
