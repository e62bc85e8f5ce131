"""Replay benchmark at paper scale: the vectorized array path against the per-record reference path.

Scale (default): 48 streams, 4 learning blocks x 48 slots, 6 strata x 48 future tasks (4 strata with
their own block + 2 held-out strata that read the whole stream), 10 label maps (identity + the 9
derangements of 4 labels), 4 cells (aligned, value, pair, key_slot), 1 slot draw, 1 repeat.

For every built-in known-law writer (and, with ``--rules``, the five reference rules) the script times
the execution of the whole replay

* array path: ``run_shard`` over all streams in one shard (``path="array"``), warmed once, best of 7
  (a run is ~15-25 ms, so one scheduler hiccup on a shared host is a large part of it);
* reference path: ``run_shard`` one stream at a time (``path="reference"``), once;

with the input preparation (``prepare_streams``) done once outside both timings, and checks that the
two paths return identical decisions for every stream (exit status 1 otherwise).

Run from the repository root::

    python bench/replay.py            # full run (~1-2 minutes, the reference path is slow)
    python bench/replay.py --quick    # 8 streams, smoke run
    python bench/replay.py --rules    # also the reference rules (~40 s more each)
    python bench/replay.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from replaylens.agents import (
    Agent,
    commutative_agent,
    invariant_agent,
    key_only_agent,
    order_sensitive_agent,
    reference_agent,
    relation_agent,
)
from replaylens.bandit import make_bandit
from replaylens.replay import ReplayPlan, StreamData, plan_replay, prepare_streams, run_shard
from replaylens.replay._engine import block_vocabulary

SEED = 20261121
CONTEXTS = ("c1", "c2", "c3", "c4")
HELD_OUT = ("h1", "h2")
CELLS = "value,pair,key_slot"  # aligned is always included
TARGET = 500.0
TARGET_RATE = 30e6  # decisions/s of the array path (issue 27)

WRITERS: tuple[tuple[str, Callable[[], Agent]], ...] = (
    ("invariant(alpha=1)", lambda: invariant_agent(1.0)),
    ("key-only(alpha=1)", lambda: key_only_agent(1.0)),
    ("commutative(alpha=1)", lambda: commutative_agent(1.0)),
    ("relation", relation_agent),
    ("order-sensitive(d=0.2)", lambda: order_sensitive_agent(0.2)),
)
RULES: tuple[tuple[str, Callable[[], Agent]], ...] = tuple(
    (f"rule:{r}", lambda r=r: reference_agent(r)) for r in ("mean", "sum", "count", "latest", "best")
)


@dataclass
class Row:
    writer: str
    decisions: int
    array_s: float
    reference_s: float
    array_runs_s: list[float]
    identical: bool

    @property
    def ratio(self) -> float:
        return self.reference_s / self.array_s


def _first_difference(a: np.ndarray, b: np.ndarray) -> str:
    if a.shape != b.shape:
        return f"shape {a.shape} (array) vs {b.shape} (reference)"
    idx = tuple(int(i) for i in np.argwhere(a != b)[0])
    n = int(np.count_nonzero(a != b))
    return f"{n} of {a.size} decisions differ; first at (cell, map, draw, repeat, task) = {idx}: " \
           f"array {int(a[idx])} vs reference {int(b[idx])}"


def bench_writer(name: str, agent: Agent, plan: ReplayPlan, sds: dict[str, StreamData],
                 blocks: tuple[tuple[str, str], ...], *, array_runs: int) -> tuple[Row, list[str]]:
    """Time one writer on both paths; returns the row and a list of mismatch descriptions (empty if equal)."""
    ordered = [sds[s] for s in plan.streams]

    run_shard(plan, ordered, agent, path="array", blocks=blocks)  # warm-up (not timed)
    times: list[float] = []
    arr: list[np.ndarray] = []
    for _ in range(array_runs):
        t0 = time.perf_counter()
        arr = run_shard(plan, ordered, agent, path="array", blocks=blocks)
        times.append(time.perf_counter() - t0)

    ref: list[np.ndarray] = []
    t0 = time.perf_counter()
    for sd in ordered:
        ref.extend(run_shard(plan, [sd], agent, path="reference", blocks=blocks))
    ref_s = time.perf_counter() - t0

    problems: list[str] = []
    if len(arr) != len(ref):
        problems.append(f"{name}: array path returned {len(arr)} streams, reference {len(ref)}")
    for sd, a, b in zip(ordered, arr, ref, strict=False):
        if not np.array_equal(a, b):
            problems.append(f"{name}, stream {sd.name!r}: {_first_difference(a, b)}")
    decisions = sum(int(a.size) for a in ref)
    row = Row(name, decisions, min(times), ref_s, times, not problems)
    return row, problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="8 streams instead of 48 (smoke run)")
    ap.add_argument("--rules", action="store_true",
                    help="also time the five reference rules (mean, sum, count, latest, best); ~40 s each")
    ap.add_argument("--json", metavar="PATH", help="also write the numbers to PATH as JSON")
    ap.add_argument("--seed", type=int, default=SEED, help=f"substrate seed (default {SEED})")
    ap.add_argument("--array-runs", type=int, default=7, help="timed array runs, best taken (default 7)")
    args = ap.parse_args(argv)

    n_streams = 8 if args.quick else 48
    sub = make_bandit(n_streams=n_streams, slots_per_block=48, n_future=48, contexts=CONTEXTS, held_out=HELD_OUT,
                      rng=args.seed)
    plan = plan_replay(sub.history, sub.futures, cells=CELLS)
    # input preparation: once, outside both timings
    t0 = time.perf_counter()
    sds = prepare_streams(plan, sub.history, sub.futures)
    blocks = block_vocabulary(sub.history, sub.futures)
    prep_s = time.perf_counter() - t0

    n_tasks = sum(len(sd.futures) for sd in sds.values())
    print(f"replay benchmark: {len(plan.streams)} streams x {len(CONTEXTS)} blocks x 48 slots "
          f"({len(sub.history.slot)} records), {len(plan.strata)} strata x 48 future tasks ({n_tasks} tasks)")
    print(f"  cells {', '.join(plan.cell_names)}; {len(plan.maps)} maps ({', '.join(plan.map_names)}); "
          f"{len(plan.draws)} draw, {plan.repeats} repeat; {n_tasks * plan.n_decisions_per_task:,} decisions "
          f"per writer")
    print(f"  prepare_streams (once, untimed below): {prep_s:.3f} s; array: warm-up + best of {args.array_runs} "
          f"(one shard); reference: once, one stream at a time")
    print(f"  python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} CPUs, seed {args.seed}")
    print()

    writers = WRITERS + (RULES if args.rules else ())
    head = f"{'writer':<24} {'decisions':>10} {'array s':>9} {'reference s':>12} {'ratio':>8}"
    print(head)
    print("-" * len(head))
    rows: list[Row] = []
    problems: list[str] = []
    for name, make in writers:
        row, bad = bench_writer(name, make(), plan, sds, blocks, array_runs=args.array_runs)
        rows.append(row)
        problems.extend(bad)
        flag = "" if row.identical else "  MISMATCH"
        print(f"{row.writer:<24} {row.decisions:>10,} {row.array_s:>9.4f} {row.reference_s:>12.3f} "
              f"{row.ratio:>7.1f}x{flag}", flush=True)
    print("-" * len(head))
    tot_dec = sum(r.decisions for r in rows)
    tot_arr = sum(r.array_s for r in rows)
    tot_ref = sum(r.reference_s for r in rows)
    ratio = tot_ref / tot_arr
    print(f"{'total':<24} {tot_dec:>10,} {tot_arr:>9.4f} {tot_ref:>12.3f} {ratio:>7.1f}x")
    print(f"array throughput: {tot_dec / tot_arr:,.0f} decisions/s (target >= {TARGET_RATE:,.0f}); "
          f"reference: {tot_dec / tot_ref:,.0f} decisions/s")

    if args.json:
        payload = {
            "scale": {"streams": len(plan.streams), "blocks": len(CONTEXTS), "slots_per_block": 48,
                      "strata": len(plan.strata), "future_per_stratum": 48, "tasks": n_tasks,
                      "maps": list(plan.map_names), "cells": list(plan.cell_names), "draws": len(plan.draws),
                      "repeats": plan.repeats, "seed": args.seed, "quick": args.quick},
            "environment": {"python": platform.python_version(), "numpy": np.__version__, "cpus": os.cpu_count()},
            "prepare_streams_s": prep_s,
            "writers": [{**asdict(r), "ratio": r.ratio} for r in rows],
            "total": {"decisions": tot_dec, "array_s": tot_arr, "reference_s": tot_ref, "ratio": ratio},
            "target_ratio": TARGET,
            "target_rate": TARGET_RATE,
            "identical": not problems,
        }
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(payload, fh, indent=2)
            fh.write("\n")

    if problems:
        print(f"ratio (reference/array) over all writers: {ratio:.1f}x (target >= {TARGET:.0f}x) "
              f"-- INVALID: the paths disagree", flush=True)
        print("ERROR: the array and reference paths returned different decisions:", file=sys.stderr)
        for p in problems[:20]:
            print(f"  {p}", file=sys.stderr)
        if len(problems) > 20:
            print(f"  ... and {len(problems) - 20} more", file=sys.stderr)
        return 1
    print(f"ratio (reference/array) over all writers: {ratio:.1f}x (target >= {TARGET:.0f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
