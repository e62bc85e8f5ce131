"""Replay benchmark at paper scale: the vectorized array path against the per-record reference path.

Scale (default): 48 streams, 4 learning blocks x 48 slots, 6 strata x 48 future tasks (4 strata with
their own block + 2 held-out strata that read the whole stream), 10 label maps (identity + the 9
derangements of 4 labels), 4 cells (aligned, value, pair, key_slot), 1 slot draw, 1 repeat.

For every built-in known-law writer (and, with ``--rules``, the five reference rules) the script times
the execution of the whole replay

* array path: ``run_shard`` over all streams in one shard (``path="array"``), warmed once, best of 12
  (a run is ~15-25 ms, so one scheduler hiccup on a shared host is a large part of it); the runs come in
  rounds over every writer, spread between the reference runs, so a slow spell of the host lands on a few
  runs of each writer instead of on every run of one;
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


def _array_round(plan: ReplayPlan, agents: dict[str, Agent], ordered: list[StreamData],
                 blocks: tuple[tuple[str, str], ...], times: dict[str, list[float]],
                 last: dict[str, list[np.ndarray]]) -> None:
    """One timed array run of every writer, one after the other."""
    for name, agent in agents.items():
        t0 = time.perf_counter()
        last[name] = run_shard(plan, ordered, agent, path="array", blocks=blocks)
        times[name].append(time.perf_counter() - t0)


def bench_writers(agents: dict[str, Agent], plan: ReplayPlan, sds: dict[str, StreamData],
                  blocks: tuple[tuple[str, str], ...], *, array_runs: int) -> tuple[list[Row], list[str]]:
    """Time every writer on both paths; returns the rows and a list of mismatch descriptions (empty if equal).

    The array runs come in rounds (every writer once a round), spread evenly between the reference runs, so a
    slow spell of a shared host falls on a few runs of every writer rather than on all runs of one; each writer's
    array time is its best run."""
    ordered = [sds[s] for s in plan.streams]
    times: dict[str, list[float]] = {name: [] for name in agents}
    last: dict[str, list[np.ndarray]] = {}
    for agent in agents.values():
        run_shard(plan, ordered, agent, path="array", blocks=blocks)  # warm-up (not timed)
    gaps = len(agents) + 1  # before the first reference run, between them, after the last
    rounds = [array_runs // gaps + (1 if g < array_runs % gaps else 0) for g in range(gaps)]
    ref_s: dict[str, float] = {}
    ref: dict[str, list[np.ndarray]] = {}
    for g, name in enumerate([*agents, None]):
        for _ in range(rounds[g]):
            _array_round(plan, agents, ordered, blocks, times, last)
        if name is None:
            break
        out: list[np.ndarray] = []
        t0 = time.perf_counter()
        for sd in ordered:
            out.extend(run_shard(plan, [sd], agents[name], path="reference", blocks=blocks))
        ref_s[name] = time.perf_counter() - t0
        ref[name] = out

    rows: list[Row] = []
    problems: list[str] = []
    for name in agents:
        arr, want = last[name], ref[name]
        bad: list[str] = []
        if len(arr) != len(want):
            bad.append(f"{name}: array path returned {len(arr)} streams, reference {len(want)}")
        for sd, a, b in zip(ordered, arr, want, strict=False):
            if not np.array_equal(a, b):
                bad.append(f"{name}, stream {sd.name!r}: {_first_difference(a, b)}")
        decisions = sum(int(a.size) for a in want)
        rows.append(Row(name, decisions, min(times[name]), ref_s[name], times[name], not bad))
        problems.extend(bad)
    return rows, problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="8 streams instead of 48 (smoke run)")
    ap.add_argument("--rules", action="store_true",
                    help="also time the five reference rules (mean, sum, count, latest, best); ~40 s each")
    ap.add_argument("--json", metavar="PATH", help="also write the numbers to PATH as JSON")
    ap.add_argument("--seed", type=int, default=SEED, help=f"substrate seed (default {SEED})")
    ap.add_argument("--array-runs", type=int, default=12,
                    help="timed array runs of each writer, in rounds spread between the reference runs; best taken "
                         "(default 12)")
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
          f"(one shard; in rounds over the writers, spread between the reference runs); reference: once, one stream "
          f"at a time")
    print(f"  python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} CPUs, seed {args.seed}")
    print()

    writers = WRITERS + (RULES if args.rules else ())
    head = f"{'writer':<24} {'decisions':>10} {'array s':>9} {'reference s':>12} {'ratio':>8}"
    print(head)
    print("-" * len(head))
    rows, problems = bench_writers({name: make() for name, make in writers}, plan, sds, blocks,
                                   array_runs=args.array_runs)
    for row in rows:
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
