"""Readouts (core.md §3): disagreement, pooling (strata equally weighted), orientation identities,
zero interaction with a nonzero direct response, T_gr (§3.7) and the utility decomposition."""

from __future__ import annotations

import numpy as np
import pytest

from replaylens.agents import commutative_agent, from_callables, load_agent
from replaylens.bandit import make_bandit
from replaylens.readouts import (
    a_rekey,
    action_response,
    delta,
    delta_o_direct,
    delta_u_direct,
    direct_action_contrast,
    disagreement,
    gamma,
    mean_utility,
    oracle_agreement,
    pair_residual,
    pi_pair_minus_value,
    pool_tasks,
    t_gr,
    utility_decomposition,
    value_time_contrast,
)
from replaylens.records import (
    FutureTasks,
    evaluator_from_rows,
    futures_from_tasks,
    history_from_records,
)
from replaylens.replay import replay


@pytest.fixture(scope="module")
def bandit():
    return make_bandit(n_streams=6, slots_per_block=12, n_future=6)


@pytest.fixture(scope="module")
def mean_dec(bandit):
    return replay(bandit.history, bandit.futures, bandit.evaluator, load_agent("mean"),
                  cells="value,pair,key_slot,rename", maps="derangements", draws=2, seed=1)


def _hand_pool(x: np.ndarray, dec) -> np.ndarray:
    """(N,) per-task values → (S,) per stream: mean within stratum, strata equally weighted."""
    out = []
    for s in range(len(dec.plan.streams)):
        in_s = dec.stream_idx == s
        strata = np.unique(dec.stratum_idx[in_s])
        out.append(np.mean([x[in_s & (dec.stratum_idx == r)].mean() for r in strata]))
    return np.array(out)


def _hand_readout(dec, per_task) -> np.ndarray:
    """per_task(m, d) -> (N,) values; pooled per stream, averaged over draws, then maps (non-identity)."""
    m_n, d_n = len(dec.plan.maps), len(dec.plan.draws)
    return np.mean([np.mean([_hand_pool(per_task(m, d), dec) for d in range(d_n)], axis=0)
                    for m in range(1, m_n)], axis=0)


# --------------------------------------------------------------------------- disagreement


def test_disagreement_basics() -> None:
    assert disagreement(np.array([0, 1, 2, 3]), np.array([0, 1, 2, 0])) == 0.25
    assert disagreement([1, 2], [2, 1]) == 1.0
    a = np.arange(10) % 3
    assert disagreement(a, a) == 0.0
    b = np.roll(a, 1)
    assert disagreement(a, b) == disagreement(b, a)
    with pytest.raises(ValueError):
        disagreement(np.zeros(3), np.zeros(4))
    with pytest.raises(ValueError):
        disagreement(np.zeros(0), np.zeros(0))


# --------------------------------------------------------------------------- pooling


def _unequal_futures(bandit) -> FutureTasks:
    """Keep a different number of tasks per (stream, stratum): 1..6."""
    keep = []
    for t in bandit.futures:
        r = int(t.stream[1:])
        k = 1 + (r + 2 * bandit.futures.strata.index(t.stratum)) % 6
        if t.index < k:
            keep.append(t)
    return FutureTasks(tuple(keep))


def test_pool_tasks_weights_strata_equally(bandit) -> None:
    fut = _unequal_futures(bandit)
    dec = replay(bandit.history, fut, bandit.evaluator, load_agent("mean"), cells="value", maps="cyclic")
    counts = {(int(s), int(r)) for s, r in zip(dec.stream_idx, dec.stratum_idx, strict=True)}
    assert len(counts) == 18
    x = np.random.default_rng(0).random(dec.n_tasks)
    got = pool_tasks(x, dec)
    want = _hand_pool(x, dec)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    plain = np.array([x[dec.stream_idx == s].mean() for s in range(6)])
    assert not np.allclose(got, plain)          # unequal stratum sizes: task-weighted mean differs
    # leading axes are carried through
    xx = np.stack([x, 2 * x, -x])
    np.testing.assert_allclose(pool_tasks(xx, dec), np.stack([want, 2 * want, -want]), atol=1e-12)


