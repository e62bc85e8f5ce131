"""Survival-risk executor (paper L1052; core §6.5 with its RECs), vectorized over tasks and arms.

Each task draws a pool of 160 (t, m) with t ~ U(0, 10), m ~ Bernoulli(π_ctx) and labels
y ~ Bernoulli(sigmoid(−2.0 + 0.42 t + β₃ m)), β₃ by phase; and 260 fresh points from the same law.
An arm selects 10 pool points to label (t-ranks are taken in the pool, ties by pool order):

* coverage: the points at t-ranks rint(linspace(0, 159, 10));
* adaptive: the first 4 coverage points, then repeatedly the unlabelled point whose fitted p̂ is
  closest to 0.5 (first in pool order); while the labelled set has one class only, the next
  coverage point not yet selected instead;
* replicate: the first coverage point, then the unlabelled point nearest (Euclidean in (t/10, m),
  first in pool order) to the latest selected point;
* mixed: the first 5 coverage points, then 5 adaptive selections.

Fitter (the public-data evaluator): features (1, z, m) with z = t standardized by the pool's mean
and population sd; weights start at 0; 80 full-batch steps w ← clip(w − 0.12·clip(g, ±5), ±25)
with g = Xᵀ(p − y)/n + 0.08·(0, w_z, w_m) (the intercept is unregularized).  Utility
exp(−mean log loss) on the 260 fresh points, probabilities clipped to [1e−6, 1 − 1e−6].

Randomness layout (per task): only the world generator (role 4) draws, ``random(1260)`` split as
pool t (160, ×10), pool m (160, m = 1[u < π]), pool y (160, y = 1[u < p]), fresh t, m, y (260 each).
The arms are deterministic given the world, so their generators are never drawn from.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SURVIVAL_BETA3", "SURVIVAL_PI", "draw_survival", "fit_logistic", "run_survival"]

SURVIVAL_BETA3 = (1.6, 0.8, 1.1)  # by phase: development, adaptation (unused), future
SURVIVAL_PI = (0.46, 0.16)  # by context: balanced, rare
BETA0, BETA1 = -2.0, 0.42
N_POOL, N_FRESH, N_LABELS = 160, 260, 10
T_MAX = 10.0
COVERAGE_RANKS = np.rint(np.linspace(0, N_POOL - 1, N_LABELS)).astype(np.int64)
ADAPT_WARM, MIXED_WARM = 4, 5
FIT_STEPS, FIT_LR, RIDGE, GRAD_CLIP, COEF_CLIP = 80, 0.12, 0.08, 5.0, 25.0
PROB_CLIP = 1e-6
N_UNIFORMS = 3 * N_POOL + 3 * N_FRESH


def draw_survival(world: np.random.Generator, arms: list[np.random.Generator]) -> tuple[np.ndarray, ...]:
    """One task's raw draws: (u[1260],) (the arms draw nothing)."""
    return (world.random(N_UNIFORMS),)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def fit_logistic(z: np.ndarray, m: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Ridge-logistic fits of [B, n] designs (features 1, z, m; labels y) -> weights [B, 3]."""
    n = z.shape[1]
    w0 = np.zeros(z.shape[0])
    w1 = np.zeros(z.shape[0])
    w2 = np.zeros(z.shape[0])
    for _ in range(FIT_STEPS):
        r = _sigmoid(w0[:, None] + w1[:, None] * z + w2[:, None] * m) - y
        g0 = r.sum(axis=1) / n
        g1 = (r * z).sum(axis=1) / n + RIDGE * w1
        g2 = (r * m).sum(axis=1) / n + RIDGE * w2
        w0 = np.clip(w0 - FIT_LR * np.clip(g0, -GRAD_CLIP, GRAD_CLIP), -COEF_CLIP, COEF_CLIP)
        w1 = np.clip(w1 - FIT_LR * np.clip(g1, -GRAD_CLIP, GRAD_CLIP), -COEF_CLIP, COEF_CLIP)
        w2 = np.clip(w2 - FIT_LR * np.clip(g2, -GRAD_CLIP, GRAD_CLIP), -COEF_CLIP, COEF_CLIP)
    return np.stack([w0, w1, w2], axis=1)


def _predict(w: np.ndarray, z: np.ndarray, m: np.ndarray) -> np.ndarray:
    return _sigmoid(w[:, 0:1] + w[:, 1:2] * z + w[:, 2:3] * m)


def _take(a: np.ndarray, idx: np.ndarray) -> np.ndarray:
    return np.take_along_axis(a, idx, axis=1)


def _adaptive(sel0: np.ndarray, cov: np.ndarray, z: np.ndarray, m: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Continue selections sel0[B, w] to 10 with the adaptive rule (coverage fallback on one class)."""
    sel = sel0
    n_b = z.shape[0]
    for _ in range(sel0.shape[1], N_LABELS):
        ys = _take(y, sel)
        one_class = np.all(ys == ys[:, :1], axis=1)
        chosen = np.zeros((n_b, z.shape[1]), dtype=bool)
        np.put_along_axis(chosen, sel, True, axis=1)
        nxt_cov = _take(cov, np.argmax(~_take(chosen, cov), axis=1)[:, None])[:, 0]
        w = fit_logistic(_take(z, sel), _take(m, sel), ys)
        gap = np.where(chosen, np.inf, np.abs(_predict(w, z, m) - 0.5))
        pick = np.where(one_class, nxt_cov, np.argmin(gap, axis=1))
        sel = np.concatenate([sel, pick[:, None]], axis=1)
    return sel


def _replicate(cov: np.ndarray, t: np.ndarray, m: np.ndarray) -> np.ndarray:
    n_b = t.shape[0]
    rows = np.arange(n_b)
    sel = cov[:, :1]
    chosen = np.zeros(t.shape, dtype=bool)
    chosen[rows, sel[:, 0]] = True
    for _ in range(1, N_LABELS):
        last = sel[:, -1]
        dt = (t - t[rows, last][:, None]) / T_MAX
        dm = m - m[rows, last][:, None]
        dist = np.where(chosen, np.inf, dt * dt + dm * dm)
        pick = np.argmin(dist, axis=1)
        chosen[rows, pick] = True
        sel = np.concatenate([sel, pick[:, None]], axis=1)
    return sel


def run_survival(u: np.ndarray, phase: np.ndarray, context: np.ndarray) -> np.ndarray:
    """Utilities [B, 4] of B tasks (arrays stacked from :func:`draw_survival`; phase/context codes [B])."""
    n_b = u.shape[0]
    beta3 = np.asarray(SURVIVAL_BETA3)[phase][:, None]
    pi = np.asarray(SURVIVAL_PI)[context][:, None]
    o = np.cumsum([0, N_POOL, N_POOL, N_POOL, N_FRESH, N_FRESH, N_FRESH])
    t = T_MAX * u[:, o[0]:o[1]]
    m = (u[:, o[1]:o[2]] < pi).astype(np.float64)
    y = (u[:, o[2]:o[3]] < _sigmoid(BETA0 + BETA1 * t + beta3 * m)).astype(np.float64)
    tf = T_MAX * u[:, o[3]:o[4]]
    mf = (u[:, o[4]:o[5]] < pi).astype(np.float64)
    yf = (u[:, o[5]:o[6]] < _sigmoid(BETA0 + BETA1 * tf + beta3 * mf)).astype(np.float64)
    mu = t.mean(axis=1, keepdims=True)
    sd = t.std(axis=1, keepdims=True)
    z = (t - mu) / sd
    zf = (tf - mu) / sd
    cov = np.argsort(t, axis=1, kind="stable")[:, COVERAGE_RANKS]  # [B, 10]
    sels = [
        cov,
        _adaptive(cov[:, :ADAPT_WARM], cov, z, m, y),
        _replicate(cov, t, m),
        _adaptive(cov[:, :MIXED_WARM], cov, z, m, y),
    ]
    sel = np.concatenate(sels, axis=0)  # [4B, 10], arm-major
    rep = np.concatenate([np.arange(n_b)] * 4)
    w = fit_logistic(_take(z[rep], sel), _take(m[rep], sel), _take(y[rep], sel))
    p = np.clip(_predict(w, zf[rep], mf[rep]), PROB_CLIP, 1.0 - PROB_CLIP)
    yy = yf[rep]
    ll = -(yy * np.log(p) + (1.0 - yy) * np.log(1.0 - p)).mean(axis=1)
    return np.exp(-ll).reshape(4, n_b).T
