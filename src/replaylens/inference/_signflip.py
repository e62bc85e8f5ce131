"""Two-sided cluster sign-flip test and p-value formatting.

Under H0 the cluster values are symmetric about 0, so flipping the sign of each cluster independently
leaves their distribution unchanged.  The statistic is the mean over clusters; the null distribution is
the mean of ``eps * values`` over sign vectors ``eps`` (all ``2**n`` of them, or ``B`` random ones).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from replaylens.rng import RngLike, check_rng

from ._bootstrap import _as_values, _check_int, _column_means, _param_error, _seed_of, _weighted_sums
from ._ordered import ordered_row_sums, ordered_sums_available
from ._results import SignFlipResult

__all__ = ["format_p", "sign_flip_test"]

#: sign vectors per Monte Carlo chunk (memory bound; results do not depend on it)
_CHUNK = 8192
#: at most this many (draw, cluster) cells are held at once
_MAX_CELLS = 1 << 21
#: the same bound for the CSR path (which runs in several threads at once)
_FAST_CELLS = 1 << 19
#: exact enumeration is refused above this many clusters (2**24 sign vectors)
_MAX_EXACT = 24


def _signed_sums(v: np.ndarray) -> np.ndarray:
    """Sum of ``eps * v`` for every sign vector ``eps`` of ``len(v)`` entries.

    Entry ``s`` flips cluster ``r`` when bit ``r`` of ``s`` is set (entry 0 is the identity).
    """
    m = v.size
    codes = np.arange(1 << m)
    bits = (codes[None, :] >> np.arange(m)[:, None]) & 1  # (m, 2**m)
    return _weighted_sums(1.0 - 2.0 * bits, v[:, None])[:, 0]


def _exact_null(v: np.ndarray) -> np.ndarray:
    """Mean under all ``2**n`` sign vectors, by meeting in the middle (low half x high half of the bits)."""
    n_low = v.size // 2
    low = _signed_sums(v[:n_low])
    high = _signed_sums(v[n_low:])
    sums: np.ndarray = np.add.outer(high, low).ravel()
    return sums / v.size


#: ``(+1, -1)`` indexed by a sign bit
_SIGNS = np.array([1.0, -1.0])


def _monte_carlo_null(gen: np.random.Generator, v: np.ndarray, n_resamples: int) -> np.ndarray:
    """Mean under ``n_resamples`` random sign vectors drawn row after row from ``gen``.

    Each chunk's sums ``((0 + e_0 v_0) + e_1 v_1) + ...`` are one CSR product (:mod:`._ordered`; the
    products ``±v`` are exact) where the installation passes its check, else :func:`_reference_null`.
    """
    if not ordered_sums_available():
        return _reference_null(gen, v, n_resamples)
    n = v.size
    null = np.empty(n_resamples, dtype=np.float64)
    col = v[:, None]
    rows = max(1, min(_CHUNK, min(_MAX_CELLS, _FAST_CELLS) // n))
    words = _Words(gen) if type(gen.bit_generator) is np.random.PCG64 else None
    try:
        for start in range(0, n_resamples, rows):
            c = min(rows, n_resamples - start)
            if words is None:
                signs = _SIGNS.take(gen.integers(0, 2, size=(c, n)))
            else:  # integers(0, 2) is the top bit of a word: as int32, a negative word draws 1 (sign -1)
                signs = np.where(words.take(c * n).view(np.int32) < 0, -1.0, 1.0).reshape(c, n)
            null[start : start + c] = ordered_row_sums(signs, col)[:, 0] / n
    finally:
        if words is not None:
            words.close()
    return null


class _Words:
    """The 32-bit words of a PCG64 Generator in the order ``Generator.integers`` consumes them, from its raw
    64-bit output (low half, then high half; first the half an earlier call left buffered).

    ``integers(0, 2)`` never rejects a word (Lemire's threshold is 0 for two values) and returns its top
    bit, so these words give its draws in a fraction of the time.  :meth:`close` leaves the generator as
    ``integers`` would have: advanced by the words taken, a left-over high half buffered.
    """

    def __init__(self, gen: np.random.Generator) -> None:
        self.bg = gen.bit_generator
        state = self.bg.state
        self.pending = np.array([state["uinteger"]] if state["has_uint32"] else [], dtype=np.uint32)

    def take(self, m: int) -> np.ndarray:
        """The next ``m`` words (uint32)."""
        need = m - self.pending.size
        fresh = self.bg.random_raw((need + 1) // 2).view(np.uint32) if need > 0 else self.pending[:0]
        words = np.concatenate((self.pending, fresh)) if self.pending.size else fresh
        self.pending = words[m:].copy()
        return words[:m]

    def close(self) -> None:
        state = dict(self.bg.state)
        state["has_uint32"] = int(self.pending.size > 0)
        state["uinteger"] = int(self.pending[0]) if self.pending.size else 0
        self.bg.state = state


def _reference_null(gen: np.random.Generator, v: np.ndarray, n_resamples: int) -> np.ndarray:
    """:func:`_monte_carlo_null` with plain elementwise arithmetic (the reference; same bytes)."""
    n = v.size
    null = np.empty(n_resamples, dtype=np.float64)
    rows = max(1, min(_CHUNK, _MAX_CELLS // n))
    for start in range(0, n_resamples, rows):
        c = min(rows, n_resamples - start)
        bits = gen.integers(0, 2, size=(c, n))
        # eps * v in draw-major layout (no transposed copy), summed left to right along the clusters:
        # the +0.0 start makes it the same IEEE sequence as ``_weighted_sums`` (a leading −0.0 becomes +0.0)
        terms = (1.0 - 2.0 * bits) * v[None, :]
        terms[:, 0] += 0.0
        np.add.accumulate(terms, axis=1, out=terms)
        null[start : start + c] = terms[:, -1] / n
    return null


def sign_flip_test(
    values: npt.ArrayLike,
    *,
    n_resamples: int = 20_000,
    rng: RngLike,
    exact: bool | Literal["auto"] = "auto",
) -> SignFlipResult:
    """Two-sided cluster sign-flip test of H0: the cluster values are symmetric about 0.

    ``values``: one value per cluster, shape ``(n,)``.  The statistic is ``T = mean(values)``; the p-value
    counts null means with ``|T_null| >= |T| - tol`` (``tol = 1e-12 * max(1, max|values|)``).
    ``exact="auto"`` enumerates all ``2**n`` sign vectors when ``2**n <= n_resamples`` (``p = count / 2**n``,
    the identity included); otherwise it draws ``n_resamples`` sign vectors from ``rng`` and
    ``p = (count + 1) / (n_resamples + 1)``.  ``exact=True`` forces enumeration (``n <= 24``),
    ``exact=False`` forces Monte Carlo.
    """
    func = "sign_flip_test"
    n_resamples = _check_int(n_resamples, "n_resamples", func, 1)
    if isinstance(exact, str) and exact == "auto":
        mode: bool | None = None
    elif isinstance(exact, (bool, np.bool_)):
        mode = bool(exact)
    else:
        raise _param_error(func, "exact", "'auto', True or False", repr(exact))
    v = _as_values(values, func, allow_2d=False)
    n = v.size
    if mode is True and n > _MAX_EXACT:
        raise _param_error(
            func, "exact", f"'auto' or False for more than {_MAX_EXACT} clusters", f"True with {n} clusters"
        )
    gen = check_rng(rng)

    use_exact = mode if mode is not None else n <= _MAX_EXACT and (1 << n) <= n_resamples
    statistic = float(_column_means(v[:, None])[0])
    tol = 1e-12 * max(1.0, float(np.max(np.abs(v))))
    null = _exact_null(v) if use_exact else _monte_carlo_null(gen, v, n_resamples)
    count = int(np.count_nonzero(np.abs(null) >= abs(statistic) - tol))
    pvalue = count / null.size if use_exact else (count + 1) / (null.size + 1)
    return SignFlipResult(
        statistic=statistic,
        pvalue=pvalue,
        n_clusters=n,
        n_resamples=int(null.size),
        exact=bool(use_exact),
        seed=_seed_of(rng),
        null_distribution=null,
    )


def format_p(p: float, n_resamples: int) -> str:
    """``"<0.001"`` when ``p < 0.001``, else ``p`` with 3 decimals (``"0.023"``).

    ``n_resamples`` is the number of resamples behind ``p``: a resampling p-value is at least
    ``1 / (n_resamples + 1)`` (Monte Carlo) or ``1 / n_resamples`` (exact), so a smaller ``p`` is refused.
    """
    func = "format_p"
    n_resamples = _check_int(n_resamples, "n_resamples", func, 1)
    ok = not isinstance(p, (bool, np.bool_)) and isinstance(p, (int, float, np.integer, np.floating))
    value: Any = float(p) if ok else p
    if not ok or not 0.0 <= value <= 1.0:
        raise _param_error(func, "p", "a float in the range [0, 1]", repr(p))
    floor = 1.0 / (n_resamples + 1)
    if value < floor * (1.0 - 1e-9):
        raise _param_error(
            func, "p", f"at least 1/(n_resamples + 1) = {floor:.3g} for a resampling p-value", repr(p)
        )
    return "<0.001" if value < 0.001 else f"{value:.3f}"
