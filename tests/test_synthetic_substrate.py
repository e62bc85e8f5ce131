"""The hidden-world numerical substrate (core spec §2.4, §6): layout, draw index, executors, world."""

from __future__ import annotations

import numpy as np
import pytest

from replaylens.errors import ConfigError
from replaylens.paper.substrates.synthetic import (
    ARMS,
    BASE_SEED,
    LEARNING_BLOCKS,
    PHASES,
    SPLIT_SIZES,
    STRATA,
    TASKS_PER_STREAM,
    WORLD_ROLE,
    SyntheticWorld,
    build_synthetic,
    draw_seed,
    public_task,
    task_index,
    task_utilities,
)
from replaylens.paper.substrates.synthetic import _source as src_mod
from replaylens.paper.substrates.synthetic import _survival as surv_mod
from replaylens.paper.substrates.synthetic import _temporal as temp_mod
from replaylens.records import check_inputs


@pytest.fixture(scope="module")
def world48() -> SyntheticWorld:
    return build_synthetic(48)


@pytest.fixture(scope="module")
def small() -> SyntheticWorld:
    return build_synthetic(3, seed=7)


def _units(phase: str) -> tuple[tuple[str, str], ...]:
    return LEARNING_BLOCKS if phase == "adaptation" else STRATA


# ---------------------------------------------------------------- layout and draw index


def test_canonical_layout() -> None:
    assert ARMS == ("coverage", "adaptive", "replicate", "mixed")
    assert STRATA == (("source", "low"), ("source", "high"), ("temporal", "low"), ("temporal", "high"),
                      ("survival", "balanced"), ("survival", "rare"))
    assert STRATA[:4] == LEARNING_BLOCKS
    assert TASKS_PER_STREAM == 624 == 6 * 24 + 4 * 48 + 6 * 48
    # j enumerates every (stratum, phase, q) of a stream exactly once, family-major: dev, adapt, future
    js = [task_index(f, c, p, q) for f, c in STRATA for p in PHASES
          if p != "adaptation" or (f, c) in LEARNING_BLOCKS for q in range(SPLIT_SIZES[p])]
    assert js == list(range(TASKS_PER_STREAM))
    with pytest.raises(ConfigError):
        task_index("survival", "rare", "adaptation", 0)  # survival has no adaptation block
    with pytest.raises(ConfigError):
        task_index("source", "low", "development", 24)
    with pytest.raises(ConfigError):
        task_index("source", "balanced", "future", 0)


def test_draw_seed_is_the_rec_formula() -> None:
    ss = draw_seed(5, "temporal", "high", "future", 300, 2, seed=BASE_SEED)
    ref = np.random.SeedSequence([BASE_SEED, 5, 1, 1, 2, 300, 2])
    assert np.array_equal(ss.generate_state(8), ref.generate_state(8))
    # string and integer codes address the same draw; a base seed above 32 bits still works
    assert np.array_equal(draw_seed(5, 1, 1, 2, 300, 2).generate_state(4), ss.generate_state(4))
    big = draw_seed(0, "source", "low", "dev", 0, 4, seed=2**40 + 3)
    ref_big = np.random.SeedSequence([2**40 + 3, 0, 0, 0, 0, 0, 4])
    assert np.array_equal(big.generate_state(4), ref_big.generate_state(4))
    for bad in ({"role": 5}, {"role": -1}, {"j": TASKS_PER_STREAM}, {"r": -1}, {"r": 2**32}):
        kw = {"r": 0, "j": 0, "role": 0} | bad
        with pytest.raises(ConfigError):
            draw_seed(kw["r"], "source", "low", "future", kw["j"], kw["role"])
    with pytest.raises(ConfigError):
        draw_seed(0, "source", "low", "future", 0, 0, seed=-1)
    with pytest.raises(ConfigError):
        draw_seed(0, "source", "low", "later", 0, 0)


def test_draw_seed_is_injective_over_a_grid() -> None:
    states: dict[bytes, tuple[object, ...]] = {}
    entropies: set[tuple[int, ...]] = set()
    for r in (0, 1, 47, 1000):
        for f, c in STRATA:
            for p in PHASES:
                if p == "adaptation" and (f, c) not in LEARNING_BLOCKS:
                    continue
                for q in range(SPLIT_SIZES[p]):
                    j = task_index(f, c, p, q)
                    for role in range(WORLD_ROLE + 1):
                        ss = draw_seed(r, f, c, p, j, role)
                        ent = tuple(int(x) for x in np.atleast_1d(ss.entropy))
                        assert ent not in entropies
                        entropies.add(ent)
                        key = ss.generate_state(4).tobytes()
                        assert key not in states, f"{(r, f, c, p, q, role)} shares entropy with {states[key]}"
                        states[key] = (r, f, c, p, q, role)
    assert len(states) == 4 * TASKS_PER_STREAM * 5
    # another base seed gives other draws for the same coordinates
    assert draw_seed(0, "source", "low", "future", 72, 4, seed=1).generate_state(4).tobytes() not in states


