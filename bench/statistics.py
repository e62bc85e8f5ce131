"""Stream-cluster statistics of an audit (issue 27): per-row reference against the shared resamples.

One summary row of an audit costs a paired bootstrap of 3 columns (action, ΔU, ΔO) and two Monte Carlo
sign-flip tests over ``--streams`` clusters and ``--resamples`` draws.  The script times, in one run:

1. one row on the reference path (elementwise sums) and on the ordered CSR path, same seeds: the
   distributions must be the same bytes;
2. the audit's ``--rows`` rows the way ``summarize`` did before issue 27 (per row: ``cluster_bootstrap`` and
   two ``sign_flip_test`` calls with per-row seeds, rows on ``--threads`` threads) against the shared
   resamples (:func:`replaylens.inference.shared_bootstrap` / ``shared_sign_flip_tests``: one set of draws
   for every row, exact sums over grid values for the bootstrap, table sums for the sign flips, blocks on
   ``--threads`` threads), with the largest interval-bound difference in Monte Carlo units (bootstrap standard errors);
3. the shared resamples alone at ``--full-resamples`` draws (the default audit's 20,000; the bootstrap's and
   the sign flips' times apart), then on numpy's paths and on the compiled loops of the ``fast`` extra (numba:
   the bootstrap's counts and exact sums in one pass, the sign flips' table sums): same bytes.

The per-row reference at 50,000 streams x 20,000 draws x 7 rows takes several minutes, so the comparison
(2) runs at ``--resamples`` (2,000 by default; both sides scale linearly in draws) and (3) gives the
shared scheme's time at full size.  The ratio of (2) is printed last.

    python bench/statistics.py                                   # 50,000 streams, 2,000 / 20,000 draws
    python bench/statistics.py --resamples 20000                 # the comparison at full size (slow)
"""

from __future__ import annotations

import argparse
import importlib
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from replaylens.inference import cluster_bootstrap, shared_bootstrap, shared_sign_flip_tests, sign_flip_test
from replaylens.rng import derive_seed

boot_mod = importlib.import_module("replaylens.inference._bootstrap")
flip_mod = importlib.import_module("replaylens.inference._signflip")
shared_mod = importlib.import_module("replaylens.inference._shared")


def one_row(values: np.ndarray, resamples: int) -> tuple[float, bytes]:
    t0 = time.perf_counter()
    iv = cluster_bootstrap(values, n_resamples=resamples, rng=1)
    tu = sign_flip_test(values[:, 1], n_resamples=resamples, rng=2, exact=False)
    to = sign_flip_test(values[:, 2], n_resamples=resamples, rng=3, exact=False)
    wall = time.perf_counter() - t0
    return wall, iv.distribution.tobytes() + tu.null_distribution.tobytes() + to.null_distribution.tobytes()


def per_row_reference(stacks: list[np.ndarray], resamples: int, threads: int) -> tuple[float, list[np.ndarray]]:
    """The audit's statistics as summarize computed them before issue 27; ``(seconds, bounds per row)``."""

    def row(r: int) -> np.ndarray:
        stack = stacks[r]
        iv = cluster_bootstrap(stack, n_resamples=resamples, rng=derive_seed(0, "bootstrap", r))
        sign_flip_test(stack[:, 1], n_resamples=resamples, rng=derive_seed(0, "signflip-u", r))
        sign_flip_test(stack[:, 2], n_resamples=resamples, rng=derive_seed(0, "signflip-o", r))
        return np.c_[iv.low, iv.high, iv.standard_error]

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        bounds = list(pool.map(row, range(len(stacks))))
    return time.perf_counter() - t0, bounds


def shared(stacks: list[np.ndarray], resamples: int, threads: int) -> tuple[float, list[np.ndarray]]:
    """The same statistics from one set of shared resamples; ``(seconds, bounds per row)``."""
    wall, ivs = shared_timed(stacks, resamples, threads)
    return wall, [np.c_[iv.low, iv.high, iv.standard_error] for iv in ivs]


def shared_timed(stacks: list[np.ndarray], resamples: int, threads: int) -> tuple[float, list[Any]]:
    wall, ivs, _ = shared_parts(stacks, resamples, threads)
    return wall, ivs


def shared_parts(stacks: list[np.ndarray], resamples: int, threads: int) -> tuple[float, list[Any], list[Any]]:
    """The audit's shared statistics: ``(seconds, intervals, sign-flip tests)``; prints the two parts' times."""
    t0 = time.perf_counter()
    values = np.hstack(stacks)
    ivs = shared_bootstrap(values, n_resamples=resamples, seed=0, groups=[3] * len(stacks), threads=threads)
    t1 = time.perf_counter()
    flips = shared_sign_flip_tests(np.delete(values, np.s_[::3], axis=1), n_resamples=resamples, seed=0,
                                   threads=threads)
    t2 = time.perf_counter()
    print(f"    (bootstrap {t1 - t0:6.2f} s, sign flips {t2 - t1:6.2f} s)")
    return t2 - t0, ivs, flips


