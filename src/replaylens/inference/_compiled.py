"""Compiled inner loops of the shared resamples (the optional ``fast`` extra: numba).

:class:`BootstrapCounts` is the bootstrap's draw-and-count step of :mod:`._shared` -- exactly the cluster
indices of ``Generator.integers(0, n, dtype=int64)`` and the counts of ``np.bincount`` on them -- in one
pass that runs without the GIL, so the blocks of draws use every core.  It reads the generator's raw 64-bit
words (``bit_generator.random_raw``) and applies numpy's own algorithm to them: Lemire's multiply-shift on
the 32-bit halves, low half first, rejecting a product whose low word falls below ``(2**32 - n) mod n``
(numpy's ``buffered_bounded_lemire_uint32``).  The equality with numpy's draws is tested byte for byte; the
products that follow are unchanged, so the bootstrap's bytes do not depend on whether numba is installed.

Without numba (or for small problems, where compiling would cost more than it saves) the caller keeps the
numpy path.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from replaylens._jit import compiled

__all__ = ["BootstrapCounts", "compiled_available"]

#: words drawn beyond a chunk's expected need (rejections are rare: about ``n / 2**32`` of the words)
_SLACK = 64


def _lemire_counts(words: np.ndarray, n: int, counts: np.ndarray) -> int:
    """Rows of ``counts`` (``(c, n)``) := counts of successive Lemire draws on ``[0, n)`` from the 32-bit
    ``words``; the number of words used, or -1 when they run out first (compiled by :func:`_kernel`)."""
    bound = np.uint64(n)
    low32 = np.uint64(0xFFFFFFFF)
    shift = np.uint64(32)
    threshold = np.uint64((0x100000000 - n) % n)
    pos = 0
    size = words.shape[0]
    tally = np.zeros(n, dtype=np.int32)  # cache-friendlier than float64 counts
    for r in range(counts.shape[0]):
        tally[:] = 0
        i = 0
        while i < n:
            if pos >= size:
                return -1
            m = np.uint64(words[pos]) * bound
            pos += 1
            if (m & low32) >= threshold:
                tally[m >> shift] += 1
                i += 1
        for j in range(n):
            counts[r, j] = tally[j]
    return pos


def _probe(fn: Callable[..., int]) -> None:
    fn(np.arange(1, 4, dtype=np.uint32) << np.uint32(30), 3, np.zeros((1, 3)))


def _kernel() -> Callable[..., int] | None:
    """The compiled counting loop, or ``None`` where numba is not installed or does not compile it."""
    return compiled(_lemire_counts, _probe)


def compiled_available() -> bool:
    """Whether the compiled loops are usable (numba installed and compiling)."""
    return _kernel() is not None


class BootstrapCounts:
    """Per-cluster counts of successive draws from one bit generator, ``(c, n)`` per call.

    Each call continues the same stream of 32-bit words, as successive ``Generator.integers(0, n,
    size=(c, n), dtype=np.int64)`` calls on a fresh generator would; the words drawn but not used are kept
    for the next call.
    """

    def __init__(self, bit_generator: np.random.BitGenerator, n: int) -> None:
        kernel = _kernel()
        if kernel is None:
            raise RuntimeError("the compiled loops need numba (pip install 'replaylens[fast]')")
        self._kernel = kernel
        self._bg = bit_generator
        self._n = n
        self._left = np.empty(0, dtype=np.uint32)

    def _more(self, halves: int) -> None:
        raw = self._bg.random_raw((halves + 1) // 2 + _SLACK)
        words = np.asarray(raw, dtype="<u8").view("<u4")  # the low half of each output first, as numpy reads
        self._left = np.concatenate((self._left, words)) if self._left.size else words

    def __call__(self, counts: np.ndarray) -> None:
        """Fill ``counts`` (``(c, n)`` float64, C-contiguous) with the next ``c`` draws' counts."""
        need = counts.shape[0] * self._n
        if self._left.size < need:
            self._more(need - self._left.size)
        while True:
            used = int(self._kernel(self._left, self._n, counts))
            if used >= 0:
                self._left = self._left[used:]
                return
            self._more(max(need // 64, _SLACK))  # rejections used up the slack: draw a little more, redo
