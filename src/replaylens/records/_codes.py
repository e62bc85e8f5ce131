"""Set questions about integer code arrays, each answered by one sort (numpy 2's hashing ``np.unique`` is far
slower on millions of codes)."""

from __future__ import annotations

import numpy as np

__all__ = ["distinct", "distinct_rows", "has_duplicates"]


def has_duplicates(x: np.ndarray) -> bool:
    """Whether an integer array holds some value twice."""
    v = np.sort(x, axis=None)
    return bool((v[1:] == v[:-1]).any())


def distinct(x: np.ndarray) -> np.ndarray:
    """``np.unique(x)`` for an integer array."""
    v = np.sort(x, axis=None)
    return v[np.r_[True, v[1:] != v[:-1]]] if v.size else v


def distinct_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of an (N, M) array of integer codes >= −1: each distinct row's first position in
    ``rows`` (in sorted-row order) and each row's index among them.  A row is read as one mixed-radix int64
    when that fits (one sort of N integers), else compared column by column."""
    radix = int(rows.max(initial=0)) + 2
    if rows.shape[0] and radix ** rows.shape[1] < 2**62:
        code = np.zeros(rows.shape[0], dtype=np.int64)
        for col in rows.T:
            code = code * radix + (col + 1)
        _u, first, of = np.unique(code, return_index=True, return_inverse=True)
    else:
        _u, first, of = np.unique(rows, axis=0, return_index=True, return_inverse=True)
    return first, of.reshape(-1)
