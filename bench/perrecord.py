"""Per-record replay benchmark (issue 27, goal 3): the engine's per-record path against a direct loop
calling the same agent on the same states.

Scale (default): 8 streams, 4 learning blocks x 48 slots, 6 strata x 48 future tasks, 10 label maps,
4 cells (aligned, value, pair, key_slot), 1 slot draw, 1 repeat: 92,160 decisions per agent.

Agents (all trivial, so that what is timed is the engine's own bookkeeping):

* ``callables``: ``from_callables``; the state counts records (a distinct state per record), ``act``
  returns a menu item picked by the state;
* ``history-reader``: a ``HistoryReader`` whose ``fn`` returns a menu item picked by the visible length;
* ``callables, draws``: as ``callables`` but ``act`` draws its answer from the per-decision generator
  on every decision (shown for information: every decision then seeds a generator).

For each agent the script times, in CPU seconds of this process (best of ``--runs``):

* engine: ``run_shard(path="reference")`` one stream at a time (the product's per-record path:
  cell functional, law checks, per-decision generators, menus, decoding);
* direct loop: the same writer ``update`` per record and ``act`` (``act_prefix`` for a reader) per
  decision on the same transformed histories, prepared beforehand and untimed; every decision gets a
  generator only where the agent draws (``default_rng`` of the same seed), none otherwise.

With ``--before`` it also times, once, the per-record loop as it was before issue 27 (kept verbatim as
the tests' oracle, ``tests/replay/_perrecord_before.py``) and checks it decides identically.

It checks that both give identical decisions (exit status 1 otherwise) and prints the engine's
decisions per CPU second, the headline (the slower of the two trivial agents against the 100,000/s
target) last.

    python bench/perrecord.py             # default scale (~1 minute)
    python bench/perrecord.py --before    # also the loop before issue 27 (~1 minute more)
    python bench/perrecord.py --quick     # 2 streams, smoke run
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from replaylens.agents import Agent, FutureInput, HistoryReader, PrefixPolicy, TaskInput, from_callables
from replaylens.bandit import make_bandit
from replaylens.interventions import cell_record
from replaylens.maps import stream_perm
from replaylens.replay import ReplayPlan, StreamData, decision_seeds, plan_replay, prepare_streams, run_shard
from replaylens.replay._engine import block_vocabulary
from replaylens.replay._seeds import task_keys

SEED = 20261121
CONTEXTS = ("c1", "c2", "c3", "c4")
HELD_OUT = ("h1", "h2")
CELLS = "value,pair,key_slot"
TARGET = 100_000.0


def _count(s: int, task: TaskInput, key: str, u: float) -> int:
    return s + 1


def callables() -> Agent:
    return from_callables(lambda: 0, _count, lambda s, t, m: m[s % len(m)], name="callables")


def callables_draws() -> Agent:
    return from_callables(lambda: 0, _count, lambda s, t, m, rng: m[int(rng.integers(len(m)))],
                          name="callables-draws", stochastic=True)


def reader() -> Agent:
    return HistoryReader(lambda recs, t, m, rng: m[len(recs) % len(m)], name="history-reader").agent()


AGENTS: tuple[tuple[str, Callable[[], Agent], bool], ...] = (
    ("callables", callables, False),
    ("history-reader", reader, False),
    ("callables, draws", callables_draws, True),
)


@dataclass(frozen=True)
class History1:
    """One transformed history (stream, cell, map, draw) as the direct loop feeds it."""

    records: list[tuple[TaskInput, str, float]]
    prefixes: frozenset[int]
    asks: list[tuple[int, FutureInput, tuple[str, ...], int]]   # (prefix, task, menu, seed) per decision
    shown: list[tuple[int, ...]]                                 # displayed codes per decision
    inverse: np.ndarray | None


def prepare_loop(plan: ReplayPlan, sds: list[StreamData], agent: Agent) -> list[History1]:
    """Every transformed history and its decisions, built independently of the engine (untimed)."""
    ns = agent.namespace
    out: list[History1] = []
    for sd in sds:
        inputs = sd.task_inputs
        tk = task_keys([f.task for f in sd.futures])
        futs = [FutureInput(f.stream, f.family, f.context, f.task, f.index,
                            int(sd.slots[int(n) - 1]) if int(n) > 0 else -1, f.metadata)
                for f, n in zip(sd.futures, sd.prefix, strict=True)]
        for spec in plan.draws:
            perms = {r: stream_perm(spec, r, sd.name, sd.block_local) for r in ("value", "pair", "time", "reorder")}
            for cell in plan.cells:
                for rho in plan.maps:
                    recs = []
                    for t in range(sd.length):
                        key, u, x = cell_record(cell, sd.codes, sd.outcomes, t, rho.array, perms)
                        recs.append((replace(inputs[x], slot=int(sd.slots[t])), ns.kappa(plan.labels[key]), u))
                    seeds = decision_seeds(plan.seed, plan.rng, sd.name, tk, plan.repeats, cell, rho, spec)
                    asks, shown = [], []
                    for j in range(len(sd.futures)):
                        menu = sd.menus[j][sd.menus[j] >= 0]
                        sh = rho.array[menu] if cell.menu_map else menu
                        for p in range(plan.repeats):
                            asks.append((int(sd.prefix[j]), futs[j], tuple(ns.show(plan.labels[a]) for a in sh),
                                         int(seeds[j, p])))
                            shown.append(tuple(int(a) for a in sh))
                    out.append(History1(recs, frozenset(sd.prefix.tolist()), asks, shown,
                                        rho.inverse.array if cell.menu_map else None))
    return out


def direct_loop(hists: list[History1], agent: Agent, draws: bool) -> list[Any]:
    """The agent's own calls on the prepared histories: update per record, act per decision."""
    writer, policy = agent.writer, agent.policy
    snap = (lambda s: s) if getattr(writer, "immutable_state", False) else copy.deepcopy
    prefix_batch = policy if isinstance(policy, PrefixPolicy) else None
    shared = np.random.default_rng(0)  # never read by the agents that do not draw
    answers: list[Any] = []
    for h in hists:
        state = writer.init_state()
        snaps = {0: snap(state)} if 0 in h.prefixes else {}
        for t, (ti, key, u) in enumerate(h.records):
            state = writer.update(state, ti, key, u)
            if t + 1 in h.prefixes:
                snaps[t + 1] = snap(state)
        if prefix_batch is not None:
            groups: dict[int, list[int]] = {}
            for i, a in enumerate(h.asks):
                groups.setdefault(a[0], []).append(i)
            got: dict[int, Any] = {}
            carry: Any = None
            for n in sorted(groups):
                idx = groups[n]
                labels, carry = prefix_batch.act_prefix(
                    snaps[n], [h.asks[i][1] for i in idx], [h.asks[i][2] for i in idx],
                    [np.random.default_rng(h.asks[i][3]) if draws else shared for i in idx], carry)
                got.update(zip(idx, labels, strict=True))
            answers.extend(got[i] for i in range(len(h.asks)))
        else:
            for n, fut, menu, seed in h.asks:
                answers.append(policy.act(snaps[n], fut, menu, np.random.default_rng(seed) if draws else shared))
    return answers


