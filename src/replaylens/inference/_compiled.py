"""Compiled inner loops of the shared resamples (the optional ``fast`` extra: numba).

:class:`BootstrapSums` is the bootstrap's step of :mod:`._shared` -- exactly the cluster indices of
``Generator.integers(0, n, dtype=int64)``, counted, and each draw's counts times the grid values -- in one
pass that runs without the GIL, so the blocks of draws use every core.  It steps the generator's PCG64 itself
(the 128-bit LCG and its XSL-RR output, as numpy does) and applies numpy's own algorithm to its 32-bit halves:
Lemire's multiply-shift, low half first (the bit generator's buffered half carried from call to call),
rejecting a product whose low word falls below ``(2**32 - n) mod n`` (numpy's
``buffered_bounded_lemire_uint32``).  No word is written to memory, and the generator's state is handed back
after each call.  The counts stay small integers in rows that fit the cache, and the products are summed in
whatever order the compiler vectorizes best: on the grid values every such sum is exact, so the bytes are
those of the numpy path's BLAS product (tested byte for byte).  :class:`BootstrapCounts` is the same draws'
counts alone (their equality with numpy's draws is tested call after call).

:func:`flip_sums` is the sign-flip test's signed sums (:mod:`._flipsums`: groups of four clusters looked up in
16-entry tables of their signed sums, added group after group), in one GIL-free pass that keeps each table chunk
in the first-level cache and four draws by four columns in registers: the same additions in the same order as
the numpy path, so the same bytes (tested byte for byte).

Without numba (or for small problems, where compiling would cost more than it saves) the caller keeps the
numpy path.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from replaylens._jit import compiled, loop_helper, pcg64_next

__all__ = ["BootstrapCounts", "BootstrapSums", "compiled_available", "flip_sums"]

_MASK64 = (1 << 64) - 1


@loop_helper
def _lemire_count(word: np.uint64, bound: np.uint64, threshold: np.uint64, tally: np.ndarray) -> int:
    """One 32-bit ``word`` through Lemire's multiply-shift on ``[0, bound)``: counted in ``tally`` (1) unless
    the product's low half falls below ``threshold`` (rejected: 0)."""
    m = word * bound
    if (m & np.uint64(0xFFFFFFFF)) >= threshold:
        tally[m >> np.uint64(32)] += 1
        return 1
    return 0


@loop_helper
def _draw_counts(state: np.ndarray, n: int, rows: np.ndarray, c: int) -> None:
    """Rows ``0 <= r < c`` of ``rows`` (``(>= c, n)``, any numeric dtype) := the counts of successive Lemire
    draws on ``[0, n)`` from a PCG64 whose ``state`` is ``(state hi, state lo, inc hi, inc lo, has_uint32,
    uinteger)`` (uint64, updated in place; the step is :func:`replaylens._jit.pcg64_next`).  One cluster: every
    count is 1, no word drawn (numpy draws none for a range of one value)."""
    if n == 1:
        for r in range(c):
            rows[r, 0] = 1
        return
    m32 = np.uint64(0xFFFFFFFF)
    s32 = np.uint64(32)
    s_hi, s_lo, inc_hi, inc_lo = state[0], state[1], state[2], state[3]
    has32 = state[4] != 0
    buf = state[5]
    bound = np.uint64(n)
    threshold = np.uint64((0x100000000 - n) % n)
    for r in range(c):
        tally = rows[r]
        tally[:] = 0
        i = 0
        if has32:   # the high half of the last output, kept (numpy's next_uint32)
            has32 = False
            i += _lemire_count(buf, bound, threshold, tally)
        while i < n:   # PCG64: the next state and its 64-bit output, both halves (low first)
            s_hi, s_lo, out = pcg64_next(s_hi, s_lo, inc_hi, inc_lo)
            i += _lemire_count(out & m32, bound, threshold, tally)
            buf = out >> s32   # (numpy keeps the high half whether or not it is used next)
            if i < n:
                i += _lemire_count(buf, bound, threshold, tally)
            else:
                has32 = True
    state[0] = s_hi
    state[1] = s_lo
    state[4] = np.uint64(1) if has32 else np.uint64(0)
    state[5] = buf