def test_mean_utility_and_oracle_by_hand(bandit) -> None:
    fut = _unequal_futures(bandit)
    dec = replay(bandit.history, fut, bandit.evaluator, load_agent("sum"), cells="pair", maps="cyclic")
    n = np.arange(dec.n_tasks)
    a = dec.actions[0, 0, 0, 0]
    np.testing.assert_allclose(mean_utility(dec).values, _hand_pool(dec.utility[n, a], dec), atol=1e-12)
    np.testing.assert_allclose(oracle_agreement(dec).values, _hand_pool((a == dec.oracle) * 1.0, dec), atol=1e-12)
    ap = dec.actions[dec.cell_index("pair"), 2, 0, 0]
    np.testing.assert_allclose(mean_utility(dec, "pair", maps=[2]).values, _hand_pool(dec.utility[n, ap], dec),
                               atol=1e-12)
    # the oracle is the first maximum of the task's utilities
    assert np.array_equal(dec.oracle, np.nanargmax(dec.utility, axis=1))


def test_action_response_and_rekey_by_hand(mean_dec) -> None:
    dec = mean_dec
    for cell in ("aligned", "value", "key_slot"):
        c = dec.cell_index(cell)
        want = _hand_readout(dec, lambda m, d, c=c: (dec.actions[c, m, d, 0] != dec.actions[c, 0, d, 0]) * 1.0)
        np.testing.assert_allclose(action_response(dec, cell).values, want, atol=1e-12)
        np.testing.assert_allclose(delta(dec, "A", cell).values, want, atol=1e-12)
    np.testing.assert_array_equal(a_rekey(dec).values, action_response(dec, "aligned").values)
    assert a_rekey(dec).by_map.shape == (9, 6)
    assert 0.0 < a_rekey(dec).estimate <= 1.0


def test_delta_orientation_by_hand(mean_dec) -> None:
    dec = mean_dec
    n = np.arange(dec.n_tasks)
    c = dec.cell_index("value")
    u = lambda m, d: dec.utility[n, dec.actions[c, m, d, 0]]  # noqa: E731
    o = lambda m, d: (dec.actions[c, m, d, 0] == dec.oracle) * 1.0  # noqa: E731
    # δ_U = U(id) − U(ρ) (positive = loss);  δ_O = O(ρ) − O(id)
    np.testing.assert_allclose(delta(dec, "U", "value").values, _hand_readout(dec, lambda m, d: u(0, d) - u(m, d)),
                               atol=1e-12)
    np.testing.assert_allclose(delta(dec, "O", "value").values, _hand_readout(dec, lambda m, d: o(m, d) - o(0, d)),
                               atol=1e-12)


def test_direct_contrasts_by_hand(mean_dec) -> None:
    dec = mean_dec
    n = np.arange(dec.n_tasks)
    c = dec.cell_index("pair")
    a_c, a_0 = dec.actions[c, 0, :, 0], dec.actions[0, 0, :, 0]
    want_a = np.mean([_hand_pool((a_c[d] != a_0[d]) * 1.0, dec) for d in range(2)], axis=0)
    np.testing.assert_allclose(direct_action_contrast(dec, "pair").values, want_a, atol=1e-12)
    want_u = np.mean([_hand_pool(dec.utility[n, a_c[d]] - dec.utility[n, a_0[d]], dec) for d in range(2)], axis=0)
    np.testing.assert_allclose(delta_u_direct(dec, "pair").values, want_u, atol=1e-12)
    want_o = np.mean([_hand_pool((a_c[d] == dec.oracle) * 1.0 - (a_0[d] == dec.oracle), dec) for d in range(2)],
                     axis=0)
    np.testing.assert_allclose(delta_o_direct(dec, "pair").values, want_o, atol=1e-12)
    # consistent renaming compares with aligned at the identity map
    r = dec.cell_index("rename")
    want_r = _hand_readout(dec, lambda m, d: (dec.actions[r, m, d, 0] != dec.actions[0, 0, d, 0]) * 1.0)
    np.testing.assert_allclose(direct_action_contrast(dec, "rename").values, want_r, atol=1e-12)
    assert direct_action_contrast(dec, "rename").estimate == 0.0   # mean is label-equivariant


# --------------------------------------------------------------------------- orientation identities


