"""Adaptive call budget vs the full matrix (issue 18 point 4).

Scripted agents whose true action responses are known: each cell has a per-decision change
probability p (stream-level heterogeneity: stream s changes with p * (0.5 + u_s), mean p), each
stream has ``--decisions`` decisions per cell, and a stream's response is the fraction that changed.
The responses are a fixed function of (repetition seed, cell, stream), so the adaptive run asks a
subset of exactly the matrix the full run sees.  The full-matrix verdict classifies the audit's
stream-cluster percentile bootstrap interval over all streams; the adaptive verdict classifies the
betting confidence sequence after it stops (``replaylens.inference.adaptive_cells``).

    python bench/adaptive.py               # 100 seeded repetitions, about 40 s on a shared 2-CPU host
    python bench/adaptive.py --reps 20     # quicker

Printed last: the fraction of (repetition, cell) verdicts equal to the full matrix's (target >= 95 %)
and the fraction of calls used (target <= 40 %), aligned baseline calls included.
"""

from __future__ import annotations

import argparse
import functools
import time

import numpy as np

from replaylens.inference import adaptive_cells, classify, cluster_bootstrap
from replaylens.rng import derive_rng

# cell -> true per-decision change probability (the margin is 0.05)
CELLS = {
    "invariant": 0.0,     # e.g. pair under a commutative rule: no change at all
    "small": 0.02,        # inside the margin, below m/2
    "near-margin": 0.04,  # inside the margin, close to it
    "just-outside": 0.08,  # just outside the margin
    "moderate": 0.2,
    "clear": 0.6,
}


def _ask(matrix: dict[str, np.ndarray], cell: str, idx: np.ndarray) -> np.ndarray:
    return matrix[cell][idx]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=100, help="Seeded repetitions.")
    ap.add_argument("--streams", type=int, default=400, help="Streams in the full matrix.")
    ap.add_argument("--decisions", type=int, default=16, help="Decisions per stream and cell.")
    ap.add_argument("--rounds", type=int, default=20, help="Adaptive rounds.")
    ap.add_argument("--margin", type=float, default=0.05, help="Equivalence margin m.")
    ap.add_argument("--resamples", type=int, default=4000, help="Bootstrap draws of the full-matrix interval.")
    a = ap.parse_args()
    t0 = time.perf_counter()
    names = list(CELLS)
    agree = np.zeros(len(names))
    streams_used = np.zeros(len(names))
    calls_used = calls_full = 0
    verdicts: dict[str, dict[str, int]] = {c: {} for c in names}
    for rep in range(a.reps):
        u = derive_rng(rep, "bench-streams").random(a.streams)
        matrix = {}
        for c, p in CELLS.items():
            rate = np.clip(p * (0.5 + u), 0.0, 1.0)
            matrix[c] = derive_rng(rep, "bench-cell", c).binomial(a.decisions, rate) / a.decisions
        full = {}
        for c in names:
            bs = cluster_bootstrap(matrix[c], n_resamples=a.resamples, rng=derive_rng(rep, "bench-boot", c))
            full[c] = classify(float(bs.low), float(bs.high), a.margin)
        res = adaptive_cells(functools.partial(_ask, matrix), a.streams, names, margin=a.margin, rounds=a.rounds,
                             seed=rep)
        for j, cv in enumerate(res.cells):
            agree[j] += cv.verdict == full[cv.cell]
            streams_used[j] += cv.n_streams
            key = f"{full[cv.cell]} -> {cv.verdict}"
            verdicts[cv.cell][key] = verdicts[cv.cell].get(key, 0) + 1
        calls_used += (res.asked + res.aligned_streams) * a.decisions
        calls_full += (len(names) + 1) * a.streams * a.decisions
    print(f"{a.reps} repetitions, {a.streams} streams x {a.decisions} decisions per cell, {a.rounds} rounds, "
          f"margin {a.margin}")
    print(f"{'cell':<14}{'true p':>8}{'agree':>8}{'streams asked':>15}  full -> adaptive")
    for j, c in enumerate(names):
        print(f"{c:<14}{CELLS[c]:>8.2f}{agree[j] / a.reps:>8.1%}{streams_used[j] / a.reps / a.streams:>15.1%}  "
              f"{verdicts[c]}")
    print(f"elapsed {time.perf_counter() - t0:.1f} s")
    print(f"verdicts equal to the full matrix: {agree.sum() / (a.reps * len(names)):.1%} (target >= 95%); "
          f"calls used: {calls_used / calls_full:.1%} of the full matrix (target <= 40%)")


if __name__ == "__main__":
    main()
