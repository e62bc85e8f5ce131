"""Resampled sums in cluster order, as one sparse product per chunk of draws.

The reference sums (``_bootstrap._weighted_sums``) add ``w_i * d_i`` strictly left to right over the
clusters, from ``0.0``, with the product rounded before the addition.  scipy's CSR product does the same
for each row of a matrix: ``y = 0.0; y += a_ij * x_j`` over the stored columns in index order.  So a
chunk of ``c`` draws in draw-major layout (row = draw, every cluster stored, zeros included) times the
``(n, k)`` values gives the reference bytes in one compiled pass, with no ``(n, c, k)`` temporaries.

That equality rests on two properties of the installed scipy build (order of the additions, and no fused
multiply-add), which :func:`ordered_sums_available` checks once on inputs that expose either; where a
build fails it, the callers keep the reference path.  The draws themselves are unchanged.
"""

from __future__ import annotations

import functools

import numpy as np

__all__ = ["ordered_row_sums", "ordered_sums_available"]


@functools.lru_cache(maxsize=4)
def _layout(c: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR column indices and row pointers of a dense ``(c, n)`` matrix (every entry stored)."""
    dtype = np.int32 if c * n < 2**31 else np.int64
    indices = np.tile(np.arange(n, dtype=dtype), c)
    indptr = np.arange(0, c * n + 1, n, dtype=dtype)
    return indices, indptr


def ordered_row_sums(weights: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``weights @ x`` for ``weights`` ``(c, n)`` and ``x`` ``(n, k)``, each cell summed left to right over
    the ``n`` clusters from ``0.0`` (the bytes of ``_weighted_sums(weights.T, x)``)."""
    from scipy.sparse import csr_matrix

    c, n = weights.shape
    indices, indptr = _layout(c, n)
    data = np.ascontiguousarray(weights, dtype=np.float64).reshape(-1)
    m = csr_matrix((data, indices, indptr), shape=(c, n))
    out: np.ndarray = np.asarray(m @ np.ascontiguousarray(x, dtype=np.float64))
    return out.reshape(c, -1)


@functools.cache
def ordered_sums_available() -> bool:
    """Whether :func:`ordered_row_sums` reproduces the reference sums on this installation.

    Row 0 adds ``1e16, 1, -1e16`` (``0`` left to right, ``1`` in any other order); row 1 adds
    ``-1`` then ``3 * fl(1/3)`` (``0`` with a rounded product, ``-2**-54`` with a fused multiply-add).
    """
    try:
        w = np.array([[1.0, 1.0, 1.0], [1.0, 3.0, 0.0]])
        x = np.array([1e16, 1.0 / 3.0, -1e16])[:, None]
        x_rows = np.array([[1e16, 1.0, -1e16], [-1.0, 1.0 / 3.0, 0.0]])
        got0 = ordered_row_sums(w[:1], x_rows[0][:, None])[0, 0]
        got1 = ordered_row_sums(w[1:], x_rows[1][:, None])[0, 0]
        wide = ordered_row_sums(w, np.c_[x, x])  # k > 1 takes scipy's multi-vector kernel
    except Exception:  # scipy missing or changed: keep the reference path
        return False
    ref_wide = np.zeros((2, 2))
    for i in range(3):
        ref_wide = ref_wide + w[:, i][:, None] * np.c_[x, x][i][None, :]
    return bool(got0 == 0.0 and got1 == 0.0 and wide.tobytes() == ref_wide.tobytes())
