"""The per-record reference path as it was before issue 27 (commit e7dbfe5), kept verbatim as the oracle of
the optimized one: every per-record decision must be identical to this loop's (tests/replay/test_perrecord.py).

Only the engine's private helpers it calls are imported; the function itself is a copy.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from replaylens.agents import Agent, FutureInput, PrefixPolicy
from replaylens.errors import AgentError, LawViolation
from replaylens.interventions import cell_record, check_laws_plain
from replaylens.maps import stream_perm
from replaylens.replay import ReplayPlan, StreamData
from replaylens.replay._engine import _agent_call, _plain
from replaylens.replay._seeds import decision_seeds, task_keys


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


def _reference_stream(plan: ReplayPlan, sd: StreamData, agent: Agent, tick: Callable[[int], None]) -> np.ndarray:
    """Plain per-record replay of one stream: the paper's cell functional record by record, a plain
    law check per history, the writer's ``update`` per record and the policy's ``act`` per decision — or,
    for a :class:`PrefixPolicy` (a HistoryReader, ...), one ``act_prefix`` per distinct prefix with every
    (task, repeat) of it and the same per-decision generators."""
    c_n, m_n, d_n, p_n, j_n = len(plan.cells), len(plan.maps), len(plan.draws), plan.repeats, len(sd.futures)
    out = np.empty((c_n, m_n, d_n, p_n, j_n), dtype=np.int64)
    ns = agent.namespace
    labels = plan.labels
    prefixes = set(sd.prefixes.tolist())
    futs = [_future_input(sd, j) for j in range(j_n)]
    base_inputs = sd.task_inputs
    t_n = sd.length
    block = sd.block_local.tolist()
    codes, outcomes = sd.codes, sd.outcomes
    menus = [sd.menus[j][sd.menus[j] >= 0] for j in range(j_n)]
    # a writer whose states are immutable values needs no copy per snapshot (a copy per prefix is quadratic)
    snap: Callable[[object], object] = (
        (lambda s: s) if getattr(agent.writer, "immutable_state", False) is True else copy.deepcopy)
    batch = agent.policy if isinstance(agent.policy, PrefixPolicy) else None
    by_prefix = [(int(n), np.flatnonzero(sd.prefix == n).tolist()) for n in sd.prefixes]
    tkeys = task_keys([f.task for f in sd.futures])
    for d, spec in enumerate(plan.draws):
        perms = _LazyPerms(spec, sd)  # a role's permutation is drawn only when a cell reads it
        for c, cell in enumerate(plan.cells):
            sources = [perms[r].tolist() if r != "id" else list(range(t_n))
                       for r in (cell.key_from, cell.outcome_from, cell.task_from)]
            for m, rho in enumerate(plan.maps):
                img = rho.array if cell.history_map else np.arange(rho.n)
                recs = [cell_record(cell, codes, outcomes, t, rho.array, perms) for t in range(t_n)]
                if plan.check_laws:
                    bad = check_laws_plain(
                        cell.preserves, block=block, keys=[r[0] for r in recs], outcomes=[r[1] for r in recs],
                        tasks=[r[2] for r in recs], ref_keys=[int(img[k]) for k in codes],
                        ref_outcomes=outcomes.tolist(), sources=sources, menu_changed=cell.menu_map)
                    if bad is not None:
                        raise LawViolation(cell.name, bad.value, f"stream {sd.name!r}, map {rho.name}, draw {d}")
                where = {"stream": sd.name, "cell": cell.name, "map": rho.name, "draw": d}
                with _agent_call(agent, "init_state", where):
                    state = agent.writer.init_state()
                snaps = {0: snap(state)} if 0 in prefixes else {}
                for t, (key, u, x) in enumerate(recs):
                    ti = replace(base_inputs[x], slot=int(sd.slots[t]))
                    with _agent_call(agent, "update", {**where, "history record": t + 1}):
                        state = agent.writer.update(state, ti, ns.kappa(labels[key]), u)
                    if t + 1 in prefixes:
                        snaps[t + 1] = snap(state)
                # every decision gets its own generator (the rng contract), deterministic agents included
                seeds = decision_seeds(plan.seed, plan.rng, sd.name, tkeys, p_n, cell, rho, spec)
                shown = [rho.array[menus[j]] if cell.menu_map else menus[j] for j in range(j_n)]
                menu_strs = [tuple(ns.show(labels[int(a)]) for a in sh) for sh in shown]

                decided: list[tuple[int, int, Any]] = []
                if batch is not None:  # once per distinct prefix, with every (task, repeat) that reads it
                    carry: object = None
                    for n, js in by_prefix:
                        asks = [(j, p) for j in js for p in range(p_n)]
                        at = {**where, "future task": futs[js[0]].task, "prefix records": n,
                              "decisions at this prefix": len(asks)}
                        with _agent_call(agent, "act_prefix", at):
                            got, carry = batch.act_prefix(
                                snaps[n], [futs[j] for j, _ in asks], [menu_strs[j] for j, _ in asks],
                                [np.random.default_rng(int(seeds[j, p])) for j, p in asks], carry)
                            answers = list(got)
                        if len(answers) != len(asks):
                            raise AgentError(f"agent {agent.name!s} act_prefix returned {len(answers)} labels for "
                                             f"{len(asks)} decisions (stream {sd.name!s}, prefix {n})")
                        decided.extend((j, p, ans) for (j, p), ans in zip(asks, answers, strict=True))
                else:
                    for j in range(j_n):
                        for p in range(p_n):
                            rng = np.random.default_rng(int(seeds[j, p]))
                            with _agent_call(agent, "act", {**where, "future task": futs[j].task, "repeat": p}):
                                ans = agent.policy.act(snaps[int(sd.prefix[j])], futs[j], menu_strs[j], rng)
                            decided.append((j, p, ans))
                for j, p, ans in decided:
                    try:
                        k = menu_strs[j].index(ans)
                    except (ValueError, TypeError):
                        raise AgentError(f"agent {agent.name!s} chose {_plain(ans)!r}, which is not in the menu "
                                         f"{list(menu_strs[j])} (stream {sd.name!s}, task {futs[j].task!s})") from None
                    a = int(shown[j][k])
                    out[c, m, d, p, j] = int(rho.inverse.array[a]) if cell.menu_map else a
                tick(j_n * p_n)
    return out
