"""Independent learned-interface check (spec partA §3.6): encoder gradients, cells, substrate, responses."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from replaylens.errors import ConfigError
from replaylens.maps import DERANGEMENTS_4
from replaylens.paper.experiments import all_reproductions
from replaylens.paper.experiments.learned_interface import (
    N_EVAL,
    N_TRAIN,
    QUERIES,
    SETTINGS,
    SLOTS,
    cells,
    data,
    generator,
    responses,
    slot_draws,
)
from replaylens.paper.fitted import (
    FitSettings,
    InterfaceEpisodes,
    InterfaceFit,
    fit_interface,
    init_interface,
    interface_loss_grad,
    interface_scores,
)


def _episodes(e: int = 5, t: int = 6, j: int = 3, seed: int = 0) -> InterfaceEpisodes:
    rng = np.random.default_rng(seed)
    return InterfaceEpisodes(rng.integers(0, 4, (e, t)), rng.random((e, t)), rng.random((e, j, 4)), 4)


def test_interface_gradient_matches_finite_differences() -> None:
    ep = _episodes()
    params = init_interface([1, 2], 4, 3, FitSettings(init_scale=0.5, dim=3))
    loss, grad = interface_loss_grad(params, ep, 1e-2)
    worst = 0.0
    for name, p in params.items():
        for idx in np.ndindex(p.shape):
            hi = {k: v.copy() for k, v in params.items()}
            hi[name][idx] += 1e-6
            lo = {k: v.copy() for k, v in params.items()}
            lo[name][idx] -= 1e-6
            lp, lm = interface_loss_grad(hi, ep, 1e-2)[0], interface_loss_grad(lo, ep, 1e-2)[0]
            k = idx[0]
            worst = max(worst, abs((lp[k] - lm[k]) / 2e-6 - grad[name][idx]))
            assert lp[1 - k] == loss[1 - k]  # a model's loss depends on its own parameters only
    assert worst < 1e-6


def test_interface_scores_match_a_per_episode_recursion() -> None:
    ep = _episodes(e=3, t=5)
    params = init_interface([4], 4, 3, FitSettings(init_scale=0.7, dim=3))
    one = {k: v[0] for k, v in params.items()}
    got = interface_scores(one, ep.keys, ep.utilities)
    for e in range(3):
        h = np.zeros(3)
        for t in range(5):
            h = np.tanh(one["W"] @ h + one["P"][ep.keys[e, t]] + (ep.utilities[e, t] - 0.5) * one["v"] + one["b"])
        np.testing.assert_allclose(got[e], np.einsum("jad,d->ja", one["R"], h) + one["c"], atol=1e-12)


def test_fit_reduces_the_loss_and_is_deterministic() -> None:
    ep = _episodes(e=8, t=6, j=3)
    s = FitSettings(updates=40, dim=4)
    a, b = fit_interface(ep, [7], s)[0], fit_interface(ep, [7], s)[0]
    assert a.loss < a.initial_loss
    assert all(np.array_equal(a.params[k], b.params[k]) for k in a.params)
    with pytest.raises(ConfigError):
        fit_interface(InterfaceEpisodes(ep.keys, ep.utilities, None, 4), [7], s)
    with pytest.raises(ConfigError):
        InterfaceEpisodes(ep.keys + 4, ep.utilities, None, 4)


def test_substrate_shapes_and_disjoint_episodes() -> None:
    train, ev = data()
    assert train.keys.shape == (N_TRAIN, SLOTS) and ev.keys.shape == (N_EVAL, SLOTS)
    assert ev.targets is not None and ev.targets.shape == (N_EVAL, QUERIES, 4)
    assert np.all((ev.targets > 0) & (ev.targets < 1))
    assert not any(np.array_equal(ev.keys[i], train.keys[j]) for i in range(N_EVAL) for j in range(N_TRAIN))
    g1, g2 = generator(), generator()
    assert np.array_equal(g1.W, g2.W) and np.linalg.norm(g1.A, 2) == pytest.approx(0.9)


def test_cells_follow_the_intervention_definitions() -> None:
    _, ev = data()
    s_t, s_v = slot_draws(N_EVAL)
    assert not np.any(s_v == np.arange(SLOTS))  # derangements
    assert all(sorted(r) == list(range(SLOTS)) for r in s_t)
    rho = DERANGEMENTS_4[0].array
    c = cells(ev.keys, ev.utilities, rho, s_t, s_v)
    assert np.array_equal(c["aligned"][0], rho[ev.keys]) and np.array_equal(c["aligned"][1], ev.utilities)
    assert np.array_equal(c["rekey"][1], ev.utilities) and np.array_equal(c["value"][0], c["aligned"][0])
    for e in range(N_EVAL):  # pair moves complete (key, utility) pairs: same multiset as aligned
        al = sorted(zip(c["aligned"][0][e].tolist(), c["aligned"][1][e].tolist(), strict=True))
        pa = sorted(zip(c["pair"][0][e].tolist(), c["pair"][1][e].tolist(), strict=True))
        assert al == pa
        assert sorted(c["value"][1][e].tolist()) == sorted(ev.utilities[e].tolist())


def test_key_blind_encoder_has_no_rekey_response() -> None:
    _, ev = data()
    params = init_interface([3], 4, QUERIES, replace(SETTINGS, init_scale=0.5))
    one = {k: v[0].copy() for k, v in params.items()}
    one["P"][:] = 0.0  # the key input is switched off
    r = responses(InterfaceFit(one, 3, 0.0, 0.0), ev)
    assert r.a_rekey == 0.0 and r.da_rekey == 0.0 and r.comparisons == N_EVAL * QUERIES
    assert r.da_value == r.A  # with σ_p = σ_v and no key dependence the pair cell is the value cell


def test_short_fit_responses_are_well_formed() -> None:
    train, ev = data()
    fit = fit_interface(train, [1], replace(SETTINGS, updates=20))[0]
    r = responses(fit, ev)
    assert 0.0 <= r.A <= 1.0 and -1.0 <= r.O <= 1.0 and -1.0 <= r.U <= 1.0


def test_reproduction_is_registered() -> None:
    assert all_reproductions()["independent-learned-interface"].issue == "3"
