"""Student t inference on per-stream values (issue 47): the product's verdicts and shown intervals.

One value per stream (the cluster summary ``c_r``); the mean's standard error ``s / sqrt(S)`` with ``S - 1``
degrees of freedom -- what CR1 (with the ``G / (G - 1)`` correction) and CR2 reduce to for an intercept-only
model with one value per cluster.  The distribution function comes from the regularized incomplete beta
function (a Lentz continued fraction), so the base install needs no scipy; ``scipy.stats.t`` is the tests'
oracle.  See docs/decisions.md, "Verdicts with known error rates (issue 47)".
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["MeanInference", "holm_adjusted", "mean_inference", "t_cdf", "t_ppf", "t_sf"]

_EPS = 1e-15
_TINY = 1e-300


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        step = d * c
        h *= step
        if abs(step - 1.0) < _EPS:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function ``I_x(a, b)``."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbt = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(lbt) * _betacf(a, b, x) / a
    return 1.0 - math.exp(lbt) * _betacf(b, a, 1.0 - x) / b


def t_sf(t: float, df: float) -> float:
    """``P(T > t)`` for Student's t with ``df`` degrees of freedom."""
    if math.isnan(t):
        return math.nan
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    tail = 0.5 * _betainc(0.5 * df, 0.5, df / (df + t * t))   # P(|T| > |t|) / 2
    return tail if t >= 0 else 1.0 - tail


def t_cdf(t: float, df: float) -> float:
    """``P(T <= t)``."""
    return 1.0 - t_sf(t, df) if t >= 0 else t_sf(-t, df)


@functools.lru_cache(maxsize=4096)
def t_ppf(q: float, df: float) -> float:
    """The ``q`` quantile of Student's t (bisection on the upper tail :func:`t_sf`, to the last bits)."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"t_ppf: q must be in (0, 1); got {q!r}")
    if q < 0.5:
        return -t_ppf(1.0 - q, df)
    if q == 0.5:
        return 0.0
    tail = 1.0 - q
    lo, hi = 0.0, 1.0
    while t_sf(hi, df) > tail:
        lo, hi = hi, 2.0 * hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        lo, hi = (mid, hi) if t_sf(mid, df) > tail else (lo, mid)
    return 0.5 * (lo + hi)


@dataclass(frozen=True)
class MeanInference:
    """The one-sample t summary of per-stream values: estimate, standard error, degrees of freedom."""

    estimate: float
    se: float
    sd: float
    n: int

    @property
    def df(self) -> int:
        return self.n - 1

    def interval(self, level: float) -> tuple[float, float]:
        """Two-sided ``level`` interval ``estimate ± t_{(1+level)/2, S-1} · se`` (NaN below 2 streams)."""
        if self.n < 2:
            return (math.nan, math.nan)
        h = t_ppf(0.5 + level / 2, self.df) * self.se
        return (self.estimate - h, self.estimate + h)

    def lower(self, alpha: float) -> float:
        """One-sided ``1 - alpha`` lower bound."""
        return math.nan if self.n < 2 else self.estimate - t_ppf(1 - alpha, self.df) * self.se

    def upper(self, alpha: float) -> float:
        """One-sided ``1 - alpha`` upper bound."""
        return math.nan if self.n < 2 else self.estimate + t_ppf(1 - alpha, self.df) * self.se

    def p_exceeds(self, margin: float) -> float:
        """One-sided p-value of ``H0: θ <= margin`` against ``θ > margin``."""
        if self.n < 2:
            return math.nan
        if self.se == 0.0:
            return 0.0 if self.estimate > margin else 1.0
        return t_sf((self.estimate - margin) / self.se, self.df)

    def detectable(self, alpha: float, power: float = 0.8) -> float:
        """The smallest excess over the margin a level-``alpha`` one-sided test detects with ``power`` at this
        spread: ``(t_{1-alpha} + t_{power}) · se`` (NaN below 2 streams)."""
        if self.n < 2:
            return math.nan
        return (t_ppf(1 - alpha, self.df) + t_ppf(power, self.df)) * self.se

    def streams_to_decide(self, margin: float, alpha: float, *, limit: int = 1_000_000) -> int | None:
        """How many streams would decide at this estimate and spread: the smallest ``S'`` whose one-sided
        bound clears ``margin`` (upper bound below it when the estimate is below, lower bound above it when the
        estimate is above); ``None`` when no number up to ``limit`` would (estimate at the margin, no spread)."""
        gap = abs(self.estimate - margin)
        if self.n < 2 or gap == 0.0 or not math.isfinite(gap):
            return None
        if self.sd == 0.0:
            return 2

        def decides(k: int) -> bool:
            return t_ppf(1 - alpha, k - 1) * self.sd / math.sqrt(k) < gap

        if not decides(limit):
            return None
        lo, hi = 2, 2
        while not decides(hi):
            lo, hi = hi, min(2 * hi, limit)
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (mid + 1, hi) if not decides(mid) else (lo, mid)
        return lo


def mean_inference(values: Sequence[float] | np.ndarray) -> MeanInference:
    """The t summary of per-stream values (finite values only; NaN statistics when none)."""
    x = np.asarray(values, dtype=np.float64)
    x = x[np.isfinite(x)]
    n = int(x.shape[0])
    if n == 0:
        return MeanInference(math.nan, math.nan, math.nan, 0)
    est = float(x.mean())
    if n < 2:
        return MeanInference(est, math.nan, math.nan, 1)
    sd = float(x.std(ddof=1))
    return MeanInference(est, sd / math.sqrt(n), sd, n)


def holm_adjusted(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (a hypothesis is rejected at family-wise level ``alpha`` when its
    adjusted p is at most ``alpha``); NaN stays NaN and does not count in the family."""
    order = sorted((p, i) for i, p in enumerate(pvalues) if not math.isnan(p))
    m = len(order)
    out = [math.nan] * len(pvalues)
    running = 0.0
    for k, (p, i) in enumerate(order):
        running = max(running, min(1.0, (m - k) * p))
        out[i] = running
    return out
