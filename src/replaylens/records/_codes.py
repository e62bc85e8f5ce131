"""Set questions about integer code arrays, each answered by one sort (numpy 2's hashing ``np.unique`` is far
slower on millions of codes)."""

from __future__ import annotations

import numpy as np

__all__ = ["distinct", "has_duplicates"]


def has_duplicates(x: np.ndarray) -> bool:
    """Whether an integer array holds some value twice."""
    v = np.sort(x, axis=None)
    return bool((v[1:] == v[:-1]).any())


def distinct(x: np.ndarray) -> np.ndarray:
    """``np.unique(x)`` for an integer array."""
    v = np.sort(x, axis=None)
    return v[np.r_[True, v[1:] != v[:-1]]] if v.size else v
