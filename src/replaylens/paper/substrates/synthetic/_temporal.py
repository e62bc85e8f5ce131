"""Temporal-discount executor (paper L1052; core §6.4 with its RECs), vectorized over tasks.

κ = log k ~ N(μ_phase, 0.48²).  A query at delay d (days) has the binary response
P(y = 1 | d) = 0.01 + 0.98 · sigmoid((d_ref/(1 + k d) − i_ref)/α_ctx), i_ref = 20, d_ref = 120.
Ten queries t = 0…9:

* coverage: D = (1, 4, 8, 16, 28, 45, 70, 105, 150, 210) in order;
* replicate: 45 + 3 (t mod 3);
* adaptive: D[t] for t < 3, then clip_[1,260](rint((100/k̂_t)[1 + 0.12((t mod 3) − 1)]));
* mixed: D[t] for t < 5, then the adaptive formula.

k̂_t is the grid MLE (Bernoulli NLL with the true context α) on the arm's responses so far over
{exp(s): s ∈ linspace(−6, −1, 360)}, first grid point on ties; the final k̂ uses all 10
responses.  Utility exp(−|log k̂ − log k|/0.72).

Every delay is an integer in [1, 260], so the per-observation NLL terms are read from a table
precomputed for both α (exactly the same numbers as evaluating the link on the fly).

Randomness layout (per task): the world generator (role 4) draws one ``standard_normal()``
(κ = μ + 0.48·z); arm a's generator draws ``random(10)`` and response t is 1[u_t < P(y = 1 | d_t)].
"""

from __future__ import annotations

import numpy as np

__all__ = ["TEMPORAL_ALPHA", "TEMPORAL_MEAN", "draw_temporal", "run_temporal"]

TEMPORAL_MEAN = (-4.25, -3.55, -3.90)  # by phase: development, adaptation, future
TEMPORAL_SD = 0.48
TEMPORAL_ALPHA = (0.55, 1.8)  # by context: low, high
I_REF, D_REF = 20.0, 120.0
DELAYS = np.array([1, 4, 8, 16, 28, 45, 70, 105, 150, 210], dtype=np.int64)
N_QUERIES = 10
D_MAX = 260
GRID_S = np.linspace(-6.0, -1.0, 360)
GRID_K = np.exp(GRID_S)
PRIOR_K = float(np.exp(-4.25))  # k̂ before any observation (never reached under the REC schedules)
ADAPT_WARM = 3
MIXED_WARM = 5
UTILITY_SCALE = 0.72


def response_prob(k: np.ndarray, d: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """P(y = 1 | d) for discount k, delay d and response scale α (broadcasting)."""
    x = (D_REF / (1.0 + k * d) - I_REF) / alpha
    return 0.01 + 0.98 / (1.0 + np.exp(-x))


def _nll_table() -> np.ndarray:
    """[α, y, d, grid] Bernoulli negative log-likelihood term of one response."""
    d = np.arange(D_MAX + 1, dtype=np.float64)
    out = np.empty((len(TEMPORAL_ALPHA), 2, D_MAX + 1, GRID_K.size))
    for i, a in enumerate(TEMPORAL_ALPHA):
        p = response_prob(GRID_K[None, :], d[:, None], np.asarray(a))
        out[i, 0] = -np.log(1.0 - p)
        out[i, 1] = -np.log(p)
    return out


_NLL = _nll_table()


def draw_temporal(world: np.random.Generator, arms: list[np.random.Generator]) -> tuple[np.ndarray, ...]:
    """One task's raw draws: (z_kappa[()], u_response[4, 10])."""
    z = np.asarray(world.standard_normal())
    u = np.stack([g.random(N_QUERIES) for g in arms])
    return z, u


def _adaptive_delay(nll: np.ndarray, t: int) -> np.ndarray:
    k_hat = GRID_K[np.argmin(nll, axis=1)]
    d = np.rint((100.0 / k_hat) * (1.0 + 0.12 * ((t % 3) - 1)))
    return np.clip(d, 1, D_MAX).astype(np.int64)


def run_temporal(z: np.ndarray, u: np.ndarray, phase: np.ndarray, context: np.ndarray) -> np.ndarray:
    """Utilities [B, 4] of B tasks (arrays stacked from :func:`draw_temporal`; phase/context codes [B])."""
    n = z.shape[0]
    kappa = np.asarray(TEMPORAL_MEAN)[phase] + TEMPORAL_SD * z
    k = np.exp(kappa)
    alpha = np.asarray(TEMPORAL_ALPHA)[context]
    nll = np.zeros((n, 4, GRID_K.size))
    ctx = np.asarray(context)
    for t in range(N_QUERIES):
        d = np.empty((n, 4), dtype=np.int64)
        d[:, 0] = DELAYS[t]
        d[:, 1] = DELAYS[t] if t < ADAPT_WARM else _adaptive_delay(nll[:, 1], t)
        d[:, 2] = 45 + 3 * (t % 3)
        d[:, 3] = DELAYS[t] if t < MIXED_WARM else _adaptive_delay(nll[:, 3], t)
        p = response_prob(k[:, None], d.astype(np.float64), alpha[:, None])
        y = (u[:, :, t] < p).astype(np.int64)
        nll += _NLL[ctx[:, None], y, d]
    s_hat = GRID_S[np.argmin(nll, axis=2)]
    return np.exp(-np.abs(s_hat - kappa[:, None]) / UTILITY_SCALE)
