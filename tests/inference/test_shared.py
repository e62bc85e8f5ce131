"""The audit's shared resamples (issue 27) against the reference cluster_bootstrap / sign_flip_test.

The shared scheme draws differently (its own named block seeds, Lemire indices, 64 sign bits per word), so
it is compared with the reference *in distribution*, at a fixed seed, within Monte Carlo bounds derived
here (not tuned): with ``B`` draws on each side, an empirical ``p``-quantile of one distribution falls at
reference-CDF level ``p ± z·sqrt(2 p (1 - p) / B)`` (the sum of two independent binomial errors), and a
Monte Carlo p-value differs from another by at most ``z·sqrt(2 p (1 - p) / B)`` (+ the ``1 / (B + 1)`` of
each estimator); ``z = 5`` keeps the whole file's false-alarm rate below 1e-4.  The two-sample KS bound is
``c(α)·sqrt(2 / B)`` with ``c(α) = sqrt(-ln(α / 2) / 2)`` at ``α = 1e-4``.
"""

from __future__ import annotations

import importlib
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import require
from replaylens.errors import ConfigError
from replaylens.inference import cluster_bootstrap, shared_bootstrap, shared_sign_flip_tests, sign_flip_test
from replaylens.rng import derive_seed

shared = importlib.import_module("replaylens.inference._shared")

B = 20_000
Z = 5.0
ALPHA = 1e-4


def _data(n: int = 300, seed: int = 11) -> np.ndarray:
    """Skewed, symmetric and shifted columns (an action share, a utility contrast, an oracle contrast)."""
    rng = np.random.default_rng(seed)
    return np.c_[rng.binomial(12, 0.2, n) / 12, rng.exponential(0.3, n) - 0.25, rng.normal(0.03, 0.4, n)]


