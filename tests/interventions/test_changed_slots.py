"""`changed_slots` (the report's changed-record examples, issue 27) finds the changed slots for every slot at once: the
same slots, in the same order, as the per-slot cell functional ``cell_record``."""

from __future__ import annotations

import math

from replaylens.bandit import make_bandit
from replaylens.interventions import cell_record, changed_slots
from replaylens.maps import stream_perm
from replaylens.replay import plan_replay, prepare_streams
from replaylens.report._explain import ROLES


def _loop(cell, sd, n, rho, perms):  # type: ignore[no-untyped-def]
    out = []
    for t in range(n):
        key, u, x = cell_record(cell, sd.codes, sd.outcomes, t, rho, perms)
        k0, u0 = int(sd.codes[t]), float(sd.outcomes[t])
        same_u = (math.isnan(u) and math.isnan(u0)) or u == u0
        if not (key == k0 and same_u and x == t):
            out.append(t)
    return out


def test_changed_slots_equal_the_per_slot_functional() -> None:
    sub = make_bandit(n_streams=3, slots_per_block=12, n_future=3, rng=11)
    plan = plan_replay(sub.history, sub.futures, cells="value,pair,key_slot,mask,reorder,rename",
                       maps=["1032", "2301"], draws=2, seed=7)
    prepared = prepare_streams(plan, sub.history, sub.futures)
    checked = 0
    for sd in prepared.values():
        for draw in plan.draws:
            perms = {role: stream_perm(draw, role, sd.name, sd.block_local) for role in ROLES}
            for cell in plan.cells:
                for rho in plan.maps:
                    for n in sorted({int(p) for p in sd.prefix}):
                        got = changed_slots(cell, sd.codes[:n], sd.outcomes[:n], rho.array, perms)
                        assert got.tolist() == _loop(cell, sd, n, rho.array, perms)
                        checked += int(got.size)
    assert checked > 0  # some cell changed some record
