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

from replaylens._jit import compiled

__all__ = ["shuffle_loop"]


def _shuffles(hi: np.ndarray, lo: np.ndarray, inc_hi: np.ndarray, inc_lo: np.ndarray, first: np.ndarray,
              last: np.ndarray, sizes: np.ndarray, derangement: bool, out: np.ndarray) -> None:
    """Row ``q`` of ``out`` := block ``q``'s permutation (its first ``sizes[q]`` entries), generator ``g``
    drawing blocks ``first[g]`` .. ``last[g] - 1`` from PCG64 state ``(hi, lo)``, increment ``(inc_hi, inc_lo)``."""
    m32 = np.uint64(0xFFFFFFFF)
    s32 = np.uint64(32)
    mult_hi = np.uint64(0x2360ED051FC65DA4)
    mult_lo = np.uint64(0x4385DF649FCCF645)
    b0 = mult_lo & m32
    b1 = mult_lo >> s32
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
                        else:  # PCG64: state = state * M + inc (mod 2**128), then the XSL-RR output
                            a0 = s_lo & m32
                            a1 = s_lo >> s32
                            p00 = a0 * b0
                            p01 = a0 * b1
                            p10 = a1 * b0
                            mid = (p00 >> s32) + (p01 & m32) + (p10 & m32)
                            new_hi = a1 * b1 + (p01 >> s32) + (p10 >> s32) + (mid >> s32) + s_lo * mult_hi \
                                + s_hi * mult_lo
                            new_lo = s_lo * mult_lo
                            s_lo = new_lo + inc_lo[g]
                            s_hi = new_hi + inc_hi[g] + (np.uint64(1) if s_lo < new_lo else np.uint64(0))
                            x = s_hi ^ s_lo
                            rot = s_hi >> np.uint64(58)
                            r = (x >> rot) | (x << ((np.uint64(64) - rot) & np.uint64(63)))
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
