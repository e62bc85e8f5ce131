"""Canonical calibration benchmark: the 12 canonical operator writers at paper scale, array path vs reference path.

Scale (default): the synthetic substrate's 48 streams with the OCRR closed-loop adaptation trace (4 learning
blocks x 48 slots), 6 strata x 48 future tasks, 4 cells (aligned, value, pair, key_slot), the identity plus the
9 derangements of the 4 arms, the primary slot draw sigma* (value/pair seed 20260824, time seed 20260822):
552,960 decisions per writer.

The 12 writers are the canonical operator families (partA 1.1): replay-invariant, key-only and commutative-pairing
with alpha in {0.5, 1, 2}, order-sensitive with d in {0.05, 0.20, 0.60}.

For every writer the script times the execution of the whole replay

* array path: ``run_shard`` over all streams in one shard (``path="array"``), warmed once, best of 3;
* reference path: ``run_shard`` one stream at a time (``path="reference"``), once;

with the input preparation (world, trace, ``prepare_streams``) done once outside both timings, and checks that
the two paths return identical decisions for every stream (exit status 1 otherwise).  The last line is the ratio
of the total reference time to the total array time.

Run from the repository root::

    python bench/calibration.py            # full run (the reference path takes a few seconds per writer)
    python bench/calibration.py --quick    # 8 streams, smoke run
    python bench/calibration.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

from replaylens.maps import SlotSpec
from replaylens.paper.controllers import AgentController, ocrr_agent, run_closed_loop
from replaylens.paper.operators import canonical_operators
from replaylens.paper.substrates.synthetic import build_synthetic
from replaylens.replay import plan_replay, prepare_streams, run_shard

SEED = 20260822
SIGMA = SlotSpec(value_seed=20260824, time_seed=20260822, reorder_seed=20260825)
CELLS = "value,pair,key_slot"  # aligned is always included


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="8 streams instead of 48 (smoke run)")
    ap.add_argument("--json", metavar="PATH", help="also write the numbers to PATH as JSON")
    ap.add_argument("--array-runs", type=int, default=3, help="timed array runs, best taken (default 3)")
    args = ap.parse_args(argv)

    n_streams = 8 if args.quick else 48
    t0 = time.perf_counter()
    world = build_synthetic(n_streams, seed=SEED)
    trace = run_closed_loop(world, AgentController(ocrr_agent("ocrr"), tuple(world.arms)), seed=SEED)
    h, f = world.history(trace.adapt_actions), world.futures()
    plan = plan_replay(h, f, cells=CELLS, maps="derangements", draws=[SIGMA], seed=SEED)
    sds = prepare_streams(plan, h, f)
    ordered = [sds[s] for s in plan.streams]
    blocks = tuple(dict.fromkeys([*zip(h.family.tolist(), h.context.tolist(), strict=True), *f.strata]))
    prep_s = time.perf_counter() - t0
    n_tasks = sum(len(sd.futures) for sd in ordered)
    per_writer = n_tasks * plan.n_decisions_per_task
    print(f"canonical calibration benchmark: {len(plan.streams)} streams x 4 blocks x 48 slots (OCRR trace), "
          f"{len(plan.strata)} strata x 48 future tasks ({n_tasks} tasks)")
    print(f"  cells {', '.join(plan.cell_names)}; {len(plan.maps)} maps; 1 draw (sigma*); {per_writer:,} decisions "
          f"per writer")
    print(f"  preparation (world, trace, streams; untimed below): {prep_s:.2f} s; array: warm-up + best of "
          f"{args.array_runs} (one shard); reference: once, one stream at a time")
    print(f"  python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} CPUs")
    print()
    head = f"{'writer':<28} {'decisions':>10} {'array s':>9} {'reference s':>12} {'ratio':>8}"
    print(head)
    print("-" * len(head))
    rows = []
    problems: list[str] = []
    for op in canonical_operators():
        name = f"{op.family}({op.label})"
        run_shard(plan, ordered, op.agent, path="array", blocks=blocks)  # warm-up
        times = []
        arr: list[np.ndarray] = []
        for _ in range(args.array_runs):
            t = time.perf_counter()
            arr = run_shard(plan, ordered, op.agent, path="array", blocks=blocks)
            times.append(time.perf_counter() - t)
        t = time.perf_counter()
        ref = [run_shard(plan, [sd], op.agent, path="reference", blocks=blocks)[0] for sd in ordered]
        ref_s = time.perf_counter() - t
        same = all(np.array_equal(a, b) for a, b in zip(arr, ref, strict=True))
        if not same:
            problems.append(name)
        rows.append({"writer": name, "decisions": per_writer, "array_s": min(times), "reference_s": ref_s,
                     "identical": same})
        print(f"{name:<28} {per_writer:>10,} {min(times):>9.4f} {ref_s:>12.3f} {ref_s / min(times):>7.1f}x"
              f"{'' if same else '  MISMATCH'}", flush=True)
    print("-" * len(head))
    tot_arr = sum(r["array_s"] for r in rows)  # type: ignore[misc]
    tot_ref = sum(r["reference_s"] for r in rows)  # type: ignore[misc]
    ratio = tot_ref / tot_arr
    print(f"{'total':<28} {per_writer * len(rows):>10,} {tot_arr:>9.4f} {tot_ref:>12.3f} {ratio:>7.1f}x")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"streams": len(plan.streams), "writers": rows, "total": {"array_s": tot_arr,
                       "reference_s": tot_ref, "ratio": ratio}, "identical": not problems}, fh, indent=2)
            fh.write("\n")
    if problems:
        print(f"ratio (reference/array) over the 12 canonical writers: {ratio:.1f}x -- INVALID: the paths disagree "
              f"for {', '.join(problems)}")
        return 1
    print(f"ratio (reference/array) over the 12 canonical writers: {ratio:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
