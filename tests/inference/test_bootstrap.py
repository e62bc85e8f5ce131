"""Tests for the cluster (stream-level) bootstrap."""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pytest
import scipy.stats as st

from replaylens.errors import ConfigError
from replaylens.inference import BootstrapResult, adjusted_level, cluster_bootstrap, sign_flip_test
from replaylens.inference import _bootstrap as bmod


def _normal(seed: int, shape: int | tuple[int, ...] = 48) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape)


def _same(a: BootstrapResult, b: BootstrapResult) -> None:
    """Bitwise equality of two results."""
    assert a.distribution.tobytes() == b.distribution.tobytes()
    assert a.distribution.shape == b.distribution.shape
    for name in ("estimate", "low", "high", "standard_error"):
        assert np.asarray(getattr(a, name)).tobytes() == np.asarray(getattr(b, name)).tobytes(), name
    for name in ("level", "n_clusters", "n_resamples", "method", "seed"):
        assert getattr(a, name) == getattr(b, name), name


# ---------------------------------------------------------------------------------------------- validation


def _msg(name: str, expected: str, got: str, func: str = "cluster_bootstrap") -> str:
    return re.escape(f"The '{name}' parameter of {func} must be {expected}. Got {got} instead.")


X = _normal(0, 10)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_resamples": 0}, _msg("n_resamples", "an int in the range [1, inf)", "0")),
        ({"n_resamples": -5}, _msg("n_resamples", "an int in the range [1, inf)", "-5")),
        ({"n_resamples": 100.0}, _msg("n_resamples", "an int in the range [1, inf)", "100.0")),
        ({"n_resamples": True}, _msg("n_resamples", "an int in the range [1, inf)", "True")),
        ({"level": 0.0}, _msg("level", "a float in the range (0, 1)", "0.0")),
        ({"level": 1}, _msg("level", "a float in the range (0, 1)", "1")),
        ({"level": 1.5}, _msg("level", "a float in the range (0, 1)", "1.5")),
        ({"level": float("nan")}, _msg("level", "a float in the range (0, 1)", "nan")),
        ({"level": "0.95"}, _msg("level", "a float in the range (0, 1)", "'0.95'")),
        (
            {"strata": np.zeros(9)},
            _msg("strata", "a 1-D array with one label per cluster (10 labels)", "an array of shape (9,)"),
        ),
        (
            {"strata": np.zeros((10, 2))},
            _msg("strata", "a 1-D array with one label per cluster (10 labels)", "an array of shape (10, 2)"),
        ),
        (
            {"strata": np.array([1, "a"] * 5, dtype=object)},
            r"The 'strata' parameter of cluster_bootstrap .* cannot be sorted",
        ),
    ],
)
def test_argument_validation(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        cluster_bootstrap(X, rng=0, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("values", "match"),
    [
        (
            np.zeros((4, 3, 2)),
            _msg("values", "a 1-D or 2-D array (clusters in rows)", "an array with 3 dimensions"),
        ),
        (
            np.float64(3.0),
            _msg("values", "a 1-D or 2-D array (clusters in rows)", "an array with 0 dimensions"),
        ),
        ([1.0], _msg("values", "an array with at least 2 clusters (rows)", "1")),
        ([], _msg("values", "an array with at least 2 clusters (rows)", "0")),
        (np.zeros((5, 0)), _msg("values", "an array with at least 1 column", "0")),
        ([1.0, np.nan, 2.0, np.inf], _msg("values", "an array of finite numbers", "2 non-finite entries")),
        (
            ["a", "b"],
            r"The 'values' parameter of cluster_bootstrap must be .* of real numbers\. Got non-numeric",
        ),
        (
            [1 + 2j, 3j],
            _msg("values", "a 1-D or 2-D array (clusters in rows) of real numbers", "complex numbers"),
        ),
    ],
)
def test_values_validation(values: object, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        cluster_bootstrap(values, rng=0)  # type: ignore[arg-type]


def test_rng_is_required_and_checked() -> None:
    with pytest.raises(ConfigError, match="rng must be a recorded seed"):
        cluster_bootstrap(X, rng=None)
    with pytest.raises(ConfigError, match="non-negative"):
        cluster_bootstrap(X, rng=-1)


def test_column_validation() -> None:
    one = cluster_bootstrap(X, n_resamples=50, rng=0)
    with pytest.raises(ConfigError, match=r"needs a result computed from \(n, k\) values"):
        one.column(0)
    two = cluster_bootstrap(np.c_[X, X], n_resamples=50, rng=0)
    with pytest.raises(ConfigError, match=re.escape("must be an int in the range [0, 2). Got 2 instead.")):
        two.column(2)
    with pytest.raises(ConfigError, match=re.escape("Got -1 instead.")):
        two.column(-1)


def test_adjusted_level() -> None:
    assert adjusted_level() == pytest.approx(0.95)
    assert adjusted_level(0.95, 2) == pytest.approx(0.975, abs=1e-15)
    assert adjusted_level(0.9, 4) == pytest.approx(0.975, abs=1e-15)
    with pytest.raises(
        ConfigError, match=_msg("n_contrasts", "an int in the range [1, inf)", "0", "adjusted_level")
    ):
        adjusted_level(0.95, 0)
    with pytest.raises(
        ConfigError, match=_msg("level", "a float in the range (0, 1)", "95", "adjusted_level")
    ):
        adjusted_level(95, 2)


# ------------------------------------------------------------------------------------------ basic semantics


def test_result_fields_and_percentile_definition() -> None:
    x = _normal(3)
    r = cluster_bootstrap(x, n_resamples=4000, level=0.9, rng=5)
    assert isinstance(r.estimate, float)
    assert r.estimate == pytest.approx(float(np.mean(x)), abs=1e-15)
    assert r.distribution.shape == (4000,)
    assert (r.low, r.high) == r.interval
    assert r.low == np.quantile(r.distribution, 0.05)
    assert r.high == np.quantile(r.distribution, 0.95)
    assert r.standard_error == pytest.approx(np.std(r.distribution, ddof=1), rel=1e-12)
    assert (r.level, r.n_clusters, r.n_resamples, r.method, r.seed) == (0.9, 48, 4000, "percentile", 5)
    # draws are means of resampled clusters: each is a mean of 48 values of x
    assert r.distribution.min() >= x.min() and r.distribution.max() <= x.max()


def test_result_is_frozen_and_json_friendly() -> None:
    r = cluster_bootstrap(np.c_[_normal(1), _normal(2)], n_resamples=200, rng=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.level = 0.5  # type: ignore[misc]
    with pytest.raises(ValueError, match="read-only"):
        r.distribution[0, 0] = 1.0
    d = r.to_dict()
    assert set(d) == {
        "estimate",
        "low",
        "high",
        "level",
        "n_clusters",
        "n_resamples",
        "method",
        "seed",
        "standard_error",
    }
    assert json.loads(json.dumps(d)) == d
    assert isinstance(d["estimate"], list) and all(type(v) is float for v in d["estimate"])
    one = cluster_bootstrap(_normal(1), n_resamples=1, rng=3)
    d1 = one.to_dict()
    assert type(d1["low"]) is float and d1["standard_error"] is None  # one draw: no SE (NaN -> None)
    json.dumps(d1, allow_nan=False)


def test_seed_recorded_only_for_int() -> None:
    x = _normal(4)
    assert cluster_bootstrap(x, n_resamples=10, rng=np.int64(9)).seed == 9  # type: ignore[arg-type]
    assert cluster_bootstrap(x, n_resamples=10, rng=np.random.default_rng(9)).seed is None
    assert cluster_bootstrap(x, n_resamples=10, rng=np.random.SeedSequence(9)).seed is None


def test_all_zero_values_give_a_point_interval() -> None:
    r = cluster_bootstrap(np.zeros(20), n_resamples=500, rng=1)
    assert r.estimate == 0.0 and r.interval == (0.0, 0.0) and r.standard_error == 0.0
    assert not r.distribution.any()
    r2 = cluster_bootstrap(np.zeros((20, 3)), n_resamples=500, rng=1)
    assert not np.any(r2.low) and not np.any(r2.high) and not np.any(r2.estimate)


@pytest.mark.parametrize("value", [0.1, 1 / 3, -7.77, 1e-300, 3e300])
@pytest.mark.parametrize("n", [2, 7, 48, 49])
def test_constant_values_give_exactly_that_constant(value: float, n: int) -> None:
    r = cluster_bootstrap(np.full(n, value), n_resamples=300, rng=2)
    assert r.estimate == r.low == r.high == value
    assert np.all(r.distribution == value)


# ------------------------------------------------------------------------------------------- determinism


def test_same_seed_same_bytes_different_seed_differs() -> None:
    x = _normal(5)
    a = cluster_bootstrap(x, n_resamples=3000, rng=123)
    b = cluster_bootstrap(x, n_resamples=3000, rng=123)
    _same(a, b)
    c = cluster_bootstrap(x, n_resamples=3000, rng=124)
    assert a.distribution.tobytes() != c.distribution.tobytes()
    # an int seed and a Generator built from it draw the same stream
    g = cluster_bootstrap(x, n_resamples=3000, rng=np.random.default_rng(123))
    assert g.distribution.tobytes() == a.distribution.tobytes() and g.seed is None


@pytest.mark.parametrize("chunk", [1, 7, 64, 1000])
@pytest.mark.parametrize("stratified", [False, True])
def test_chunking_does_not_change_results(
    monkeypatch: pytest.MonkeyPatch, chunk: int, stratified: bool
) -> None:
    x = _normal(6, (47, 3))
    strata = np.arange(47) % 5 if stratified else None
    ref = cluster_bootstrap(x, n_resamples=2001, rng=77, strata=strata)
    monkeypatch.setattr(bmod, "_CHUNK", chunk)
    _same(ref, cluster_bootstrap(x, n_resamples=2001, rng=77, strata=strata))


def test_cell_budget_does_not_change_results(monkeypatch: pytest.MonkeyPatch) -> None:
    x = _normal(7, 300)
    ref = cluster_bootstrap(x, n_resamples=999, rng=8)
    monkeypatch.setattr(bmod, "_MAX_CELLS", 1000)  # 3 draws per chunk for n = 300
    _same(ref, cluster_bootstrap(x, n_resamples=999, rng=8))


# --------------------------------------------------------------------------------------------- paired (n, k)


def test_paired_columns_equal_one_dimensional_runs() -> None:
    x = _normal(8, (48, 5))
    r = cluster_bootstrap(x, n_resamples=3000, level=0.9, rng=42)
    assert r.distribution.shape == (3000, 5)
    assert r.n_statistics == 5
    for j in range(5):
        alone = cluster_bootstrap(x[:, j], n_resamples=3000, level=0.9, rng=42)
        _same(r.column(j), alone)
        assert np.asarray(r.estimate)[j] == alone.estimate
        assert np.asarray(r.low)[j] == alone.low and np.asarray(r.high)[j] == alone.high


def test_paired_contrast_stays_paired() -> None:
    rng = np.random.default_rng(9)
    base = rng.normal(0.0, 5.0, size=48)  # large between-cluster spread shared by both arms
    arms = np.c_[base, base + 0.3 + rng.normal(0.0, 0.1, size=48)]
    r = cluster_bootstrap(arms, n_resamples=4000, rng=10)
    contrast = r.distribution[:, 1] - r.distribution[:, 0]
    direct = cluster_bootstrap(arms[:, 1] - arms[:, 0], n_resamples=4000, rng=10)
    # same resampled clusters in every row: the contrast of the draws is the draw of the contrast
    np.testing.assert_allclose(contrast, direct.distribution, rtol=0, atol=1e-12)
    assert contrast.std() < 0.05 < r.distribution[:, 0].std()


# ------------------------------------------------------------------------------------------------- strata


def test_stratified_draws_keep_stratum_sizes() -> None:
    labels = np.array(["a"] * 16 + ["b"] * 5 + ["c"] * 1 + ["d"] * 26)
    np.random.default_rng(0).shuffle(labels)
    layout = bmod._strata_layout(labels, labels.size, "test")
    counts = bmod._draw_counts(np.random.default_rng(1), labels.size, 500, layout)
    assert counts.shape == (48, 500)
    np.testing.assert_array_equal(counts.sum(axis=0), 48)
    for name, size in {"a": 16, "b": 5, "c": 1, "d": 26}.items():
        np.testing.assert_array_equal(counts[labels == name].sum(axis=0), size)
    np.testing.assert_array_equal(counts[labels == "c"], 1)  # a singleton stratum is always drawn once
    assert counts[labels == "a"].max() > 1  # really resampled with replacement


def test_stratified_with_constant_strata_is_degenerate() -> None:
    strata = np.repeat([0, 1, 2], 16)
    np.random.default_rng(3).shuffle(strata)
    values = np.array([1.0, -2.0, 4.0])[strata]  # constant within strata, exact arithmetic
    r = cluster_bootstrap(values, n_resamples=2000, rng=4, strata=strata)
    assert r.method == "percentile-stratified"
    assert np.all(r.distribution == 1.0) and r.interval == (1.0, 1.0)
    plain = cluster_bootstrap(values, n_resamples=2000, rng=4)
    assert plain.method == "percentile" and plain.high - plain.low > 0.5


def test_stratified_interval_is_narrower_when_strata_explain_variance() -> None:
    strata = np.repeat(np.arange(3), 16)
    values = np.array([-3.0, 0.0, 3.0])[strata] + _normal(11)
    strat = cluster_bootstrap(values, n_resamples=4000, rng=12, strata=strata)
    plain = cluster_bootstrap(values, n_resamples=4000, rng=12)
    assert strat.estimate == plain.estimate
    assert strat.standard_error < 0.6 * plain.standard_error


# ------------------------------------------------------------------------------------------- against scipy


def test_interval_agrees_with_scipy_percentile_bootstrap() -> None:
    x = np.random.default_rng(2024).normal(1.0, 2.0, size=48)
    ours = cluster_bootstrap(x, n_resamples=20_000, level=0.95, rng=11)
    ref = st.bootstrap(
        (x,),
        np.mean,
        method="percentile",
        n_resamples=20_000,
        confidence_level=0.95,
        rng=np.random.default_rng(12),
    )
    tol = 0.02 * x.std(ddof=1)
    assert abs(ours.low - ref.confidence_interval.low) < tol
    assert abs(ours.high - ref.confidence_interval.high) < tol
    assert ours.standard_error == pytest.approx(ref.standard_error, rel=0.03)


# ---------------------------------------------------------------------------------- calibration, size, speed


@pytest.mark.slow
def test_coverage_of_95_percent_interval() -> None:
    reps = 200
    covered = 0
    for i in range(reps):
        x = np.random.default_rng([99, i]).normal(size=48)
        r = cluster_bootstrap(x, n_resamples=2000, rng=i)
        covered += bool(r.low <= 0.0 <= r.high)
    assert st.binomtest(covered, reps, 0.95, alternative="less").pvalue > 0.001, covered


@pytest.mark.slow
def test_interval_and_sign_flip_agree_on_direction() -> None:
    """A clearly shifted sample is excluded by the interval and rejected by the test."""
    x = np.random.default_rng(5).normal(0.8, 1.0, size=48)
    r = cluster_bootstrap(x, n_resamples=5000, rng=1)
    assert r.low > 0.0
    assert sign_flip_test(x, n_resamples=5000, rng=2).pvalue < 0.01


def test_large_paired_run_completes() -> None:
    x = _normal(13, (48, 40))
    r = cluster_bootstrap(x, n_resamples=20_000, rng=14)
    assert r.distribution.shape == (20_000, 40)
    assert np.all(np.isfinite(r.distribution))
    low, high = np.asarray(r.low), np.asarray(r.high)
    assert low.shape == high.shape == (40,) and np.all(low < high)
