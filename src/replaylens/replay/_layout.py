"""Index arithmetic of an array-path shard, for all its streams at once (no per-stream Python work).

Per stream: its distinct prefix ends (the cuts, ascending), each future task's cut, the tasks asked
(every task, or one per distinct (prefix, stratum, menu) for a task-invariant agent — the first such
task, in the lexicographic order of that context, as ``np.unique(..., axis=0)`` orders it); then the
queries ordered (stream, cell, draw, map, asked task, repeat) and, for every decision of every
stream's (cells, maps, draws, repeats, tasks) array, the query that answers it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["QueryLayout", "ShardActions", "TaskLayout", "action_dtype", "query_layout", "stream_decisions",
           "task_layout"]


def action_dtype(n_labels: int) -> np.dtype[Any]:
    """The smallest signed integer type holding every label code 0 … n_labels − 1 (the actions' dtype)."""
    for t in (np.int8, np.int16, np.int32):
        if n_labels <= np.iinfo(t).max + 1:
            return np.dtype(t)
    return np.dtype(np.int64)


class ShardActions(list[np.ndarray]):
    """One shard's decisions: each stream's (cells, maps, draws, repeats, tasks) array, in the shard's stream
    order (a plain list of them), and, where they are consecutive task slices of one array, that
    (cells, maps, draws, repeats, all tasks) array as :attr:`block`: the action sink and the journal then copy
    the shard once instead of stream by stream (issue 27)."""

    block: np.ndarray | None

    def __init__(self, arrays: list[np.ndarray] | None = None, block: np.ndarray | None = None) -> None:
        super().__init__(arrays or [])
        self.block = block

    @classmethod
    def from_block(cls, block: np.ndarray, tasks: np.ndarray | list[int]) -> ShardActions:
        """The streams' arrays as views of ``block``, ``tasks[i]`` tasks for stream ``i``."""
        ends = np.cumsum(np.asarray(tasks, dtype=np.int64)).tolist()
        if (ends[-1] if ends else 0) != block.shape[-1]:
            raise ValueError(f"{ends[-1] if ends else 0} tasks in all, but the block has {block.shape[-1]}")
        starts = [0, *ends[:-1]]
        return cls([block[..., a:b] for a, b in zip(starts, ends, strict=True)], block)

    def tasks(self) -> list[int]:
        return [int(a.shape[-1]) for a in self]

    def __reduce__(self) -> tuple[Any, ...]:
        # sent to and from a worker process as the block alone when there is one (not twice)
        if self.block is not None:
            return (ShardActions.from_block, (self.block, self.tasks()))
        return (ShardActions, (list(self), None))


@dataclass(frozen=True, eq=False)
class TaskLayout:
    """The tasks of S streams (N in all, stream by stream) and the A tasks asked."""

    n_streams: int
    tasks_per_stream: np.ndarray  # (S,)
    cuts: np.ndarray              # (S, K) distinct prefix ends, ascending, padded with the last
    cut: np.ndarray               # (N,) index into its stream's cuts
    asked: np.ndarray             # (A,) task index (shard-wide) of each asked task, stream by stream
    asked_per_stream: np.ndarray  # (S,)
    back: np.ndarray              # (N,) index of its asked task within its stream's asked tasks


def _group_starts(keys: list[np.ndarray], order: np.ndarray) -> np.ndarray:
    """True where a row of the sorted keys differs from the previous row (first row True)."""
    n = order.shape[0]
    new = np.zeros(n, dtype=bool)
    if n:
        new[0] = True
        for k in keys:
            s = k[order]
            new[1:] |= s[1:] != s[:-1]
    return new


def _sorted_groups(keys: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The rows (one value of each key per row) in ``np.lexsort(tuple(reversed(keys)))`` order (the first key
    primary; stable), and :func:`_group_starts` of that order: from one stable sort of a mixed-radix int64
    code of the keys when their ranges fit in 62 bits (equal codes = equal rows), else the lexsort."""
    if not keys[0].size:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
    lows = [int(k.min()) for k in keys]
    spans = [int(k.max()) - lo + 1 for k, lo in zip(keys, lows, strict=True)]
    if float(np.prod([float(x) for x in spans])) >= 2.0**62:
        order = np.lexsort(tuple(reversed(keys)))
        return order, _group_starts(keys, order)
    code = np.zeros(keys[0].shape[0], dtype=np.int64)
    for k, lo, span in zip(keys, lows, spans, strict=True):
        code *= span
        code += k
        code -= lo
    order = np.argsort(code, kind="stable")
    ordered = code[order]
    return order, np.r_[True, ordered[1:] != ordered[:-1]]


def task_layout(tasks_per_stream: np.ndarray, prefix: np.ndarray, stratum: np.ndarray, menus: np.ndarray,
                *, dedupe: bool) -> TaskLayout:
    """Cuts and asked tasks of S streams whose N tasks (stream by stream) have ``prefix`` (N,),
    ``stratum`` (N,) and ``menus`` (N, M)."""
    s_n = int(tasks_per_stream.shape[0])
    n = int(prefix.shape[0])
    sid = np.repeat(np.arange(s_n, dtype=np.int64), tasks_per_stream)
    first_task = np.r_[0, np.cumsum(tasks_per_stream)][:-1].astype(np.int64)
    # cuts: distinct (stream, prefix), ascending
    order, new = _sorted_groups([sid, prefix])
    gid = np.cumsum(new) - 1
    cut_of = np.empty(n, dtype=np.int64)
    per_stream = np.bincount(sid[order][new], minlength=s_n)
    g_start = np.r_[0, np.cumsum(per_stream)][:-1]
    cut_of[order] = gid - g_start[sid[order]]
    k_max = max(int(per_stream.max(initial=0)), 1)
    values = prefix[order][new]
    cuts = np.zeros((s_n, k_max), dtype=np.int64)
    last = np.zeros(s_n, dtype=np.int64)
    has = per_stream > 0
    last[has] = values[g_start[has] + per_stream[has] - 1]
    cuts[:] = last[:, None]
    g_sid = sid[order][new]
    cuts[g_sid, gid[new] - g_start[g_sid]] = values
    if not dedupe:
        return TaskLayout(s_n, tasks_per_stream, cuts, cut_of, np.arange(n, dtype=np.int64),
                          tasks_per_stream.astype(np.int64), np.arange(n, dtype=np.int64) - first_task[sid])
    keys = [sid, prefix, stratum, *(menus[:, c] for c in range(menus.shape[1]))]
    order, new = _sorted_groups(keys)  # stable: the first task of each context leads its group
    gid = np.cumsum(new) - 1
    asked = order[new]
    asked_per_stream = np.bincount(sid[asked], minlength=s_n)
    a_start = np.r_[0, np.cumsum(asked_per_stream)][:-1]
    back = np.empty(n, dtype=np.int64)
    back[order] = gid - a_start[sid[order]]
    return TaskLayout(s_n, tasks_per_stream, cuts, cut_of, asked.astype(np.int64), asked_per_stream, back)


@dataclass(frozen=True, eq=False)
class QueryLayout:
    """Q queries ordered (stream, cell-draw-map combination, asked task, repeat)."""

    stream: np.ndarray   # (Q,)
    combo: np.ndarray    # (Q,) index of (cell, draw, map), cell-major
    task: np.ndarray     # (Q,) shard-wide task index
    repeat: np.ndarray   # (Q,)
    start: np.ndarray    # (S,) first query of each stream


def query_layout(lay: TaskLayout, cdm: int, p_n: int) -> QueryLayout:
    """The queries of every stream: ``cdm`` combinations × its asked tasks × ``p_n`` repeats (streams that all
    ask as many tasks: one (S, cdm, A, P) grid, broadcast; else :func:`_query_layout_ragged`)."""
    a_ps = lay.asked_per_stream
    s_n = lay.n_streams
    if not s_n or (a_ps != a_ps[0]).any():
        return _query_layout_ragged(lay, cdm, p_n)
    a = int(a_ps[0])
    grid = (s_n, cdm, a, p_n)

    def spread(values: np.ndarray, shape: tuple[int, int, int, int]) -> np.ndarray:
        out = np.broadcast_to(values.reshape(shape).astype(np.int64, copy=False), grid).reshape(-1)
        return out if out.flags.writeable else out.copy()  # a grid that broadcasts nothing is a read-only view

    return QueryLayout(spread(np.arange(s_n), (s_n, 1, 1, 1)), spread(np.arange(cdm), (1, cdm, 1, 1)),
                       spread(lay.asked, (s_n, 1, a, 1)), spread(np.arange(p_n), (1, 1, 1, p_n)),
                       np.arange(s_n, dtype=np.int64) * (cdm * a * p_n))


def _query_layout_ragged(lay: TaskLayout, cdm: int, p_n: int) -> QueryLayout:
    """:func:`query_layout` for any numbers of asked tasks per stream (index arithmetic over all queries)."""
    per = lay.asked_per_stream * p_n * cdm
    total = int(per.sum())
    start = np.r_[0, np.cumsum(per)][:-1].astype(np.int64)
    q_stream = np.repeat(np.arange(lay.n_streams, dtype=np.int64), per)
    w = np.arange(total, dtype=np.int64) - start[q_stream]
    span = (lay.asked_per_stream * p_n)[q_stream]
    combo = w // np.maximum(span, 1)
    rem = w - combo * span
    a_start = np.r_[0, np.cumsum(lay.asked_per_stream)][:-1].astype(np.int64)
    task = lay.asked[a_start[q_stream] + rem // p_n]
    return QueryLayout(q_stream, combo, task, rem % p_n, start)


def stream_decisions(decoded: np.ndarray, lay: TaskLayout, ql: QueryLayout,
                     dims: tuple[int, int, int, int]) -> ShardActions:
    """Each stream's (cells, maps, draws, repeats, tasks) array of the decoded answers (Q,) to the
    queries of :func:`query_layout`; ``dims`` = (cells, maps, draws, repeats).  Streams with the
    same numbers of tasks and asked tasks are gathered together (one transposition per shape)."""
    c_n, m_n, d_n, p_n = dims
    j_all, a_all = lay.tasks_per_stream.astype(np.int64), lay.asked_per_stream.astype(np.int64)
    first_task = np.r_[0, np.cumsum(j_all)][:-1].astype(np.int64)
    results: list[np.ndarray] = [decoded[:0]] * lay.n_streams
    shape_key = j_all * (int(a_all.max(initial=0)) + 1) + a_all
    order = np.argsort(shape_key, kind="stable")
    cuts = np.flatnonzero(np.r_[True, shape_key[order][1:] != shape_key[order][:-1]]) if order.size else order
    for members in np.split(order, cuts[1:]):
        j, a = int(j_all[members[0]]), int(a_all[members[0]])
        g = members.shape[0]
        span = c_n * d_n * m_n * a * p_n
        idx = ql.start[members][:, None] + np.arange(span)
        blk = decoded[idx].reshape(g, c_n, d_n, m_n, a, p_n).transpose(0, 1, 3, 2, 5, 4)  # (G, c, m, d, p, a)
        back = lay.back[first_task[members][:, None] + np.arange(j)]
        whole = g == lay.n_streams   # one group of every stream, in order (a stable sort): the shard's block
        grouped = np.moveaxis(blk, 0, -2) if whole else blk   # whole: (c, m, d, p, G, a)
        if j == a and (back == np.arange(j)).all():
            sel = grouped
        elif (back == back[0]).all():  # the same asked task for every task index: one gather for the group
            sel = grouped[..., back[0]]
        else:
            for i, s_i in enumerate(members.tolist()):
                results[s_i] = blk[i][..., back[i]]
            continue
        if whole:   # (c, m, d, p, G, j) in one copy, then every stream's tasks side by side
            block = np.ascontiguousarray(sel)
            return ShardActions.from_block(block.reshape(*block.shape[:-2], g * j), [j] * g)
        out = np.ascontiguousarray(sel)
        for i, s_i in enumerate(members.tolist()):
            results[s_i] = out[i]
    return ShardActions(results)