def compiled_against_numpy(stacks: list[np.ndarray], resamples: int, threads: int) -> bool:
    """The shared resamples on numpy's paths and on the compiled loops (``fast`` extra: the bootstrap's counts
    and exact sums, the sign flips' table sums): prints both times; True when the bootstrap distributions and the
    sign-flip nulls are the same bytes (or numba is not installed)."""
    keep = shared_mod.compiled_available
    shared_mod.compiled_available = lambda: False
    try:
        t_np, iv_np, fl_np = shared_parts(stacks, resamples, threads)
    finally:
        shared_mod.compiled_available = keep
    if not shared_mod._use_compiled(stacks[0].shape[0], resamples):
        print(f"  numpy paths        {t_np:8.2f} s  (the compiled loops are not used here: numba missing or too small)")
        return True
    t_c, iv_c, fl_c = shared_parts(stacks, resamples, threads)
    same = (all(a.distribution.tobytes() == b.distribution.tobytes() for a, b in zip(iv_np, iv_c, strict=True))
            and all(a.null_distribution.tobytes() == b.null_distribution.tobytes()
                    for a, b in zip(fl_np, fl_c, strict=True)))
    print(f"  numpy paths        {t_np:8.2f} s")
    print(f"  compiled loops     {t_c:8.2f} s  {'same bytes' if same else 'MISMATCH'}  ratio {t_np / t_c:.2f}x")
    return same


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=50_000)
    ap.add_argument("--resamples", type=int, default=2_000, help="draws of the timed comparisons")
    ap.add_argument("--full-resamples", type=int, default=20_000, help="draws of the shared scheme alone")
    ap.add_argument("--rows", type=int, default=7, help="summary rows (the default audit has 7)")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    rng = np.random.default_rng(20261125)
    stacks = [np.c_[rng.binomial(12, 0.1, args.streams) / 12, rng.normal(0.01, 0.2, (args.streams, 2))]
              for _ in range(args.rows)]
    values = stacks[0]
    cells = args.streams * args.resamples

    fast, fast_bytes = one_row(values, args.resamples)
    keep = boot_mod.ordered_sums_available, flip_mod.ordered_sums_available
    boot_mod.ordered_sums_available = flip_mod.ordered_sums_available = lambda: False  # type: ignore[assignment]
    try:
        ref, ref_bytes = one_row(values, args.resamples)
    finally:
        boot_mod.ordered_sums_available, flip_mod.ordered_sums_available = keep
    same = "same bytes" if fast_bytes == ref_bytes else "MISMATCH"
    print(f"one row, {args.streams} streams x {args.resamples} draws: bootstrap (3 columns) + 2 sign-flip tests")
    print(f"  reference sums {ref:8.2f} s  ({ref / cells * 1e9:6.1f} ns per stream-draw)")
    print(f"  ordered CSR    {fast:8.2f} s  ({fast / cells * 1e9:6.1f} ns per stream-draw)  {same}"
          f"  ratio {ref / fast:.2f}x")

    cpu0 = time.process_time()
    full, _ = shared(stacks, args.full_resamples, args.threads)
    cpu = time.process_time() - cpu0
    print(f"shared resamples alone, {args.rows} rows x {args.streams} streams x {args.full_resamples} draws, "
          f"{args.threads} threads: {full:8.2f} s wall, {cpu:8.2f} s CPU (all threads)")

    print(f"shared resamples on numpy's paths vs the compiled loops, {args.full_resamples} draws:")
    compiled_same = compiled_against_numpy(stacks, args.full_resamples, args.threads)

    t_ref, b_ref = per_row_reference(stacks, args.resamples, args.threads)
    t_new, b_new = shared(stacks, args.resamples, args.threads)
    # interval bounds and SEs of the two schemes, in units of the reference's bootstrap SE
    se = np.concatenate([b[:, 2] for b in b_ref])
    diff = max(float(np.max(np.abs(np.concatenate([n[:, c] for n in b_new]) -
                                   np.concatenate([r[:, c] for r in b_ref])) / se)) for c in (0, 1))
    print(f"audit statistics, {args.rows} rows x {args.streams} streams x {args.resamples} draws, "
          f"{args.threads} threads:")
    print(f"  per-row reference {t_ref:8.2f} s")
    print(f"  shared resamples  {t_new:8.2f} s  (largest interval-bound difference {diff:.3f} bootstrap SE)")
    print(f"ratio (per-row reference / shared) for the audit's statistics: {t_ref / t_new:.2f}x")
    return 0 if same == "same bytes" and compiled_same else 1


if __name__ == "__main__":
    raise SystemExit(main())
