"""Stream-cluster statistics of one audit row (issue 27): the ordered CSR sums against the reference sums.

One summary row of an audit costs a paired bootstrap of 3 columns (action, ΔU, ΔO) and two Monte Carlo
sign-flip tests, each over ``--streams`` clusters and ``--resamples`` draws.  The script times that row
on the reference path (elementwise sums) and on the default path (one CSR product per chunk), from the
same seeds, checks that the distributions are the same bytes, and prints the ratio last.

    python bench/statistics.py                                # 50,000 streams, 2,000 draws
    python bench/statistics.py --streams 10000 --resamples 20000
"""

from __future__ import annotations

import argparse
import importlib
import time

import numpy as np

from replaylens.inference import cluster_bootstrap, sign_flip_test

boot_mod = importlib.import_module("replaylens.inference._bootstrap")
flip_mod = importlib.import_module("replaylens.inference._signflip")


def one_row(values: np.ndarray, resamples: int) -> tuple[float, bytes]:
    t0 = time.perf_counter()
    iv = cluster_bootstrap(values, n_resamples=resamples, rng=1)
    tu = sign_flip_test(values[:, 1], n_resamples=resamples, rng=2, exact=False)
    to = sign_flip_test(values[:, 2], n_resamples=resamples, rng=3, exact=False)
    wall = time.perf_counter() - t0
    return wall, iv.distribution.tobytes() + tu.null_distribution.tobytes() + to.null_distribution.tobytes()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=50_000)
    ap.add_argument("--resamples", type=int, default=2_000)
    args = ap.parse_args()
    rng = np.random.default_rng(20261125)
    values = np.c_[rng.binomial(12, 0.1, args.streams) / 12, rng.normal(0.01, 0.2, (args.streams, 2))]
    cells = args.streams * args.resamples
    fast, fast_bytes = one_row(values, args.resamples)
    keep = boot_mod.ordered_sums_available, flip_mod.ordered_sums_available
    boot_mod.ordered_sums_available = flip_mod.ordered_sums_available = lambda: False  # type: ignore[assignment]
    try:
        ref, ref_bytes = one_row(values, args.resamples)
    finally:
        boot_mod.ordered_sums_available, flip_mod.ordered_sums_available = keep
    same = "same bytes" if fast_bytes == ref_bytes else "MISMATCH"
    print(f"{args.streams} streams x {args.resamples} draws: bootstrap (3 columns) + 2 sign-flip tests")
    print(f"reference sums {ref:8.2f} s  ({ref / cells * 1e9:6.1f} ns per stream-draw)")
    print(f"ordered CSR    {fast:8.2f} s  ({fast / cells * 1e9:6.1f} ns per stream-draw)  {same}")
    print(f"ratio (reference/ordered) for one audit row's statistics: {ref / fast:.2f}x")
    return 0 if same == "same bytes" else 1


if __name__ == "__main__":
    raise SystemExit(main())
