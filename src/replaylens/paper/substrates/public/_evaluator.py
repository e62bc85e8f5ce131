"""The frozen ridge-regularized logistic evaluator, vectorized over tasks and arms.

Fit on the selected design only (weights and intercept start at zero): 80 full-batch gradient steps of
size 0.12 on the mean log loss plus (0.08/2)‖w‖² (gradient Xᵀ(p−y)/n + 0.08·w; the intercept is not
penalized).  Each gradient component is clipped to ±5 and each coefficient to ±25.  The score is the
mean log loss on the evaluation pool with probabilities clipped to [1e-6, 1 − 1e-6]; utility = exp(−loss).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from ....errors import ConfigError

__all__ = ["EvaluatorConfig", "ridge_logistic_utility"]


@dataclass(frozen=True)
class EvaluatorConfig:
    """Settings of the ridge-logistic evaluator (defaults: the paper's, with Part B's clipping choices)."""

    steps: int = 80
    step_size: float = 0.12
    penalty: float = 0.08
    grad_clip: float | None = 5.0
    coef_clip: float | None = 25.0
    prob_clip: float = 1e-6

    def __post_init__(self) -> None:
        if self.steps < 0 or self.step_size <= 0 or self.penalty < 0 or not 0 < self.prob_clip < 0.5:
            raise ConfigError(f"invalid evaluator settings: {self}")


def ridge_logistic_utility(Xs: np.ndarray, ys: np.ndarray, Xe: np.ndarray, ye: np.ndarray,
                           config: EvaluatorConfig = EvaluatorConfig(), *, chunk: int = 128) -> np.ndarray:
    """Utilities exp(−held-out log loss) [T, A] for T tasks × A designs.

    ``Xs`` [T, A, n, d] and ``ys`` [T, A, n]: each task's A selected designs (one per arm);
    ``Xe`` [T, m, d] and ``ye`` [T, m]: the task's evaluation pool, shared by its designs.
    Every (task, design) fit is independent; the batch is processed in chunks of ``chunk`` tasks.
    """
    Xs = np.asarray(Xs, dtype=np.float64)
    ys = np.asarray(ys, dtype=np.float64)
    Xe = np.asarray(Xe, dtype=np.float64)
    ye = np.asarray(ye, dtype=np.float64)
    if Xs.ndim != 4 or ys.shape != Xs.shape[:3] or Xe.ndim != 3 or ye.shape != Xe.shape[:2] \
            or Xe.shape[0] != Xs.shape[0] or Xe.shape[2] != Xs.shape[3]:
        raise ConfigError(f"expected Xs [T,A,n,d], ys [T,A,n], Xe [T,m,d], ye [T,m]; got {Xs.shape}, {ys.shape}, "
                          f"{Xe.shape}, {ye.shape}")
    out = np.empty(Xs.shape[:2], dtype=np.float64)
    for lo in range(0, Xs.shape[0], max(1, chunk)):
        hi = min(lo + max(1, chunk), Xs.shape[0])
        w, b = _fit(Xs[lo:hi], ys[lo:hi], config)
        out[lo:hi] = _score(Xe[lo:hi], ye[lo:hi], w, b, config)
    return out


def _fit(Xs: np.ndarray, ys: np.ndarray, c: EvaluatorConfig) -> tuple[np.ndarray, np.ndarray]:
    T, A, n, d = Xs.shape
    w = np.zeros((T, A, d))
    b = np.zeros((T, A))
    for _ in range(c.steps):
        p = expit(np.matmul(Xs, w[..., None])[..., 0] + b[..., None])
        r = p - ys
        gw = np.matmul(r[..., None, :], Xs)[..., 0, :] / n + c.penalty * w
        gb = r.mean(axis=2)
        if c.grad_clip is not None:
            np.clip(gw, -c.grad_clip, c.grad_clip, out=gw)
            np.clip(gb, -c.grad_clip, c.grad_clip, out=gb)
        w = w - c.step_size * gw
        b = b - c.step_size * gb
        if c.coef_clip is not None:
            np.clip(w, -c.coef_clip, c.coef_clip, out=w)
            np.clip(b, -c.coef_clip, c.coef_clip, out=b)
    return w, b


def _score(Xe: np.ndarray, ye: np.ndarray, w: np.ndarray, b: np.ndarray, c: EvaluatorConfig) -> np.ndarray:
    p = expit(np.matmul(w[:, :, None, :], Xe[:, None, :, :].swapaxes(-1, -2))[:, :, 0, :] + b[..., None])
    p = np.clip(p, c.prob_clip, 1.0 - c.prob_clip)
    y = ye[:, None, :]
    loss = -np.mean(y * np.log(p) + (1.0 - y) * np.log(1.0 - p), axis=2)
    return np.exp(-loss)