@pytest.mark.parametrize("y", ["U", "A", "O"])
def test_orientation_identities(mean_dec, y: str) -> None:
    dec = mean_dec

    dv, dt, dp, da = (delta(dec, y, c) for c in ("value", "key_slot", "pair", "aligned"))
    gv, gt, gp = (gamma(dec, y, c) for c in ("value", "key_slot", "pair"))
    # "value null − time placebo" = ⟨δ^value − δ^time⟩ = Γ^time − Γ^value
    np.testing.assert_allclose(dv.values - dt.values, gt.values - gv.values, rtol=0, atol=1e-12)
    np.testing.assert_allclose(gv.values, da.values - dv.values, rtol=0, atol=1e-12)
    # P_y = δ^pair − δ^aligned = −Γ^pair
    np.testing.assert_allclose(pair_residual(dec, y).values, -gp.values, rtol=0, atol=1e-12)
    np.testing.assert_allclose(pair_residual(dec, y).values, dp.values - da.values, rtol=0, atol=1e-12)
    # E_y = δ^value − δ^key_slot;  Π^{P−V} = δ^pair − δ^value
    np.testing.assert_allclose(value_time_contrast(dec, y).values, dv.values - dt.values, rtol=0, atol=1e-12)
    np.testing.assert_allclose(pi_pair_minus_value(dec, y).values, dp.values - dv.values, rtol=0, atol=1e-12)
    np.testing.assert_allclose(value_time_contrast(dec, y).by_map, dv.by_map - dt.by_map, rtol=0, atol=1e-12)
    np.testing.assert_allclose(gamma(dec, y, "value").by_map, da.by_map - dv.by_map, rtol=0, atol=1e-12)
    assert np.all(gamma(dec, y, "aligned").values == 0.0)
    assert dv.maps == tuple(m.name for m in dec.plan.maps[1:])


def test_zero_interaction_with_nonzero_direct_response() -> None:
    """core.md §3.3: a two-key commutative writer; value reassignment switches the winner while both
    cells have rekey response 1 → Γ_A^value = 0 and D_A^value(id) = 1."""
    h = history_from_records([
        {"stream": "s", "family": "f", "context": "c", "slot": 0, "task": "t0", "key": "A", "outcome": 0.9},
        {"stream": "s", "family": "f", "context": "c", "slot": 1, "task": "t1", "key": "B", "outcome": 0.1}])
    f = futures_from_tasks([{"stream": "s", "family": "f", "context": "c", "task": f"x{j}",
                                 "menu": ["A", "B"]} for j in range(3)])
    e = evaluator_from_rows([{"stream": "s", "task": f"x{j}", "key": a, "utility": u}
                             for j in range(3) for a, u in (("A", 1.0), ("B", 0.0))])
    for path in ("array", "reference"):
        dec = replay(h, f, e, commutative_agent(), cells="value", maps="derangements", path=path)
        assert dec.plan.map_names == ("id", "10")
        assert action_response(dec, "aligned").values.tolist() == [1.0]
        assert action_response(dec, "value").values.tolist() == [1.0]
        assert gamma(dec, "A", "value").values.tolist() == [0.0]
        assert direct_action_contrast(dec, "value").values.tolist() == [1.0]
        # utility: δ_U^aligned = 1 − 0, δ_U^value = 0 − 1 → Γ_U^value = 2; ΔU_value(id) = −1
        assert gamma(dec, "U", "value").values.tolist() == [2.0]
        assert delta_u_direct(dec, "value").values.tolist() == [-1.0]


# --------------------------------------------------------------------------- T_gr


def test_t_gr_deterministic_equals_between_cell_disagreement(bandit) -> None:
    dec = replay(bandit.history, bandit.futures, bandit.evaluator, load_agent("mean"),
                 cells="value,key_slot,rename", maps="derangements", draws=2, repeats=2, seed=4)
    for cell in ("value", "key_slot"):
        np.testing.assert_allclose(t_gr(dec, cell).values, direct_action_contrast(dec, cell).values, atol=1e-15)
        np.testing.assert_allclose(t_gr(dec, cell, maps="nonidentity").values,
                                   direct_action_contrast(dec, cell, maps="nonidentity").values, atol=1e-15)
        assert t_gr(dec, cell).estimate > 0
    np.testing.assert_allclose(t_gr(dec, "rename", maps="nonidentity").values,
                               direct_action_contrast(dec, "rename").values, atol=1e-15)
    assert np.all(t_gr(dec, "value", reference="value").values == 0.0)


_P_PLAIN = np.array([0.7, 0.1, 0.1, 0.1])
_P_MASKED = np.array([0.1, 0.1, 0.1, 0.7])


def _masked_aware_agent():
    """Stochastic policy: action law p if every visible outcome is observed, q once a masked one is seen."""
    def update(state, task, key, outcome):
        return state or bool(np.isnan(outcome))

    def act(state, task, menu, rng):
        p = _P_MASKED if state else _P_PLAIN
        return menu[int(rng.choice(len(menu), p=p))]

    return from_callables(lambda: False, update, act, name="mask-aware", stochastic=True)