# ---------------------------------------------------------------- executors


def test_source_exact_recovery_and_permutation_invariance() -> None:
    # three sources on grid points, no noise: coverage queries them exactly -> MSE 0 -> utility 1
    phase = np.array([2])
    sd = src_mod.SOURCE_SD[2]
    grid = src_mod.GRID
    pts = grid[[0, 4, 8]]
    noise = np.zeros((1, 4, 10))
    query = np.full((1, 4, 10, 2), 0.5)
    u = src_mod.run_source((pts / sd)[None], noise, query, phase, np.array([0]))
    assert u[0, 0] == pytest.approx(1.0, abs=1e-12)
    assert np.all((u > 0) & (u <= 1))
    # permutation-invariant matching: relabelling the latent sources changes nothing
    g = np.random.default_rng(np.random.SeedSequence([1, 2, 3]))
    z = g.standard_normal((64, 3, 2))
    nz = g.standard_normal((64, 4, 10))
    qr = g.random((64, 4, 10, 2))
    ph = np.full(64, 1)
    ctx = np.arange(64) % 2
    base = src_mod.run_source(z, nz, qr, ph, ctx)
    for perm in ([1, 0, 2], [2, 1, 0], [1, 2, 0]):
        assert np.allclose(src_mod.run_source(z[:, perm], nz, qr, ph, ctx), base, rtol=0, atol=1e-12)


def test_source_queries_follow_the_arm_rules() -> None:
    assert src_mod.GRID.shape == (9, 2)
    assert np.array_equal(src_mod.GRID[4], [0.0, 0.0])
    assert np.array_equal(src_mod.START, src_mod.GRID[0])
    # a single huge source at G[0]: the field peaks there; every arm starts there, replicate stays
    # within a few 0.04-steps of it, so its three estimates all sit at G[0]
    z = (np.repeat(src_mod.GRID[0][None], 3, axis=0) / src_mod.SOURCE_SD[1])[None]
    u = src_mod.run_source(z, np.zeros((1, 4, 10)), np.zeros((1, 4, 10, 2)), np.array([1]), np.array([0]))
    assert u[0, 2] == pytest.approx(1.0, abs=1e-3)


def test_temporal_all_ones_gives_the_smallest_grid_k() -> None:
    # u = 0 < P(y=1) always: every response is 1, the grid MLE is the first (smallest) k = exp(-6)
    z = np.array([0.3, -1.0])
    u = np.zeros((2, 4, 10))
    phase = np.array([1, 2])
    out = temp_mod.run_temporal(z, u, phase, np.array([0, 1]))
    kappa = np.asarray(temp_mod.TEMPORAL_MEAN)[phase] + temp_mod.TEMPORAL_SD * z
    want = np.exp(-np.abs(-6.0 - kappa) / temp_mod.UTILITY_SCALE)
    assert np.allclose(out, want[:, None], rtol=0, atol=1e-12)
    # the NLL table is the link evaluated on the fly
    k, d = temp_mod.GRID_K[17], 45
    p = temp_mod.response_prob(np.asarray(k), np.asarray(float(d)), np.asarray(temp_mod.TEMPORAL_ALPHA[1]))
    assert temp_mod._NLL[1, 1, d, 17] == pytest.approx(-np.log(p), rel=1e-14)
    assert temp_mod._NLL[1, 0, d, 17] == pytest.approx(-np.log(1.0 - p), rel=1e-14)


def test_temporal_grid_mle_recovers_k_from_many_informative_responses() -> None:
    # the response law is monotone in d; feeding the exact NLL of the true grid point wins the argmin
    nll = np.zeros((1, temp_mod.GRID_K.size))
    true = 150
    for d in range(1, 261):
        p = temp_mod.response_prob(temp_mod.GRID_K[true], np.asarray(float(d)), np.asarray(0.55))
        nll += p * temp_mod._NLL[0, 1, d] + (1 - p) * temp_mod._NLL[0, 0, d]  # expected NLL
    assert int(np.argmin(nll)) == true


