"""The measured-outcome executor: pools, arms, evaluator (against a plain per-task reference), world conversions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import replaylens as rl
from replaylens.errors import ConfigError
from replaylens.paper.data import DataError, load
from replaylens.paper.substrates.public import (
    ARMS,
    EvaluatorConfig,
    PublicConfig,
    PublicWorld,
    build_public,
    effective_cost,
    ridge_logistic_utility,
    select_designs,
    standardize,
)
from replaylens.records import check_inputs
from replaylens.rng import derive_rng

SEED = 20260901


@pytest.fixture(scope="module")
def data_dir(public_data_dir: Path) -> Path:
    """The session's directory with both verified copies (tests/conftest.py fetches them)."""
    return public_data_dir


@pytest.fixture(scope="module")
def world(data_dir: Path) -> PublicWorld:
    return build_public(3, seed=SEED, data_dir=data_dir)


# ------------------------------------------------------------------ an independent per-task reference


def ref_design(arm: str, Xc: np.ndarray, yc: np.ndarray, k: int = 24) -> list[int]:
    cov = [int(i) for i in np.argsort(Xc[:, 0], kind="stable")]

    def next_cov(sel: list[int]) -> int:
        return next(i for i in cov if i not in sel)

    if arm == "coverage":
        return cov[:k]
    if arm == "replicate":
        sel = [cov[0]]
        while len(sel) < k:
            d = np.linalg.norm(Xc - Xc[sel[-1]], axis=1)
            d[sel] = np.inf
            sel.append(int(np.argmin(d)))
        return sel
    sel = cov[: 4 if arm == "adaptive" else k // 2]
    while len(sel) < k:
        ys = yc[sel]
        if ys.min() == ys.max():
            sel.append(next_cov(sel))
            continue
        mp, mn = Xc[sel][ys == 1].mean(0), Xc[sel][ys == 0].mean(0)
        dvec = mp - mn
        dist = np.abs((Xc - (mp + mn) / 2) @ dvec) / np.linalg.norm(dvec)
        dist[sel] = np.inf
        sel.append(int(np.argmin(dist)))
    return sel


def ref_utility(Xs: np.ndarray, ys: np.ndarray, Xe: np.ndarray, ye: np.ndarray) -> float:
    w, b = np.zeros(Xs.shape[1]), 0.0
    for _ in range(80):
        p = 1 / (1 + np.exp(-(Xs @ w + b)))
        g = np.clip(Xs.T @ (p - ys) / len(ys) + 0.08 * w, -5, 5)
        gb = float(np.clip(np.mean(p - ys), -5, 5))
        w, b = np.clip(w - 0.12 * g, -25, 25), float(np.clip(b - 0.12 * gb, -25, 25))
    p = np.clip(1 / (1 + np.exp(-(Xe @ w + b))), 1e-6, 1 - 1e-6)
    return float(np.exp(np.mean(ye * np.log(p) + (1 - ye) * np.log(1 - p))))


@pytest.mark.parametrize("stratum", range(4))
def test_world_matches_the_per_task_reference(world: PublicWorld, data_dir: Path, stratum: int) -> None:
    fam, ctx = world.strata[stratum]
    X, y, _ = load(fam, data_dir=data_dir)
    Z = (X - X.mean(0)) / X.std(0)
    med = np.median(Z[:, 0])
    for r, split, q in [(0, "development", 0), (1, "adaptation", 7), (2, "future", 23), (0, "future", 11)]:
        j = ("development", "adaptation", "future").index(split)
        g = derive_rng(SEED, "public", fam, ctx, r, split, q)  # the task's own indexed draw
        if ctx == "iid":
            rows = g.choice(len(y), 192, replace=False)
            cand, ev = rows[:96], rows[96:]
        else:
            cand = g.choice(np.flatnonzero(Z[:, 0] <= med), 96, replace=False)
            ev = g.choice(np.flatnonzero(Z[:, 0] > med), 96, replace=False)
        np.testing.assert_array_equal(world.candidates[r, stratum, j, q], cand)
        np.testing.assert_array_equal(world.evaluation[r, stratum, j, q], ev)
        for a, arm in enumerate(ARMS):
            sel = ref_design(arm, Z[cand], y[cand])
            assert world.designs[r, stratum, j, q, a].tolist() == sel, (fam, ctx, arm)
            u = ref_utility(Z[cand][sel], y[cand][sel].astype(float), Z[ev], y[ev].astype(float))
            assert world.utility(split)[r, stratum, q, a] == round(u, 6)  # stored in micro-units


# ------------------------------------------------------------------ pools and arms


def test_pools_are_disjoint_and_shifted_sides_are_opposite(world: PublicWorld, data_dir: Path) -> None:
    for s, (fam, ctx) in enumerate(world.strata):
        X, _, _ = load(fam, data_dir=data_dir)
        z0 = standardize(X)[:, 0]
        med = np.median(z0)
        cand = world.candidates[:, s].reshape(-1, 96)
        ev = world.evaluation[:, s].reshape(-1, 96)
        both = np.concatenate([cand, ev], axis=1)
        assert all(len(set(row)) == 192 for row in both.tolist())  # distinct rows, disjoint pools
        if ctx == "shifted":
            assert (z0[cand] <= med).all() and (z0[ev] > med).all()
        else:
            assert (z0[cand] <= med).mean() == pytest.approx(0.5, abs=0.08)
        # every task draws its own pools
        assert len({tuple(row) for row in cand.tolist()}) == cand.shape[0]


def test_arm_rules(world: PublicWorld, data_dir: Path) -> None:
    fam, _ = world.strata[3]
    X, y, _ = load(fam, data_dir=data_dir)
    Z = standardize(X)
    cand = world.candidates[:, 3].reshape(-1, 96)
    Xc, yc = Z[cand], y[cand]
    d = select_designs(Xc, yc)
    assert d.shape == (cand.shape[0], 4, 24)
    for t in range(0, cand.shape[0], 17):
        cov = np.argsort(Xc[t, :, 0], kind="stable")
        assert d[t, 0].tolist() == cov[:24].tolist()  # coverage: the 24 smallest, pool order on ties
        assert d[t, 1, :4].tolist() == cov[:4].tolist()  # adaptive: 4-observation coverage warm start
        assert d[t, 3, :12].tolist() == cov[:12].tolist()  # mixed: first half coverage
        assert d[t, 2, 0] == cov[0]
        for k in range(1, 24):  # replicate: nearest unvisited to the latest
            dist = np.linalg.norm(Xc[t] - Xc[t, d[t, 2, k - 1]], axis=1)
            assert dist[d[t, 2, k]] == np.delete(dist, d[t, 2, :k]).min()
        assert all(len(set(row)) == 24 for row in d[t].tolist())
    # chunking does not change the result
    np.testing.assert_array_equal(select_designs(Xc[:40], yc[:40], chunk=7), d[:40])


def test_duplicate_rows_break_ties_by_pool_order() -> None:
    Xc = np.array([[[0.0, 1.0], [2.0, 0.0], [2.0, 0.0], [1.0, 5.0], [3.0, 1.0]]])
    yc = np.array([[0, 1, 1, 0, 1]])
    d = select_designs(Xc, yc, 4, arms=("replicate",))
    # start at the smallest first feature (pos 0); positions 1 and 2 are identical: pool order decides
    assert d[0, 0].tolist() == [0, 1, 2, 4]
    # one class only among the selected -> next coverage observation (no boundary yet)
    d = select_designs(Xc, np.zeros((1, 5), dtype=int), 5, arms=("adaptive",))
    assert d[0, 0].tolist() == np.argsort(Xc[0, :, 0], kind="stable").tolist()
    with pytest.raises(ConfigError, match="unknown arm"):
        select_designs(Xc, yc, 2, arms=("greedy",))


def test_evaluator_basics() -> None:
    rng = np.random.default_rng(3)
    Xs = rng.normal(size=(2, 1, 24, 3))
    ys = (Xs[..., 0] > 0).astype(float)
    Xe = rng.normal(size=(2, 96, 3))
    ye = (Xe[..., 0] > 0).astype(float)
    # zero steps: p = 0.5 everywhere, log loss = log 2, utility exactly 1/2
    u0 = ridge_logistic_utility(Xs, ys, Xe, ye, EvaluatorConfig(steps=0))
    np.testing.assert_allclose(u0, 0.5, rtol=1e-15)
    u = ridge_logistic_utility(Xs, ys, Xe, ye)
    assert (u > 0.6).all() and (u < 1).all()  # a separable signal is learned
    # flipping the evaluation labels makes the fitted model worse than chance
    assert (ridge_logistic_utility(Xs, ys, Xe, 1 - ye) < 0.5).all()
    for t in range(2):
        assert u[t, 0] == pytest.approx(ref_utility(Xs[t, 0], ys[t, 0], Xe[t], ye[t]), rel=1e-12)


# ------------------------------------------------------------------ the world


def test_world_shapes_and_determinism(world: PublicWorld, data_dir: Path) -> None:
    assert world.strata == (("breast-cancer", "iid"), ("breast-cancer", "shifted"), ("wine-red", "iid"),
                            ("wine-red", "shifted"))
    assert world.arms == ("coverage", "adaptive", "replicate", "mixed")
    assert world.streams == ("r00", "r01", "r02")
    for split in ("development", "adaptation", "future"):
        U = world.utility(split)
        assert U.shape == (3, 4, 24, 4)
        assert ((U > 0) & (U < 1)).all()
        np.testing.assert_array_equal(world.oracle(split), np.argmax(U, axis=-1))
        np.testing.assert_array_equal(world.oracle_utility(split), U.max(axis=-1))
    # splits are different tasks
    assert not np.array_equal(world.dev_utility, world.adapt_utility)
    assert not np.array_equal(world.adapt_utility, world.future_utility)
    assert set(world.data_sha256) == {"breast-cancer", "wine-red"}
    assert not world.future_utility.flags.writeable and not world.designs.flags.writeable
    np.testing.assert_array_equal(world.future_utility, np.round(world.future_utility, 6))  # micro-units
    np.testing.assert_array_equal(world.dev_means(), world.dev_utility.mean(axis=2))
    fold = world.select([2, 0])
    assert fold.streams == ("r02", "r00") and fold.history(np.zeros((2, 4, 24), dtype=int)).streams == fold.streams
    np.testing.assert_array_equal(fold.future_utility[0], world.future_utility[2])
    # reordering the families is building the world in that order (per-task generators)
    wine_first = world.reorder(("wine-red", "breast-cancer"))
    built = build_public(3, seed=SEED, data_dir=data_dir, datasets=("wine-red", "breast-cancer"))
    assert wine_first.strata == built.strata and wine_first.fingerprint() == built.fingerprint()
    for name in ("candidates", "evaluation", "designs"):
        np.testing.assert_array_equal(getattr(wine_first, name), getattr(built, name))
    assert not wine_first.designs.flags.writeable
    with pytest.raises(ConfigError, match="each family"):
        world.reorder(("wine-red",))
    # raw (unrounded) utilities are the same measurements
    raw = build_public(1, seed=SEED, data_dir=data_dir, datasets=("breast-cancer",), config=PublicConfig(decimals=None))
    np.testing.assert_allclose(raw.future_utility[0], world.future_utility[0, :2], atol=5e-7)
    assert not np.array_equal(raw.future_utility[0], world.future_utility[0, :2])
    # indexed draws: a stream does not depend on how many streams are built; seeds matter
    one = build_public(1, seed=SEED, data_dir=data_dir, datasets=("wine-red",))
    np.testing.assert_array_equal(one.future_utility[0], world.future_utility[0, 2:])
    assert one.fingerprint() == build_public(1, seed=SEED, data_dir=data_dir, datasets=("wine-red",)).fingerprint()
    other = build_public(1, seed=SEED + 1, data_dir=data_dir, datasets=("breast-cancer",), contexts=("iid",))
    assert not np.allclose(other.future_utility[0, 0], world.future_utility[0, 0])


def test_utility_levels(data_dir: Path) -> None:
    """Measured levels (8 streams) next to the paper's No update (= mixed) stratum utilities.

    Paper: breast cancer 0.834 / 0.755, wine 0.544 / 0.557 (iid / shift); pooled oracle ≈ 0.690.
    """
    w = build_public(8, seed=7, data_dir=data_dir)
    mixed = w.future_utility[..., 3].mean(axis=(0, 2))
    np.testing.assert_allclose(mixed, [0.834, 0.755, 0.544, 0.557], atol=0.012)
    assert w.oracle_utility().mean() == pytest.approx(0.690, abs=0.01)
    # replicate is the worst arm on iid breast cancer and the best on its shifted context
    bc = w.future_utility[:, :2].mean(axis=(0, 2))
    assert bc[0].argmin() == 2 and bc[1].argmax() == 2


def test_history_futures_evaluator(world: PublicWorld) -> None:
    R, S, T = 3, 4, 24
    actions = np.tile(np.arange(T) % 4, (R, S, 1))  # round-robin C, A, R, M
    h = world.history(actions)
    assert len(h) == R * S * T and h.streams == world.streams
    assert h.blocks("r01") == world.strata
    first = h.stream_slice("r01")
    np.testing.assert_array_equal(h.slot[first], np.arange(S * T))
    assert h.key[first][:5].tolist() == ["coverage", "adaptive", "replicate", "mixed", "coverage"]
    np.testing.assert_array_equal(h.outcome[first].reshape(S, T), world.chosen_utility(actions, "adaptation")[1])
    # labels are accepted too and give the same history
    assert world.history(np.array(world.arms)[actions]).equals(h)
    fut, ev = world.futures(), world.evaluator()
    assert len(fut) == R * S * T and fut.labels == world.arms and fut.strata == world.strata
    check_inputs(h, fut, ev)
    oracle = world.oracle()
    for task in fut.tasks[::37]:
        r, s = world.streams.index(task.stream), world.strata.index(task.stratum)
        np.testing.assert_array_equal(ev.utilities(task), world.future_utility[r, s, task.index])
        assert ev.oracle(task) == world.arms[oracle[r, s, task.index]]
    with pytest.raises(ConfigError, match="shape"):
        world.history(actions[:, :, :5])
    with pytest.raises(ConfigError, match="unknown arm"):
        world.history(np.full((R, S, T), "greedy"))


def test_replay_on_the_world_scores_the_mean_rule(world: PublicWorld) -> None:
    actions = np.tile(np.arange(24) % 4, (3, 4, 1))
    h, fut, ev = world.history(actions), world.futures(), world.evaluator()
    dec = rl.replay(h, fut, ev, rl.reference_agent("mean"), cells="value", maps=["id"], seed=1)
    aligned = dec.actions[dec.cell_index("aligned"), 0, 0, 0]
    # the Mean rule picks the arm with the largest mean adaptation utility of its own block
    means = world.adapt_utility[np.arange(3)[:, None, None], np.arange(4)[None, :, None], np.arange(24)[None, None, :],
                        actions].reshape(3, 4, 6, 4).mean(axis=2)
    expect = np.repeat(np.argmax(means, axis=-1)[..., None], 24, axis=-1).reshape(-1)
    codes = [fut.labels.index(world.arms[a]) for a in expect]
    assert aligned.tolist() == codes
    np.testing.assert_allclose(dec.chosen_utility()[dec.cell_index("aligned"), 0, 0, 0],
                               world.chosen_utility(np.argmax(means, axis=-1)[..., None].repeat(24, -1)).reshape(-1))


def test_missing_data_and_bad_arguments(tmp_path: Path, data_dir: Path) -> None:
    with pytest.raises(DataError, match="replaylens paper data fetch breast-cancer"):
        build_public(1, seed=1, data_dir=tmp_path)
    with pytest.raises(ConfigError):
        build_public(0, seed=1, data_dir=data_dir)
    with pytest.raises(ConfigError):
        build_public(1, seed=-1, data_dir=data_dir)
    with pytest.raises(ConfigError, match="context"):
        build_public(1, seed=1, data_dir=data_dir, datasets=("breast-cancer",), contexts=("ood",))
    with pytest.raises(ConfigError):
        PublicConfig(n_select=97)


def test_effective_cost() -> None:
    assert effective_cost("OCRR") == 24 and effective_cost("No update") == 24
    assert effective_cost("Extra sampling") == 72 == effective_cost("extra_sampling")
    assert effective_cost("extra-sampling", budget=10) == 30
