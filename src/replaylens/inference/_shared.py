"""Shared resamples for many paired statistics at once: the audit's statistics (issue 27).

:func:`cluster_bootstrap` and :func:`sign_flip_test` draw their own resamples for every call and add in
cluster order (byte-exact, BLAS-free); the paper wing keeps them.  An audit asks the same question of
every summary row (a percentile interval for 3 columns, a sign-flip test for 2 of them) over the same
clusters, so here **one** set of draws serves every row and column:

* **bootstrap** -- each draw resamples ``n`` clusters with replacement: cluster indices exactly uniform on
  ``[0, n)`` (``Generator.integers(0, n)``: Lemire's multiply-shift with rejection on the
  generator's 32-bit words, no modulo bias), turned into per-cluster counts; every column's resampled sum is
  ``counts . values`` over the centred values rounded to a grid on which that sum is exact (:func:`_on_grid`:
  ``53 - ceil(log2 n)`` bits below the column's largest magnitude), through one BLAS product per chunk of
  draws on numpy's path, or counted and multiplied in one compiled pass (:class:`._compiled.BootstrapSums`);
* **sign flips** -- each draw takes ``ceil(n / 64)`` raw 64-bit words: bit ``b`` of word ``w`` (least
  significant first) flips cluster ``64 w + b`` (bit set: sign -1); the signed sums of every column add the
  clusters four at a time from tables of their 16 signed sums, in a fixed order (:mod:`._flipsums`).
  Exact enumeration for tiny ``n`` is delegated to :func:`sign_flip_test`, as it decides.

Draws come in blocks of :data:`BLOCK` draws; block ``i`` draws from its own Generator
``derive_seed(seed, "audit-bootstrap" | "audit-signflip", i)``, so blocks may run on any number of threads.

A column of zeros (the row of an intervention that changed no decision) resamples to exact zeros and is left
out of the sums (:func:`_live_columns`).

Reproducibility: the bootstrap's resampled sums are exact and the sign-flip nulls add in a fixed order, so both
statistics' bytes depend only on ``seed``, ``n_resamples`` and the values, on every installation: not on
BLAS, the CPU's kernels, numba, the number of threads here or inside BLAS, the columns left out, or the replay
backend.  The price is the bootstrap's grid: a value moves by at most ``2**-(53 - ceil(log2 n))`` of its
column's largest magnitude (about 7e-12 of it at 50,000 clusters), so a resampled mean by at most that much.
Marginally each column is the same percentile bootstrap and Monte Carlo sign-flip test as the reference's (see
docs/decisions.md, "Audit statistics: shared resamples (issue 27)" and "Exact resampled sums").
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import numpy.typing as npt

from replaylens._cpus import statistics_threads
from replaylens._jit import worth_it
from replaylens.rng import derive_seed

from ._bootstrap import _as_values, _check_int, _check_level, _column_means, _param_error
from ._compiled import BootstrapSums, compiled_available
from ._compiled import flip_sums as flip_sums_compiled
from ._flipsums import flip_sums
from ._results import BootstrapResult, SignFlipResult
from ._signflip import _MAX_EXACT, sign_flip_test

__all__ = ["BLOCK", "shared_bootstrap", "shared_sign_flip_tests", "single_thread_blas"]

#: draws per block (one Generator each); fixed, so the bytes never depend on the thread count
BLOCK = 256
#: at most this many (draw, cluster) float64 cells per matrix product (8 MB, cache-sized; a function of ``n`` only)
_MAX_CELLS = 1 << 20
#: (cluster, draw) cells from which the compiled draw-and-count loop is used when numba is installed (below
#: it, importing numba costs more than it saves)
COMPILED_CELLS = 1 << 28
#: leave the columns of zeros out of the products (their resampled means are zeros); off only to test that
SKIP_ZERO_COLUMNS = True


def _threads(threads: int | None) -> int:
    if threads is None:
        return statistics_threads()
    return _check_int(threads, "threads", "shared resampling", 1)


def _seed(seed: int, func: str) -> int:
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise _param_error(func, "seed", "a non-negative int (the recorded seed)", repr(seed))
    return int(seed)


def _rows_per_product(n: int) -> int:
    return max(1, min(BLOCK, _MAX_CELLS // n))


def _on_grid(m: np.ndarray) -> np.ndarray:
    """``m`` (``(n, K)``, finite) with each column rounded to nearest on its grid ``2**(E - b)``: ``E`` the
    column's binary exponent (its largest magnitude below ``2**E``), ``b = 53 - ceil(log2 n)`` bits.  A value
    moves by at most half a step, ``2**-b`` of its column's largest magnitude; and any sum of ``n`` draws' worth
    of these values -- a resampled sum, ``sum_i count_i * x_i`` with the counts adding up to ``n`` -- is a
    multiple of the step below ``2**53`` steps, so float64 holds it and each of its partial sums exactly: every
    order of the additions (BLAS's, a compiled loop's) gives the same bytes.  No ``-0.0`` (a zero is ``+0.0``)."""
    bits = 53 - (m.shape[0] - 1).bit_length()   # ceil(log2 n)
    _, exponent = np.frexp(np.max(np.abs(m), axis=0, initial=0.0))
    shift = bits - exponent
    return np.ldexp(np.rint(np.ldexp(m, shift)), -shift) + 0.0


def _padded_transpose(grid: np.ndarray) -> np.ndarray:
    """``grid`` (``(n, K)``) transposed, with rows of zeros up to a multiple of four (what
    :class:`._compiled.BootstrapSums` multiplies: four columns at a time)."""
    out = np.zeros((4 * math.ceil(grid.shape[1] / 4), grid.shape[0]), dtype=np.float64)
    out[: grid.shape[1]] = grid.T
    return out


def _bootstrap_block(seed: int, block: int, grid: np.ndarray, grid_t: np.ndarray | None, draws: int,
                     out: np.ndarray) -> None:
    """Resampled mean deviations of block ``block`` (``draws`` rows) into ``out`` (``draws x K``).

    The indices are ``Generator.integers(0, n, dtype=int64)``, which for ``n <= 2**32`` is Lemire's
    multiply-shift on the PCG64's 32-bit words (low half of each 64-bit output first) with rejection
    below ``2**32 mod n`` (the draws of ``dtype=uint32``, already as bincount's int64), so every cluster
    has exactly ``floor(2**32 / n)`` accepted words; drawn draw after draw, so the products' row split
    (a function of ``n``) does not change them.  Each draw's resampled sum of the ``grid`` values
    (:func:`_on_grid`) is exact: through numpy (bincount, then a BLAS product), or with ``grid_t``
    (``grid`` transposed, padded to a multiple of four rows) through :class:`._compiled.BootstrapSums` (one
    GIL-free pass); the same bytes either way.
    """
    n, k = grid.shape
    gen = np.random.default_rng(derive_seed(seed, "audit-bootstrap", block))
    if grid_t is not None:
        sums = np.empty((draws, grid_t.shape[0]), dtype=np.float64)
        BootstrapSums(gen.bit_generator, grid_t)(sums)
        out[:] = sums[:, :k]
    else:
        rows = _rows_per_product(n)
        counts = np.empty((min(rows, draws), n), dtype=np.float64)
        for r0 in range(0, draws, rows):
            c = min(rows, draws - r0)
            index = gen.integers(0, n, size=(c, n), dtype=np.int64)
            for i in range(c):
                counts[i] = np.bincount(index[i], minlength=n)
            np.dot(counts[:c], grid, out=out[r0 : r0 + c])
    out += 0.0   # an exact zero is +0.0 on every path
    out /= n


def _use_compiled(n: int, n_resamples: int) -> bool:
    """Whether the draws go through the compiled loop: numba installed and a problem big enough
    (:data:`COMPILED_CELLS`) that importing it pays, or numba loaded already; the bytes are the same either way."""
    return worth_it(n * n_resamples, COMPILED_CELLS) and compiled_available()


#: the numpy path's sign-flip sums take several blocks per task (fewer, longer vectorized steps), holding at most
#: this many bytes of sign words at once; the bytes do not depend on it
_WORD_BYTES = 1 << 24


def _flip_span(padded: np.ndarray, compiled: bool) -> int:
    """Blocks per sign-flip task: one for the compiled sums, up to 8 for numpy's (:data:`_WORD_BYTES`)."""
    return 1 if compiled else max(1, min(8, _WORD_BYTES // (padded.shape[0] // 8 * BLOCK)))


def _signflip_blocks(seed: int, blocks: range, padded: np.ndarray, n: int, n_resamples: int, out: np.ndarray, *,
                     compiled: bool = False) -> None:
    """Null means of the consecutive blocks ``blocks`` into their rows of ``out`` (``n_resamples x k``): block
    ``b``'s sign vectors are the raw words of its own PCG64, ``W`` per vector; their signed sums are
    :func:`._flipsums.flip_sums` (``compiled``: :func:`._compiled.flip_sums`, the same additions), over
    ``padded`` (``(64 W, K)``, ``K >= k`` a multiple of 4: the columns past ``k`` are zeros, dropped)."""
    width = padded.shape[0] // 64  # raw words per sign vector
    r0, r1 = blocks.start * BLOCK, min(n_resamples, blocks.stop * BLOCK)
    raw = np.concatenate([
        np.random.default_rng(derive_seed(seed, "audit-signflip", b)).bit_generator.random_raw(
            min(BLOCK, n_resamples - b * BLOCK) * width)
        for b in blocks]).astype("<u8", copy=False)
    sums = np.empty((r1 - r0, padded.shape[1]), dtype=np.float64)
    kernel = flip_sums_compiled() if compiled else None
    (kernel or flip_sums)(raw, padded, sums)
    out[r0:r1] = sums[:, : out.shape[1]] / n


@contextlib.contextmanager
def single_thread_blas() -> Iterator[None]:
    """Hold BLAS to one thread (where ``threadpoolctl`` is installed) while the caller runs its own parallel
    work or many small products: BLAS threads on top only contend. Results are the same either way."""
    try:  # imported by name: threadpoolctl ships no type information
        tpc = importlib.import_module("threadpoolctl")
    except ImportError:
        yield
        return
    with tpc.threadpool_limits(limits=1, user_api="blas"):
        yield


def _run_blocks(block: Callable[[range], None], n_resamples: int, threads: int, span: int = 1) -> None:
    """``block(blocks)`` for every run of ``span`` consecutive blocks of the ``n_resamples`` draws (the last run
    maybe shorter), on up to ``threads`` threads (numpy's
    generators and ``np.dot``'s BLAS call release the GIL; each block writes its own rows, so the order
    does not matter).  The products use ``np.dot``, not ``np.matmul``: on numpy 2.4 matmul held the GIL
    around the same BLAS call (measured: two threads of matmul ran one at a time, of dot side by side), which
    had left the blocks nearly serial; the two give the same bytes here.

    BLAS is held to one thread meanwhile where ``threadpoolctl`` is installed (the blocks are the
    parallel work; BLAS threads on top of them only contend); the bytes are the same either way.
    """
    count = math.ceil(n_resamples / BLOCK)
    blocks = [range(b, min(b + span, count)) for b in range(0, count, span)]
    workers = min(threads, len(blocks))
    with contextlib.ExitStack() as stack:
        stack.enter_context(single_thread_blas())
        if workers <= 1:
            for b in blocks:
                block(b)
            return
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="replaylens-shared") as pool:
            for _ in pool.map(block, blocks):
                pass


def _live_columns(m: np.ndarray) -> np.ndarray:
    """The columns of ``m`` that are not all zeros (every column when :data:`SKIP_ZERO_COLUMNS` is off): a column
    of zeros resamples to exact zeros, so it is left out of the sums (the rows of an intervention that changed no
    decision); the other columns' bytes do not depend on it (their sums are exact, or added in a fixed order)."""
    if not SKIP_ZERO_COLUMNS:
        return np.arange(m.shape[1])
    return np.flatnonzero(m.any(axis=0))


def _spread(part: np.ndarray, live: np.ndarray, k: int) -> np.ndarray:
    """``(B, k)`` with ``part``'s columns at ``live`` and exact zeros (what the product gives a column of zeros,
    +0.0) elsewhere."""
    out = np.zeros((part.shape[0], k), dtype=np.float64)
    out[:, live] = part
    return out


def _groups(groups: Sequence[int] | None, k: int, func: str) -> list[tuple[int, int]]:
    sizes = [k] if groups is None else [_check_int(g, "groups", func, 1) for g in groups]
    if sum(sizes) != k:
        raise _param_error(func, "groups", f"column counts adding up to the {k} columns", repr(list(sizes)))
    ends = np.cumsum([0, *sizes]).tolist()
    return list(itertools.pairwise(ends))


def shared_bootstrap(
    values: npt.ArrayLike,
    *,
    n_resamples: int = 20_000,
    level: float = 0.95,
    seed: int,
    groups: Sequence[int] | None = None,
    threads: int | None = None,
) -> list[BootstrapResult]:
    """Percentile bootstrap intervals of the column means of ``values`` ``(n, K)``, all columns from the
    same resampled clusters (one draw = one multinomial count vector), one result per group of
    consecutive columns (``groups``: column counts; default one group of all ``K``).

    Each result is what :func:`cluster_bootstrap` reports (estimate, percentile interval, standard error,
    ``method="percentile"``, the ``(B, k)`` distribution: a slice of the shared ``(B, K)`` matrix), from
    the shared draws of ``seed`` instead of a Generator of its own.  ``threads``: blocks run at once
    (default :func:`replaylens._cpus.statistics_threads`: up to 4, no more than the CPUs available; the bytes
    do not depend on it).
    """
    func = "shared_bootstrap"
    n_resamples = _check_int(n_resamples, "n_resamples", func, 1)
    level = _check_level(level, "level", func)
    seed = _seed(seed, func)
    arr = _as_values(values, func, allow_2d=True)
    v = arr.reshape(arr.shape[0], -1)
    n, k = v.shape
    spans = _groups(groups, k, func)
    if n >= 1 << 32:
        raise _param_error(func, "values", "fewer than 2**32 clusters", str(n))
    pivot = _column_means(v)  # as cluster_bootstrap: centre on the correctly rounded mean, refine it
    centered = np.ascontiguousarray(v - pivot)
    estimate = pivot + _column_means(centered)
    live = _live_columns(centered)
    grid = _on_grid(centered[:, live])
    dev = np.empty((n_resamples, live.size), dtype=np.float64)
    grid_t = _padded_transpose(grid) if _use_compiled(n, n_resamples) else None

    def block(blocks: range) -> None:
        for b in blocks:
            r0 = b * BLOCK
            _bootstrap_block(seed, b, grid, grid_t, min(BLOCK, n_resamples - r0), dev[r0 : r0 + BLOCK])

    if live.size:
        _run_blocks(block, n_resamples, _threads(threads))
    deviation = dev if live.size == k else _spread(dev, live, k)
    distribution = pivot + deviation
    tail = (1.0 - level) / 2.0
    bounds = np.array([np.quantile(np.ascontiguousarray(distribution[:, j]), [tail, 1.0 - tail]) for j in range(k)])
    se = np.array([float(np.std(np.ascontiguousarray(deviation[:, j]), ddof=1)) if n_resamples > 1 else math.nan
                   for j in range(k)])
    return [
        BootstrapResult(
            estimate=estimate[a:b].copy(), low=bounds[a:b, 0].copy(), high=bounds[a:b, 1].copy(), level=level,
            n_clusters=n, n_resamples=n_resamples, method="percentile", seed=seed,
            distribution=distribution[:, a:b], standard_error=se[a:b].copy(),
        )
        for a, b in spans
    ]


def shared_sign_flip_tests(
    values: npt.ArrayLike,
    *,
    n_resamples: int = 20_000,
    seed: int,
    threads: int | None = None,
) -> list[SignFlipResult]:
    """Two-sided sign-flip tests of every column of ``values`` ``(n, K)``, all from the same sign vectors.

    Statistic, tolerance and p-value are :func:`sign_flip_test`'s (Monte Carlo:
    ``p = (count + 1) / (n_resamples + 1)``).  When it would enumerate all ``2**n`` sign vectors
    (``2**n <= n_resamples``), every column is delegated to it, so tiny ``n`` stays exact.  ``threads``:
    as in :func:`shared_bootstrap`.
    """
    func = "shared_sign_flip_tests"
    n_resamples = _check_int(n_resamples, "n_resamples", func, 1)
    seed = _seed(seed, func)
    arr = _as_values(values, func, allow_2d=True)
    v = arr.reshape(arr.shape[0], -1)
    n, k = v.shape
    if n <= _MAX_EXACT and (1 << n) <= n_resamples:
        return [sign_flip_test(v[:, j], n_resamples=n_resamples, rng=seed) for j in range(k)]
    live = _live_columns(v)
    padded = np.zeros((64 * math.ceil(n / 64), 4 * math.ceil(live.size / 4)), dtype=np.float64)
    padded[:n, : live.size] = v[:, live]  # the bits past n, and the columns past the live ones, add zeros
    part = np.empty((n_resamples, live.size), dtype=np.float64)
    compiled = _use_compiled(n, n_resamples)

    def block(blocks: range) -> None:
        _signflip_blocks(seed, blocks, padded, n, n_resamples, part, compiled=compiled)

    if live.size:
        _run_blocks(block, n_resamples, _threads(threads), _flip_span(padded, compiled))
    null = part if live.size == k else _spread(part, live, k)
    statistic = _column_means(v)
    out = []
    for j in range(k):
        tol = 1e-12 * max(1.0, float(np.max(np.abs(v[:, j]))))
        col = null[:, j]
        count = int(np.count_nonzero(np.abs(col) >= abs(float(statistic[j])) - tol))
        out.append(SignFlipResult(statistic=float(statistic[j]), pvalue=(count + 1) / (n_resamples + 1),
                                  n_clusters=n, n_resamples=n_resamples, exact=False, seed=seed,
                                  null_distribution=col))
    return out
