"""The audit's sign-flip sums in a fixed order, through tables of four clusters' signed sums (issue 27).

A sign vector is ``W`` raw 64-bit words: bit ``b`` of word ``w`` (least significant first) flips cluster
``64 w + b`` (bit set: sign -1).  Its null sum of column ``k`` is ``sum_i s_i x_ik``, computed as:

* the clusters in groups of four, group ``g`` holding clusters ``4g .. 4g + 3`` (nibble ``j`` of word ``w`` is
  group ``16 w + j``'s four signs);
* for each group, a table of its 16 signed sums, entry ``m`` = ``((s0 x0 + s1 x1) + s2 x2) + s3 x3`` with
  ``s_b = -1`` where bit ``b`` of ``m`` is set (built by doubling: each new cluster adds and subtracts its value);
* the sum = ``0.0`` plus the entries the nibbles pick, added group after group (``g = 0, 1, ...``).

That is a fixed sequence of IEEE additions (``±x`` is exact, so no multiply rounds), so the bytes depend only on
the words and the values: not on BLAS, the CPU's kernels, the number of threads, or whether numba is installed
(:func:`._compiled.flip_sums` is the same additions compiled).  Per cluster and draw it costs a quarter of a table
lookup instead of writing a ±1.0 matrix and multiplying it (about a third of the time of the expansion and BLAS
product it replaced, measured; docs/decisions.md).  The values are padded with zero rows to whole words.
"""

from __future__ import annotations

import numpy as np

__all__ = ["flip_sums", "nibble_tables"]

#: groups of four clusters per vectorized chunk of the numpy path (the bytes do not depend on it)
_CHUNK = 512


def nibble_tables(padded: np.ndarray) -> np.ndarray:
    """``(G, 16, K)`` signed sums of every group of four rows of ``padded`` (``(4 G, K)``): entry ``[g, m]`` is
    ``((s0 x0 + s1 x1) + s2 x2) + s3 x3`` over rows ``4g + b``, ``s_b = -1`` where bit ``b`` of ``m`` is set."""
    groups, kk = padded.shape[0] // 4, padded.shape[1]
    quad = padded.reshape(groups, 4, kk)
    tables = np.empty((groups, 16, kk), dtype=np.float64)
    tables[:, 0] = quad[:, 0]
    tables[:, 1] = -quad[:, 0]
    size = 2
    for b in range(1, 4):   # entries m + size (bit b set) subtract cluster b, entries m add it
        x = quad[:, b][:, None, :]
        tables[:, size : 2 * size] = tables[:, :size] - x
        tables[:, :size] += x
        size *= 2
    return tables


def flip_sums(raw: np.ndarray, padded: np.ndarray, out: np.ndarray) -> None:
    """``out`` (``(c, K)``) := the signed sums of the ``c`` sign vectors in ``raw`` (``c · W`` words, little
    endian) over ``padded`` (``(64 W, K)``), group after group (the module's order; numpy's path): the groups
    :data:`_CHUNK` at a time, each a vectorized step over every draw."""
    n64, kk = padded.shape
    width, draws = n64 // 64, out.shape[0]
    octets = np.asarray(raw, dtype="<u8").view(np.uint8).reshape(draws, 8 * width)   # byte i: groups 2i, 2i + 1
    acc = np.zeros((draws, kk), dtype=np.float64)
    for b0 in range(0, 8 * width, _CHUNK // 2):
        block = octets[:, b0 : b0 + _CHUNK // 2].T   # (bytes, draws): a cache-sized transpose
        nibbles = np.empty((2 * block.shape[0], draws), dtype=np.uint8)
        nibbles[0::2] = block & 15
        nibbles[1::2] = block >> 4
        tables = nibble_tables(padded[8 * b0 : 8 * b0 + 4 * nibbles.shape[0]])
        for g in range(nibbles.shape[0]):
            acc += tables[g].take(nibbles[g], axis=0)
    out[:] = acc
