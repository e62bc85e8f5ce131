"""The learned fits' floating-point path: numpy/BLAS as dispatched, or a pinned path whose bytes do not depend on
the CPU (issue 28; docs/decisions.md "Issue 28 (third pass)").

numpy dispatches float64 ``tanh``/``exp``/``log`` per CPU at run time (``X86_V4`` AVX-512, ``X86_V3`` AVX2,
baseline ``X86_V2``) and OpenBLAS picks its kernel per CPU; a chaotic fit amplifies one ulp.  The pinned path
uses only IEEE-exact elementwise operations (``+ − × ÷``, ``floor``, ``ldexp``, ``abs``, comparisons) and numpy's
reductions and ``einsum`` (fixed C code compiled for the baseline, not SIMD-dispatched), so two x86-64 machines
with the same numpy give the same bytes (measured: tests/paper/test_numerics.py, docs/paper/reproduction-notes.md):

* ``exp``: x = k·ln2 + r (Cody–Waite, k·LN2_HI exact), e^r by its degree-13 Taylor polynomial in Horner form
  (|r| ≤ ln2/2, truncation < 2⁻⁵⁵), scaled by ``ldexp``; ``expm1`` the same polynomial without the 1 for
  |x| ≤ ln2/2 (inside ``tanh``: 2^k·expm1(r) + (2^k − 1) for x ≥ 0); ``tanh`` = sign·t/(t + 2),
  t = expm1(2|x|); ``sigmoid`` = 1/(1 + exp(−x)); ``softplus`` = log(1 + eˢ) = max(s, 0) + log1p(e^−|s|),
  ``log1p`` on [0, 1] as 2·atanh(u/(u + 2)) by its series.  Each is within a few ulp of the correctly rounded
  value (tests/paper/test_numerics.py).
* ``matmul``: ``np.einsum`` with ``optimize=False`` on C-contiguous operands instead of BLAS: numpy's
  sum-of-products loops are compiled for the baseline instruction set only (not dispatched at run time, no FMA
  on x86-64's baseline), so their order and rounding depend on the shapes alone.

The path is chosen by ``REPLAYLENS_PINNED_FITS`` (``1`` pinned, the default; ``0`` numpy/BLAS, kept for the
comparisons in docs/paper/reproduction-notes.md) or, inside a process, :func:`pinned_numerics`.  Every committed
section of docs/paper/reproduction.md whose fits or generators go through this module was generated on the pinned
path.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

__all__ = ["ENV_VAR", "dot", "exp", "expm1", "is_pinned", "log1p", "matmul", "norm2", "path_label",
           "pinned_numerics", "qr", "sigmoid", "softplus", "tanh"]

ENV_VAR = "REPLAYLENS_PINNED_FITS"
_DEFAULT = "1"
_STATE = {"pinned": os.environ.get(ENV_VAR, _DEFAULT).strip() not in ("0", "false", "no", "")}

_LN2_HI = 6.93147180369123816490e-01   # ln2's high 32 bits: k·_LN2_HI is exact for |k| < 2²¹
_LN2_LO = 1.90821492927058770002e-10
_INV_LN2 = 1.44269504088896338700e00
# 1/n! for n = 13 … 2 (Horner order), then the linear and constant terms are added explicitly.
_EXP_COEF = tuple(1.0 / float(np.prod(np.arange(1, n + 1, dtype=np.float64))) for n in range(13, 1, -1))
_ATANH_TERMS = 18   # Σ z^(2i)/(2i+1), i < 18: z² ≤ 1/9 leaves < 2⁻⁵⁹


def is_pinned() -> bool:
    """Whether the fits run on the pinned (machine-independent) path."""
    return _STATE["pinned"]


def path_label() -> str:
    """One line naming the numerical path (for section notes)."""
    if is_pinned():
        return "pinned float64 path (fixed-order products, dispatch-free exp/tanh/log1p; replaylens.paper.numerics)"
    return "numpy/BLAS float64 path (CPU-dependent kernels)"


@contextmanager
def pinned_numerics(on: bool = True) -> Iterator[None]:
    """Run the block with the pinned path on (or off), restoring the previous choice; the environment variable is
    set too, so that worker processes started inside the block take the same path."""
    before, env = _STATE["pinned"], os.environ.get(ENV_VAR)
    _STATE["pinned"] = bool(on)
    os.environ[ENV_VAR] = "1" if on else "0"
    try:
        yield
    finally:
        _STATE["pinned"] = before
        if env is None:
            os.environ.pop(ENV_VAR, None)
        else:
            os.environ[ENV_VAR] = env


def _f64(x: np.ndarray | float) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _expm1_poly(r: np.ndarray) -> np.ndarray:
    """e^r − 1 for |r| ≤ ln2/2 as r·(1 + r·(1/2 + r·(1/6 + …))) (no cancellation)."""
    p = np.full_like(r, _EXP_COEF[0])
    for c in _EXP_COEF[1:]:
        p *= r
        p += c
    p *= r
    p += 1.0
    return p * r


def _exp_pinned(x: np.ndarray) -> np.ndarray:
    x = np.clip(x, -746.0, 710.0)   # e^−746 rounds to 0, e^710 overflows to inf
    k = np.floor(x * _INV_LN2 + 0.5)
    r = (x - k * _LN2_HI) - k * _LN2_LO   # NaN stays NaN through r
    k = np.where(np.isnan(k), 0.0, k)
    e = _expm1_poly(r) + 1.0
    # ldexp in two halves so that 2^k never overflows an intermediate for k near ±1024
    k1 = np.floor(k * 0.5)
    return np.ldexp(np.ldexp(e, k1.astype(np.int64)), (k - k1).astype(np.int64))


def exp(x: np.ndarray | float) -> np.ndarray:
    """e^x, elementwise (float64)."""
    return _exp_pinned(_f64(x)) if is_pinned() else np.exp(x)


def _expm1_pinned(x: np.ndarray) -> np.ndarray:
    small = np.abs(x) <= 0.5 * _LN2_HI
    return np.where(small, _expm1_poly(np.where(small, x, 0.0)), _exp_pinned(x) - 1.0)


def expm1(x: np.ndarray | float) -> np.ndarray:
    """e^x − 1, elementwise (float64)."""
    return _expm1_pinned(_f64(x)) if is_pinned() else np.expm1(x)


def _expm1_nonneg(x: np.ndarray) -> np.ndarray:
    """e^x − 1 for 0 ≤ x ≤ 40 in one pass: 2^k·expm1(r) + (2^k − 1), x = k·ln2 + r, 2^k built from its bits
    (exact; 2^k − 1 is exact for k ≤ 53, and beyond it tanh rounds to 1 anyway)."""
    k = np.floor(x * _INV_LN2 + 0.5)
    r = (x - k * _LN2_HI) - k * _LN2_LO
    p2 = ((k.astype(np.int64) + 1023) << 52).view(np.float64)
    t = _expm1_poly(r)
    t *= p2
    t += p2 - 1.0
    return t


def _tanh_pinned(x: np.ndarray) -> np.ndarray:
    a = np.fmin(np.abs(x), 20.0)   # tanh(20) rounds to 1; fmin maps NaN to 20 (restored below)
    a += a
    t = _expm1_nonneg(a)
    y = t / (t + 2.0)
    np.copysign(y, x, out=y)       # odd; keeps ±0
    nan = np.isnan(x)
    if nan.any():
        y[nan] = np.nan
    return y


def tanh(x: np.ndarray | float, out: np.ndarray | None = None) -> np.ndarray:
    """tanh x, elementwise (float64); written into ``out`` when given."""
    if not is_pinned():
        return np.tanh(x, out=out) if out is not None else np.tanh(x)
    y = _tanh_pinned(_f64(x))
    if out is None:
        return y
    out[...] = y
    return out


def sigmoid(x: np.ndarray | float) -> np.ndarray:
    """1/(1 + e^−x), elementwise (float64)."""
    return 1.0 / (1.0 + (_exp_pinned(-_f64(x)) if is_pinned() else np.exp(-np.asarray(x))))


def _log1p_unit(u: np.ndarray) -> np.ndarray:
    """log(1 + u) for 0 ≤ u ≤ 1: 2·atanh(z), z = u/(u + 2) ≤ 1/3, by its series in Horner form."""
    z = u / (u + 2.0)
    z2 = z * z
    p = np.full_like(z, 1.0 / (2 * _ATANH_TERMS - 1))
    for i in range(_ATANH_TERMS - 2, -1, -1):
        p *= z2
        p += 1.0 / (2 * i + 1)
    return 2.0 * z * p


def log1p(u: np.ndarray | float) -> np.ndarray:
    """log(1 + u) for u in [0, 1] (the range the fits need), elementwise (float64)."""
    if not is_pinned():
        return np.log1p(u)
    u = _f64(u)
    if np.any((u < 0.0) | (u > 1.0)):
        raise ValueError("pinned log1p is defined on [0, 1] only")
    return _log1p_unit(u)


def softplus(s: np.ndarray | float) -> np.ndarray:
    """log(1 + e^s) = logaddexp(0, s), elementwise (float64)."""
    if not is_pinned():
        return np.logaddexp(0.0, s)
    s = _f64(s)
    return np.maximum(s, 0.0) + _log1p_unit(_exp_pinned(-np.abs(s)))


def _matmul_pinned(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.einsum`` without path optimization (numpy's own sum-of-products loops: no BLAS), on C-contiguous
    copies so that the summation order depends on the shapes only."""
    if b.shape[-2] != a.shape[-1]:
        raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not align")
    return np.einsum("...mj,...jn->...mn", np.ascontiguousarray(a), np.ascontiguousarray(b), optimize=False)


