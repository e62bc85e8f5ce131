"""numpy's seeding and permutation draws for many generators at once (the same bytes, vectorized).

``default_rng(SeedSequence([seed, stable_int(role), stable_int(name)]))`` followed by
``g.permutation(n)`` calls is re-implemented elementwise over uint64 arrays: the SeedSequence
hash (32-bit words), PCG64's seeding and 128-bit LCG step with its XSL-RR output, the buffered
32-bit draws and the masked-rejection interval draw of the Fisher–Yates shuffle.  Every
generator advances exactly as its numpy twin does, so the permutations are identical; the tests
compare both draw for draw.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["pcg64_states", "seed_state_words", "seed_words", "VectorPCG64"]

_U = np.uint64
_M32 = _U(0xFFFFFFFF)
_INIT_A, _MULT_A = 0x43B0D7E5, 0x931E8875
_INIT_B, _MULT_B = 0x8B51F9DD, 0x58F38DED
_MIX_L, _MIX_R = 0xCA01F9DD, 0x4973F715
_POOL = 4
_MULT_HI, _MULT_LO = _U(0x2360ED051FC65DA4), _U(0x4385DF649FCCF645)  # PCG's 128-bit multiplier


def seed_words(value: int) -> list[int]:
    """A non-negative int as SeedSequence reads it: little-endian 32-bit words (``[0]`` for 0)."""
    if value == 0:
        return [0]
    out: list[int] = []
    while value > 0:
        out.append(value & 0xFFFFFFFF)
        value >>= 32
    return out


def _hashmix(value: np.ndarray, const: int) -> tuple[np.ndarray, int]:
    value = (value ^ _U(const)) & _M32
    const = (const * _MULT_A) & 0xFFFFFFFF
    value = (value * _U(const)) & _M32
    return value ^ (value >> _U(16)), const


def _mix(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    r: np.ndarray = (np.multiply(x, _U(_MIX_L)) - np.multiply(y, _U(_MIX_R))) & _M32
    return r ^ (r >> _U(16))


def _pool(entropy: np.ndarray, lengths: np.ndarray) -> list[np.ndarray]:
    """SeedSequence's mixed pool (4 words) of each row of ``entropy`` (G, L) uint64 words, row g
    holding ``lengths[g]`` words (zero padded)."""
    const = _INIT_A
    mixer: list[np.ndarray] = []
    for i in range(_POOL):
        col = entropy[:, i] if i < entropy.shape[1] else np.zeros(entropy.shape[0], dtype=_U)
        v, const = _hashmix(col, const)
        mixer.append(v)
    for i_src in range(_POOL):
        for i_dst in range(_POOL):
            if i_src != i_dst:
                h, const = _hashmix(mixer[i_src], const)
                mixer[i_dst] = _mix(mixer[i_dst], h)
    for i_src in range(_POOL, entropy.shape[1]):
        live = lengths > i_src
        for i_dst in range(_POOL):
            h, const = _hashmix(entropy[:, i_src], const)
            mixer[i_dst] = np.where(live, _mix(mixer[i_dst], h), mixer[i_dst])
    return mixer


def _mulhi(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """High 64 bits of the 128-bit product of uint64 arrays."""
    a0, a1, b0, b1 = a & _M32, a >> _U(32), b & _M32, b >> _U(32)
    p00, p01, p10 = a0 * b0, a0 * b1, a1 * b0
    mid = (p00 >> _U(32)) + (p01 & _M32) + (p10 & _M32)
    return a1 * b1 + (p01 >> _U(32)) + (p10 >> _U(32)) + (mid >> _U(32))


def _step(hi: np.ndarray, lo: np.ndarray, inc_hi: np.ndarray, inc_lo: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """state ← state · M + inc (mod 2^128) on (hi, lo) halves."""
    with np.errstate(over="ignore"):
        new_hi = _mulhi(lo, np.broadcast_to(_MULT_LO, lo.shape)) + lo * _MULT_HI + hi * _MULT_LO
        new_lo = lo * _MULT_LO
        out_lo = new_lo + inc_lo
        carry = (out_lo < new_lo).astype(_U)
        return new_hi + inc_hi + carry, out_lo


def seed_state_words(entropy_prefix: Sequence[int], last: np.ndarray) -> list[np.ndarray]:
    """``SeedSequence([*entropy_prefix, last[g]]).generate_state(4, np.uint64)`` for every g, as four uint64
    arrays (``last`` a uint64 array of non-negative values): numpy's SeedSequence hash, vectorized."""
    prefix = [w for v in entropy_prefix for w in seed_words(int(v))]
    last = np.asarray(last, dtype=_U)
    g_n, p_n = last.shape[0], len(prefix)
    entropy = np.zeros((g_n, p_n + 2), dtype=_U)
    entropy[:, :p_n] = np.asarray(prefix, dtype=_U)
    entropy[:, p_n] = last & _M32
    entropy[:, p_n + 1] = last >> _U(32)
    lengths = p_n + 1 + (last > _M32).astype(np.int64)
    with np.errstate(over="ignore"):
        mixer = _pool(entropy, lengths)
        words: list[np.ndarray] = []
        const = _INIT_B
        for i in range(8):  # generate_state(4, uint64): 8 words, little-endian pairs
            v = mixer[i % _POOL] ^ _U(const)
            const = (const * _MULT_B) & 0xFFFFFFFF
            v = (v * _U(const)) & _M32
            words.append(v ^ (v >> _U(16)))
        return [words[2 * k] | (words[2 * k + 1] << _U(32)) for k in range(4)]