def decode(hists: list[History1], answers: list[Any]) -> list[int]:
    """Canonical label codes of the loop's answers (as the engine decodes them)."""
    out: list[int] = []
    i = 0
    for h in hists:
        for (_n, _f, menu, _s), sh in zip(h.asks, h.shown, strict=True):
            a = sh[menu.index(answers[i])]
            out.append(int(h.inverse[a]) if h.inverse is not None else a)
            i += 1
    return out


def engine_codes(plan: ReplayPlan, sds: list[StreamData], outs: list[np.ndarray]) -> list[int]:
    """The engine's decisions in the loop's order: stream, draw, cell, map, task, repeat."""
    return [int(x) for o in outs for x in o.transpose(2, 0, 1, 4, 3).reshape(-1)]


def load_before() -> Callable[..., np.ndarray]:
    """The per-record loop before issue 27 (the tests' oracle copy)."""
    path = Path(__file__).resolve().parent.parent / "tests" / "replay" / "_perrecord_before.py"
    spec = importlib.util.spec_from_file_location("_perrecord_before", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    fn: Callable[..., np.ndarray] = mod._reference_stream
    return fn


def best_cpu(fn: Callable[[], Any], runs: int) -> tuple[float, Any]:
    best, got = float("inf"), None
    for _ in range(runs):
        t0 = time.process_time()
        got = fn()
        best = min(best, time.process_time() - t0)
    return best, got


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="2 streams instead of 8 (smoke run)")
    ap.add_argument("--streams", type=int, default=None, help="number of streams (default 8)")
    ap.add_argument("--runs", type=int, default=3, help="timed runs of each side, best taken (default 3)")
    ap.add_argument("--before", action="store_true", help="also time the per-record loop before issue 27 (once)")
    ap.add_argument("--seed", type=int, default=SEED, help=f"substrate seed (default {SEED})")
    args = ap.parse_args(argv)

    n_streams = args.streams or (2 if args.quick else 8)
    sub = make_bandit(n_streams=n_streams, slots_per_block=48, n_future=48, contexts=CONTEXTS, held_out=HELD_OUT,
                      rng=args.seed)
    plan = plan_replay(sub.history, sub.futures, cells=CELLS)
    sds = prepare_streams(plan, sub.history, sub.futures)
    blocks = block_vocabulary(sub.history, sub.futures)
    ordered = [sds[s] for s in plan.streams]
    n_tasks = sum(len(sd.futures) for sd in ordered)
    print(f"per-record benchmark: {len(plan.streams)} streams x {len(CONTEXTS)} blocks x 48 slots "
          f"({len(sub.history.slot)} records), {n_tasks} future tasks; cells {', '.join(plan.cell_names)}; "
          f"{len(plan.maps)} maps; {n_tasks * plan.n_decisions_per_task:,} decisions per agent")
    print(f"  CPU seconds of this process, best of {args.runs}; engine: run_shard(path='reference') one stream "
          "at a time; loop: the agent's update/act on the same prepared histories")
    print(f"  python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} CPUs, seed {args.seed}")
    print()
    before = load_before() if args.before else None
    head = f"{'agent':<18} {'decisions':>10} {'engine s':>9} {'loop s':>8} {'engine/s':>10} {'loop/s':>10} {'ratio':>6}"
    if before is not None:
        head += f" {'before s':>9} {'speed-up':>8}"
    print(head)
    print("-" * len(head))
    rates: dict[str, float] = {}
    problems: list[str] = []
    for name, make, draws in AGENTS:
        agent = make()
        hists = prepare_loop(plan, ordered, agent)
        eng_s, outs = best_cpu(lambda a=agent: [run_shard(plan, [sd], a, path="reference", blocks=blocks)[0]
                                                for sd in ordered], args.runs)
        loop_s, answers = best_cpu(lambda a=agent, h=hists, dr=draws: direct_loop(h, a, dr), args.runs)
        n = sum(int(o.size) for o in outs)
        same = engine_codes(plan, ordered, outs) == decode(hists, answers)
        extra = ""
        if before is not None:
            old_s, olds = best_cpu(lambda a=agent: [before(plan, sd, a, lambda _n: None) for sd in ordered], 1)
            same = same and all(np.array_equal(o, b) for o, b in zip(outs, olds, strict=True))
            extra = f" {old_s:>9.3f} {old_s / eng_s:>7.1f}x"
        if not same:
            problems.append(name)
        rates[name] = n / eng_s
        print(f"{name:<18} {n:>10,} {eng_s:>9.3f} {loop_s:>8.3f} {n / eng_s:>10,.0f} {n / loop_s:>10,.0f} "
              f"{eng_s / loop_s:>5.2f}x{extra}{'' if same else '  MISMATCH'}", flush=True)
    print("-" * len(head))
    print("ratio: engine CPU time / direct-loop CPU time for the same decisions (1.00x = no engine overhead)")
    if before is not None:
        print("speed-up: CPU time of the loop before issue 27 / the engine's, same agent, identical decisions")
    if problems:
        print(f"ERROR: the engine and the direct loop decided differently for: {', '.join(problems)}",
              file=sys.stderr)
        return 1
    trivial = {k: rates[k] for k in ("callables", "history-reader")}
    worst = min(trivial, key=lambda k: trivial[k])
    print(f"per-record engine throughput (trivial agents, identical decisions): "
          f"{', '.join(f'{k} {v:,.0f}' for k, v in trivial.items())} decisions/s; "
          f"slowest {worst} {trivial[worst]:,.0f}/s (target >= {TARGET:,.0f}/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
