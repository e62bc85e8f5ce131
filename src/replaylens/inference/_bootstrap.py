"""Cluster (stream-level) percentile bootstrap.

The unit of resampling is a cluster: one replicate stream, already pooled to one value (or one row of
``k`` paired statistics).  Draw ``b`` resamples ``n`` clusters with replacement, turns the indices into
per-cluster counts ``m_b`` and takes ``mean_b = m_b @ values / n``, so the ``k`` columns of a row share
the same resampled clusters and paired contrasts stay paired.

Reproducibility: all draws come from one Generator, chunk after chunk, and the weighted sums are
accumulated in cluster order (no BLAS: a CSR product that adds left to right, checked once against the
plain elementwise reference), so the bytes of the distribution depend only on the seed, not on the
chunk size, the BLAS build, or whether a column is bootstrapped alone or with others.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from replaylens.errors import ConfigError
from replaylens.rng import RngLike, check_rng

from ._ordered import ordered_row_sums, ordered_sums_available
from ._results import BootstrapResult

__all__ = ["adjusted_level", "cluster_bootstrap"]

#: draws per chunk (memory bound; results do not depend on it)
_CHUNK = 8192
#: at most this many (draw, cluster) cells are held at once
_MAX_CELLS = 1 << 21
#: the same bound for the CSR path (which runs in several threads at once; results do not depend on it)
_FAST_CELLS = 1 << 19


def _param_error(func: str, name: str, expected: str, got: str) -> ConfigError:
    return ConfigError(f"The {name!r} parameter of {func} must be {expected}. Got {got} instead.")


def _check_int(value: Any, name: str, func: str, low: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < low:
        raise _param_error(func, name, f"an int in the range [{low}, inf)", repr(value))
    return int(value)


def _check_level(value: Any, name: str, func: str) -> float:
    ok = not isinstance(value, (bool, np.bool_)) and isinstance(value, (int, float, np.integer, np.floating))
    if not ok or not 0.0 < float(value) < 1.0:
        raise _param_error(func, name, "a float in the range (0, 1)", repr(value))
    return float(value)


def _as_values(values: npt.ArrayLike, func: str, *, allow_2d: bool) -> np.ndarray:
    """Validated float64 copy of ``values`` (1-D, or 2-D when ``allow_2d``)."""
    shapes = "a 1-D or 2-D array (clusters in rows)" if allow_2d else "a 1-D array (one value per cluster)"
    if np.iscomplexobj(values):
        raise _param_error(func, "values", f"{shapes} of real numbers", "complex numbers")
    try:
        arr = np.array(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise _param_error(func, "values", f"{shapes} of real numbers", f"non-numeric data ({exc})") from exc
    if arr.ndim not in ((1, 2) if allow_2d else (1,)):
        raise _param_error(func, "values", shapes, f"an array with {arr.ndim} dimensions")
    if arr.shape[0] < 2:
        raise _param_error(func, "values", "an array with at least 2 clusters (rows)", str(arr.shape[0]))
    if arr.ndim == 2 and arr.shape[1] < 1:
        raise _param_error(func, "values", "an array with at least 1 column", "0")
    bad = int(np.count_nonzero(~np.isfinite(arr)))
    if bad:
        raise _param_error(func, "values", "an array of finite numbers", f"{bad} non-finite entries")
    return arr


def _seed_of(rng: RngLike) -> int | None:
    """The recorded int seed when ``rng`` is one, else ``None``."""
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, (bool, np.bool_)):
        return int(rng)
    return None


def _column_means(v: np.ndarray) -> np.ndarray:
    """Correctly rounded column means of ``(n, k)`` values (independent of memory layout)."""
    n = int(v.shape[0])

    def mean(col: np.ndarray) -> float:
        try:
            return math.fsum(col.tolist()) / n
        except OverflowError:  # the exact sum leaves the float range; the mean does not
            return math.fsum((col / n).tolist())

    return np.array([mean(v[:, j]) for j in range(v.shape[1])], dtype=np.float64)


def _weighted_sums(weights_t: np.ndarray, d: np.ndarray) -> np.ndarray:
    """``weights_t.T @ d`` for ``weights_t`` ``(n, c)`` and ``d`` ``(n, k)``, summed in cluster order.

    Vectorized over clusters in blocks: the products of a block are stacked after the running sum and
    added with ``np.add.accumulate`` along the cluster axis, which (unlike ``sum`` or a BLAS product,
    both pairwise/blocked) adds strictly left to right.  So each output cell is the same sequence of
    IEEE operations ``((0 + w_0 d_0) + w_1 d_1) + ...`` whatever ``c``, ``k`` or the block size is.
    """
    n, c = weights_t.shape
    k = d.shape[1]
    acc = np.zeros((c, k), dtype=np.float64)
    step = max(1, _MAX_CELLS // max(1, c * k))
    for r0 in range(0, n, step):
        r1 = min(n, r0 + step)
        blk = np.empty((r1 - r0 + 1, c, k), dtype=np.float64)
        blk[0] = acc
        np.multiply(weights_t[r0:r1, :, None], d[r0:r1, None, :], out=blk[1:])
        np.add.accumulate(blk, axis=0, out=blk)
        acc = blk[-1].copy()
    return acc


class _Strata(NamedTuple):
    """Draw layout: position ``p`` of a row draws uniformly from ``order[start[p] : start[p] + high[p]]``."""

    order: np.ndarray
    start: np.ndarray
    high: np.ndarray
    sizes: np.ndarray


def _strata_layout(strata: npt.ArrayLike, n: int, func: str) -> _Strata:
    expected = f"a 1-D array with one label per cluster ({n} labels)"
    try:
        labels = np.asarray(strata)
        _, codes = np.unique(labels, return_inverse=True)
    except (TypeError, ValueError) as exc:
        raise _param_error(func, "strata", expected, f"labels that cannot be sorted ({exc})") from exc
    if labels.ndim != 1 or labels.shape[0] != n:
        raise _param_error(func, "strata", expected, f"an array of shape {labels.shape}")
    codes = codes.reshape(-1)
    order = np.argsort(codes, kind="stable")
    sizes = np.bincount(codes)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    sorted_codes = codes[order]
    return _Strata(order=order, start=starts[sorted_codes], high=sizes[sorted_codes], sizes=sizes)


def _draw_counts(gen: np.random.Generator, n: int, c: int, layout: _Strata | None) -> np.ndarray:
    """Per-cluster counts of ``c`` resamples, shape ``(n, c)`` (column ``b`` sums to ``n``).

    Indices are drawn row after row (``size=(c, n)``) from ``gen``, so consecutive chunks give the same
    draws as one large chunk.  With ``layout`` each stratum keeps its size in every resample.
    """
    if layout is None:
        idx = gen.integers(0, n, size=(c, n))
    else:
        idx = layout.order[layout.start + gen.integers(0, layout.high, size=(c, n))]
    flat = idx * c + np.arange(c)[:, None]
    counts = np.bincount(flat.ravel(), minlength=n * c).reshape(n, c)
    return counts.astype(np.float64)


def _draw_counts_rows(gen: np.random.Generator, n: int, c: int, layout: _Strata | None) -> np.ndarray:
    """The counts of :func:`_draw_counts` (same draws) in draw-major layout, shape ``(c, n)``."""
    if layout is None:
        idx = gen.integers(0, n, size=(c, n))
    else:
        idx = layout.order[layout.start + gen.integers(0, layout.high, size=(c, n))]
    idx += (np.arange(c, dtype=idx.dtype) * n)[:, None]
    counts = np.bincount(idx.reshape(-1), minlength=n * c).reshape(c, n)
    return counts.astype(np.float64)


def _resampled_deviation(
    gen: np.random.Generator, centered: np.ndarray, n_resamples: int, layout: _Strata | None, *, fast: bool
) -> np.ndarray:
    """``(n_resamples, k)`` resampled means of ``centered`` (draw minus pivot), chunk after chunk.

    ``fast`` sums each chunk with one CSR product (:mod:`._ordered`); otherwise with the reference
    :func:`_weighted_sums`.  Both give the same bytes from the same draws.
    """
    n, k = centered.shape
    deviation = np.empty((n_resamples, k), dtype=np.float64)
    rows = max(1, min(_CHUNK, min(_MAX_CELLS, _FAST_CELLS if fast else _MAX_CELLS) // n))
    for start in range(0, n_resamples, rows):
        c = min(rows, n_resamples - start)
        if fast:
            sums = ordered_row_sums(_draw_counts_rows(gen, n, c, layout), centered)
        else:
            sums = _weighted_sums(_draw_counts(gen, n, c, layout), centered)
        deviation[start : start + c] = sums / n
    return deviation


def cluster_bootstrap(
    values: npt.ArrayLike,
    *,
    n_resamples: int = 20_000,
    level: float = 0.95,
    rng: RngLike,
    strata: npt.ArrayLike | None = None,
) -> BootstrapResult:
    """Percentile bootstrap interval of the mean over clusters.

    ``values``: one value per cluster, shape ``(n,)``, or ``k`` paired statistics, shape ``(n, k)``
    (every draw uses the same resampled clusters for all columns).  ``strata``: optional labels, one per
    cluster; clusters are then resampled within each stratum, keeping stratum sizes
    (``method="percentile-stratified"``).  The estimate is the plain mean over all ``n`` clusters and the
    interval holds the ``(1-level)/2`` and ``1-(1-level)/2`` quantiles of the ``n_resamples`` draws.
    """
    func = "cluster_bootstrap"
    n_resamples = _check_int(n_resamples, "n_resamples", func, 1)
    level = _check_level(level, "level", func)
    arr = _as_values(values, func, allow_2d=True)
    one_d = arr.ndim == 1
    v = arr.reshape(arr.shape[0], -1)
    n, k = v.shape
    layout = None if strata is None else _strata_layout(strata, n, func)
    gen = check_rng(rng)

    # Centre on the correctly rounded mean, then refine it by the mean of the residuals: for a constant
    # column the residuals are one exact tiny number, so estimate and every draw equal that constant.
    pivot = _column_means(v)
    centered = v - pivot
    estimate = pivot + _column_means(centered)
    deviation = _resampled_deviation(gen, centered, n_resamples, layout, fast=ordered_sums_available())
    distribution = pivot + deviation

    tail = (1.0 - level) / 2.0
    columns = [np.ascontiguousarray(distribution[:, j]) for j in range(k)]
    bounds = np.array([np.quantile(col, [tail, 1.0 - tail]) for col in columns])
    # the SE is shift invariant: take it from the deviations (accurate, and no overflow for huge values)
    spread = [np.ascontiguousarray(deviation[:, j]) for j in range(k)]
    se = np.array([float(np.std(col, ddof=1)) if n_resamples > 1 else math.nan for col in spread])

    def shaped(a: np.ndarray) -> float | np.ndarray:
        return float(a[0]) if one_d else a

    return BootstrapResult(
        estimate=shaped(estimate),
        low=shaped(np.ascontiguousarray(bounds[:, 0])),
        high=shaped(np.ascontiguousarray(bounds[:, 1])),
        level=level,
        n_clusters=n,
        n_resamples=n_resamples,
        method="percentile" if layout is None else "percentile-stratified",
        seed=_seed_of(rng),
        distribution=columns[0] if one_d else distribution,
        standard_error=shaped(se),
    )


def adjusted_level(level: float = 0.95, n_contrasts: int = 1) -> float:
    """Bonferroni-adjusted individual confidence level ``1 - (1 - level) / n_contrasts``.

    For example ``adjusted_level(0.95, 2) == 0.975`` for two co-primary contrasts.
    """
    level = _check_level(level, "level", "adjusted_level")
    n_contrasts = _check_int(n_contrasts, "n_contrasts", "adjusted_level", 1)
    return 1.0 - (1.0 - level) / n_contrasts
