"""The counterfactual utility table kept as columns: (stream, task) → {key: utility} built per lookup.

A utility file of a million tasks read into nested dicts holds a dict, a tuple key and a float object per
cell (several hundred bytes a task); :class:`CodedTable` keeps the text columns as codes into their
distinct values and the utilities as one float array, grouped by task in first-appearance order, and is
a read-only ``Mapping`` with exactly the keys, order and values of the nested dicts it replaces.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np

__all__ = ["CodedTable"]


class CodedTable(Mapping[tuple[str, str], Mapping[str, float]]):
    """``(stream, task) -> {key: utility}`` over code columns (a row's keys in file order)."""

    def __init__(self, streams: list[str], tasks: list[str], keys: list[str], s: np.ndarray, t: np.ndarray,
                 k: np.ndarray, u: np.ndarray) -> None:
        pair = s.astype(np.int64) * max(len(tasks), 1) + t
        uniq, first, inverse = np.unique(pair, return_index=True, return_inverse=True)
        by_first = np.argsort(first, kind="stable")            # groups in first-appearance order
        rank = np.empty(uniq.size, dtype=np.int64)
        rank[by_first] = np.arange(uniq.size)
        group = rank[inverse.reshape(-1)]
        order = np.argsort(group, kind="stable")                # rows grouped, file order within a group
        self._keys = keys
        self._k = k[order].astype(np.int32)
        self._u = np.ascontiguousarray(u[order], dtype=np.float64)
        self._start = np.r_[0, np.cumsum(np.bincount(group, minlength=uniq.size))].astype(np.int64)
        g_pair = uniq[by_first]
        self._g_stream = (g_pair // max(len(tasks), 1)).astype(np.int32)
        self._g_task = (g_pair % max(len(tasks), 1)).astype(np.int32)
        self._streams, self._tasks = streams, tasks
        index: dict[str, dict[str, int]] = {}
        for g, (a, b) in enumerate(zip(self._g_stream.tolist(), self._g_task.tolist(), strict=True)):
            index.setdefault(streams[a], {})[tasks[b]] = g
        self._index = index

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
        streams, tasks = self._streams, self._tasks
        for a, b in zip(self._g_stream.tolist(), self._g_task.tolist(), strict=True):
            yield (streams[a], tasks[b])

    def __len__(self) -> int:
        return int(self._g_stream.size)
