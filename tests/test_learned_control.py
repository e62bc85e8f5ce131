"""The same-architecture learned control with permutation augmentation (issue 14 point 4)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from replaylens.paper.experiments import all_reproductions
from replaylens.paper.experiments.learned_control import PAPER_CONTRASTS, PAPER_FITS, contrast_table, control_rows
from replaylens.paper.learned import (
    CONTROL_SEEDS,
    PAPER_SETTINGS,
    ControlConfig,
    ControlEpisodes,
    control_scores,
    init_recurrent,
    make_control_episodes,
    run_learned_control,
)
from replaylens.paper.learned._control import _ControlBatch, occupied_permutations
from replaylens.rng import derive_rng

REDUCED = ControlConfig(n_train=32, n_dev=16, n_held=12, seeds=CONTROL_SEEDS[:2],
                        settings=dataclasses.replace(PAPER_SETTINGS, updates=40))


def _episodes(n: int = 8, seed: int = 1) -> ControlEpisodes:
    return make_control_episodes(n, derive_rng(seed, "test-control"))


def test_episodes_hold_complete_blocks_balanced_targets_and_left_padding() -> None:
    ep = _episodes(40)
    assert np.bincount(ep.targets(), minlength=4).tolist() == [10, 10, 10, 10]
    assert set(ep.lengths.tolist()) <= {20, 24, 28, 32, 36, 40}
    for i in range(ep.n):
        occ = ep.keys[i, ep.keys.shape[1] - ep.lengths[i]:]
        assert np.all(ep.keys[i, : ep.keys.shape[1] - ep.lengths[i]] == -1)
        for b in range(0, occ.size, 4):
            assert sorted(occ[b : b + 4].tolist()) == [0, 1, 2, 3]
        u = ep.utilities[i, ep.keys.shape[1] - ep.lengths[i]:]
        assert np.all((u >= 0.43) & (u <= 0.57))


def test_pair_slot_transport_preserves_the_target_and_fixes_padding() -> None:
    ep = _episodes(16)
    perms = occupied_permutations(ep.lengths, ep.keys.shape[1], derive_rng(3, "p"))
    moved = ep.permute(perms)
    assert np.array_equal(moved.targets(), ep.targets())
    assert np.array_equal(moved.keys < 0, ep.keys < 0)
    assert not np.array_equal(moved.keys, ep.keys)


def test_padding_leaves_the_state_at_zero() -> None:
    ep = _episodes(4)
    p = init_recurrent(derive_rng(5, "init"), 4, 16, 0.3)
    extra = np.full((ep.n, 8), -1)
    padded = ControlEpisodes(np.concatenate([extra, ep.keys], axis=1),
                             np.concatenate([np.full((ep.n, 8), 0.5), ep.utilities], axis=1), ep.lengths)
    assert np.array_equal(control_scores(p, padded), control_scores(p, ep))


def test_training_gradient_matches_finite_differences() -> None:
    ep = _episodes(8)
    p0 = init_recurrent(derive_rng(2, "init"), 4, 16, 0.3)
    p = {k: v[None].copy() for k, v in p0.items()}
    batch = _ControlBatch(ep, [1], False, 16, np.dtype(np.float64))
    bce, grad = batch.loss_grad(p)
    for name in ("W", "P", "V", "Q"):
        for idx in ((0, 1, 2), (0, 3, 1)):
            q = {k: v.copy() for k, v in p.items()}
            q[name][idx] += 1e-6
            up, _ = batch.loss_grad(q, need_grad=False)
            assert (up[0] - bce[0]) / 1e-6 == pytest.approx(grad[name][idx], rel=1e-3, abs=1e-7)


def test_augmentation_draws_a_new_permutation_every_update() -> None:
    ep = _episodes(8)
    batch = _ControlBatch(ep, [7], True, 16, np.dtype(np.float64))
    p = {k: v[None].copy() for k, v in init_recurrent(derive_rng(2, "init"), 4, 16, 0.05).items()}
    batch.loss_grad(p)
    first = batch.z.copy()
    batch.loss_grad(p)
    assert not np.array_equal(first, batch.z)
    again = _ControlBatch(ep, [7], True, 16, np.dtype(np.float64))
    again.loss_grad(p)
    assert np.array_equal(again.z, first)


def test_augmented_training_input_keeps_its_target() -> None:
    """Under augmentation the target of the permuted input is the (fixed) training target."""
    ep = _episodes(16)
    batch = _ControlBatch(ep, [7], True, 16, np.dtype(np.float64))
    for _ in range(3):
        batch.epoch += 1
        batch._augment()
        z = batch.z[0]
        keys = np.where(z[..., :4].sum(-1) > 0, z[..., :4].argmax(-1), -1).T
        util = np.where(keys >= 0, (z[..., 4:].sum(-1) + 0.5).T, 0.5)
        permuted = ControlEpisodes(keys, util, ep.lengths)
        assert np.array_equal(permuted.keys < 0, ep.keys < 0)
        assert np.array_equal(permuted.targets(), ep.targets())
        assert np.array_equal(np.argmax(batch.y[0], axis=1), ep.targets())


def test_target_readout_of_an_oracle_scorer_is_perfect(monkeypatch: pytest.MonkeyPatch) -> None:
    """Exact key sums as scores: mapped-aligned and pair-replay target accuracy 1, pair action 0."""
    from replaylens.paper.learned import _control as lc

    held = _episodes(12)
    future = lc.make_control_future(held, derive_rng(4, "future"))
    monkeypatch.setattr(lc, "control_scores", lambda params, episodes: episodes.centered_sums())
    m = lc.evaluate_control({}, held, future, lc.evaluation_draws(held, 9)).means()
    assert m["aligned_acc"] == 1.0 and m["pair_acc"] == 1.0
    assert m["pair_action"] == 0.0 and m["utility_gap"] == 0.0 and m["oracle_gap"] == 0.0


@pytest.fixture(scope="module")
def reduced() -> object:
    return run_learned_control(REDUCED)


def test_reduced_design_is_deterministic_and_gives_every_paper_row(reduced: object) -> None:
    again = run_learned_control(REDUCED)
    for reg in ("ordinary", "augmented"):
        for a, b in zip(reduced.fits[reg], again.fits[reg], strict=True):  # type: ignore[attr-defined]
            assert a.model.dev_bce == b.model.dev_bce
            assert np.array_equal(a.evaluation.pair_action, b.evaluation.pair_action)
    rows = control_rows(reduced, n_resamples=200)  # type: ignore[arg-type]
    fits = [r for r in rows if r.table == "tab:learned-control-all-fits" and "mean" not in r.row]
    assert len(fits) == 2 * 2 * 6
    assert {r.paper for r in fits} <= {v for vals in PAPER_FITS.values() for v in vals}
    assert all(r.status in ("match", "differs") for r in fits)
    assert all("REDUCED design" in r.note for r in rows if r.table.startswith("tab:"))
    contrasts = [r for r in rows if r.table.startswith("tab:learned-control-") and "Ordinary" in r.row]
    assert {r.column.rsplit(" ", 1)[0] for r in contrasts if r.column.endswith("estimate")} == set(PAPER_CONTRASTS)
    # sign rows exist exactly for the contrasts whose paper interval excludes zero
    assert sum("excludes 0" in r.column for r in contrasts) == 3


def test_contrasts_are_augmented_minus_ordinary_means(reduced: object) -> None:
    table = contrast_table(reduced, n_resamples=200)  # type: ignore[arg-type]
    fits = reduced.fits  # type: ignore[attr-defined]
    want = np.mean([f.evaluation.pair_action.mean() for f in fits["augmented"]]) - np.mean(
        [f.evaluation.pair_action.mean() for f in fits["ordinary"]])
    assert table["Pair action change"][0] == pytest.approx(want, abs=1e-12)
    est, lo, hi = table["Pair replay target acc."]
    assert lo <= est <= hi


def test_learned_control_is_registered() -> None:
    rep = all_reproductions()["learned-control"]
    assert "tab:learned-control-all-fits" in rep.title


def test_pair_placebo_rows_carry_the_pair_preserving_label() -> None:
    from replaylens.paper.experiments.synthetic_suite import semantic_null

    rows = semantic_null()
    pair = [r for r in rows if r.row.startswith("Pair placebo − value null")]
    assert len(pair) == 9
    assert {r.table for r in pair} == {"tab:pair-preserving-detail"}
    assert not any(r.table == "tab:pair-preserving-detail" for r in rows if r not in pair)
