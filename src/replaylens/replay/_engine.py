"""Replay execution: the vectorized array path and the per-record reference path (the test oracle).

Both paths feed each transformed history through the same writer, snapshot the state at every
stratum's prefix end T_{r,R} (the future of stratum R sees only records up to its feeding
block), ask the policy about the held-fixed future tasks, and return decoded label codes.
The evaluator is applied afterwards (:mod:`._result`); agents never see it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ..agents import Agent, FutureInput, QueryBatch, RecordBatch, TaskInput
from ..errors import AgentError, ConfigError
from ..interventions import TransformedBatch, transform_stream
from ..maps import stream_perm
from ..records import Evaluator, FutureTask, FutureTasks, History
from ..rng import stable_int
from ._plan import ReplayPlan

__all__ = ["StreamData", "prepare_streams", "run_shard"]

ROLES = ("value", "pair", "time", "reorder")


@dataclass(frozen=True, eq=False)
class StreamData:
    """One stream's records in slot order, encoded, plus its future tasks."""

    name: str
    codes: np.ndarray          # (T,) label codes
    outcomes: np.ndarray       # (T,)
    block_local: np.ndarray    # (T,) block index within the stream (by first slot)
    block_global: np.ndarray   # (T,) block code in the run's block vocabulary
    slots: np.ndarray          # (T,)
    task_code: np.ndarray      # (T,) index into ``task_inputs``
    task_inputs: tuple[TaskInput, ...]
    futures: tuple[FutureTask, ...]
    prefix: np.ndarray         # (J,) number of visible records for each future task
    menus: np.ndarray          # (J, M) canonical label codes of each menu (−1 padding)
    stratum_code: np.ndarray   # (J,) block-vocabulary code of each task's stratum


def _block_vocab(history: History, futures: FutureTasks) -> tuple[tuple[str, str], ...]:
    blocks = dict.fromkeys(zip(history.family.tolist(), history.context.tolist(), strict=True))
    blocks.update(dict.fromkeys(futures.strata))
    return tuple(blocks)


def prepare_streams(plan: ReplayPlan, history: History, futures: FutureTasks) -> dict[str, StreamData]:
    """Encode every planned stream (label codes follow ``plan.labels``)."""
    code = {lab: i for i, lab in enumerate(plan.labels)}
    bvocab = _block_vocab(history, futures)
    bcode = {b: i for i, b in enumerate(bvocab)}
    out: dict[str, StreamData] = {}
    m_max = max(len(t.menu) for t in futures)
    for s in plan.streams:
        sl = history.stream_slice(s)
        fam, ctx = history.family[sl].tolist(), history.context[sl].tolist()
        blocks = list(zip(fam, ctx, strict=True))
        local = {b: i for i, b in enumerate(dict.fromkeys(blocks))}
        slots = history.slot[sl]
        recs = tuple(history.records(s))
        tis = tuple(TaskInput(r.stream, r.family, r.context, r.slot, r.task, r.event_time, r.event_id, r.metadata)
                    for r in recs)
        futs = futures.of(s)
        prefix = np.empty(len(futs), dtype=np.int64)
        for j, f in enumerate(futs):
            feed = f.feeds if f.feeds is not None else (f.stratum if f.stratum in local else None)
            if feed is None:
                prefix[j] = len(blocks)
            else:
                end = int(slots[[i for i, b in enumerate(blocks) if b == feed][-1]])
                prefix[j] = int(np.searchsorted(slots, end, side="right"))
        menus = np.full((len(futs), m_max), -1, dtype=np.int64)
        for j, f in enumerate(futs):
            menus[j, : len(f.menu)] = [code[a] for a in f.menu]
        out[s] = StreamData(
            name=s, codes=np.array([code[k] for k in history.key[sl].tolist()], dtype=np.int64),
            outcomes=history.outcome[sl].astype(np.float64), block_local=np.array([local[b] for b in blocks]),
            block_global=np.array([bcode[b] for b in blocks], dtype=np.int64), slots=slots,
            task_code=np.arange(len(recs), dtype=np.int64), task_inputs=tis, futures=futs, prefix=prefix,
            menus=menus, stratum_code=np.array([bcode[f.stratum] for f in futs], dtype=np.int64),
        )
    return out


def block_vocabulary(history: History, futures: FutureTasks) -> tuple[tuple[str, str], ...]:
    return _block_vocab(history, futures)


def _splitmix(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.uint64)
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def decision_seeds(plan: ReplayPlan, stream: str, n_tasks: int, c: int, m: int, d: int) -> np.ndarray:
    """(J, P) per-decision seeds: a fixed function of (seed, stream, task, cell, map, draw, repeat)."""
    base = _splitmix(np.array([plan.seed ^ stable_int(stream)], dtype=np.uint64))
    key = base ^ _splitmix(np.array([(c << 40) | (m << 24) | (d << 12)], dtype=np.uint64))
    j = np.arange(n_tasks, dtype=np.uint64)[:, None]
    p = np.arange(plan.repeats, dtype=np.uint64)[None, :]
    with np.errstate(over="ignore"):
        return _splitmix(_splitmix(key ^ j * np.uint64(0x100000001B3)) ^ p)


