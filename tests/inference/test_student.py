"""The product's Student t (issue 47) against scipy's, and Holm's step-down against statsmodels' definition."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replaylens.inference import holm_adjusted, mean_inference, t_ppf, t_sf

stats = pytest.importorskip("scipy.stats")


@pytest.mark.parametrize("df", [1, 2, 3, 4, 7, 15, 47, 1000, 49_999])
def test_t_distribution_matches_scipy(df: int) -> None:
    for t in (-30.0, -3.0, -1.2, -0.1, 0.0, 0.3, 1.9, 2.5, 7.0, 40.0):
        want = float(stats.t.sf(t, df))
        assert math.isclose(t_sf(t, df), want, rel_tol=1e-9, abs_tol=1e-300)
    for q in (0.6, 0.8, 0.9, 0.95, 0.975, 0.99, 0.995, 0.9999, 0.05, 0.2):
        assert math.isclose(t_ppf(q, df), float(stats.t.ppf(q, df)), rel_tol=1e-10, abs_tol=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-1.0, 1.0, allow_nan=False), min_size=2, max_size=48))
def test_mean_inference_is_the_one_sample_t(values: list[float]) -> None:
    x = np.array(values)
    inf = mean_inference(x)
    sd = float(x.std(ddof=1))
    assert inf.estimate == pytest.approx(float(x.mean())) and inf.df == len(values) - 1
    if sd > 1e-9:
        lo, hi = inf.interval(0.95)
        want = stats.t.interval(0.95, len(values) - 1, loc=x.mean(), scale=sd / math.sqrt(len(values)))
        assert (lo, hi) == pytest.approx(want, rel=1e-9, abs=1e-12)
        p = inf.p_exceeds(0.1)
        assert p == pytest.approx(float(stats.ttest_1samp(x, 0.1, alternative="greater").pvalue), rel=1e-7,
                                  abs=1e-12)


def test_holm_adjusted_p_values() -> None:
    p = [0.01, 0.04, 0.03, math.nan, 0.005]
    adj = holm_adjusted(p)
    # sorted 0.005, 0.01, 0.03, 0.04 over m = 4: 0.02, 0.03, 0.06, 0.06 (monotone), NaN kept out of the family
    assert adj[4] == pytest.approx(0.02) and adj[0] == pytest.approx(0.03)
    assert adj[2] == pytest.approx(0.06) and adj[1] == pytest.approx(0.06) and math.isnan(adj[3])
    assert holm_adjusted([0.9, 0.8]) == [1.0, 1.0]


def test_degenerate_inputs() -> None:
    assert math.isnan(mean_inference([]).estimate)
    one = mean_inference([0.3])
    assert one.estimate == 0.3 and math.isnan(one.interval(0.95)[0]) and math.isnan(one.p_exceeds(0.0))
    flat = mean_inference([0.2] * 5)
    assert flat.interval(0.95) == (0.2, 0.2) and flat.p_exceeds(0.1) == 0.0 and flat.p_exceeds(0.3) == 1.0
