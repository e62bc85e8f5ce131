"""Replay execution: the vectorized array path and the per-record reference path (the test oracle).

Both paths feed each transformed history through the same writer, snapshot the state at every
stratum's prefix end T_{r,R} (the future of stratum R sees only records up to its feeding
block), ask the policy about the held-fixed future tasks, and return decoded label codes.
The evaluator is applied afterwards (:func:`utilities_for`); agents never see it.
"""

from __future__ import annotations

import copy
import functools
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..agents import Agent, FutureInput, PrefixPolicy, QueryBatch, RecordBatch, TaskInput
from ..errors import AgentError, AgentRaised, ConfigError, LawViolation, ReplayLensError
from ..interventions import Cell, TransformedBatch, cell_record, check_laws_plain, outcome_codes, transform_batch
from ..maps import LabelMap, SlotSpec, stream_perm, stream_perms
from ..records import Evaluator, FutureTask, FutureTasks, History
from ..settings import DEFAULT_SHARD_MEMORY
from ._layout import action_dtype, query_layout, stream_decisions, task_layout
from ._lazyrng import SeedBlock
from ._menus import query_menus
from ._plan import ReplayPlan
from ._prepare import prepare_columnar
from ._seeds import _finish, combo_key, decision_seeds, query_seeds, stream_key, task_keys
from ._streams import StreamData, future_column, task_columns, task_rows

__all__ = [
    "DEFAULT_SHARD_MEMORY",
    "StreamData",
    "block_vocabulary",
    "decision_seeds",
    "prepare_streams",
    "run_shard",
    "shard_layout",
    "shard_memory_estimate",
    "utilities_for",
]

ROLES = ("value", "pair", "time", "reorder")


def block_vocabulary(history: History, futures: FutureTasks) -> tuple[tuple[str, str], ...]:
    """Every block and stratum (family, context), history blocks first (each in first-appearance order)."""
    (fv, fam), (cv, ctx) = history.text_codes("family"), history.text_codes("context")
    # a pair appears first where a run of equal (family, context) rows starts: only run starts are looked at
    start = np.r_[0, np.flatnonzero((fam[1:] != fam[:-1]) | (ctx[1:] != ctx[:-1])) + 1] if fam.size else \
        np.zeros(0, dtype=np.int64)
    blocks = dict.fromkeys(zip(fv[fam[start]].tolist(), cv[ctx[start]].tolist(), strict=True))
    blocks.update(dict.fromkeys(futures.strata))
    return tuple(blocks)


def prepare_streams(plan: ReplayPlan, history: History, futures: FutureTasks) -> dict[str, StreamData]:
    """Encode every planned stream (label codes follow ``plan.labels``), by columns (:mod:`._prepare`)."""
    bcode = {b: i for i, b in enumerate(block_vocabulary(history, futures))}
    return prepare_columnar(plan, history, futures, bcode)


def _prepare_streams_loop(plan: ReplayPlan, history: History, futures: FutureTasks) -> dict[str, StreamData]:
    """:func:`prepare_streams` stream by stream (the reference the columnar version is tested against)."""
    code = {lab: i for i, lab in enumerate(plan.labels)}
    bcode = {b: i for i, b in enumerate(block_vocabulary(history, futures))}
    m_max = max(len(t.menu) for t in futures)
    key_codes = np.array([code[k] for k in history.key.tolist()], dtype=np.int64)
    family, context = history.family, history.context   # decoded once (each access decodes the column)
    # group once (rows are sorted by stream, so each stream is one contiguous run): linear, not per stream
    names, first, counts = np.unique(history.stream, return_index=True, return_counts=True)
    where = {str(n): slice(int(f), int(f) + int(c)) for n, f, c in zip(names, first, counts, strict=True)}
    by_stream: dict[str, list[FutureTask]] = {}
    for t in futures:
        by_stream.setdefault(t.stream, []).append(t)
    out: dict[str, StreamData] = {}
    for s in plan.streams:
        if s not in where:
            raise KeyError(s)
        sl = where[s]
        blocks = list(zip(family[sl].tolist(), context[sl].tolist(), strict=True))
        local = {b: i for i, b in enumerate(dict.fromkeys(blocks))}
        slots = history.slot[sl]
        last_pos = {b: i for i, b in enumerate(blocks)}  # last position of each block
        futs = tuple(by_stream.get(s, ()))
        prefix = np.empty(len(futs), dtype=np.int64)
        menus = np.full((len(futs), m_max), -1, dtype=np.int64)
        for j, f in enumerate(futs):
            feed = f.feeds if f.feeds is not None else (f.stratum if f.stratum in local else None)
            prefix[j] = len(blocks) if feed is None else int(np.searchsorted(slots, slots[last_pos[feed]], "right"))
            menus[j, : len(f.menu)] = [code[a] for a in f.menu]
        out[s] = StreamData(
            name=s, history=history, rows=sl, codes=key_codes[sl], outcomes=history.outcome[sl].astype(np.float64),
            block_local=np.array([local[b] for b in blocks], dtype=np.int64),
            block_global=np.array([bcode[b] for b in blocks], dtype=np.int64), slots=slots, futures=futs,
            prefix=prefix, menus=menus, stratum_code=np.array([bcode[f.stratum] for f in futs], dtype=np.int64),
        )
    return out