def _transforms(plan: ReplayPlan, sd: StreamData) -> dict[tuple[int, int], TransformedBatch]:
    maps = np.stack([m.array for m in plan.maps])
    out: dict[tuple[int, int], TransformedBatch] = {}
    for d, spec in enumerate(plan.draws):
        perms = {role: stream_perm(spec, role, sd.name, sd.block_local) for role in ROLES}
        for c, cell in enumerate(plan.cells):
            if not cell.roles and d > 0:
                out[(c, d)] = out[(c, 0)]
                continue
            out[(c, d)] = transform_stream(cell, codes=sd.codes, outcomes=sd.outcomes, tasks=sd.task_code,
                                           block=sd.block_local, perms=perms, maps=maps, check=plan.check_laws)
    return out


def _future_input(sd: StreamData, j: int) -> FutureInput:
    f = sd.futures[j]
    n = int(sd.prefix[j])
    clock = int(sd.slots[n - 1]) if n > 0 else -1
    return FutureInput(f.stream, f.family, f.context, f.task, f.index, clock, f.metadata)


def _reference_stream(plan: ReplayPlan, sd: StreamData, agent: Agent,
                      tick: Callable[[int], None]) -> np.ndarray:
    c_n, m_n, d_n, p_n, j_n = len(plan.cells), len(plan.maps), len(plan.draws), plan.repeats, len(sd.futures)
    out = np.empty((c_n, m_n, d_n, p_n, j_n), dtype=np.int64)
    tf = _transforms(plan, sd)
    ns = agent.namespace
    labels = plan.labels
    prefixes = sorted(set(sd.prefix.tolist()))
    futs = [_future_input(sd, j) for j in range(j_n)]
    dummy = np.random.default_rng(0)
    for c, cell in enumerate(plan.cells):
        for d in range(d_n):
            tb = tf[(c, d)]
            inputs = [replace(sd.task_inputs[int(tb.tasks[0, t])], slot=int(sd.slots[t]))
                      for t in range(sd.codes.shape[0])]
            for m, rho in enumerate(plan.maps):
                state = agent.writer.init_state()
                snaps = {0: copy.deepcopy(state)} if 0 in prefixes else {}
                for t, ti in enumerate(inputs):
                    state = agent.writer.update(state, ti, ns.kappa(labels[int(tb.keys[m, t])]),
                                                float(tb.outcomes[m, t]))
                    if t + 1 in prefixes:
                        snaps[t + 1] = copy.deepcopy(state)
                seeds = decision_seeds(plan, sd.name, j_n, c, m, d) if agent.stochastic else None
                for j in range(j_n):
                    menu = sd.menus[j][sd.menus[j] >= 0]
                    shown = rho.array[menu] if cell.menu_map else menu
                    menu_str = tuple(ns.show(labels[int(a)]) for a in shown)
                    for p in range(p_n):
                        rng = np.random.default_rng(int(seeds[j, p])) if seeds is not None else dummy
                        ans = agent.policy.act(snaps[int(sd.prefix[j])], futs[j], menu_str, rng)
                        try:
                            k = menu_str.index(ans)
                        except ValueError:
                            raise AgentError(f"agent {agent.name!r} chose {ans!r}, which is not in the menu "
                                             f"{list(menu_str)} (stream {sd.name!r}, task {futs[j].task!r})") from None
                        a = int(shown[k])
                        out[c, m, d, p, j] = int(rho.inverse.array[a]) if cell.menu_map else a
                tick(j_n * p_n)
    return out


