"""Retrieval-level readouts of the history cells of an audit (value, pair, reorder, mask, ...).

For every history cell q (consistent renaming excluded: it is the identity at ρ = id) the transformed history of
each stream (first slot draw, identity map) is ingested into the agent's store exactly as the replay does, every
future task's top-k is read at its visible prefix, and compared with the aligned history's top-k; the decisions
are the replay's own (cell q vs aligned, ρ = id, first draw and repeat).  The result is the two-level readout
(:func:`replaylens.memory.retrieval.two_level`) per cell.

The same-order rebuild control of ``check-migration --store`` comes with it (entry ``"rebuild (control)"``): the
aligned stores and every cell's stores are built once more, fresh (no cached retrieval), and — when a rebuild
changes an answer (top-k ids or decision) — ``CONTROL_REBUILDS`` times in all.  The control's status is SAFE when
no rebuild changes any answer, else UNSAFE (the store is nondeterministic here); each cell then reports its
changes on the queries no rebuild changes (``retrieval_changed_beyond_control``) and the permutation test of its
change rate against the rebuilds' (``noise_test``; :mod:`replaylens.memory.retrieval._control`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ...interventions import cell_record
from ...maps import stream_perm
from ...replay import ROLES, StreamData, prepare_streams
from ._control import CONTROL_REBUILDS, SAFE, UNSAFE, disagreements, noise_test
from ._items import Retrieved, text_of
from ._readouts import Comparison, two_level

__all__ = ["CONTROL_KEY", "cell_retrieval_readouts"]

CONTROL_KEY = "rebuild (control)"


def _snapshots(agent: Any, plan: Any, sd: StreamData, c: int) -> dict[int, Any]:
    cell = plan.cells[c]
    rho = plan.maps[0]
    perms = {role: stream_perm(plan.draws[0], role, sd.name, sd.block_local) for role in ROLES}
    inputs = sd.task_inputs
    state = agent.init_state()
    snaps = {0: state}
    for t in range(sd.length):
        key, u, x = cell_record(cell, sd.codes, sd.outcomes, t, rho.array, perms)
        state = agent.update(state, replace(inputs[x], slot=int(sd.slots[t])), plan.labels[key], u)
        snaps[t + 1] = state
    return snaps


def _fresh(agent: Any, sd: StreamData, snaps: dict[int, Any]) -> list[tuple[tuple[str, ...], str]]:
    """Every future task's answer (top-k ids, decision) from a fresh build of its visible prefix's store."""
    out: list[tuple[tuple[str, ...], str] | None] = [None] * len(sd.futures)
    by_prefix: dict[int, list[int]] = {}
    for j in range(len(sd.futures)):
        by_prefix.setdefault(int(sd.prefix[j]), []).append(j)
    for pre, js in by_prefix.items():
        texts = [text_of(sd.futures[j].task, sd.futures[j].metadata) for j in js]
        rs = agent.retrieve_fresh(snaps[pre], texts)
        ds = agent.decide_retrieved(snaps[pre], texts, rs, [tuple(sd.futures[j].menu) for j in js])
        for j, r, d in zip(js, rs, ds, strict=True):
            out[j] = (r.ids, d)
    return [a for a in out if a is not None]


def _retrievals(agent: Any, sd: StreamData, snaps: dict[int, Any]) -> list[Retrieved]:
    """Every future task's top-k at its visible prefix, through the agent's cache (the replay's own builds)."""
    out: list[Retrieved] = []
    for j, f in enumerate(sd.futures):
        (r,) = agent.retrieve_many(snaps[int(sd.prefix[j])], [text_of(f.task, f.metadata)])
        out.append(r)
    return out


def cell_retrieval_readouts(agent: Any, history: Any, futures: Any, plan: Any, decisions: Any, *, seed: int,
                            n_resamples: int, level: float) -> dict[str, Any]:
    """``{cell: two-level readout dict}`` for every history cell of ``plan`` (see the module docstring)."""
    sds = prepare_streams(plan, history, futures)
    labels = plan.labels
    acts = decisions.actions  # (C, M, D, P, N)
    out: dict[str, Any] = {}
    offsets = np.r_[0, np.cumsum([len(sds[s].futures) for s in plan.streams])]
    cells = [c for c, cell in enumerate(plan.cells) if c == 0 or not cell.menu_map]
    snaps = {(c, s): _snapshots(agent, plan, sds[s], c) for c in cells for s in plan.streams}
    first: dict[tuple[int, str], list[tuple[tuple[str, ...], str]]] = {}
    reads: dict[tuple[int, str], list[Retrieved]] = {}
    for c in cells:
        for si, s in enumerate(plan.streams):
            sd = sds[s]
            reads[(c, s)] = _retrievals(agent, sd, snaps[(c, s)])
            first[(c, s)] = [(r.ids, labels[int(acts[c, 0, 0, 0, int(offsets[si]) + j])])
                             for j, r in enumerate(reads[(c, s)])]
    builds = {key: [first[key], _fresh(agent, sds[key[1]], snaps[key])] for key in first}
    if any(b[0] != b[1] for b in builds.values()):  # noise: every side to 1 + CONTROL_REBUILDS builds
        for key, b in builds.items():
            b.extend(_fresh(agent, sds[key[1]], snaps[key]) for _ in range(CONTROL_REBUILDS - 1))
    noisy = {key: [any(x[j] != b[0][j] for x in b[1:]) for j in range(len(b[0]))] for key, b in builds.items()}
    n_reb = len(builds[(0, plan.streams[0])]) - 1 if plan.streams else 0
    ctl = []
    for s in plan.streams:
        sd, r0 = sds[s], reads[(0, s)]
        for j, f in enumerate(sd.futures):
            ids1, d1 = builds[(0, s)][1][j]
            ctl.append(Comparison(s, f.task, r0[j], Retrieved(ids1, ()), builds[(0, s)][0][j][1], d1))
    n_noisy = sum(sum(noisy[(0, s)]) for s in plan.streams)
    n_q = len(ctl)
    tl = two_level(ctl, seed=seed, name="cell:rebuild", n_resamples=n_resamples, level=level)
    status = SAFE if n_noisy == 0 else UNSAFE
    line = (f"same-order rebuild (control): SAFE — {n_reb} fresh rebuild(s) of every aligned store return identical "
            f"top-k and decisions for all {n_q} queries (the store is deterministic here)" if status == SAFE else
            f"same-order rebuild (control): UNSAFE — fresh rebuilds of the aligned stores change the top-k or "
            f"decision of {n_noisy}/{n_q} queries ({n_reb} rebuilds; the store's own nondeterminism): each cell's "
            f"retrieval changes are read against it")
    out[CONTROL_KEY] = {"migration": "same records, same order, a fresh store (the store's own noise)",
                        **tl.to_dict(), "rebuilds": n_reb, "noisy_queries": n_noisy, "status": status,
                        "verdict": line}
    for c, cell in enumerate(plan.cells):
        if c == 0 or cell.menu_map:
            continue
        comps = []
        beyond = [0, 0]
        cell_noisy = 0
        for si, s in enumerate(plan.streams):
            sd = sds[s]
            for j, f in enumerate(sd.futures):
                i = int(offsets[si]) + j
                comp = Comparison(s, f.task, reads[(0, s)][j], reads[(c, s)][j], labels[int(acts[0, 0, 0, 0, i])],
                                  labels[int(acts[c, 0, 0, 0, i])])
                comps.append(comp)
                if noisy[(0, s)][j] or noisy[(c, s)][j]:
                    cell_noisy += 1
                else:
                    beyond[0] += comp.retrieval_changed
                    beyond[1] += comp.decision_changed
        tl = two_level(comps, seed=seed, name=f"cell:{cell.name}", n_resamples=n_resamples, level=level)
        entry: dict[str, Any] = {"migration": cell.migration, **tl.to_dict(), "noisy_queries": cell_noisy,
                                 "retrieval_changed_beyond_control": beyond[0],
                                 "decisions_changed_beyond_control": beyond[1], "noise_test": None}
        if n_reb > 1:
            mats = [disagreements([*builds[(0, s)], *builds[(c, s)]]) for s in plan.streams]
            entry["noise_test"] = noise_test(mats, n_reb + 1, seed=seed, name=f"cell:{cell.name}",
                                             level=level).to_dict()
        out[cell.name] = entry
    return out