BYTES_PER_CELL_RECORD = 96
"""Measured peak bytes per (record, cell, map, draw) of the array path (≈ 12 float64/int64 arrays:
transformed keys/outcomes/tasks, the writer's per-record state, ``to_micro`` and its temporaries)."""


def shard_memory_estimate(plan: ReplayPlan, sd: StreamData) -> int:
    """Estimated peak bytes the array path needs for stream ``sd``: records × cells × maps × draws,
    plus its queries (tasks × repeats × cells × maps × draws, each with a menu row)."""
    return int(_memory_estimates(plan, sd.length, len(sd.futures), sd.menus.shape[1]))


def _memory_estimates(plan: ReplayPlan, length: Any, tasks: Any, menu_width: Any) -> Any:
    """:func:`shard_memory_estimate` of streams of ``length`` records, ``tasks`` future tasks and menus
    ``menu_width`` wide (numbers, or arrays of them for many streams at once)."""
    cdm = len(plan.cells) * len(plan.maps) * len(plan.draws)
    return length * cdm * BYTES_PER_CELL_RECORD + tasks * plan.repeats * cdm * (menu_width + 8) * 8


def shard_layout(plan: ReplayPlan, sds: dict[str, StreamData], *, path: str, shard_size: int | None = None,
                 shard_memory: int | None = None) -> list[tuple[str, ...]]:
    """Consecutive groups of ``plan.streams``: ``shard_size`` streams each when given; else one
    stream per shard on the reference path, and on the array path as many streams as fit in
    ``shard_memory`` bytes (:func:`shard_memory_estimate`; a stream larger than that is alone)."""
    if shard_size is not None:
        return plan.shards(shard_size)
    if path != "array":
        return plan.shards(1)
    budget = shard_memory or DEFAULT_SHARD_MEMORY
    if budget < 1:
        raise ConfigError(f"shard memory must be >= 1 byte; got {budget}")
    sd = [sds[s] for s in plan.streams]

    def column(value: Callable[[StreamData], int]) -> np.ndarray:
        return np.fromiter((value(x) for x in sd), dtype=np.int64, count=len(sd))

    need = _memory_estimates(plan, column(lambda x: x.length), column(lambda x: len(x.futures)),
                             column(lambda x: x.menus.shape[1]))
    ends = pack_greedily(need, budget)
    return [tuple(plan.streams[a:b]) for a, b in itertools.pairwise([0, *ends])]


def pack_greedily(need: np.ndarray, budget: int) -> list[int]:
    """The end of each group when items of sizes ``need`` (non-negative) are taken in order and a group ends
    before the item that would take it past ``budget`` (an item larger than the budget alone): the loop
    item after item, found by one search of the running sum per group."""
    cum = np.cumsum(need)
    ends: list[int] = []
    start, base = 0, 0
    while start < need.shape[0]:
        end = max(start + 1, int(np.searchsorted(cum, base + budget, side="right")))
        ends.append(end)
        start, base = end, int(cum[end - 1])
    return ends


@dataclass(frozen=True, eq=False)
class _Shard:
    streams: tuple[StreamData, ...]
    block_local: np.ndarray   # (S, T) −1 padded
    transforms: dict[tuple[int, int], TransformedBatch]


