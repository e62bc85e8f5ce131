"""Disjoint producer/action namespaces, and the pure ``apply_cell`` operator."""

from __future__ import annotations

import math

import numpy as np
import pytest

import replaylens as rl
from replaylens.agents import Namespace
from replaylens.bandit import make_bandit
from replaylens.errors import ConfigError
from replaylens.maps import DERANGEMENTS_4, SlotSpec


def _disjoint_agent() -> rl.Agent:
    """Mean rule over producer keys P_<a>; the policy only sees action keys A_<a> (ψ_P∘φ = ψ_A∘χ)."""

    def update(s: tuple, task: rl.TaskInput, key: str, u: float) -> tuple:
        assert key.startswith("P_"), key
        return (*s, (task.block, key, u))

    def act(s: tuple, task: rl.FutureInput, menu: tuple[str, ...]) -> str:
        assert all(m.startswith("A_") for m in menu), menu
        best, best_v = menu[0], -math.inf
        for m in menu:
            vals = [u for b, k, u in s if b == task.stratum and k == "P_" + m[2:] and not math.isnan(u)]
            v = sum(vals) / len(vals) if vals else -math.inf
            if v > best_v:
                best, best_v = m, v
        return best

    return rl.from_callables(lambda: (), update, act, name="disjoint-mean",
                             namespace=Namespace(producer_prefix="P_", action_prefix="A_"))


def test_disjoint_namespaces_are_bound_and_decoded() -> None:
    sub = make_bandit(n_streams=4, slots_per_block=10, n_future=3)
    dis = rl.replay(sub.history, sub.futures, sub.evaluator, _disjoint_agent(), cells="value,pair,rename")
    # the same mean rule in the shared namespace (written the same way, no prefixes)
    def update(s: tuple, task: rl.TaskInput, key: str, u: float) -> tuple:
        return (*s, (task.block, key, u))

    def act(s: tuple, task: rl.FutureInput, menu: tuple[str, ...]) -> str:
        best, best_v = menu[0], -math.inf
        for m in menu:
            vals = [u for b, k, u in s if b == task.stratum and k == m and not math.isnan(u)]
            v = sum(vals) / len(vals) if vals else -math.inf
            if v > best_v:
                best, best_v = m, v
        return best

    shared = rl.replay(sub.history, sub.futures, sub.evaluator, rl.from_callables(lambda: (), update, act),
                       cells="value,pair,rename")
    assert np.array_equal(dis.actions, shared.actions)
    assert (dis.actions[0, 1:] != dis.actions[0, :1]).any()  # rekey still moves decisions


def test_apply_cell_is_pure_and_follows_the_cell_table() -> None:
    sub = make_bandit(n_streams=3, slots_per_block=8, n_future=2)
    h = sub.history
    before = h.fingerprint()
    labels = sub.futures.labels
    spec = SlotSpec.from_seed(5)
    rho = DERANGEMENTS_4[1]
    al = rl.apply_cell(h, "aligned", labels=labels, rho=rho, spec=spec)
    val = rl.apply_cell(h, "value", labels=labels, rho=rho, spec=spec)
    pair = rl.apply_cell(h, "pair", labels=labels, rho=rho, spec=spec)
    ks = rl.apply_cell(h, "key_slot", labels=labels, rho=rho, spec=spec)
    ro = rl.apply_cell(h, "reorder", labels=labels, rho=rho, spec=spec)
    mk = rl.apply_cell(h, "mask", labels=labels, spec=spec)
    assert h.fingerprint() == before  # the input is never modified
    code = {lab: i for i, lab in enumerate(labels)}
    assert al.key.tolist() == [labels[rho.images[code[k]]] for k in h.key.tolist()]
    assert np.array_equal(val.key, al.key) and sorted(val.outcome) == sorted(h.outcome)
    assert np.array_equal(ks.outcome, h.outcome) and sorted(ks.key) == sorted(al.key)
    assert sorted(zip(pair.key, pair.outcome, strict=True)) == sorted(zip(al.key, al.outcome, strict=True))
    assert np.array_equal(pair.outcome, val.outcome)  # σ_p = σ_v
    assert np.array_equal(pair.task, h.task) and not np.array_equal(ro.task, h.task)
    assert sorted(zip(ro.task, ro.key, ro.outcome, strict=True)) == sorted(zip(h.task, al.key, al.outcome, strict=True))
    assert np.isnan(mk.outcome).all() and np.array_equal(mk.key, h.key)
    with pytest.raises(ConfigError):
        rl.apply_cell(h, "value", labels=("coverage", "adaptive"))
