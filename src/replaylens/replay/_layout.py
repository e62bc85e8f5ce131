"""Index arithmetic of an array-path shard, for all its streams at once (no per-stream Python work).

Per stream: its distinct prefix ends (the cuts, ascending), each future task's cut, the tasks asked
(every task, or one per distinct (prefix, stratum, menu) for a task-invariant agent — the first such
task, in the lexicographic order of that context, as ``np.unique(..., axis=0)`` orders it); then the
queries ordered (stream, cell, draw, map, asked task, repeat) and, for every decision of every
stream's (cells, maps, draws, repeats, tasks) array, the query that answers it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["QueryLayout", "TaskLayout", "decision_query", "query_layout", "task_layout"]


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


def task_layout(tasks_per_stream: np.ndarray, prefix: np.ndarray, stratum: np.ndarray, menus: np.ndarray,
                *, dedupe: bool) -> TaskLayout:
    """Cuts and asked tasks of S streams whose N tasks (stream by stream) have ``prefix`` (N,),
    ``stratum`` (N,) and ``menus`` (N, M)."""
    s_n = int(tasks_per_stream.shape[0])
    n = int(prefix.shape[0])
    sid = np.repeat(np.arange(s_n, dtype=np.int64), tasks_per_stream)
    first_task = np.r_[0, np.cumsum(tasks_per_stream)][:-1].astype(np.int64)
    # cuts: distinct (stream, prefix), ascending
    order = np.lexsort((prefix, sid))
    new = _group_starts([sid, prefix], order)
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
    order = np.lexsort(tuple(reversed(keys)))  # stable: the first task of each context leads its group
    new = _group_starts(keys, order)
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
    """The queries of every stream: ``cdm`` combinations × its asked tasks × ``p_n`` repeats."""
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


def decision_query(lay: TaskLayout, ql: QueryLayout, dims: tuple[int, int, int, int]) -> tuple[np.ndarray, np.ndarray]:
    """For every decision of every stream's (cells, maps, draws, repeats, tasks) array, laid end to end,
    the query that answers it; and the arrays' offsets.  ``dims`` = (cells, maps, draws, repeats)."""
    c_n, m_n, d_n, p_n = dims
    j = lay.tasks_per_stream.astype(np.int64)
    size = c_n * m_n * d_n * p_n * j
    offsets = np.r_[0, np.cumsum(size)].astype(np.int64)
    o_stream = np.repeat(np.arange(lay.n_streams, dtype=np.int64), size)
    w = np.arange(int(offsets[-1]), dtype=np.int64) - offsets[:-1][o_stream]
    js = np.maximum(j[o_stream], 1)
    jj, t = w % js, w // js
    p, t = t % p_n, t // p_n
    d, t = t % d_n, t // d_n
    m, c = t % m_n, t // m_n
    first_task = np.r_[0, np.cumsum(j)][:-1].astype(np.int64)
    span = lay.asked_per_stream[o_stream] * p_n
    q = ql.start[o_stream] + ((c * d_n + d) * m_n + m) * span + lay.back[first_task[o_stream] + jj] * p_n + p
    return q, offsets