def _padded(sds: Sequence[StreamData], values: list[np.ndarray], t_n: int, fill: float, dtype: Any) -> np.ndarray:
    """Per-stream (T_i,) arrays as one (S, t_n) array, ``fill`` past each stream's end."""
    lengths = np.array([v.shape[0] for v in values], dtype=np.int64)
    if values and bool((lengths == t_n).all()):  # no padding
        return np.stack(values).astype(dtype, copy=False)
    out = np.full((len(sds), t_n), fill, dtype=dtype)
    if values:
        row = np.repeat(np.arange(len(sds)), lengths)
        col = np.arange(int(lengths.sum())) - np.repeat(np.r_[0, np.cumsum(lengths)][:-1], lengths)
        out[row, col] = np.concatenate(values)
    return out


def _shard(plan: ReplayPlan, sds: Sequence[StreamData], *, before_maps: bool = False) -> _Shard:
    """The shard's streams transformed by every (cell, draw), under every label map (``before_maps``: under
    the identity only, i.e. the keys before ρ, one map row)."""
    t_n = max(sd.length for sd in sds)
    codes = _padded(sds, [sd.codes for sd in sds], t_n, -1, np.int64)
    outs = _padded(sds, [sd.outcomes for sd in sds], t_n, np.nan, np.float64)
    blk = _padded(sds, [sd.block_local for sd in sds], t_n, -1, np.int64)
    ocodes, n_oc = outcome_codes(outs)
    maps = np.arange(len(plan.labels), dtype=np.int64)[None, :] if before_maps else \
        np.stack([m.array for m in plan.maps])
    tf: dict[tuple[int, int], TransformedBatch] = {}
    reference: dict[object, np.ndarray] = {}  # the aligned history's law codes, shared by every cell and draw
    roles = tuple(r for r in ROLES if any(r in cell.roles for cell in plan.cells))  # each role draws on its own
    for d, spec in enumerate(plan.draws):
        perms = stream_perms(spec, roles, [sd.name for sd in sds], blk) if roles else {}  # = stream_perm row by row
        for c, cell in enumerate(plan.cells):
            if not cell.roles and d > 0:
                tf[(c, d)] = tf[(c, 0)]
                continue
            tf[(c, d)] = transform_batch(cell, codes=codes, outcomes=outs, block=blk, perms=perms, maps=maps,
                                         check=plan.check_laws, ocodes=ocodes, n_ocodes=n_oc, reference=reference)
    return _Shard(tuple(sds), blk, tf)


def _future_input(sd: StreamData, j: int) -> FutureInput:
    f = sd.futures[j]
    n = int(sd.prefix[j])
    clock = int(sd.slots[n - 1]) if n > 0 else -1
    return FutureInput(f.stream, f.family, f.context, f.task, f.index, clock, f.metadata)


class _LazyPerms(dict[str, np.ndarray]):
    """``role -> stream_perm(...)`` computed on first use (the aligned cell reads none)."""

    def __init__(self, spec: Any, sd: StreamData) -> None:
        super().__init__()
        self.spec, self.sd = spec, sd

    def __missing__(self, role: str) -> np.ndarray:
        p = self[role] = stream_perm(self.spec, role, self.sd.name, self.sd.block_local)
        return p


def _seed_table(plan: ReplayPlan, sd: StreamData) -> np.ndarray:
    """Every decision seed of stream ``sd`` in one vectorized pass: (cell, map, draw, task, repeat) uint64,
    each (cell, map, draw) block equal to :func:`decision_seeds`'s."""
    tkeys = task_keys(future_column([sd], "task").tolist())
    combos = np.array([[[combo_key(plan.rng, cell, rho, spec) for spec in plan.draws] for rho in plan.maps]
                       for cell in plan.cells], dtype=np.uint64).reshape(len(plan.cells), len(plan.maps),
                                                                          len(plan.draws), 1, 1)
    repeats = np.arange(plan.repeats, dtype=np.uint64)[None, :]
    table = _finish(np.array(stream_key(plan.seed, sd.name), dtype=np.uint64), combos, tkeys[:, None], repeats)
    return np.ascontiguousarray(np.broadcast_to(table, (*combos.shape[:3], len(sd.futures), plan.repeats)))