def test_survival_fitter_and_selections() -> None:
    assert surv_mod.COVERAGE_RANKS.tolist() == [0, 18, 35, 53, 71, 88, 106, 124, 141, 159]
    g = np.random.default_rng(np.random.SeedSequence([11]))
    # the fitter lowers the training log loss from the zero-weight start (log 2)
    z = g.standard_normal((5, 10))
    m = (g.random((5, 10)) < 0.4).astype(float)
    y = (g.random((5, 10)) < 1 / (1 + np.exp(-(0.5 + 1.5 * z)))).astype(float)
    w = surv_mod.fit_logistic(z, m, y)
    p = np.clip(1 / (1 + np.exp(-(w[:, :1] + w[:, 1:2] * z + w[:, 2:3] * m))), 1e-6, 1 - 1e-6)
    loss = -(y * np.log(p) + (1 - y) * np.log(1 - p)).mean(axis=1)
    assert np.all(loss < np.log(2))
    assert np.all(np.abs(w) <= surv_mod.COEF_CLIP)
    # selections: 10 distinct pool points, with the arms' coverage prefixes
    u = g.random((6, surv_mod.N_UNIFORMS))
    t = 10 * u[:, :160]
    mm = (u[:, 160:320] < 0.46).astype(float)
    yy = (u[:, 320:480] < 0.5).astype(float)
    zz = (t - t.mean(1, keepdims=True)) / t.std(1, keepdims=True)
    cov = np.argsort(t, axis=1, kind="stable")[:, surv_mod.COVERAGE_RANKS]
    for sel, warm in ((surv_mod._adaptive(cov[:, :4], cov, zz, mm, yy), 4),
                      (surv_mod._adaptive(cov[:, :5], cov, zz, mm, yy), 5),
                      (surv_mod._replicate(cov, t, mm), 1)):
        assert sel.shape == (6, 10)
        assert all(len(set(row)) == 10 for row in sel.tolist())
        assert np.array_equal(sel[:, :warm], cov[:, :warm])
    # one class only: the adaptive arm keeps taking coverage points
    ones = np.ones_like(yy)
    assert np.array_equal(surv_mod._adaptive(cov[:, :4], cov, zz, mm, ones), cov)


# ---------------------------------------------------------------- the built world


def test_shapes_ranges_and_rounding(small: SyntheticWorld) -> None:
    assert small.dev_utility.shape == (3, 6, 24, 4)
    assert small.adapt_utility.shape == (3, 4, 48, 4)
    assert small.future_utility.shape == (3, 6, 48, 4)
    for split in ("development", "adaptation", "future"):
        u = small.utility(split)
        assert np.all(np.isfinite(u)) and u.min() >= 0.0 and u.max() <= 1.0
        assert np.array_equal(np.round(u, 6), u)  # six decimals: exact micro-units
        assert not u.flags.writeable
    with pytest.raises(ValueError):
        small.future_utility[0, 0, 0, 0] = 0.5


def test_oracle_is_the_first_maximum(world48: SyntheticWorld) -> None:
    for split in ("development", "adaptation", "future"):
        u = world48.utility(split)
        o = world48.oracle(split)
        flat_u, flat_o = u.reshape(-1, 4), o.reshape(-1)
        first = np.array([row.tolist().index(max(row.tolist())) for row in flat_u])
        assert np.array_equal(flat_o, first)
    # exact ties exist (e.g. survival arms that label the same points) and go to the lower index
    u = world48.future_utility.reshape(-1, 4)
    tied = (u == u.max(axis=1, keepdims=True)).sum(axis=1) > 1
    assert tied.any()
    o = world48.oracle("future").reshape(-1)
    assert np.all(o[tied] == np.argmax(u[tied] == u[tied].max(axis=1, keepdims=True), axis=1))


def test_every_cell_is_reproducible_on_its_own(world48: SyntheticWorld) -> None:
    g = np.random.default_rng(np.random.SeedSequence([2026, 3]))
    checked = set()
    for _ in range(24):
        r = int(g.integers(48))
        phase = PHASES[int(g.integers(3))]
        units = _units(phase)
        b = int(g.integers(len(units)))
        q = int(g.integers(SPLIT_SIZES[phase]))
        f, c = units[b]
        u = task_utilities(r, f, c, phase, q)
        assert np.array_equal(u, world48.utility(phase)[r, b, q]), (r, f, c, phase, q)
        checked.add(f)
    # one cell of every family and phase, deliberately
    for (f, c), phase in ((("survival", "rare"), "future"), (("temporal", "high"), "adaptation"),
                          (("source", "low"), "development")):
        b = _units(phase).index((f, c))
        assert np.array_equal(task_utilities(47, f, c, phase, 5), world48.utility(phase)[47, b, 5])
    assert checked  # the random draw touched at least one family


def test_determinism_and_stream_locality(small: SyntheticWorld) -> None:
    again = build_synthetic(3, seed=7)
    for name in ("dev_utility", "adapt_utility", "future_utility"):
        assert getattr(small, name).tobytes() == getattr(again, name).tobytes()
    assert small.fingerprint() == again.fingerprint()
    other = build_synthetic(3, seed=8)
    for name in ("dev_utility", "adapt_utility", "future_utility"):
        assert not np.array_equal(getattr(small, name), getattr(other, name))
    # each stream depends only on its own seeds: a 2-stream world is the prefix of the 3-stream one
    two = build_synthetic(2, seed=7)
    assert np.array_equal(two.future_utility, small.future_utility[:2])
    assert np.array_equal(two.adapt_utility, small.adapt_utility[:2])
    with pytest.raises(ConfigError):
        build_synthetic(0)
    with pytest.raises(ConfigError):
        build_synthetic(2, seed=-3)