def _ks(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sample Kolmogorov-Smirnov statistic."""
    grid = np.sort(np.concatenate([a, b]))
    fa = np.searchsorted(np.sort(a), grid, side="right") / a.size
    fb = np.searchsorted(np.sort(b), grid, side="right") / b.size
    return float(np.max(np.abs(fa - fb)))


KS_BOUND = math.sqrt(-math.log(ALPHA / 2) / 2) * math.sqrt(2 / B)


# ------------------------------------------------------------------------ distribution against the reference


def test_bootstrap_distribution_matches_the_reference() -> None:
    v = _data()
    new = shared_bootstrap(v, n_resamples=B, seed=7, threads=2)[0]
    ref = cluster_bootstrap(v, n_resamples=B, rng=7)
    assert np.asarray(new.estimate).tobytes() == np.asarray(ref.estimate).tobytes()  # same estimator
    assert new.method == ref.method == "percentile" and new.n_resamples == ref.n_resamples == B
    for j in range(3):
        a, r = new.distribution[:, j], np.sort(ref.distribution[:, j])
        for p in (0.025, 0.1, 0.5, 0.9, 0.975):
            level = np.searchsorted(r, np.quantile(a, p), side="right") / B  # reference CDF at our quantile
            assert abs(level - p) <= Z * math.sqrt(2 * p * (1 - p) / B) + 1 / B, (j, p, level)
        assert _ks(a, r) <= KS_BOUND, j
        # the standard errors: relative MC error of a sample SD is about 1/sqrt(2B) on each side
        se_new, se_ref = float(np.asarray(new.standard_error)[j]), float(np.asarray(ref.standard_error)[j])
        assert abs(se_new / se_ref - 1) <= Z * math.sqrt(2 / (2 * B)), j


def test_sign_flip_null_and_pvalues_match_the_reference() -> None:
    v = _data(400, seed=3)
    cols = [v[:, 1], v[:, 2], v[:, 2] - 0.035]  # p-values near 0.06, 0.09 and 0.98
    new = shared_sign_flip_tests(np.column_stack(cols), n_resamples=B, seed=5, threads=2)
    for j, col in enumerate(cols):
        ref = sign_flip_test(col, n_resamples=B, rng=derive_seed(5, "ref", j))
        assert not new[j].exact and new[j].n_resamples == B
        assert new[j].statistic == ref.statistic
        p = (new[j].pvalue + ref.pvalue) / 2
        assert abs(new[j].pvalue - ref.pvalue) <= Z * math.sqrt(2 * p * (1 - p) / B) + 2 / (B + 1), j
        assert _ks(new[j].null_distribution, ref.null_distribution) <= KS_BOUND, j


def test_tiny_n_is_delegated_to_exact_enumeration() -> None:
    v = _data(10, seed=4)[:, 1:]
    new = shared_sign_flip_tests(v, n_resamples=2_000, seed=1)
    for j in range(2):
        ref = sign_flip_test(v[:, j], n_resamples=2_000, rng=1)
        assert new[j].exact and ref.exact and new[j].pvalue == ref.pvalue
        assert new[j].null_distribution.tobytes() == ref.null_distribution.tobytes()
    assert not shared_sign_flip_tests(v, n_resamples=1_000, seed=1)[0].exact  # 2**10 > 1000: Monte Carlo


# ------------------------------------------------------------------------------------- the draws themselves


def _lemire(raw: np.ndarray, n: int) -> np.ndarray:
    """Reference: Lemire's multiply-shift with rejection on the 32-bit words of raw 64-bit outputs (low half
    first): ``(w * n) >> 32`` of every word whose low half ``(w * n) mod 2**32`` is ``>= 2**32 mod n``."""
    words = np.stack([raw & 0xFFFFFFFF, raw >> 32], axis=1).reshape(-1)
    prod = words * np.uint64(n)
    return (prod >> 32)[(prod & 0xFFFFFFFF) >= (1 << 32) % n]


def test_lemire_rejection_leaves_every_index_one_word() -> None:
    # n = 3 * 2**30: w * n / 2**32 = 3w/4, so words 4j, 4j+1, 4j+2, 4j+3 give indices 3j, 3j, 3j+1, 3j+2 with
    # low halves 0, 3*2**30, 2**31, 2**30; the threshold 2**32 mod n = 2**30 rejects exactly the words 4j
    n = 3 * 2**30
    raw = np.arange(0, 4000, 2, dtype=np.uint64) | (np.arange(1, 4000, 2, dtype=np.uint64) << np.uint64(32))
    assert _lemire(raw, n).tolist() == list(range(3000))


@pytest.mark.parametrize("n", [7, 50_000, 3 * 2**30])
def test_index_draws_are_lemire_on_the_generators_words(n: int) -> None:
    """The draws of a block (``Generator.integers(0, n, dtype=int64)``) are the reference Lemire outputs of
    the same PCG64's raw words, rejections included (a quarter of the words at n = 3 * 2**30)."""
    m = 3 * 50_000
    got = np.random.default_rng(9).integers(0, n, size=(3, m // 3), dtype=np.int64).reshape(-1)
    assert got.tolist() == np.random.default_rng(9).integers(0, n, size=m, dtype=np.uint32).tolist()
    ref = _lemire(np.random.default_rng(9).bit_generator.random_raw(m), n)  # 2m words, at most 1/4 rejected
    assert got.tolist() == ref[:m].tolist()


def test_index_draws_are_uniform_chi_square() -> None:
    n, m = 5_000, 1_000_000
    counts = np.bincount(np.random.default_rng(2).integers(0, n, size=m, dtype=np.uint32), minlength=n)
    expected = m / n
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    df = n - 1
    assert abs(chi2 - df) <= Z * math.sqrt(2 * df)  # chi-square(df) ~ N(df, 2 df) at this df


def _choose_path(monkeypatch: pytest.MonkeyPatch, compiled: bool) -> None:
    """Send the shared resamples through the compiled loops (numba required) or through numpy's paths."""
    if compiled:
        if not importlib.import_module("replaylens.inference._compiled").compiled_available():
            require("fast", "numba (the fast extra) is not installed")
        monkeypatch.setattr(shared, "COMPILED_CELLS", 0)
    else:
        monkeypatch.setattr(shared, "compiled_available", lambda: False)


def _documented_grid(col: list[float]) -> list[float]:
    """The documented grid in plain Python: each value rounded (half to even) to a multiple of
    ``2**(E - b)``, ``E`` the binary exponent of the column's largest magnitude, ``b = 53 - ceil(log2 n)``."""
    bits = 53 - math.ceil(math.log2(len(col)))
    step = math.ldexp(1.0, math.frexp(max(abs(x) for x in col))[1] - bits)
    return [round(x / step) * step + 0.0 for x in col]


@pytest.mark.parametrize("compiled", [False, True])
def test_bootstrap_draws_are_the_documented_exact_sums(monkeypatch: pytest.MonkeyPatch, compiled: bool) -> None:
    """Block 0's resampled means, byte for byte, rebuilt from the documented spec on the numpy path and the compiled
    one: Lemire indices of the block's PCG64 words, counted; the centred values on their grid; each resampled sum
    exact (rational arithmetic here), then divided by n and added to the correctly rounded mean.  Magnitudes over
    twelve orders within a column, where a sum in floating point would not be exact."""
    _choose_path(monkeypatch, compiled)
    n = 70
    v = _data(n, seed=8) * 10.0 ** np.random.default_rng(8).integers(-6, 6, size=(n, 1))
    got = shared_bootstrap(v, n_resamples=5, seed=4)[0]
    index = _lemire(np.random.default_rng(derive_seed(4, "audit-bootstrap", 0)).bit_generator.random_raw(5 * n), n)
    counts = [np.bincount(index[n * b : n * (b + 1)], minlength=n).tolist() for b in range(5)]
    for j in range(3):
        col = [float(x) for x in v[:, j]]
        pivot = math.fsum(col) / n
        grid = _documented_grid([x - pivot for x in col])
        exact = [float(sum(Fraction(c) * Fraction(x) for c, x in zip(row, grid, strict=True))) for row in counts]
        want = [(s + 0.0) / n + pivot for s in exact]
        assert got.distribution[:, j].tobytes() == np.array(want).tobytes(), j


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 3000), orders=st.integers(0, 30), seed=st.integers(0, 2**32))
def test_the_grid_moves_a_value_half_a_step_at_most_and_makes_every_resampled_sum_exact(
        n: int, orders: int, seed: int) -> None:
    """A grid value is within half a step (``2**-b`` of the column's largest magnitude) of its value, on the grid
    already (rounding again changes nothing), never ``-0.0``; and a resampled sum -- any counts adding up to
    ``n``, the worst piled on the largest magnitude -- is exact through BLAS, in any order."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2)) * 10.0 ** rng.integers(-orders, orders + 1, size=(n, 2))
    grid = shared._on_grid(x)
    bits = 53 - math.ceil(math.log2(n)) if n > 1 else 53
    big = np.max(np.abs(x), axis=0)
    assert np.all(np.abs(grid - x) <= np.ldexp(1.0, np.frexp(big)[1] - bits - 1))
    assert shared._on_grid(grid).tobytes() == grid.tobytes() and not np.signbit(grid[grid == 0]).any()
    counts = rng.multinomial(n, np.full(n, 1 / n), size=3).astype(np.float64)
    counts[0] = 0.0
    counts[0, np.argmax(np.abs(x[:, 0]))] = n   # every draw on the column's largest value
    for order in (np.arange(n), rng.permutation(n)):
        got = counts[:, order] @ grid[order]
        for r in range(3):
            for j in range(2):
                exact = sum(Fraction(int(c)) * Fraction(float(g)) for c, g in zip(counts[r], grid[:, j], strict=True))
                assert got[r, j] == exact


def _documented_flip_sum(words: list[int], x: list[float]) -> float:
    """The documented null sum in plain Python: clusters in groups of four, each group's entry
    ``((s0 x0 + s1 x1) + s2 x2) + s3 x3`` (sign -1 where the cluster's bit is set), added from 0.0 group after
    group."""
    total = 0.0
    for g in range(len(x) // 4):
        entry = 0.0
        for b in range(4):
            i = 4 * g + b
            term = -x[i] if (words[i // 64] >> (i % 64)) & 1 else x[i]
            entry = term if b == 0 else entry + term
        total += entry
    return total


@pytest.mark.parametrize("compiled", [False, True])
def test_sign_flip_nulls_are_the_documented_sums(monkeypatch: pytest.MonkeyPatch, compiled: bool) -> None:
    """Block 0's null means, byte for byte, rebuilt from the documented spec (the signs are the bits of the
    block's PCG64 words; the sums add groups of four clusters in order), on the numpy path and the compiled one."""
    _choose_path(monkeypatch, compiled)
    v = _data(70, seed=8)[:, 1:] * np.array([1e12, 1e-6])   # magnitudes where another order changes bytes
    got = shared_sign_flip_tests(v, n_resamples=5, seed=4)
    raw = np.random.PCG64(derive_seed(4, "audit-signflip", 0)).random_raw(5 * 2).reshape(5, 2)
    for j in range(2):
        x = [float(a) for a in v[:, j]] + [0.0] * (128 - 70)
        want = [_documented_flip_sum([int(w) for w in raw[b]], x) / 70 for b in range(5)]
        assert got[j].null_distribution.tobytes() == np.array(want).tobytes(), j


# ------------------------------------------------------------------------------------------ reproducibility


@pytest.mark.parametrize("n", [50, 1_000])
def test_same_bytes_for_any_thread_count(n: int) -> None:
    v = _data(n, seed=6)
    runs = [shared_bootstrap(v, n_resamples=3 * shared.BLOCK + 17, seed=2, threads=t)[0] for t in (1, 2, 3)]
    flips = [shared_sign_flip_tests(v, n_resamples=3 * shared.BLOCK + 17, seed=2, threads=t) for t in (1, 2, 3)]
    for r in runs[1:]:
        assert r.distribution.tobytes() == runs[0].distribution.tobytes()
        assert np.asarray(r.low).tobytes() == np.asarray(runs[0].low).tobytes()
    for f in flips[1:]:
        assert [x.null_distribution.tobytes() for x in f] == [x.null_distribution.tobytes() for x in flips[0]]


def test_same_bytes_for_any_blas_thread_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """With threadpoolctl the blocks hold BLAS to one thread; without it BLAS uses all its threads."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    v = np.tile(_data(2_000, seed=6), 4) * np.arange(1, 13)  # 12 columns: products large enough to thread
    held = shared_bootstrap(v, n_resamples=600, seed=2, threads=2)[0].distribution.tobytes()
    held_flip = shared_sign_flip_tests(v, n_resamples=600, seed=2, threads=1)[2].null_distribution.tobytes()
    real_import = importlib.import_module

    def no_threadpoolctl(name: str) -> object:
        if name == "threadpoolctl":
            raise ImportError(name)
        return real_import(name)

    monkeypatch.setattr(shared.importlib, "import_module", no_threadpoolctl)
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        free = shared_bootstrap(v, n_resamples=600, seed=2, threads=2)[0].distribution.tobytes()
        free_flip = shared_sign_flip_tests(v, n_resamples=600, seed=2, threads=1)[2].null_distribution.tobytes()
    assert free == held and free_flip == held_flip


def test_same_seed_same_bytes_and_another_seed_differs() -> None:
    v = _data(200, seed=1)
    a = shared_bootstrap(v, n_resamples=700, seed=3)[0]
    b = shared_bootstrap(v, n_resamples=700, seed=3)[0]
    c = shared_bootstrap(v, n_resamples=700, seed=4)[0]
    assert a.distribution.tobytes() == b.distribution.tobytes() and a.seed == 3
    assert a.distribution.tobytes() != c.distribution.tobytes()
    fa = shared_sign_flip_tests(v, n_resamples=700, seed=3)
    fb = shared_sign_flip_tests(v, n_resamples=700, seed=3)
    assert [x.null_distribution.tobytes() for x in fa] == [x.null_distribution.tobytes() for x in fb]


def test_draws_are_shared_by_every_column_and_group() -> None:
    v = _data(500, seed=2)
    both = np.c_[v, v[:, ::-1], v[:, :1]]
    rows = shared_bootstrap(both, n_resamples=1_000, seed=8, groups=[3, 3, 1])
    assert rows[0].distribution.shape == (1_000, 3) and rows[2].distribution.shape == (1_000, 1)
    for j in range(3):
        assert rows[1].distribution[:, 2 - j].tobytes() == rows[0].distribution[:, j].tobytes()
    assert rows[2].distribution[:, 0].tobytes() == rows[0].distribution[:, 0].tobytes()
    assert np.asarray(rows[1].low)[::-1].tobytes() == np.asarray(rows[0].low).tobytes()
    flips = shared_sign_flip_tests(np.c_[v[:, 1], v[:, 2], v[:, 1]], n_resamples=1_000, seed=8)
    assert flips[0].null_distribution.tobytes() == flips[2].null_distribution.tobytes()
    assert flips[0].pvalue == flips[2].pvalue


def test_results_are_read_only_and_validated() -> None:
    r = shared_bootstrap(_data(30), n_resamples=50, seed=0)[0]
    assert not r.distribution.flags.writeable and r.n_statistics == 3
    assert r.column(1).distribution.shape == (50,)
    with pytest.raises(ConfigError, match="groups"):
        shared_bootstrap(_data(30), n_resamples=50, seed=0, groups=[2, 2])
    with pytest.raises(ConfigError, match="seed"):
        shared_bootstrap(_data(30), n_resamples=50, seed=-1)
    with pytest.raises(ConfigError, match="n_resamples"):
        shared_sign_flip_tests(_data(30), n_resamples=0, seed=0)


def test_summarize_takes_every_row_from_the_shared_resamples() -> None:
    from replaylens.agents import load_agent
    from replaylens.bandit import make_bandit
    from replaylens.replay import replay
    from replaylens.report import summarize

    sub = make_bandit(n_streams=12, slots_per_block=5, n_future=2)
    dec = replay(sub.history, sub.futures, sub.evaluator, load_agent("mean"))
    rows = summarize(dec, seed=3, n_resamples=999)
    values = np.hstack([np.c_[r.action.values, r.utility.values, r.oracle.values] for r in rows])
    ivs = shared_bootstrap(values, n_resamples=999, seed=3, groups=[3] * len(rows))
    tests = shared_sign_flip_tests(np.delete(values, np.s_[::3], axis=1), n_resamples=999, seed=3)
    assert len(rows) > 1
    for r, row in enumerate(rows):
        assert row.interval.distribution.shape == (999, 3) and row.interval.n_resamples == 999
        assert row.interval.distribution.tobytes() == ivs[r].distribution.tobytes()
        assert row.utility_test.null_distribution.tobytes() == tests[2 * r].null_distribution.tobytes()
        assert row.oracle_test.pvalue == tests[2 * r + 1].pvalue and not row.oracle_test.exact
        assert set(row.to_dict()) >= {"action_ci", "delta_utility_ci", "delta_utility_p", "delta_oracle_p"}


@pytest.mark.parametrize("n", [300, 3_000])
def test_columns_of_zeros_are_not_multiplied_and_change_nothing(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    """A column of zeros (an intervention that changed no decision) is left out of the sums: its resampled means
    and null values are exact zeros (+0.0), and every other column is the same bytes as with it kept (the
    bootstrap's sums are exact, the sign flips' added in a fixed order: neither depends on the other columns)."""
    v = _data(n, seed=5)
    z = np.zeros(n)
    for m in (np.c_[v, z, z, z], np.c_[z, v[:, 1], z], np.c_[z, z], np.c_[v[:, 2]]):
        monkeypatch.setattr(shared, "SKIP_ZERO_COLUMNS", True)
        boot = shared_bootstrap(m, n_resamples=600, seed=4)[0]
        flips = shared_sign_flip_tests(m, n_resamples=600, seed=4)
        assert boot.distribution.tobytes() == shared_bootstrap(m, n_resamples=600, seed=4)[0].distribution.tobytes()
        monkeypatch.setattr(shared, "SKIP_ZERO_COLUMNS", False)
        full = shared_bootstrap(m, n_resamples=600, seed=4)[0]
        full_flips = shared_sign_flip_tests(m, n_resamples=600, seed=4)
        dead = ~m.any(axis=0)
        assert not np.signbit(boot.distribution[:, dead]).any() and not boot.distribution[:, dead].any()
        assert boot.distribution.tobytes() == full.distribution.tobytes()
        assert np.asarray(boot.low).tobytes() == np.asarray(full.low).tobytes()
        assert np.asarray(boot.estimate).tobytes() == np.asarray(full.estimate).tobytes()
        for j, (a, b) in enumerate(zip(flips, full_flips, strict=True)):
            assert a.null_distribution.tobytes() == b.null_distribution.tobytes() and a.pvalue == b.pvalue
            assert a.pvalue == 1.0 or not dead[j]
