"""Tie rules ≺_pol (part of the estimand) and exact, order-independent accumulation."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from enum import Enum

import numpy as np

__all__ = ["FIXED_SCALE", "TieRule", "choose", "choose_batch", "to_fixed", "to_micro"]

FIXED_SCALE = float(2**32)
"""Fixed-point resolution of commutative sums: each term is rounded to a multiple of 2^-32, so the
sum of up to 2^20 terms of magnitude <= 1 is an exactly representable float and is the same in
any order (pair transport then leaves the state bit-for-bit unchanged)."""


def to_fixed(x: np.ndarray | float) -> np.ndarray:
    """Round terms to integer multiples of 2^-32, stored as exact float64 integers (scaled)."""
    return np.rint(np.asarray(x, dtype=np.float64) * FIXED_SCALE)


def to_micro(u: np.ndarray | float) -> np.ndarray:
    """Utilities in integer micro-units (six decimals, as ledgers display them); NaN stays NaN."""
    return np.rint(np.asarray(u, dtype=np.float64) * 1e6)


class TieRule(str, Enum):
    """How an exact score tie is broken.

    * ``FIRST_CANONICAL``: the first maximum in menu (canonical) order — the oracle's rule and the
      canonical calibration writers'.
    * ``LEX_LARGEST``: the lexicographically largest label string — OCRR and the ledger writers.
    * ``FIRST_APPEARANCE``: the key first seen in the ledger, then canonical order — reference rules.
    """

    FIRST_CANONICAL = "first_canonical"
    LEX_LARGEST = "lex_largest"
    FIRST_APPEARANCE = "first_appearance"


def choose(scores: Sequence[float], menu: Sequence[str], rule: TieRule,
           first_seen: Sequence[float] | None = None) -> str:
    """The menu label with the highest score under ``rule`` (scores compared exactly)."""
    s = np.asarray(scores, dtype=np.float64)
    best = np.flatnonzero(s == s.max())
    if best.size == 1 or rule is TieRule.FIRST_CANONICAL:
        return menu[int(best[0])]
    if rule is TieRule.LEX_LARGEST:
        return max(menu[int(i)] for i in best)
    fs = np.asarray(first_seen if first_seen is not None else np.zeros(len(menu)), dtype=np.float64)
    sub = fs[best]
    return menu[int(best[np.flatnonzero(sub == sub.min())[0]])]


def choose_batch(scores: np.ndarray, menu: np.ndarray, rule: TieRule, labels: Sequence[str],
                 first_seen: np.ndarray | None = None) -> np.ndarray:
    """Vectorized :func:`choose` for (Q, M) scores over (Q, M) menu codes (−1 = padding)."""
    s = np.where(menu >= 0, scores, -np.inf)
    if rule is TieRule.FIRST_CANONICAL and 0 < s.shape[1] <= 16:  # a few columns: column by column, no row loops
        cols = list(s.T)
        best = functools.reduce(np.maximum, cols)
        pos = np.zeros(s.shape[0], dtype=np.intp)
        for j in range(len(cols) - 1, -1, -1):  # the first maximum (none, e.g. NaN: position 0, as argmax)
            pos[cols[j] == best] = j
        return menu[np.arange(menu.shape[0]), pos]
    top = s == s.max(axis=1, keepdims=True)
    if rule is TieRule.FIRST_CANONICAL:
        pos = np.argmax(top, axis=1)
    elif rule is TieRule.LEX_LARGEST:
        rank = np.argsort(np.argsort(np.asarray(labels, dtype=object)))
        r = np.where(top, rank[np.where(menu >= 0, menu, 0)], -1)
        pos = np.argmax(r, axis=1)
    else:
        fs = np.where(top, first_seen if first_seen is not None else 0.0, np.inf)
        pos = np.argmax(fs == fs.min(axis=1, keepdims=True), axis=1)
    return menu[np.arange(menu.shape[0]), pos]