def _write_prefixes(agent: Agent, init_state: Callable[[], Any], update: Callable[..., Any],
                    snap: Callable[[object], object], task_in: list[TaskInput], keys: list[str], utils: list[float],
                    prefixes: set[int], where: dict[str, object]) -> dict[int, Any]:
    """The writer's state after each prefix length in ``prefixes``: ``init_state`` then ``update`` per record."""
    try:
        state = init_state()
    except Exception as exc:
        if isinstance(exc, ReplayLensError):
            raise
        raise AgentRaised(agent.name, "init_state", where, exc) from exc
    snaps = {0: snap(state)} if 0 in prefixes else {}
    for t in range(len(task_in)):
        try:
            state = update(state, task_in[t], keys[t], utils[t])
        except Exception as exc:
            if isinstance(exc, ReplayLensError):
                raise
            raise AgentRaised(agent.name, "update", {**where, "history record": t + 1}, exc) from exc
        if t + 1 in prefixes:
            snaps[t + 1] = snap(state)
    return snaps


def _in_menu(menu: tuple[str, ...], ans: object) -> bool:
    try:
        menu.index(ans)
    except (ValueError, TypeError):
        return False
    return True


def _reference_stream(plan: ReplayPlan, sd: StreamData, agent: Agent, tick: Callable[[int], None]) -> np.ndarray:
    """Plain per-record replay of one stream: the paper's cell functional record by record, a plain
    law check per transformed history, the writer's ``update`` per record and the policy's ``act`` per
    decision — or, for a :class:`PrefixPolicy` (a HistoryReader, ...), one ``act_prefix`` per distinct
    prefix with every (task, repeat) of it and the same per-decision generators.

    Per decision only the agent's call is paid: the generator is seeded (as ``default_rng(seed)``) only
    if the agent reads it (:mod:`._lazyrng`), seeds are derived for the whole stream at once,
    menus are shown once per distinct menu, and where the agent failed is only spelled out when it did.
    """
    c_n, m_n, d_n, p_n, j_n = len(plan.cells), len(plan.maps), len(plan.draws), plan.repeats, len(sd.futures)
    out = np.empty((c_n, m_n, d_n, p_n, j_n), dtype=np.int64)
    ns = agent.namespace
    kappa = [ns.kappa(lab) for lab in plan.labels]   # the writer's key of each label code
    show = [ns.show(lab) for lab in plan.labels]     # the policy's menu entry of each label code
    prefix_of = sd.prefix.tolist()
    prefixes = set(prefix_of)
    futs = [_future_input(sd, j) for j in range(j_n)]
    base_inputs = sd.task_inputs
    t_n = sd.length
    slots = sd.slots.tolist()
    block = sd.block_local.tolist()
    codes, outcomes = sd.codes, sd.outcomes
    code_list, outcome_list = codes.tolist(), outcomes.tolist()
    identity = np.arange(len(plan.labels), dtype=np.int64)
    # distinct menus (canonical codes), each task's menu as an index into them
    menu_rows: dict[tuple[int, ...], int] = {}
    menu_of = [menu_rows.setdefault(tuple(int(a) for a in row[row >= 0]), len(menu_rows)) for row in sd.menus]
    menu_pad = np.full((len(menu_rows), max((len(k) for k in menu_rows), default=0)), -1, dtype=np.int64)
    for i, k in enumerate(menu_rows):
        menu_pad[i, : len(k)] = k
    # a writer whose states are immutable values needs no copy per snapshot (a copy per prefix is quadratic)
    immutable = getattr(agent.writer, "immutable_state", False) is True
    snap: Callable[[object], object] = (
        (lambda s: s) if immutable else copy.deepcopy)
    batch = agent.policy if isinstance(agent.policy, PrefixPolicy) else None
    by_prefix = [(int(n), np.flatnonzero(sd.prefix == n).tolist()) for n in sd.prefixes]
    asks_at = [[(j, p) for j in js for p in range(p_n)] for _n, js in by_prefix]
    # the order decisions are asked in (per prefix for a PrefixPolicy, else task by task), as arrays
    decided = [jp for asks in asks_at for jp in asks] if batch is not None else \
        [(j, p) for j in range(j_n) for p in range(p_n)]
    ask_j = np.array([j for j, _ in decided], dtype=np.int64)
    ask_p = np.array([p for _, p in decided], dtype=np.int64)
    ask_menu = [menu_of[j] for j, _ in decided]
    ask_menu_arr = np.array(ask_menu, dtype=np.int64)
    seeds = _seed_table(plan, sd)
    init_state, update = agent.writer.init_state, agent.writer.update
    # a writer of immutable states that builds every prefix state at once (a HistoryReader: slices of one tuple)
    prefix_states = getattr(agent.writer, "prefix_states", None) if immutable else None
    prefix_order = sorted(prefixes)
    act = agent.policy.act

    def raised(call: str, exc: Exception, where: dict[str, object]) -> AgentRaised:
        return AgentRaised(agent.name, call, where, exc)

    for d, spec in enumerate(plan.draws):
        perms = _LazyPerms(spec, sd)  # a role's permutation is drawn only when a cell reads it
        for c, cell in enumerate(plan.cells):
            # the cell functional at the identity map: keys before ρ, utilities and task positions
            recs = [cell_record(cell, codes, outcomes, t, identity, perms) for t in range(t_n)]
            task_in = [base_inputs[x] if base_inputs[x].slot == slots[t] else replace(base_inputs[x], slot=slots[t])
                       for t, (_k, _u, x) in enumerate(recs)]
            utils = [u for _k, u, _x in recs]
            if plan.check_laws:  # ρ is a bijection applied to both histories: a law holds under ρ iff at ρ = id
                rho0 = plan.maps[0]
                img = rho0.array.tolist() if cell.history_map else None
                keys0 = [k for k, _u, _x in recs] if img is None else [img[k] for k, _u, _x in recs]
                sources = [perms[r].tolist() if r != "id" else list(range(t_n))
                           for r in (cell.key_from, cell.outcome_from, cell.task_from)]
                bad = check_laws_plain(
                    cell.preserves, block=block, keys=keys0, outcomes=utils, tasks=[x for _k, _u, x in recs],
                    ref_keys=code_list if img is None else [img[k] for k in code_list],
                    ref_outcomes=outcome_list, sources=sources, menu_changed=cell.menu_map)
                if bad is not None:
                    raise LawViolation(cell.name, bad.value, f"stream {sd.name!r}, map {rho0.name}, draw {d}")
            for m, rho in enumerate(plan.maps):
                images = rho.array.tolist()
                keys = [kappa[images[k]] if cell.history_map else kappa[k] for k, _u, _x in recs]
                where = {"stream": sd.name, "cell": cell.name, "map": rho.name, "draw": d}
                snaps = prefix_states(task_in, keys, utils, prefix_order) if prefix_states is not None else None
                if snaps is None:
                    snaps = _write_prefixes(agent, init_state, update, snap, task_in, keys, utils, prefixes, where)
                # the displayed menus: codes (after ρ for a menu-mapped cell) and their labels
                shown_pad = np.where(menu_pad >= 0, rho.array[np.maximum(menu_pad, 0)], -1) if cell.menu_map \
                    else menu_pad
                menu_strs = [tuple(show[a] for a in row if a >= 0) for row in shown_pad.tolist()]
                # every decision gets its own generator (the rng contract): built only if the agent reads it
                gen = SeedBlock(seeds[c, m, d]).generator  # decision (j, p) is j * p_n + p in the block
                answers: list[object] = []
                if batch is not None:  # once per distinct prefix, with every (task, repeat) that reads it
                    carry: object = None
                    for (n, js), asks in zip(by_prefix, asks_at, strict=True):
                        try:
                            got, carry = batch.act_prefix(
                                snaps[n], [futs[j] for j, _ in asks], [menu_strs[menu_of[j]] for j, _ in asks],
                                [gen(j * p_n + p) for j, p in asks], carry)
                            got_list = list(got)
                        except Exception as exc:
                            if isinstance(exc, ReplayLensError):
                                raise
                            raise raised("act_prefix", exc, {**where, "future task": futs[js[0]].task,
                                                             "prefix records": n,
                                                             "decisions at this prefix": len(asks)}) from exc
                        if len(got_list) != len(asks):
                            raise AgentError(f"agent {agent.name!s} act_prefix returned {len(got_list)} labels for "
                                             f"{len(asks)} decisions (stream {sd.name!s}, prefix {n})")
                        answers.extend(got_list)
                else:
                    for j in range(j_n):
                        state_j, fut, menu, first = snaps[prefix_of[j]], futs[j], menu_strs[menu_of[j]], j * p_n
                        for p in range(p_n):
                            try:
                                answers.append(act(state_j, fut, menu, gen(first + p)))
                            except Exception as exc:
                                if isinstance(exc, ReplayLensError):
                                    raise
                                raise raised("act", exc, {**where, "future task": fut.task, "repeat": p}) from exc
                try:  # the answers' menu positions, in one pass; the first bad answer is named below
                    ks = list(map(tuple.index, [menu_strs[i] for i in ask_menu], answers))
                except (ValueError, TypeError):
                    for (j, _p), ans in zip(decided, answers, strict=True):
                        if not _in_menu(menu_strs[menu_of[j]], ans):
                            raise AgentError(f"agent {agent.name!s} chose {_plain(ans)!r}, which is not in the menu "
                                             f"{list(menu_strs[menu_of[j]])} (stream {sd.name!s}, task "
                                             f"{futs[j].task!s})") from None
                    raise
                a = shown_pad[ask_menu_arr, np.asarray(ks, dtype=np.int64)]
                out[c, m, d][ask_p, ask_j] = rho.inverse.array[a] if cell.menu_map else a
                tick(j_n * p_n)
    return out


