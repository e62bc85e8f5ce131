"""Block permutations of many generators in one compiled pass (the optional ``fast`` extra: numba).

The same draws as :func:`._pcg.shuffle_draws` and as numpy's own ``Generator.permutation`` (which the tests
compare draw for draw): for every generator, from its PCG64 state, each of its blocks in order is a
Fisher-Yates shuffle of ``arange(n)`` whose swap partners are ``random_interval`` draws (masked rejection
on the buffered 32-bit outputs, low half first); with ``derangement`` a shuffle with a fixed point is
drawn again from the identity.  One generator after another, without the GIL and without numpy's
per-stream seeding overhead.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from replaylens._jit import compiled, pcg64_next

__all__ = ["shuffle_loop"]


def _shuffles(hi: np.ndarray, lo: np.ndarray, inc_hi: np.ndarray, inc_lo: np.ndarray, first: np.ndarray,
              last: np.ndarray, sizes: np.ndarray, derangement: bool, out: np.ndarray) -> None:
    """Row ``q`` of ``out`` := block ``q``'s permutation (its first ``sizes[q]`` entries), generator ``g``
    drawing blocks ``first[g]`` .. ``last[g] - 1`` from PCG64 state ``(hi, lo)``, increment ``(inc_hi, inc_lo)``."""
    m32 = np.uint64(0xFFFFFFFF)
    s32 = np.uint64(32)
    for g in range(hi.shape[0]):
        s_hi = hi[g]
        s_lo = lo[g]
        has32 = False
        buf = np.uint64(0)
        for q in range(first[g], last[g]):
            n = sizes[q]
            while True:
                for t in range(n):
                    out[q, t] = t
                i = n - 1
                while i > 0:
                    mask = np.uint64(i)
                    mask |= mask >> np.uint64(1)
                    mask |= mask >> np.uint64(2)
                    mask |= mask >> np.uint64(4)
                    mask |= mask >> np.uint64(8)
                    mask |= mask >> np.uint64(16)
                    while True:
                        if has32:
                            v = buf
                            has32 = False
                        else:  # PCG64: the next state and its 64-bit output
                            s_hi, s_lo, r = pcg64_next(s_hi, s_lo, inc_hi[g], inc_lo[g])
                            buf = r >> s32
                            has32 = True
                            v = r & m32
                        v &= mask
                        if v <= np.uint64(i):
                            break
                    j = np.int64(v)
                    tmp = out[q, i]
                    out[q, i] = out[q, j]
                    out[q, j] = tmp
                    i -= 1
                if not derangement:
                    break
                fixed = False
                for t in range(n):
                    if out[q, t] == t:
                        fixed = True
                        break
                if not fixed:
                    break


def _probe(fn: Callable[..., None]) -> None:
    one = np.ones(1, dtype=np.uint64)
    fn(one, one, one, one, np.zeros(1, dtype=np.int64), np.ones(1, dtype=np.int64), np.full(1, 3, dtype=np.int64),
       True, np.zeros((1, 3), dtype=np.int64))


def shuffle_loop() -> Callable[..., None] | None:
    """The compiled :func:`_shuffles`, or ``None`` where numba is missing or does not compile it."""
    return compiled(_shuffles, _probe)