def _pcg_lemire_counts(state: np.ndarray, n: int, counts: np.ndarray) -> None:
    """Rows of ``counts`` (``(c, n)``) := counts of successive Lemire draws on ``[0, n)`` (:func:`_draw_counts`;
    compiled by :func:`_kernel`)."""
    _draw_counts(state, n, counts, counts.shape[0])


#: clusters per tile of the compiled products (a tile of four columns of the grid values, 32 KiB, stays in the
#: first-level cache while every count row of a chunk goes past it)
_TILE = 1024


@loop_helper
def _add_products(rows: np.ndarray, c: int, grid_t: np.ndarray, out: np.ndarray, r0: int) -> None:
    """``out[r0 + r, k] +=`` the sum over clusters ``i`` of ``rows[r, i] * grid_t[k, i]`` for ``r < c``, two
    count rows by four columns at a time, clusters tile by tile (``grid_t``'s rows a multiple of four).  Every
    such sum is exact (the values are on the grid of :func:`._shared._on_grid`), so the order of the additions,
    which the compiler may change here, does not change a bit."""
    kk, n = grid_t.shape
    for t0 in range(0, n, _TILE):
        t1 = min(n, t0 + _TILE)
        m = t1 - t0
        for ra in range(0, c, 2):
            rb = min(ra + 1, c - 1)
            ca, cb = rows[ra, t0:t1], rows[rb, t0:t1]
            for k0 in range(0, kk, 4):
                x0, x1 = grid_t[k0, t0:t1], grid_t[k0 + 1, t0:t1]
                x2, x3 = grid_t[k0 + 2, t0:t1], grid_t[k0 + 3, t0:t1]
                a0 = a1 = a2 = a3 = b0 = b1 = b2 = b3 = 0.0
                for i in range(m):
                    u, v = float(ca[i]), float(cb[i])
                    a0 += u * x0[i]
                    a1 += u * x1[i]
                    a2 += u * x2[i]
                    a3 += u * x3[i]
                    b0 += v * x0[i]
                    b1 += v * x1[i]
                    b2 += v * x2[i]
                    b3 += v * x3[i]
                out[r0 + ra, k0] += a0
                out[r0 + ra, k0 + 1] += a1
                out[r0 + ra, k0 + 2] += a2
                out[r0 + ra, k0 + 3] += a3
                if rb != ra:
                    out[r0 + rb, k0] += b0
                    out[r0 + rb, k0 + 1] += b1
                    out[r0 + rb, k0 + 2] += b2
                    out[r0 + rb, k0 + 3] += b3


def _pcg_lemire_sums(state: np.ndarray, n: int, rows: np.ndarray, grid_t: np.ndarray, out: np.ndarray) -> None:
    """``out`` (``(draws, K)``) := each successive draw's count vector (:func:`_draw_counts`) times the grid
    values ``grid_t`` (``(K, n)``), ``rows.shape[0]`` draws counted into ``rows`` at a time, then multiplied
    (:func:`_add_products`; compiled by :func:`_sums_kernel` with reassociation allowed: the sums are exact)."""
    draws = out.shape[0]
    out[:] = 0.0
    for r0 in range(0, draws, rows.shape[0]):
        c = min(rows.shape[0], draws - r0)
        _draw_counts(state, n, rows, c)
        _add_products(rows, c, grid_t, out, r0)


def _probe(fn: Callable[..., None]) -> None:
    fn(np.ones(6, dtype=np.uint64), 3, np.zeros((1, 3)))


def _probe_sums(fn: Callable[..., None]) -> None:
    fn(np.ones(6, dtype=np.uint64), 3, np.zeros((1, 3), dtype=np.uint16), np.ones((4, 3)), np.zeros((1, 4)))


def _sums_kernel() -> Callable[..., None] | None:
    """The compiled count-and-multiply loop (reassociating: its sums are exact), or ``None`` without numba."""
    return compiled(_pcg_lemire_sums, _probe_sums, reassociate=True)


def _kernel() -> Callable[..., None] | None:
    """The compiled counting loop, or ``None`` where numba is not installed or does not compile it."""
    return compiled(_pcg_lemire_counts, _probe)