def _array_shard(plan: ReplayPlan, sh: _Shard, agent: Agent, blocks: tuple[tuple[str, str], ...],
                 tick: Callable[[int], None]) -> list[np.ndarray]:
    """Vectorized replay of a shard: one history row per (stream, cell, draw, map), states read at
    each stream's distinct prefix ends (cuts), and a single ``act_batch`` call for every decision."""
    assert agent.array is not None
    sds = sh.streams
    c_n, m_n, d_n, p_n, s_n = len(plan.cells), len(plan.maps), len(plan.draws), plan.repeats, len(sds)
    t_n = sh.block_local.shape[1]
    cdm = c_n * d_n * m_n
    shared = shares_label_maps(agent)  # one row per (stream, cell, draw), keys before ρ (sh made so)
    r_m = 1 if shared else m_n          # history rows per (stream, cell, draw)
    keys = np.stack([np.stack([sh.transforms[(c, d)].keys for d in range(d_n)], 1) for c in range(c_n)], 1)
    outs = np.stack([np.stack([sh.transforms[(c, d)].outcomes for d in range(d_n)], 1) for c in range(c_n)], 1)
    tasks = np.stack([np.stack([sh.transforms[(c, d)].tasks for d in range(d_n)], 1) for c in range(c_n)], 1)
    assert keys.shape[3] == r_m
    shape = (s_n * c_n * d_n * r_m, t_n)  # rows ordered (stream, cell, draw, map)
    lengths = np.array([sd.length for sd in sds], dtype=np.int64)
    task_off = np.r_[0, np.cumsum(lengths)][:-1]
    tk = np.where(tasks >= 0, tasks + task_off[:, None, None, None], 0)
    bg = _padded(sds, [sd.block_global for sd in sds], t_n, 0, np.int64)
    # ---- tasks and queries, ordered (stream, cell, draw, map, asked task, repeat).  A task-invariant
    # agent is asked one representative task per (prefix, stratum, menu) of each stream; others every task.
    all_block = task_rows(sds, "stratum_code")
    all_menu = task_rows(sds, "menus")
    lay = task_layout(np.array([len(sd.futures) for sd in sds], dtype=np.int64),
                      task_rows(sds, "prefix"), all_block, all_menu,
                      dedupe=agent.task_invariant and not agent.stochastic)
    keys_r = keys.reshape(shape)
    task_names = _record_tasks(sds)
    records = RecordBatch(
        keys=keys_r, outcomes=np.broadcast_to(outs[:, :, :, None, :], keys.shape).reshape(shape),
        blocks=np.repeat(bg, shape[0] // s_n, axis=0),
        tasks=np.broadcast_to(tk[:, :, :, None, :], keys.shape).reshape(shape),
        valid=keys_r >= 0, cuts=np.repeat(lay.cuts, shape[0] // s_n, axis=0), labels=plan.labels, block_names=blocks,
        task_names=task_names)
    maps = np.stack([m.array for m in plan.maps])
    inv = np.stack([m.inverse.array for m in plan.maps])
    menu_map = np.array([cell.menu_map for cell in plan.cells])
    cc, _dd, mm = (g.reshape(-1) for g in np.indices((c_n, d_n, m_n)))
    ql = query_layout(lay, cdm, p_n)
    q_f, q_task, q_stream = ql.combo, ql.task, ql.stream
    q_row = q_stream * cdm + q_f if not shared else q_stream * (c_n * d_n) + q_f // m_n   # q_f = (c, d, m)
    history_map = np.array([cell.history_map for cell in plan.cells])
    menu, all_state_labels = query_menus(all_menu, q_f, q_task, cc, mm, maps, inv, menu_map, history_map,
                                          shared=shared)
    # An agent sharing rows across label maps, declared deterministic, reads the same row, labels and menu at
    # every map of a cell that relabels neither the history nor the menu: it is asked at the first map only,
    # and the other maps' queries (the same block of the stream's queries, m blocks later) copy its answers.
    sub: slice | np.ndarray = slice(None)
    drop = None
    if shared and not agent.stochastic and m_n > 1:
        twins = ~(history_map | menu_map)[cc[q_f]] & (mm[q_f] > 0)
        if twins.any():
            drop, sub = twins, np.flatnonzero(~twins)
    # per-decision seeds always (deterministic agents included), the same as the per-record path
    stream_names = tuple(sd.name for sd in sds)
    future_names = future_column(sds, "task")
    combos = _combo_keys(plan.rng, plan.cells, plan.draws, plan.maps)
    tkeys = np.zeros(len(future_names), dtype=np.uint64)   # the keys of the asked tasks only
    tkeys[lay.asked] = task_keys(future_names[lay.asked].tolist())
    seeds = query_seeds(plan.seed, plan.rng, stream_names, combos, q_stream[sub], q_f[sub], tkeys[q_task[sub]],
                        ql.repeat[sub])
    state_labels = all_state_labels[sub] if all_state_labels is not None else None
    queries = QueryBatch(row=q_row[sub], cut=lay.cut[q_task[sub]], block=all_block[q_task[sub]], menu=menu[sub],
                         seed=seeds, stream=q_stream[sub], task=q_task[sub], stream_names=stream_names,
                         task_names=tuple(future_names.tolist()), state_labels=state_labels)
    with _agent_call(agent, "act_batch", {"streams": ", ".join(stream_names)}):
        asked = np.asarray(agent.array.act_batch(records, queries), dtype=np.int64)
    if asked.shape != (queries.menu.shape[0],):
        raise AgentError(f"agent {agent.name!r} act_batch returned shape {asked.shape}, expected "
                         f"({queries.menu.shape[0]},)")
    # the asked answers are checked against their menus (a copied twin has its source's menu, asked earlier)
    ok = (asked >= 0) & (queries.menu == asked[:, None]).any(axis=1)
    if not ok.all():
        q = int(np.flatnonzero(~ok)[0])
        q_s, q_t = int(queries.stream[q]), int(queries.task[q])
        raise AgentError(f"agent {agent.name!r} chose label code {int(asked[q])}, which is not in the menu "
                         f"(stream {stream_names[q_s]!r}, task {str(future_names[q_t])!r})")
    got = asked
    if drop is not None:
        got = np.empty(menu.shape[0], dtype=np.int64)
        got[sub] = asked
        twin = np.flatnonzero(drop)
        got[twin] = got[twin - mm[q_f[twin]] * (lay.asked_per_stream[q_stream[twin]] * p_n)]
    if menu_map.any():  # the canonical code of each answer: ρ⁻¹ where the query's cell relabelled its menu
        l_n = inv.shape[1]
        decode = np.where(menu_map[cc][:, None], inv[mm], np.arange(l_n)[None, :]).astype(np.int64)  # (cdm, L)
        decoded = decode.reshape(-1)[q_f * l_n + got]
    else:
        decoded = got
    # in the actions' own type (one byte below 128 labels): the per-stream arrays gathered below, the action sink
    # and the journal then move a byte a decision, not eight
    decoded = decoded.astype(action_dtype(len(plan.labels)), copy=False)
    # the histories and queries are no longer needed: freed before the (large) decision arrays are built
    del records, queries, keys, keys_r, outs, tasks, tk, bg, menu, all_state_labels, state_labels, seeds, asked, got
    results = stream_decisions(decoded, lay, ql, (c_n, m_n, d_n, p_n))
    tick(int(cdm * p_n * lay.tasks_per_stream.sum()))
    return results


def _record_tasks(sds: Sequence[StreamData]) -> tuple[str, ...]:
    """Every record's task id, stream by stream (one slice when the streams are consecutive rows of one history)."""
    h = sds[0].history
    consecutive = all(sd.history is h and sd.rows.step in (None, 1) for sd in sds) and \
        all(a.rows.stop == b.rows.start for a, b in itertools.pairwise(sds))
    col = h.text("task", slice(sds[0].rows.start, sds[-1].rows.stop)) if consecutive else \
        np.concatenate([sd.history.text("task", sd.rows) for sd in sds])
    return tuple(col.tolist())   # History.text gives numpy text: each value a str


@functools.lru_cache(maxsize=64)
def _combo_keys(mode: str, cells: tuple[Cell, ...], draws: tuple[SlotSpec, ...],
                maps: tuple[LabelMap, ...]) -> np.ndarray:
    """:func:`combo_key` of every (cell, draw, map), cell-major (a read-only array; a pure function of
    frozen values, so it is cached)."""
    out = np.array([combo_key(mode, cell, rho, spec) for cell in cells for spec in draws for rho in maps],
                   dtype=np.uint64)
    out.flags.writeable = False
    return out


def shares_label_maps(agent: Agent) -> bool:
    """Whether ``agent``'s array form reads one history row per (stream, cell, draw) for every label map
    (:attr:`QueryBatch.state_labels`)."""
    return bool(getattr(agent.array, "shares_label_maps", False))


def _plain(x: object) -> object:
    """numpy scalars as plain Python values (messages never show ``np.str_('A')``)."""
    return x.item() if isinstance(x, np.generic) else x


class _agent_call:
    """Turn an exception raised by the agent's own code into :class:`AgentRaised` naming where it was."""

    __slots__ = ("agent", "call", "where")

    def __init__(self, agent: Agent, call: str, where: dict[str, object]) -> None:
        self.agent, self.call, self.where = agent, call, where

    def __enter__(self) -> None:
        return None

    def __exit__(self, et: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if exc is None or not isinstance(exc, Exception) or isinstance(exc, ReplayLensError):
            return None
        raise AgentRaised(self.agent.name, self.call, self.where, exc) from exc


def run_shard(plan: ReplayPlan, sds: Sequence[StreamData], agent: Agent, *, path: str,
              blocks: tuple[tuple[str, str], ...], tick: Callable[[int], None] | None = None) -> list[np.ndarray]:
    """Decisions of one shard: per stream an int array (cells, maps, draws, repeats, tasks) of label codes (on
    the array path a :class:`~replaylens.replay._layout.ShardActions` in the codes' smallest type,
    :func:`~replaylens.replay._layout.action_dtype`, the arrays as views of one block when the shard's streams
    have one shape).

    A pure function of the plan, the shard's streams and the agent.
    """
    tk = tick or (lambda _n: None)
    if path not in ("array", "reference"):
        raise ConfigError(f"path must be 'array' or 'reference'; got {path!r}")
    if path == "array" and agent.array is None:
        raise ConfigError(f"agent {agent.name!r} has no array implementation; use path='reference'")
    if path == "array":
        return _array_shard(plan, _shard(plan, sds, before_maps=shares_label_maps(agent)), agent, blocks, tk)
    return [_reference_stream(plan, sd, agent, tk) for sd in sds]


def utilities_for(sds: Sequence[StreamData], evaluator: Evaluator, n_labels: int) -> tuple[np.ndarray, np.ndarray]:
    """(N, L) counterfactual utilities by label code (NaN off-menu) and the (N,) first-maximum oracle codes."""
    menus = task_rows(sds, "menus") if sds else np.empty((0, 1), dtype=np.int64)
    n = menus.shape[0]
    on = menus >= 0
    table = evaluator.table
    values_at = getattr(table, "values_at", None)  # a file-read table: looked up on codes (the row dicts' values)
    rows_for = getattr(table, "rows_for", None)
    if values_at is not None and rows_for is not None:
        # the table's rows of the whole task set (kept by the table), then these tasks' rows and menu codes
        cols, at = task_columns(sds)
        rows = rows_for(cols.streams, cols.stream, cols.task_text)[at]
        vals = np.asarray(values_at(rows, cols.menus, cols.menu[at]), dtype=np.float64)
    else:
        vals = np.fromiter((row[a] for sd in sds for f in sd.futures for row in (table[(f.stream, f.task)],)
                            for a in f.menu), dtype=np.float64, count=int(on.sum()))
    scored = np.full(menus.shape, -np.inf)
    scored[on] = vals   # row-major: each task's menu in order, as ``vals``
    del vals
    util = np.full((n, n_labels), np.nan)
    for j in range(menus.shape[1]):   # menu position by position (a later one wins, as in row-major order)
        rows = np.flatnonzero(on[:, j])
        util[rows, menus[rows, j]] = scored[rows, j]
    oracle = menus[np.arange(n), np.argmax(scored, axis=1)] if n else np.empty(0, dtype=np.int64)
    return util, oracle.astype(np.int64)