def _array_shard(plan: ReplayPlan, sds: Sequence[StreamData], agent: Agent, n_blocks_vocab: tuple[tuple[str, str], ...],
                 tick: Callable[[int], None]) -> list[np.ndarray]:
    assert agent.array is not None
    c_n, m_n, d_n, p_n = len(plan.cells), len(plan.maps), len(plan.draws), plan.repeats
    t_max = max(sd.codes.shape[0] for sd in sds)
    keys_rows, out_rows, blk_rows, task_rows, len_rows = [], [], [], [], []
    q_row, q_block, q_menu, q_seed, q_stream, q_task, q_index = [], [], [], [], [], [], []
    task_names: list[str] = []
    future_names: list[str] = []
    row = 0
    for s_i, sd in enumerate(sds):
        t = sd.codes.shape[0]
        tf = _transforms(plan, sd)
        prefixes = sorted(set(sd.prefix.tolist()))
        pref_pos = {L: i for i, L in enumerate(prefixes)}
        task_off = len(task_names)
        task_names.extend(ti.task for ti in sd.task_inputs)
        fut_off = len(future_names)
        future_names.extend(f.task for f in sd.futures)
        j_n = len(sd.futures)
        blk = np.zeros(t_max, dtype=np.int64)
        blk[:t] = sd.block_global
        qrow_local = np.array([pref_pos[int(L)] for L in sd.prefix], dtype=np.int64)
        for c, cell in enumerate(plan.cells):
            for d in range(d_n):
                tb = tf[(c, d)]
                for m, rho in enumerate(plan.maps):
                    k = np.full(t_max, -1, dtype=np.int64)
                    k[:t] = tb.keys[m]
                    o = np.full(t_max, np.nan)
                    o[:t] = tb.outcomes[m]
                    tk = np.zeros(t_max, dtype=np.int64)
                    tk[:t] = tb.tasks[m] + task_off
                    for L in prefixes:
                        keys_rows.append(k)
                        out_rows.append(o)
                        blk_rows.append(blk)
                        task_rows.append(tk)
                        len_rows.append(L)
                    menus = np.where(sd.menus >= 0, rho.array[np.maximum(sd.menus, 0)], -1) if cell.menu_map \
                        else sd.menus
                    seeds = decision_seeds(plan, sd.name, j_n, c, m, d) if agent.stochastic else \
                        np.zeros((j_n, p_n), dtype=np.uint64)
                    q_row.append(np.repeat(row + qrow_local, p_n))
                    q_block.append(np.repeat(sd.stratum_code, p_n))
                    q_menu.append(np.repeat(menus, p_n, axis=0))
                    q_seed.append(seeds.reshape(-1))
                    q_stream.append(np.full(j_n * p_n, s_i, dtype=np.int64))
                    q_task.append(np.repeat(np.arange(j_n) + fut_off, p_n))
                    q_index.append(np.array([(c, m, d)], dtype=np.int64).repeat(j_n * p_n, axis=0))
                    row += len(prefixes)
    keys = np.stack(keys_rows)
    lengths = np.asarray(len_rows)
    valid = np.arange(t_max)[None, :] < lengths[:, None]
    records = RecordBatch(keys=keys, outcomes=np.stack(out_rows), blocks=np.stack(blk_rows),
                          tasks=np.stack(task_rows), valid=valid, labels=plan.labels,
                          block_names=n_blocks_vocab, task_names=tuple(task_names))
    menu = np.concatenate(q_menu)
    queries = QueryBatch(row=np.concatenate(q_row), block=np.concatenate(q_block), menu=menu,
                         seed=np.concatenate(q_seed), stream=np.concatenate(q_stream), task=np.concatenate(q_task),
                         stream_names=tuple(sd.name for sd in sds), task_names=tuple(future_names))
    got = np.asarray(agent.array.act_batch(records, queries), dtype=np.int64)
    if got.shape != (menu.shape[0],):
        raise AgentError(f"agent {agent.name!r} act_batch returned shape {got.shape}, expected ({menu.shape[0]},)")
    ok = (menu == got[:, None]).any(axis=1)
    if not ok.all():
        q = int(np.flatnonzero(~ok)[0])
        raise AgentError(f"agent {agent.name!r} chose label code {int(got[q])}, which is not in the menu "
                         f"(stream {queries.stream_names[queries.stream[q]]!r}, "
                         f"task {queries.task_names[queries.task[q]]!r})")
    idx = np.concatenate(q_index)
    inv = np.stack([m.inverse.array for m in plan.maps])
    menu_map = np.array([cell.menu_map for cell in plan.cells])
    decoded = np.where(menu_map[idx[:, 0]], inv[idx[:, 1], got], got)
    results: list[np.ndarray] = []
    pos = 0
    for sd in sds:
        j_n = len(sd.futures)
        n = c_n * m_n * d_n * j_n * p_n
        block = decoded[pos:pos + n].reshape(c_n, d_n, m_n, j_n, p_n)
        results.append(np.ascontiguousarray(block.transpose(0, 2, 1, 4, 3)))
        pos += n
        tick(n)
    return results


def run_shard(plan: ReplayPlan, sds: Sequence[StreamData], agent: Agent, *, path: str,
              blocks: tuple[tuple[str, str], ...], tick: Callable[[int], None] | None = None) -> list[np.ndarray]:
    """Decisions of one shard: per stream an int array (cells, maps, draws, repeats, tasks) of label codes."""
    tk = tick or (lambda _n: None)
    if path == "array":
        if agent.array is None:
            raise ConfigError(f"agent {agent.name!r} has no array implementation; use path='reference'")
        return _array_shard(plan, sds, agent, blocks, tk)
    if path == "reference":
        return [_reference_stream(plan, sd, agent, tk) for sd in sds]
    raise ConfigError(f"path must be 'array' or 'reference'; got {path!r}")


def utilities_for(sds: Sequence[StreamData], evaluator: Evaluator, n_labels: int) -> tuple[np.ndarray, np.ndarray]:
    """(N, L) counterfactual utilities by label code (NaN off-menu) and the (N,) oracle codes."""
    rows, oracle = [], []
    for sd in sds:
        for j, f in enumerate(sd.futures):
            u = np.full(n_labels, np.nan)
            menu = sd.menus[j][sd.menus[j] >= 0]
            vals = evaluator.utilities(f)
            u[menu] = vals
            rows.append(u)
            oracle.append(int(menu[int(np.argmax(vals))]))
    return np.stack(rows), np.asarray(oracle, dtype=np.int64)
