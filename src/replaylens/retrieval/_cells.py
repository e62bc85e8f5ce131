"""Retrieval-level readouts of the history cells of an audit (value, pair, reorder, mask, ...).

For every history cell q (consistent renaming excluded: it is the identity at ρ = id) the transformed history of
each stream (first slot draw, identity map) is ingested into the agent's store exactly as the replay does, every
future task's top-k is read at its visible prefix, and compared with the aligned history's top-k; the decisions
are the replay's own (cell q vs aligned, ρ = id, first draw and repeat).  The result is the two-level readout
(:func:`replaylens.retrieval.two_level`) per cell.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..interventions import cell_record
from ..maps import stream_perm
from ..replay import ROLES, StreamData, prepare_streams
from ._items import Retrieved, text_of
from ._readouts import Comparison, two_level

__all__ = ["cell_retrieval_readouts"]


def _retrievals(agent: Any, plan: Any, sd: StreamData, c: int) -> list[Retrieved]:
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
    aligned = {s: _retrievals(agent, plan, sds[s], 0) for s in plan.streams}
    for c, cell in enumerate(plan.cells):
        if c == 0 or cell.menu_map:
            continue
        comps = []
        for si, s in enumerate(plan.streams):
            sd = sds[s]
            after = _retrievals(agent, plan, sd, c)
            for j, f in enumerate(sd.futures):
                i = int(offsets[si]) + j
                comps.append(Comparison(s, f.task, aligned[s][j], after[j], labels[int(acts[0, 0, 0, 0, i])],
                                        labels[int(acts[c, 0, 0, 0, i])]))
        tl = two_level(comps, seed=seed, name=f"cell:{cell.name}", n_resamples=n_resamples, level=level)
        out[cell.name] = {"migration": cell.migration, **tl.to_dict()}
    return out