def pcg64_states(entropy_prefix: Sequence[int], last: np.ndarray) -> tuple[np.ndarray, ...]:
    """PCG64 (state_hi, state_lo, inc_hi, inc_lo) of ``PCG64(SeedSequence([*entropy_prefix, last[g]]))``
    for every g (``last`` a uint64 array of non-negative values)."""
    val = seed_state_words(entropy_prefix, last)
    g_n = val[0].shape[0]
    with np.errstate(over="ignore"):
        # pcg64_set_seed: initstate = (val0, val1), initseq = (val2, val3), (high, low)
        inc_hi = (val[2] << _U(1)) | (val[3] >> _U(63))
        inc_lo = (val[3] << _U(1)) | _U(1)
        zero = np.zeros(g_n, dtype=_U)
        hi, lo = _step(zero, zero, inc_hi, inc_lo)
        lo2 = lo + val[1]
        hi = hi + val[0] + (lo2 < lo).astype(_U)
        hi, lo = _step(hi, lo2, inc_hi, inc_lo)
    return hi, lo, inc_hi, inc_lo


class VectorPCG64:
    """G PCG64 generators advanced together (``next_uint32`` for a chosen subset)."""

    def __init__(self, hi: np.ndarray, lo: np.ndarray, inc_hi: np.ndarray, inc_lo: np.ndarray) -> None:
        self.hi, self.lo, self.inc_hi, self.inc_lo = hi.copy(), lo.copy(), inc_hi, inc_lo
        self.has32 = np.zeros(hi.shape[0], dtype=bool)
        self.buf32 = np.zeros(hi.shape[0], dtype=_U)

    def next_uint32(self, rows: np.ndarray) -> np.ndarray:
        """One 32-bit draw (as uint64) from each generator in ``rows`` (distinct indices)."""
        has = self.has32[rows]
        out = self.buf32[rows].copy()
        need = rows[~has]
        if need.size:
            hi, lo = _step(self.hi[need], self.lo[need], self.inc_hi[need], self.inc_lo[need])
            self.hi[need], self.lo[need] = hi, lo
            x = hi ^ lo
            rot = hi >> _U(58)
            with np.errstate(over="ignore"):
                r = (x >> rot) | (x << ((_U(64) - rot) & _U(63)))
            out[~has] = r & _M32
            self.buf32[need] = r >> _U(32)
        self.has32[rows] = ~has
        return out


def _interval_masks(width: int) -> np.ndarray:
    """``random_interval``'s mask for every max in 0..width−1: the smallest 2^k − 1 >= max."""
    m = np.arange(width, dtype=np.int64)
    for s in (1, 2, 4, 8, 16, 32):
        m |= m >> s
    return m


def shuffle_draws(gen: VectorPCG64, first: np.ndarray, last: np.ndarray, sizes: np.ndarray,
                  derangement: bool) -> np.ndarray:
    """Block permutations drawn as numpy's ``Generator.permutation`` draws them, for every generator at once.

    Generator g draws groups ``first[g]`` .. ``last[g] − 1`` in order (each of ``sizes[q] >= 2``
    slots), each a Fisher–Yates shuffle of ``arange(n)`` (``random_interval`` of 32-bit draws); with
    ``derangement`` a shuffle with a fixed point is redrawn.  Returns (Q, W) permutations (W the
    largest size; entries past a group's size are left as the identity).
    """
    q_n = sizes.shape[0]
    width = int(sizes.max(initial=2))
    cols = np.arange(width, dtype=np.int64)
    out = np.broadcast_to(cols, (q_n, width)).copy()
    masks = _interval_masks(width)
    act = np.flatnonzero(last > first)
    ptr = first[act].astype(np.int64)
    end = last[act].astype(np.int64)
    n = sizes[ptr].astype(np.int64)
    i = n - 1
    x = np.broadcast_to(cols, (act.size, width)).copy()
    while act.size:
        val = (gen.next_uint32(act) & masks[i].astype(_U)).astype(np.int64)
        r = np.flatnonzero(val <= i)
        if not r.size:
            continue
        ir, vr = i[r], val[r]
        a = x[r, ir]
        x[r, ir] = x[r, vr]
        x[r, vr] = a
        i[r] = ir - 1
        fin = r[ir == 1]
        if not fin.size:
            continue
        if derangement:
            fixed = ((x[fin] == cols) & (cols < n[fin, None])).any(axis=1)
            rej, fin = fin[fixed], fin[~fixed]
            x[rej] = cols
            i[rej] = n[rej] - 1
        out[ptr[fin]] = x[fin]
        ptr[fin] += 1
        more = ptr[fin] < end[fin]
        nxt, done = fin[more], fin[~more]
        n[nxt] = sizes[ptr[nxt]]
        i[nxt] = n[nxt] - 1
        x[nxt] = cols
        if done.size:
            keep = np.ones(act.size, dtype=bool)
            keep[done] = False
            act, ptr, end, n, i, x = act[keep], ptr[keep], end[keep], n[keep], i[keep], x[keep]
    return out


def seeded_uniforms(seeds: np.ndarray, k: int) -> np.ndarray:
    """(k, Q): the first ``k`` values of ``np.random.default_rng(seed).random()`` for every seed, for all seeds at
    once (PCG64 seeded through SeedSequence, each draw ``(next_uint64 >> 11) * 2**-53``): the same bytes."""
    hi, lo, inc_hi, inc_lo = pcg64_states([], np.asarray(seeds, dtype=np.uint64))
    out = np.empty((k, hi.shape[0]), dtype=np.float64)
    for i in range(k):
        hi, lo = _step(hi, lo, inc_hi, inc_lo)
        x, rot = hi ^ lo, hi >> _U(58)
        with np.errstate(over="ignore"):
            word = (x >> rot) | (x << ((_U(64) - rot) & _U(63)))
        out[i] = (word >> _U(11)).astype(np.float64) * 2.0**-53
    return out
