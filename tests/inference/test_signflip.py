"""Tests for the cluster sign-flip test and p-value formatting."""

from __future__ import annotations

import itertools
import json
import re

import numpy as np
import pytest
import scipy.stats as st
from hypothesis import given, settings
from hypothesis import strategies as hs

from replaylens.errors import ConfigError
from replaylens.inference import SignFlipResult, format_p, sign_flip_test
from replaylens.inference import _signflip as smod


def _msg(name: str, expected: str, got: str, func: str = "sign_flip_test") -> str:
    return re.escape(f"The '{name}' parameter of {func} must be {expected}. Got {got} instead.")


def _scipy_exact_p(x: np.ndarray) -> float:
    res = st.permutation_test(
        (x,), statistic=np.mean, permutation_type="samples", n_resamples=np.inf, alternative="two-sided"
    )
    return float(res.pvalue)


# ---------------------------------------------------------------------------------------------- validation

X = np.random.default_rng(0).normal(size=10)


@pytest.mark.parametrize(
    ("values", "kwargs", "match"),
    [
        (X, {"n_resamples": 0}, _msg("n_resamples", "an int in the range [1, inf)", "0")),
        (X, {"n_resamples": 2.5}, _msg("n_resamples", "an int in the range [1, inf)", "2.5")),
        (X, {"exact": "yes"}, _msg("exact", "'auto', True or False", "'yes'")),
        (X, {"exact": 1}, _msg("exact", "'auto', True or False", "1")),
        (
            np.ones(25),
            {"exact": True},
            _msg("exact", "'auto' or False for more than 24 clusters", "True with 25 clusters"),
        ),
        (
            np.ones((10, 2)),
            {},
            _msg("values", "a 1-D array (one value per cluster)", "an array with 2 dimensions"),
        ),
        ([3.0], {}, _msg("values", "an array with at least 2 clusters (rows)", "1")),
        ([1.0, np.inf, 0.0], {}, _msg("values", "an array of finite numbers", "1 non-finite entries")),
        (X, {"rng": None}, "rng must be a recorded seed"),
    ],
)
def test_validation(values: object, kwargs: dict[str, object], match: str) -> None:
    kwargs = {"rng": 0, **kwargs}
    with pytest.raises(ConfigError, match=match):
        sign_flip_test(values, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("p", "n", "match"),
    [
        (-0.1, 99, _msg("p", "a float in the range [0, 1]", "-0.1", "format_p")),
        (1.5, 99, _msg("p", "a float in the range [0, 1]", "1.5", "format_p")),
        (float("nan"), 99, _msg("p", "a float in the range [0, 1]", "nan", "format_p")),
        ("0.1", 99, _msg("p", "a float in the range [0, 1]", "'0.1'", "format_p")),
        (0.5, 0, _msg("n_resamples", "an int in the range [1, inf)", "0", "format_p")),
        (
            0.001,
            99,
            _msg("p", "at least 1/(n_resamples + 1) = 0.01 for a resampling p-value", "0.001", "format_p"),
        ),
    ],
)
def test_format_p_validation(p: object, n: int, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        format_p(p, n)  # type: ignore[arg-type]


def test_format_p() -> None:
    assert format_p(0.0234, 999) == "0.023"
    assert format_p(0.001, 999) == "0.001"
    assert format_p(0.000999, 20_000) == "<0.001"
    assert format_p(1 / 20_001, 20_000) == "<0.001"
    assert format_p(1.0, 10) == "1.000"
    assert format_p(1 / 1024, 1024) == "<0.001"  # exact test: n_resamples = 2**n


# ----------------------------------------------------------------------------------------- exact vs scipy


@pytest.mark.parametrize(
    "x",
    [
        np.random.default_rng(1).normal(0.4, 1.0, size=10),
        np.random.default_rng(2).normal(0.0, 1.0, size=10),
        np.array([0.0, 0.0, 1.0, 1.0, -1.0, 2.0, 2.0, -2.0, 3.0, 0.0]),  # ties and zeros
        np.array([0.5, 0.5, 0.5, -0.5, 0.0, 1.5, -1.5, 1.0, 1.0, -1.0]),
        np.array([1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 0.0, 0.0, 4.0, -4.0]),  # statistic exactly 0
        np.array([0.1, 0.2, 0.3, -0.6, 0.1, 0.2, 0.3, -0.6, 0.7, 0.7]),  # inexact decimals, near ties
    ],
)
def test_exact_pvalue_equals_scipy(x: np.ndarray) -> None:
    r = sign_flip_test(x, rng=0)  # 2**10 <= 20_000: exact under "auto"
    assert r.exact and r.n_resamples == 1024 and r.n_clusters == 10
    assert r.pvalue == pytest.approx(_scipy_exact_p(x), abs=1e-12)
    assert r.statistic == pytest.approx(float(np.mean(x)), abs=1e-15)
    assert r.pvalue * 1024 == round(r.pvalue * 1024)


@settings(max_examples=40, deadline=None)
@given(hs.lists(hs.integers(-3, 3), min_size=2, max_size=8))
def test_exact_pvalue_equals_brute_force(ints: list[int]) -> None:
    x = np.array(ints, dtype=np.float64) / 4.0  # exact arithmetic: ties are genuine ties
    t = abs(x.mean())
    null = [abs(np.dot(eps, x)) / x.size for eps in itertools.product((1.0, -1.0), repeat=x.size)]
    expected = sum(v >= t for v in null) / len(null)
    r = sign_flip_test(x, rng=0, exact=True)
    assert r.pvalue == expected


def test_exact_null_is_symmetric_and_starts_with_identity() -> None:
    x = np.random.default_rng(3).normal(size=11)
    r = sign_flip_test(x, rng=0, exact=True)
    null = np.sort(r.null_distribution)
    np.testing.assert_array_equal(null, -null[::-1])
    assert r.null_distribution[0] == pytest.approx(r.statistic, abs=1e-15)
    assert r.null_distribution[-1] == pytest.approx(-r.statistic, abs=1e-15)


def test_strongly_positive_sample_has_smallest_exact_p() -> None:
    x = 5.0 + np.random.default_rng(4).random(10)
    r = sign_flip_test(x, rng=0)
    assert r.exact and r.pvalue == 2 / 1024  # identity and all-flipped


# ------------------------------------------------------------------------------------------- Monte Carlo


def test_auto_switches_to_monte_carlo() -> None:
    x = np.random.default_rng(5).normal(size=15)  # 2**15 > 20_000
    r = sign_flip_test(x, rng=1)
    assert not r.exact and r.n_resamples == 20_000 and r.null_distribution.shape == (20_000,)
    assert sign_flip_test(x, rng=1, n_resamples=2**15).exact
    forced = sign_flip_test(x[:10], rng=1, exact=False, n_resamples=500)
    assert not forced.exact and forced.n_resamples == 500


@pytest.mark.parametrize("seed", range(5))
def test_monte_carlo_p_is_a_multiple_of_one_over_b_plus_one(seed: int) -> None:
    b = 999
    x = np.random.default_rng(seed).normal(0.2, 1.0, size=30)
    r = sign_flip_test(x, n_resamples=b, rng=seed)
    k = r.pvalue * (b + 1)
    assert abs(k - round(k)) < 1e-9 and 1 <= round(k) <= b + 1


def test_strongly_positive_sample_has_smallest_monte_carlo_p() -> None:
    x = 5.0 + np.random.default_rng(6).random(40)
    r = sign_flip_test(x, n_resamples=2000, rng=7)
    assert r.pvalue == 1 / 2001


def test_monte_carlo_agrees_with_exact() -> None:
    x = np.random.default_rng(8).normal(0.3, 1.0, size=14)
    exact = sign_flip_test(x, rng=0, exact=True)
    mc = sign_flip_test(x, n_resamples=20_000, rng=9, exact=False)
    assert abs(exact.pvalue - mc.pvalue) < 0.02
    # the Monte Carlo null draws from the exact null: its values all occur there
    assert np.isin(np.round(mc.null_distribution, 12), np.round(exact.null_distribution, 12)).all()


@pytest.mark.parametrize("exact", [True, False])
def test_all_zero_values_give_p_one(exact: bool) -> None:
    r = sign_flip_test(np.zeros(12), n_resamples=300, rng=1, exact=exact)
    assert r.statistic == 0.0 and r.pvalue == 1.0


def test_determinism_and_chunking(monkeypatch: pytest.MonkeyPatch) -> None:
    x = np.random.default_rng(10).normal(size=33)
    a = sign_flip_test(x, n_resamples=3001, rng=5)
    b = sign_flip_test(x, n_resamples=3001, rng=5)
    assert a.null_distribution.tobytes() == b.null_distribution.tobytes() and a.pvalue == b.pvalue
    assert a.seed == 5 and sign_flip_test(x, n_resamples=10, rng=np.random.default_rng(5)).seed is None
    c = sign_flip_test(x, n_resamples=3001, rng=6)
    assert a.null_distribution.tobytes() != c.null_distribution.tobytes()
    monkeypatch.setattr(smod, "_CHUNK", 7)
    d = sign_flip_test(x, n_resamples=3001, rng=5)
    assert a.null_distribution.tobytes() == d.null_distribution.tobytes() and a.pvalue == d.pvalue


def test_result_record() -> None:
    r = sign_flip_test(np.arange(1.0, 9.0), rng=3)
    assert isinstance(r, SignFlipResult)
    d = r.to_dict()
    assert d == {
        "statistic": 4.5,
        "pvalue": r.pvalue,
        "n_clusters": 8,
        "n_resamples": 256,
        "exact": True,
        "seed": 3,
    }
    assert json.loads(json.dumps(d)) == d
    with pytest.raises(ValueError, match="read-only"):
        r.null_distribution[0] = 0.0


# ---------------------------------------------------------------------------------------------- calibration


@pytest.mark.slow
def test_size_under_the_null() -> None:
    reps = 200
    rejections = 0
    for i in range(reps):
        x = np.random.default_rng([199, i]).normal(size=48)
        rejections += sign_flip_test(x, n_resamples=2000, rng=i).pvalue <= 0.05
    assert st.binomtest(rejections, reps, 0.05, alternative="greater").pvalue > 0.001, rejections