def test_t_gr_stochastic_identical_and_different_laws() -> None:
    sub = make_bandit(n_streams=6, slots_per_block=6, n_future=24, rng=7)
    dec = replay(sub.history, sub.futures, sub.evaluator, _masked_aware_agent(), cells="value,mask",
                 maps="derangements", draws=2, repeats=2, seed=8)
    same = t_gr(dec, "value", maps="all")
    diff = t_gr(dec, "mask", maps="all")
    analytic = 0.5 * float(np.sum((_P_PLAIN - _P_MASKED) ** 2))   # 0.36
    assert abs(same.estimate) < 0.03
    assert abs(diff.estimate - analytic) < 0.03
    # the raw between-cell disagreement is far from both (it includes the within-cell noise)
    raw = disagreement(dec.actions[dec.cell_index("value"), :, :, 0], dec.actions[0, :, :, 1])
    assert raw > 0.3
    # estimates are reported unclipped: some streams/maps are negative under the null
    assert (same.by_map < 0).any()


def test_t_gr_needs_two_repeats(mean_dec) -> None:
    with pytest.raises(ValueError, match="repeats"):
        t_gr(mean_dec, "value")


def test_t_gr_three_repeats_formula(bandit) -> None:
    """With p repeats: mean cross disagreement − ½ (mean within-cell pair disagreement of each cell)."""
    ag = from_callables(lambda: None, lambda s, t, k, u: None,
                        lambda s, t, m, rng: m[int(rng.integers(2))], name="coin", stochastic=True)
    dec = replay(bandit.history, bandit.futures, bandit.evaluator, ag, cells="value", maps="", repeats=3, seed=2)
    yc, ye = dec.actions[1, 0, 0], dec.actions[0, 0, 0]   # (P, N)
    cross = np.mean([yc[r] != ye[s] for r in range(3) for s in range(3)], axis=0)
    pairs = [(0, 1), (0, 2), (1, 2)]
    wc = np.mean([yc[r] != yc[s] for r, s in pairs], axis=0)
    we = np.mean([ye[r] != ye[s] for r, s in pairs], axis=0)
    np.testing.assert_allclose(t_gr(dec, "value").values, _hand_pool(cross - 0.5 * (wc + we), dec), atol=1e-12)


# --------------------------------------------------------------------------- utility decomposition


@pytest.mark.parametrize("cell", ["value", "key_slot"])
def test_utility_decomposition_by_hand(mean_dec, cell: str) -> None:
    dec = mean_dec
    ud = utility_decomposition(dec, cell)
    n = np.arange(dec.n_tasks)
    c = dec.cell_index(cell)
    a_c, a_0 = dec.actions[c, 0, :, 0], dec.actions[0, 0, :, 0]       # (D, N) at ρ = id
    du = dec.utility[n, a_c] - dec.utility[n, a_0]
    sw = a_c != a_0
    assert ud.n_switches == int(sw.sum()) > 0
    assert ud.harm + ud.tie + ud.gain == pytest.approx(1.0, abs=1e-12)
    assert ud.harm == pytest.approx(float((du[sw] < 0).mean()), abs=1e-12)
    assert ud.tie == pytest.approx(float((du[sw] == 0).mean()), abs=1e-12)
    assert ud.gain == pytest.approx(float((du[sw] > 0).mean()), abs=1e-12)
    assert ud.conditional == pytest.approx(float(du[sw].mean()), abs=1e-12)
    np.testing.assert_allclose(ud.net.values, delta_u_direct(dec, cell).values, atol=1e-12)
    assert ud.net.estimate == pytest.approx(delta_u_direct(dec, cell).estimate, abs=1e-12)
    np.testing.assert_allclose(ud.switch_rate.values, direct_action_contrast(dec, cell).values, atol=1e-12)
    want_abs = np.mean([_hand_pool(np.abs(du[d]), dec) for d in range(2)], axis=0)
    np.testing.assert_allclose(ud.absolute.values, want_abs, atol=1e-12)
    assert np.all(ud.absolute.values >= np.abs(ud.net.values) - 1e-12)


def test_utility_decomposition_without_switches(bandit) -> None:
    dec = replay(bandit.history, bandit.futures, bandit.evaluator, commutative_agent(), cells="pair",
                 maps="derangements")
    ud = utility_decomposition(dec, "pair", maps="all")
    assert ud.n_switches == 0
    assert (ud.harm, ud.tie, ud.gain, ud.conditional) == (0.0, 0.0, 0.0, 0.0)
    assert np.all(ud.net.values == 0.0) and np.all(ud.switch_rate.values == 0.0)
