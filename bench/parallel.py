"""Concurrent and parallel replay (issue 17): threads for waiting agents, processes and Ray for CPU-bound ones.

* threads: a per-record agent whose ``act`` waits 5 ms (a stand-in for a model or service call), serial
  vs ``concurrency=32``; efficiency = speed-up / 32 (target >= 90 % of ideal throughput);
* processes: a CPU-bound pure-Python per-record agent, ``workers=2`` vs ``workers=1`` (target >= 1.7x
  on 2 free cores);
* ray: the same CPU-bound agent as Ray tasks on a local instance with 2 CPUs (start-up included and
  reported separately).

Every parallel run is checked to give byte-identical decisions to the serial run (exit status 1 otherwise).
Run from the repository root::

    python bench/parallel.py            # about a minute on 2 free cores
    python bench/parallel.py --quick    # smaller, a few seconds per backend
    python bench/parallel.py --no-ray
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import numpy as np

from replaylens.agents import Agent, FutureInput, TaskInput
from replaylens.bandit import make_bandit
from replaylens.replay import prepare_replay


class _NoState:
    def init_state(self) -> None:
        return None

    def update(self, state: None, task: TaskInput, key: str, outcome: float) -> None:
        return None


class _Wait:
    """``act`` waits ``ms`` milliseconds (releases the GIL), then picks a menu entry from the task name."""

    def __init__(self, ms: float) -> None:
        self.s = ms / 1000.0

    def act(self, state: None, task: FutureInput, menu: tuple[str, ...], rng: np.random.Generator) -> str:
        time.sleep(self.s)
        return menu[len(task.task) % len(menu)]


class _Burn:
    """CPU-bound pure-Python ``act`` (holds the GIL): ``n`` multiply-adds, then a seeded choice."""

    def __init__(self, n: int) -> None:
        self.n = n

    def act(self, state: None, task: FutureInput, menu: tuple[str, ...], rng: np.random.Generator) -> str:
        x = 0
        for i in range(self.n):
            x = (x * 31 + i) % 1_000_003
        return menu[(x + int(rng.integers(0, 1 << 30))) % len(menu)]


def _timed(prepared: Any, agent: Agent, **kw: Any) -> tuple[float, bytes]:
    t0 = time.perf_counter()
    dec = prepared.run(agent, path="reference", **kw)
    return time.perf_counter() - t0, dec.actions.tobytes()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller problems")
    ap.add_argument("--no-ray", action="store_true", help="skip the Ray backend")
    ap.add_argument("--concurrency", type=int, default=32, help="threads for the waiting agent")
    args = ap.parse_args()
    print(f"host: {os.cpu_count()} CPUs, python {sys.version.split()[0]}")
    failed = False
    lines: list[str] = []

    # ---- threads: 5 ms waiting agent
    sub = make_bandit(n_streams=64 if args.quick else 256, slots_per_block=4, n_future=2 if args.quick else 4)
    prep = prepare_replay(sub.history, sub.futures, sub.evaluator, cells="", maps="")
    agent = Agent("wait-5ms", _NoState(), _Wait(5.0))
    n_dec = len(prep.base.task_ids)
    t_serial, ref = _timed(prep, agent, backend="serial")
    t_thr, got = _timed(prep, agent, backend="threads", concurrency=args.concurrency)
    failed |= got != ref
    speed = t_serial / t_thr
    eff = speed / args.concurrency
    print(f"threads   {n_dec} decisions x 5 ms: serial {t_serial:.2f} s, concurrency {args.concurrency} "
          f"{t_thr:.3f} s, speed-up {speed:.1f}x, identical={got == ref}")
    lines.append(f"threads: {eff:.0%} of ideal throughput at concurrency {args.concurrency} (target >= 90 %)")

    # ---- processes: CPU-bound per-record agent
    sub = make_bandit(n_streams=8, slots_per_block=4, n_future=4)
    prep = prepare_replay(sub.history, sub.futures, sub.evaluator, cells="value", maps="", repeats=2)
    burn = Agent("burn", _NoState(), _Burn(20_000 if args.quick else 60_000), stochastic=True)
    n_dec = len(prep.base.task_ids) * prep.plan.n_decisions_per_task
    t1, ref = _timed(prep, burn, backend="processes", workers=1)
    t2, got = _timed(prep, burn, backend="processes", workers=2)
    failed |= got != ref
    print(f"processes {n_dec} CPU-bound decisions: 1 worker {t1:.2f} s, 2 workers {t2:.2f} s, "
          f"identical={got == ref}")
    lines.append(f"processes: {t1 / t2:.2f}x with 2 workers vs 1 (target >= 1.7x on 2 free cores)")

    # ---- ray
    if not args.no_ray:
        try:
            import ray
        except ImportError:
            lines.append("ray: not installed")
        else:
            t0 = time.perf_counter()
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
            t_start = time.perf_counter() - t0
            try:
                t_first, first = _timed(prep, burn, backend="ray", workers=2)   # workers start and import
                t_ray, got = _timed(prep, burn, backend="ray", workers=2)
            finally:
                ray.shutdown()
            failed |= got != ref or first != ref
            print(f"ray       {n_dec} CPU-bound decisions: ray.init {t_start:.1f} s, first run (worker start-up) "
                  f"{t_first:.2f} s, warm run with 2 CPUs {t_ray:.2f} s, identical={got == ref and first == ref}")
            lines.append(f"ray: {t1 / t_ray:.2f}x with 2 CPUs vs 1 worker process (warm workers; start-up "
                         f"excluded; target >= 1.7x on 2 free cores)")

    print("decisions identical on every backend:", "yes" if not failed else "NO")
    for line in lines:
        print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