def test_calibration_targets(world48: SyntheticWorld) -> None:
    ad = world48.adapt_utility
    means = ad.mean(axis=(0, 2))  # [block, arm]
    mixed = ARMS.index("mixed")
    replicate = ARMS.index("replicate")
    for b in (0, 1):  # source low / high: mixed dominates adaptation (the paper's hard constraint) ...
        others = np.delete(means[b], mixed)
        assert means[b, mixed] > others.max() + 0.05, means[b]
        # ... and in every stream (so a ledger controller settles on mixed; core §14)
        per_stream = ad[:, b].mean(axis=1)
        assert np.all(per_stream.argmax(axis=1) == mixed)
    for split in ("development", "adaptation", "future"):  # replicate is a poor temporal arm
        u = world48.utility(split)
        units = _units(split)
        for ctx in ("low", "high"):
            m = u[:, units.index(("temporal", ctx))].mean(axis=(0, 1))
            assert m.argmin() == replicate and m[replicate] < 0.15, (split, ctx, m)


def test_library_inputs(small: SyntheticWorld) -> None:
    g = np.random.default_rng(np.random.SeedSequence([5]))
    actions = g.integers(0, 4, size=(3, 4, 48))
    h = small.history(actions)
    f = small.futures()
    e = small.evaluator()
    check_inputs(h, f, e)
    assert len(h) == 3 * 4 * 48 and h.streams == ("r00", "r01", "r02")
    assert h.blocks("r01") == LEARNING_BLOCKS
    recs = list(h.records("r02"))
    assert [x.slot for x in recs] == list(range(192))
    x = recs[48 * 3 + 7]
    a = int(actions[2, 3, 7])
    assert (x.family, x.context, x.task, x.key) == ("temporal", "high", "r02/temporal/high/adapt/07", ARMS[a])
    assert x.outcome == small.adapt_utility[2, 3, 7, a]
    chosen = small.adapt_utility[2, 3, np.arange(48), actions[2, 3]]
    assert np.array_equal(small.selected_outcomes(actions)[2, 3], chosen)
    # futures: 6 strata x 48 per stream, canonical menu, no feeds (prefix rule decides)
    assert len(f) == 3 * 288 and f.strata == STRATA and f.labels == ARMS
    assert all(t.menu == ARMS and t.feeds is None for t in f.tasks)
    t = f.of("r01", ("survival", "rare"))[9]
    assert (t.task, t.index) == ("r01/survival/rare/future/09", 9)
    assert np.array_equal(e.utilities(t), small.future_utility[1, 5, 9])
    o = small.oracle("future")
    assert all(e.oracle(t) == ARMS[o[int(t.stream[1:]), STRATA.index(t.stratum), t.index]] for t in f.tasks)
    for bad in (actions[:, :3], actions.astype(float), actions + 4, actions - 1):
        with pytest.raises(ConfigError):
            small.history(bad)


def test_public_task_inputs_and_clock(small: SyntheticWorld) -> None:
    fut = small.task_inputs("future")
    assert len(fut) == 3 * 6 * 48
    clocks = {(x.family, x.context): x.clock for x in fut if x.r == 0}
    # T_{r,R}: the last slot of the feeding prefix (own block; survival: the whole stream)
    assert clocks == {STRATA[0]: 47, STRATA[1]: 95, STRATA[2]: 143, STRATA[3]: 191, STRATA[4]: 191, STRATA[5]: 191}
    ad = small.task_inputs("adaptation")
    assert [x.clock for x in ad[:200] if x.r == 0] == list(range(-1, 191))
    x = public_task(1, "temporal", "low", "adaptation", 3)
    assert (x.phase, x.index, x.global_index, x.clock, x.updates) == ("adaptation", 3, 2 * 120 + 24 + 3, 98, 99)
    assert x.task == "r01/temporal/low/adapt/03" and x.stratum == ("temporal", "low")
    dev = small.task_inputs("development")
    assert {x.clock for x in dev if x.family == "survival"} == {191}
    assert small.dev_means().shape == (3, 6, 4)


def test_world_drives_the_closed_loop(small: SyntheticWorld) -> None:
    from replaylens.paper.controllers import NoUpdate, run_closed_loop

    res = run_closed_loop(small, NoUpdate(ARMS), seed=1)
    assert np.array_equal(res.future_utility, small.future_utility[..., ARMS.index("mixed")])
    assert np.array_equal(res.adapt_utility, small.adapt_utility[..., ARMS.index("mixed")])
