"""The four sampling arms over a candidate pool, vectorized across tasks.

Every function takes a batch of T tasks: candidate features ``Xc`` [T, P, d] (standardized) and labels
``yc`` [T, P] in {0, 1}, and returns pool positions [T, n] in selection order.  Exact-index ties go to
the original pool order (``argmin``/stable sort return the first position).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from ....errors import ConfigError

__all__ = ["ARMS", "CoverageMode", "adaptive_fill", "coverage_order", "select_designs"]

ARMS: tuple[str, ...] = ("coverage", "adaptive", "replicate", "mixed")
"""The sampling arms in canonical (source) order C, A, R, M."""

CoverageMode = Literal["prefix", "even"]

ADAPTIVE_WARM_START = 4


def coverage_order(Xc: np.ndarray, n: int, mode: CoverageMode = "prefix") -> np.ndarray:
    """[T, P] pool positions in coverage order.

    ``prefix`` (default, the paper's literal wording): increasing first standardized feature, ties by pool
    order (stable sort).  ``even``: the n evenly spaced ranks of that order first, then the remaining
    positions in sorted order (the alternative reading kept as an option).
    """
    order = np.argsort(Xc[:, :, 0], axis=1, kind="stable")
    if mode == "prefix":
        return order
    if mode != "even":
        raise ConfigError(f"coverage mode must be 'prefix' or 'even'; got {mode!r}")
    P = order.shape[1]
    ranks = np.round(np.linspace(0, P - 1, n)).astype(np.int64)
    rest = np.setdiff1d(np.arange(P), ranks)
    return np.concatenate([order[:, ranks], order[:, rest]], axis=1)


def _next_coverage(cov: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """[T] the first position in coverage order that is not yet selected."""
    free_in_cov = ~np.take_along_axis(mask, cov, axis=1)
    return cov[np.arange(cov.shape[0]), np.argmax(free_in_cov, axis=1)]


def adaptive_fill(Xc: np.ndarray, yc: np.ndarray, cov: np.ndarray, chosen: np.ndarray, n: int) -> np.ndarray:
    """Extend the selections ``chosen`` [T, k] to n positions with the adaptive (centroid-boundary) rule.

    Each step computes the centroids μ₊, μ₋ of the selected observations' labels and picks the unvisited
    candidate minimising |(x − (μ₊+μ₋)/2)·(μ₊−μ₋)| / ‖μ₊−μ₋‖ (the perpendicular-bisector hyperplane in all
    standardized features).  When the selected set has one class only (or μ₊ = μ₋ exactly, so there is no
    boundary) the next coverage observation is taken instead.
    """
    T, P, d = Xc.shape
    rows = np.arange(T)
    sel = np.empty((T, n), dtype=np.int64)
    k0 = chosen.shape[1]
    sel[:, :k0] = chosen
    mask = np.zeros((T, P), dtype=bool)
    pos_lab = np.asarray(yc) == 1
    # running class sums in selection order (the order a per-task ``X[sel][y == 1].mean(0)`` adds them)
    sum_p, sum_n = np.zeros((T, d)), np.zeros((T, d))
    n_p, n_n = np.zeros(T), np.zeros(T)

    def add(pick: np.ndarray) -> None:
        mask[rows, pick] = True
        x = Xc[rows, pick]
        lab = pos_lab[rows, pick]
        sum_p[lab] += x[lab]
        sum_n[~lab] += x[~lab]
        n_p[lab] += 1.0
        n_n[~lab] += 1.0

    for k in range(k0):
        add(chosen[:, k])
    for k in range(k0, n):
        mu_p = sum_p / np.maximum(n_p, 1.0)[:, None]
        mu_n = sum_n / np.maximum(n_n, 1.0)[:, None]
        dvec = mu_p - mu_n
        mid = (mu_p + mu_n) / 2.0
        norm = np.sqrt(np.einsum("td,td->t", dvec, dvec))
        no_boundary = (n_p == 0) | (n_n == 0) | (norm == 0.0)
        proj = np.matmul(Xc - mid[:, None, :], dvec[:, :, None])[:, :, 0]
        dist = np.abs(proj) / np.where(norm > 0, norm, 1.0)[:, None]
        dist[mask] = np.inf
        pick = np.where(no_boundary, _next_coverage(cov, mask), np.argmin(dist, axis=1))
        sel[:, k] = pick
        add(pick)
    return sel


def _replicate(Xc: np.ndarray, cov: np.ndarray, n: int) -> np.ndarray:
    """Start at the first coverage observation, then the nearest unvisited candidate to the latest one."""
    T, P, _ = Xc.shape
    rows = np.arange(T)
    sel = np.empty((T, n), dtype=np.int64)
    sel[:, 0] = cov[:, 0]
    mask = np.zeros((T, P), dtype=bool)
    mask[rows, sel[:, 0]] = True
    for k in range(1, n):
        diff = Xc - Xc[rows, sel[:, k - 1]][:, None, :]
        dist = np.sqrt(np.einsum("tpd,tpd->tp", diff, diff))
        dist[mask] = np.inf
        pick = np.argmin(dist, axis=1)
        sel[:, k] = pick
        mask[rows, pick] = True
    return sel


def select_designs(Xc: np.ndarray, yc: np.ndarray, n: int = 24, *, arms: tuple[str, ...] = ARMS,
                   coverage: CoverageMode = "prefix", chunk: int = 128) -> np.ndarray:
    """Pool positions [T, len(arms), n] chosen by each arm, in selection order.

    * ``coverage``: the first n observations in coverage order.
    * ``adaptive``: a 4-observation coverage warm start, then the adaptive rule (:func:`adaptive_fill`).
    * ``replicate``: the nearest (Euclidean, all standardized features) unvisited candidate to the latest
      selected point, starting from the first coverage observation.
    * ``mixed``: coverage for the first ⌊n/2⌋, then the adaptive rule conditioned on all of them.

    Tasks are processed in chunks of ``chunk`` (cache-sized work arrays); results do not depend on it.
    """
    Xc = np.asarray(Xc, dtype=np.float64)
    yc = np.asarray(yc)
    if Xc.ndim != 3 or yc.shape != Xc.shape[:2]:
        raise ConfigError(f"expected Xc [T, P, d] and yc [T, P]; got {Xc.shape} and {yc.shape}")
    if not 1 <= n <= Xc.shape[1]:
        raise ConfigError(f"n must be between 1 and the pool size {Xc.shape[1]}; got {n}")
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        raise ConfigError(f"unknown arm {unknown[0]!r}; arms are {', '.join(ARMS)}")
    out = np.empty((Xc.shape[0], len(arms), n), dtype=np.int64)
    step = max(1, chunk)
    for lo in range(0, Xc.shape[0], step):
        out[lo:lo + step] = _select_chunk(Xc[lo:lo + step], yc[lo:lo + step], n, arms, coverage)
    return out


def _select_chunk(Xc: np.ndarray, yc: np.ndarray, n: int, arms: tuple[str, ...], coverage: CoverageMode) -> np.ndarray:
    cov = coverage_order(Xc, n, coverage)
    out = np.empty((Xc.shape[0], len(arms), n), dtype=np.int64)
    for i, arm in enumerate(arms):
        if arm == "coverage":
            out[:, i] = cov[:, :n]
        elif arm == "adaptive":
            out[:, i] = adaptive_fill(Xc, yc, cov, cov[:, : min(ADAPTIVE_WARM_START, n)], n)
        elif arm == "replicate":
            out[:, i] = _replicate(Xc, cov, n)
        else:  # mixed
            out[:, i] = adaptive_fill(Xc, yc, cov, cov[:, : n // 2], n)
    return out
