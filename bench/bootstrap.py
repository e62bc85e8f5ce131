"""Inference benchmark: 20,000-draw stream-cluster bootstrap intervals and sign-flip tests of an audit's readouts.

The audit is the paper-scale replay of ``bench/replay.py`` (48 streams, 4 blocks x 48 slots, 6 strata x 48
future tasks, identity + 9 derangements, cells aligned/value/pair/key_slot) run once on the array path
for one writer (default: relation).  Its cell readouts, one value per stream (48 clusters):

* for each cell != aligned: direct_action_contrast, delta_u_direct, delta_o_direct (maps = identity);
* a_rekey (aligned, the 9 derangements);
* gamma(y, cell) for y in U, A, O and each cell != aligned (non-identity maps);

are bootstrapped (``cluster_bootstrap``, 20,000 draws) as one paired ``(48, K)`` call and as K separate
calls, and tested with ``sign_flip_test`` (20,000 sign vectors).  A plain Python loop over 20,000 draws
for ONE readout is timed as the baseline.  Every timing: warmed once, best of ``--repeat`` runs
(``time.perf_counter``).

Run from the repository root::

    python bench/bootstrap.py
    python bench/bootstrap.py --writer commutative --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from replaylens.agents import (
    Agent,
    commutative_agent,
    invariant_agent,
    key_only_agent,
    order_sensitive_agent,
    relation_agent,
)
from replaylens.bandit import make_bandit
from replaylens.inference import cluster_bootstrap, sign_flip_test
from replaylens.readouts import (
    StreamValues,
    a_rekey,
    delta_o_direct,
    delta_u_direct,
    direct_action_contrast,
    gamma,
)
from replaylens.replay import plan_replay, replay

SUBSTRATE_SEED = 20261121
CONTEXTS = ("c1", "c2", "c3", "c4")
HELD_OUT = ("h1", "h2")
CELLS = ("value", "pair", "key_slot")  # aligned is always included
B = 20_000
LEVEL = 0.95
TARGET_S = 1.0

WRITERS: dict[str, Callable[[], Agent]] = {
    "invariant": lambda: invariant_agent(1.0),
    "key-only": lambda: key_only_agent(1.0),
    "commutative": lambda: commutative_agent(1.0),
    "relation": relation_agent,
    "order-sensitive": lambda: order_sensitive_agent(0.2),
}


def best_of(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """Warm ``fn`` once, then the best wall time of ``repeat`` runs and the last result."""
    out = fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def audit_readouts(dec: Any) -> list[StreamValues]:
    """The K cell readouts of the audit, each one value per stream."""
    out: list[StreamValues] = []
    for cell in CELLS:
        out += [direct_action_contrast(dec, cell, maps="identity"),
                delta_u_direct(dec, cell, maps="identity"),
                delta_o_direct(dec, cell, maps="identity")]
    out.append(a_rekey(dec))
    for cell in CELLS:
        out += [gamma(dec, y, cell, maps="nonidentity") for y in ("U", "A", "O")]
    return out


def loop_baseline(v: np.ndarray, n_resamples: int, seed: int, level: float) -> tuple[float, float]:
    """Straightforward percentile bootstrap: a Python loop over draws, mean of the resampled values."""
    rng = np.random.default_rng(seed)
    n = v.shape[0]
    means = np.empty(n_resamples)
    for b in range(n_resamples):
        means[b] = v[rng.integers(0, n, n)].mean()
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return float(low), float(high)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--writer", choices=sorted(WRITERS), default="relation", help="audited writer (default relation)")
    ap.add_argument("--seed", type=int, default=0, help="bootstrap / sign-flip seed (default 0)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per measurement, best taken (default 3)")
    ap.add_argument("--json", metavar="PATH", help="also write the numbers to PATH as JSON")
    args = ap.parse_args(argv)
    seed = args.seed

    # ---- the audit (not part of the inference timings)
    sub = make_bandit(n_streams=48, slots_per_block=48, n_future=48, contexts=CONTEXTS, held_out=HELD_OUT,
                      rng=SUBSTRATE_SEED)
    plan = plan_replay(sub.history, sub.futures, cells=",".join(CELLS))
    t0 = time.perf_counter()
    dec = replay(sub.history, sub.futures, sub.evaluator, WRITERS[args.writer](), plan=plan, path="array")
    replay_s = time.perf_counter() - t0
    readout_s, svs = best_of(lambda: audit_readouts(dec), args.repeat)
    values = np.column_stack([sv.values for sv in svs])  # (streams, K)
    n, k = values.shape

    print(f"bootstrap benchmark: writer {args.writer!r}, {n} stream clusters, K = {k} readouts, "
          f"{B:,} draws, level {LEVEL}")
    print(f"  python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} CPUs; seed {seed}; "
          f"best of {args.repeat} after one warm-up")
    print(f"  (not timed below) array replay {replay_s:.3f} s ({dec.actions.size:,} decisions); "
          f"K readouts from the decisions {readout_s:.4f} s")
    print()

    # ---- timings
    paired_s, paired = best_of(lambda: cluster_bootstrap(values, n_resamples=B, level=LEVEL, rng=seed), args.repeat)
    separate_s, separate = best_of(
        lambda: [cluster_bootstrap(values[:, j], n_resamples=B, level=LEVEL, rng=seed) for j in range(k)],
        args.repeat)
    signflip_s, tests = best_of(
        lambda: [sign_flip_test(values[:, j], n_resamples=B, rng=seed) for j in range(k)], args.repeat)

    # one readout: library call vs the straightforward loop (first readout that is not constant over streams)
    j0 = next((j for j in range(k) if np.ptp(values[:, j]) > 0), 0)
    one_s, one = best_of(lambda: cluster_bootstrap(values[:, j0], n_resamples=B, level=LEVEL, rng=seed),
                         args.repeat)
    loop_s, loop_ci = best_of(lambda: loop_baseline(values[:, j0], B, seed, LEVEL), args.repeat)

    same = all(np.array_equal(paired.distribution[:, j], separate[j].distribution) for j in range(k))

    # ---- readout table
    w = max(len(sv.name) for sv in svs)
    head = f"{'readout':<{w}}  {'estimate':>9}  {'95% interval':>21}  {'sign-flip p':>11}"
    print(head)
    print("-" * len(head))
    for j, sv in enumerate(svs):
        lo, hi = float(paired.low[j]), float(paired.high[j])
        print(f"{sv.name:<{w}}  {float(paired.estimate[j]):>9.4f}  [{lo:>9.4f}, {hi:>9.4f}]  "
              f"{tests[j].pvalue:>11.5f}")
    print()

    total_s = paired_s + separate_s + signflip_s
    print("timings (seconds)")
    lines = [
        (f"paired: one cluster_bootstrap call on ({n}, {k})", paired_s, ""),
        (f"separate: {k} cluster_bootstrap calls on ({n},)", separate_s,
         f"({separate_s / k * 1e3:.1f} ms per readout)"),
        (f"sign-flip: {k} sign_flip_test calls ({B:,} sign vectors)", signflip_s,
         f"({signflip_s / k * 1e3:.1f} ms per readout)"),
        ("total (paired + separate + sign-flip)", total_s, ""),
    ]
    lw = max(len(label) for label, _, _ in lines)
    for label, sec, note in lines:
        print(f"  {label:<{lw}}  {sec:8.4f}  {note}".rstrip())
    print(f"  paired columns byte-identical to the separate calls: {'yes' if same else 'NO'}")
    print()
    print(f"baseline, ONE readout ({svs[j0].name}): Python loop over {B:,} draws "
          f"(np.random.default_rng({seed}), mean of resampled values)")
    print(f"  loop {loop_s:.4f} s vs cluster_bootstrap {one_s:.4f} s: {loop_s / one_s:.1f}x faster")
    print(f"  intervals: loop [{loop_ci[0]:.4f}, {loop_ci[1]:.4f}], cluster_bootstrap [{one.low:.4f}, {one.high:.4f}]")
    print(f"  K readouts by the loop (projected {k} x {loop_s:.3f} s = {k * loop_s:.2f} s) vs one paired call: "
          f"{k * loop_s / paired_s:.0f}x faster")

    if args.json:
        payload = {
            "writer": args.writer, "n_clusters": n, "k": k, "n_resamples": B, "level": LEVEL, "seed": seed,
            "environment": {"python": platform.python_version(), "numpy": np.__version__, "cpus": os.cpu_count()},
            "readouts": [{"name": sv.name, "cell": sv.cell, **paired.column(j).to_dict(),
                          "signflip_p": tests[j].pvalue} for j, sv in enumerate(svs)],
            "seconds": {"replay": replay_s, "readouts": readout_s, "paired": paired_s, "separate": separate_s,
                        "signflip": signflip_s, "total": total_s, "one_readout": one_s, "loop_one_readout": loop_s},
            "baseline_ratio": loop_s / one_s,
            "paired_equals_separate": same,
            "target_s": TARGET_S,
        }
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(payload, fh, indent=2, ensure_ascii=False)
            fh.write("\n")

    print(f"20,000-draw intervals for {k} readouts: {paired_s:.3f} s (target well under {TARGET_S:.0f} s)")
    if not same:
        print("ERROR: the paired (n, K) bootstrap does not reproduce the separate calls' distributions "
              "byte for byte (same seed)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