@loop_helper
def _nibble_tables(padded: np.ndarray, g0: int, g1: int, tables: np.ndarray) -> None:
    """``tables[g - g0]`` := group ``g``'s 16 signed sums for ``g0 <= g < g1`` (:func:`._flipsums.nibble_tables`:
    entry ``m`` is ``((s0 x0 + s1 x1) + s2 x2) + s3 x3``, ``s_b = -1`` where bit ``b`` of ``m`` is set)."""
    kk = padded.shape[1]
    for g in range(g0, g1):
        t = tables[g - g0]
        for k in range(kk):
            x = padded[4 * g, k]
            t[0, k] = x
            t[1, k] = -x
        size = 2
        for b in range(1, 4):
            for m in range(size):
                for k in range(kk):
                    x = padded[4 * g + b, k]
                    t[m + size, k] = t[m, k] - x
                    t[m, k] = t[m, k] + x
            size *= 2


@loop_helper
def _plus4(row: np.ndarray, k0: int, s: tuple[float, float, float, float]) -> tuple[float, float, float, float]:
    """``(s[0] + row[k0], ..., s[3] + row[k0 + 3])``: one table entry's four columns added to four running sums
    (inlined: the sums stay in registers)."""
    return s[0] + row[k0], s[1] + row[k0 + 1], s[2] + row[k0 + 2], s[3] + row[k0 + 3]


@loop_helper
def _add_tables(raw: np.ndarray, width: int, w0: int, w1: int, tables: np.ndarray, out: np.ndarray) -> None:
    """``out[r, k] +=`` the table entries of words ``w0 <= w < w1`` of draw ``r`` (nibble ``j`` of word ``w``
    picks the entry of group ``16 w + j``), group after group; four draws by four columns at a time (``out``'s
    columns a multiple of four; a last partial set of draws repeats its last draw, written twice alike)."""
    draws, kk = out.shape
    m4 = np.uint64(15)
    last = draws - 1
    for k0 in range(0, kk, 4):
        for r0 in range(0, draws, 4):
            ra, rb, rc, rd = r0, min(r0 + 1, last), min(r0 + 2, last), min(r0 + 3, last)
            a = out[ra, k0], out[ra, k0 + 1], out[ra, k0 + 2], out[ra, k0 + 3]
            b = out[rb, k0], out[rb, k0 + 1], out[rb, k0 + 2], out[rb, k0 + 3]
            c = out[rc, k0], out[rc, k0 + 1], out[rc, k0 + 2], out[rc, k0 + 3]
            d = out[rd, k0], out[rd, k0 + 1], out[rd, k0 + 2], out[rd, k0 + 3]
            for w in range(w0, w1):
                base = 16 * (w - w0)
                wa, wb = raw[ra * width + w], raw[rb * width + w]
                wc, wd = raw[rc * width + w], raw[rd * width + w]
                for j in range(16):
                    sh = np.uint64(4 * j)
                    a = _plus4(tables[base + j, (wa >> sh) & m4], k0, a)
                    b = _plus4(tables[base + j, (wb >> sh) & m4], k0, b)
                    c = _plus4(tables[base + j, (wc >> sh) & m4], k0, c)
                    d = _plus4(tables[base + j, (wd >> sh) & m4], k0, d)
            out[ra, k0], out[ra, k0 + 1], out[ra, k0 + 2], out[ra, k0 + 3] = a
            out[rb, k0], out[rb, k0 + 1], out[rb, k0 + 2], out[rb, k0 + 3] = b
            out[rc, k0], out[rc, k0 + 1], out[rc, k0 + 2], out[rc, k0 + 3] = c
            out[rd, k0], out[rd, k0 + 1], out[rd, k0 + 2], out[rd, k0 + 3] = d