def dot(a: np.ndarray, b: np.ndarray) -> float:
    """Σ a·b over all entries (``np.vdot`` for real arrays); on the pinned path numpy's pairwise sum of the
    products instead of BLAS's ``ddot``."""
    if not is_pinned():
        return float(np.vdot(a, b))
    return float(np.sum(_f64(a).ravel() * _f64(b).ravel()))


def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``a @ b`` (numpy's matmul semantics, float64); on the pinned path in a fixed summation order, no BLAS."""
    if not is_pinned():
        return np.matmul(a, b, out=out) if out is not None else np.matmul(a, b)
    a, b = _f64(a), _f64(b)
    va, vb = a.ndim == 1, b.ndim == 1
    res = _matmul_pinned(a[None, :] if va else a, b[:, None] if vb else b)
    if vb:
        res = res[..., 0]
    if va:
        res = res[..., 0, :] if not vb else res[..., 0]
    if out is None:
        return res
    out[...] = res
    return out


def _qr_pinned(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Householder QR of a square matrix, reflections applied in column order with fixed-order products."""
    n = a.shape[0]
    r = a.copy()
    q = np.eye(n)
    for k in range(n - 1):
        x = r[k:, k]
        alpha = -np.sqrt(np.sum(x * x)) if x[0] >= 0.0 else np.sqrt(np.sum(x * x))
        v = x.copy()
        v[0] -= alpha
        vn = np.sqrt(np.sum(v * v))
        if vn == 0.0:
            continue
        v /= vn
        r[k:, :] -= 2.0 * v[:, None] * _matmul_pinned(v[None, :], r[k:, :])
        q[:, k:] -= 2.0 * _matmul_pinned(q[:, k:], v[:, None]) * v[None, :]
    return q, r


def qr(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(Q, R) with a = QR for a square float64 matrix (LAPACK's on the numpy path; the signs of R's diagonal
    may differ between the paths, so callers fix them)."""
    a = np.asarray(a)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"qr: a square matrix is needed; got shape {a.shape}")
    if not is_pinned():
        q, r = np.linalg.qr(a)
        return q, r
    return _qr_pinned(_f64(a))


_POWER_STEPS = 2000


def norm2(a: np.ndarray) -> float:
    """The spectral norm ‖a‖₂ (largest singular value): LAPACK's SVD on the numpy path; on the pinned path
    √(largest eigenvalue of aᵀa) by a fixed number of power iterations from the all-ones vector."""
    if not is_pinned():
        return float(np.linalg.norm(a, 2))
    a = _f64(a)
    g = _matmul_pinned(a.T, a)
    v = np.full((a.shape[1], 1), 1.0)
    lam = 0.0
    for _ in range(_POWER_STEPS):
        w = _matmul_pinned(g, v)
        lam = float(np.sqrt(np.sum(w * w)))
        if lam == 0.0:
            return 0.0
        v = w / lam
    return float(np.sqrt(lam))
