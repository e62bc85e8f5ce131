"""Compiled inner loops of the shared resamples (the optional ``fast`` extra: numba).

:class:`BootstrapCounts` is the bootstrap's draw-and-count step of :mod:`._shared` -- exactly the cluster
indices of ``Generator.integers(0, n, dtype=int64)`` and the counts of ``np.bincount`` on them -- in one
pass that runs without the GIL, so the blocks of draws use every core.  It steps the generator's PCG64 itself
(the 128-bit LCG and its XSL-RR output, as numpy does) and applies numpy's own algorithm to its 32-bit halves:
Lemire's multiply-shift, low half first (the bit generator's buffered half carried from call to call),
rejecting a product whose low word falls below ``(2**32 - n) mod n`` (numpy's
``buffered_bounded_lemire_uint32``).  No word is written to memory, and the generator's state is handed back
after each call.  The equality with numpy's draws is tested byte for byte; the products that follow are
unchanged, so the bootstrap's bytes do not depend on whether numba is installed.

:func:`expand_signs` is the sign-flip test's expansion of raw 64-bit words into rows of +1.0 / -1.0 (bit ``b``
of word ``w`` of a row, least significant first, sets cluster ``64 w + b`` to -1.0), written in place: the same
matrix, so the same products, as the numpy path's byte-table lookup (tested byte for byte).

Without numba (or for small problems, where compiling would cost more than it saves) the caller keeps the
numpy path.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from replaylens._jit import compiled, loop_helper, pcg64_next

__all__ = ["BootstrapCounts", "compiled_available", "expand_signs"]

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


def _pcg_lemire_counts(state: np.ndarray, n: int, counts: np.ndarray) -> None:
    """Rows of ``counts`` (``(c, n)``) := counts of successive Lemire draws on ``[0, n)`` from a PCG64 whose
    ``state`` is ``(state hi, state lo, inc hi, inc lo, has_uint32, uinteger)`` (uint64, updated in place)
    (compiled by :func:`_kernel`; the step is :func:`replaylens._jit.pcg64_next`)."""
    m32 = np.uint64(0xFFFFFFFF)
    s32 = np.uint64(32)
    s_hi, s_lo, inc_hi, inc_lo = state[0], state[1], state[2], state[3]
    has32 = state[4] != 0
    buf = state[5]
    bound = np.uint64(n)
    threshold = np.uint64((0x100000000 - n) % n)
    tally = np.zeros(n, dtype=np.int32)  # cache-friendlier than float64 counts
    for r in range(counts.shape[0]):
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
        for j in range(n):
            counts[r, j] = tally[j]
    state[0] = s_hi
    state[1] = s_lo
    state[4] = np.uint64(1) if has32 else np.uint64(0)
    state[5] = buf


def _probe(fn: Callable[..., None]) -> None:
    fn(np.ones(6, dtype=np.uint64), 3, np.zeros((1, 3)))


def _kernel() -> Callable[..., None] | None:
    """The compiled counting loop, or ``None`` where numba is not installed or does not compile it."""
    return compiled(_pcg_lemire_counts, _probe)


def _expand_signs(raw: np.ndarray, out: np.ndarray) -> None:
    """Row ``r`` of ``out`` (``(c, 64 W)`` float64) := the signs of words ``raw[r W : (r + 1) W]`` (uint64):
    ``1 - 2 · bit``, bit ``b`` of word ``w`` at column ``64 w + b``."""
    one = np.uint64(1)
    width = out.shape[1] // 64
    for r in range(out.shape[0]):
        for w in range(width):
            word = raw[r * width + w]
            for b in range(64):
                out[r, 64 * w + b] = 1.0 - 2.0 * np.float64((word >> np.uint64(b)) & one)


def _probe_signs(fn: Callable[..., None]) -> None:
    fn(np.ones(1, dtype=np.uint64), np.zeros((1, 64)))


def expand_signs() -> Callable[[np.ndarray, np.ndarray], None] | None:
    """The compiled sign expansion ``(raw words, out rows)``, or ``None`` without numba."""
    return compiled(_expand_signs, _probe_signs)


def compiled_available() -> bool:
    """Whether the compiled loops are usable (numba installed and compiling)."""
    return _kernel() is not None


class BootstrapCounts:
    """Per-cluster counts of successive draws from one PCG64 bit generator, ``(c, n)`` per call.

    Each call continues the generator as successive ``Generator.integers(0, n, size=(c, n), dtype=np.int64)``
    calls would, and leaves it where they would (its state is handed back after each call).
    """

    def __init__(self, bit_generator: np.random.BitGenerator, n: int) -> None:
        kernel = _kernel()
        if kernel is None:
            raise RuntimeError("the compiled loops need numba (pip install 'replaylens[fast]')")
        if not isinstance(bit_generator, np.random.PCG64):
            raise TypeError(f"BootstrapCounts steps a PCG64, not a {type(bit_generator).__name__}")
        self._kernel = kernel
        self._bg = bit_generator
        self._n = n

    def __call__(self, counts: np.ndarray) -> None:
        """Fill ``counts`` (``(c, n)`` float64, C-contiguous) with the next ``c`` draws' counts."""
        st = self._bg.state
        pcg, inc = int(st["state"]["state"]), int(st["state"]["inc"])
        state = np.array([pcg >> 64, pcg & _MASK64, inc >> 64, inc & _MASK64, st["has_uint32"], st["uinteger"]],
                         dtype=np.uint64)
        self._kernel(state, self._n, counts)
        hi, lo, _, _, has32, buf = (int(x) for x in state)
        self._bg.state = {"bit_generator": "PCG64", "state": {"state": (hi << 64) | lo, "inc": inc},
                          "has_uint32": has32, "uinteger": buf}