def _flip_sums(raw: np.ndarray, padded: np.ndarray, out: np.ndarray) -> None:
    """``out`` (``(c, K)``, ``K`` a multiple of 4) := the signed sums of :func:`._flipsums.flip_sums` for the
    ``c`` sign vectors in ``raw`` (``c · W`` uint64 words; ``padded`` is ``(64 W, K)``), one table chunk of at
    most 32 KiB at a time (the order of the additions does not depend on the chunk)."""
    n64, kk = padded.shape
    width = n64 // 64
    per_chunk = max(1, 16 // kk)   # words per chunk: 16 groups of 16 entries of kk float64 each
    out[:] = 0.0
    tables = np.empty((16 * per_chunk, 16, kk))
    for w0 in range(0, width, per_chunk):
        w1 = min(width, w0 + per_chunk)
        _nibble_tables(padded, 16 * w0, 16 * w1, tables)
        _add_tables(raw, width, w0, w1, tables, out)


def _probe_flips(fn: Callable[..., None]) -> None:
    fn(np.ones(1, dtype=np.uint64), np.ones((64, 4)), np.zeros((1, 4)))


def flip_sums() -> Callable[[np.ndarray, np.ndarray, np.ndarray], None] | None:
    """The compiled signed sums ``(raw words, padded values, out)``, or ``None`` without numba."""
    return compiled(_flip_sums, _probe_flips)


def compiled_available() -> bool:
    """Whether the compiled loops are usable (numba installed and compiling the bootstrap's)."""
    return _sums_kernel() is not None


class _Stepper:
    """A compiled loop that steps one PCG64 bit generator as ``Generator.integers(0, n, dtype=np.int64)`` calls
    would, and leaves it where they would (its state is handed back after each call)."""

    def __init__(self, kernel: Callable[..., None] | None, bit_generator: np.random.BitGenerator, n: int) -> None:
        if kernel is None:
            raise RuntimeError("the compiled loops need numba (pip install 'replaylens[fast]')")
        if not isinstance(bit_generator, np.random.PCG64):
            raise TypeError(f"{type(self).__name__} steps a PCG64, not a {type(bit_generator).__name__}")
        self._kernel = kernel
        self._bg = bit_generator
        self._n = n

    def _run(self, *arrays: np.ndarray) -> None:
        st = self._bg.state
        pcg, inc = int(st["state"]["state"]), int(st["state"]["inc"])
        state = np.array([pcg >> 64, pcg & _MASK64, inc >> 64, inc & _MASK64, st["has_uint32"], st["uinteger"]],
                         dtype=np.uint64)
        self._kernel(state, self._n, *arrays)
        hi, lo, _, _, has32, buf = (int(x) for x in state)
        self._bg.state = {"bit_generator": "PCG64", "state": {"state": (hi << 64) | lo, "inc": inc},
                          "has_uint32": has32, "uinteger": buf}


class BootstrapCounts(_Stepper):
    """Per-cluster counts of successive draws from one PCG64 bit generator, ``(c, n)`` per call: the counts of
    ``np.bincount`` on successive ``Generator.integers(0, n, size=(c, n), dtype=np.int64)``."""

    def __init__(self, bit_generator: np.random.BitGenerator, n: int) -> None:
        super().__init__(_kernel(), bit_generator, n)

    def __call__(self, counts: np.ndarray) -> None:
        """Fill ``counts`` (``(c, n)``, C-contiguous) with the next ``c`` draws' counts."""
        self._run(counts)


#: bytes of count rows a compiled chunk holds (the rows go past each tile of grid values once per chunk)
_CHUNK_BYTES = 1 << 21


class BootstrapSums(_Stepper):
    """The draws of :class:`BootstrapCounts`, each count vector multiplied at once by grid values ``grid_t``
    (``(K, n)``, ``K`` a multiple of four, on :func:`._shared._on_grid`'s grid: every sum exact); the counts are
    kept as small integers (``uint16`` below ``2**16`` clusters) and never written as float rows."""

    def __init__(self, bit_generator: np.random.BitGenerator, grid_t: np.ndarray) -> None:
        n = grid_t.shape[1]
        super().__init__(_sums_kernel(), bit_generator, n)
        self._grid_t = grid_t
        dtype = np.dtype(np.uint16 if n < 1 << 16 else np.uint32)   # a count is at most n
        self._rows = np.empty((max(1, min(256, _CHUNK_BYTES // (n * dtype.itemsize))), n), dtype=dtype)

    def __call__(self, out: np.ndarray) -> None:
        """``out`` (``(c, K)`` float64) := the next ``c`` draws' sums (exact; a zero may come out as -0.0)."""
        self._run(self._rows, self._grid_t, out)
