"""Ray on one and two nodes (issue 51): scaling efficiency for a slow agent and the overhead per shard.

A real cluster on this machine, bound to 127.0.0.1 (the test suite's ``tests/replay/_ray_cluster.py``): a head
with one CPU, then a second raylet with one CPU.  The agent is a per-record agent whose ``act`` waits ``--ms``
milliseconds a decision (a stand-in for a model or service call: it needs no CPU, so two 1-CPU nodes on a 2-core
host are two nodes' worth), one stream a shard on the reference path.

* ``serial``: the replay in this process, one shard after another;
* ``1 node`` / ``2 nodes``: the same replay as Ray tasks, the driver joined to the cluster (workers started by a
  warm-up run first, so start-up is reported apart);
* efficiency per node = serial time / (nodes x Ray time) (target >= 0.9); overhead per shard = (nodes x Ray time
  - serial time) / shards.

Every Ray run is checked to give the serial run's decisions byte for byte (exit status 1 otherwise).  Run from the
repository root::

    python bench/ray.py            # 32 streams, 2 ms a decision: about two minutes
    python bench/ray.py --quick    # 8 streams, 1 ms: about half a minute
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent   # this file is bench/ray.py: its folder must not shadow the ray package
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")   # before ray is imported: 127.0.0.1 stays the nodes'
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")   # the bench's own cluster, on 127.0.0.1 only
sys.path.insert(0, str(_HERE.parent / "tests" / "replay"))

import numpy as np  # noqa: E402
from _ray_cluster import Cluster, make_root  # noqa: E402

from replaylens.agents import Agent, FutureInput, TaskInput  # noqa: E402
from replaylens.bandit import make_bandit  # noqa: E402
from replaylens.replay import prepare_replay  # noqa: E402


class _Sums:
    def init_state(self) -> tuple[float, ...]:
        return ()

    def update(self, state: tuple[Any, ...], task: TaskInput, key: str, outcome: float) -> tuple[Any, ...]:
        return (*state, (key, 0.0 if np.isnan(outcome) else float(outcome)))


class _Slow:
    """Waits ``ms`` milliseconds, then the menu entry of the largest total outcome so far."""

    def __init__(self, ms: float) -> None:
        self.s = ms / 1000.0

    def act(self, state: tuple[Any, ...], task: FutureInput, menu: tuple[str, ...], rng: np.random.Generator) -> str:
        if self.s:
            time.sleep(self.s)
        totals: dict[str, float] = {}
        for key, outcome in state:
            totals[key] = totals.get(key, 0.0) + outcome
        return max(menu, key=lambda a: (totals.get(a, 0.0), a))


def _agent(ms: float) -> Agent:
    return Agent("slow", _Sums(), _Slow(ms))


def _pid() -> int:
    return os.getpid()


def _warm(ray: Any, nodes: int) -> None:
    """Start one worker process on each of the ``nodes`` live nodes (a task pinned to each)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    end = time.monotonic() + 60
    while len([n for n in ray.nodes() if n["Alive"]]) < nodes and time.monotonic() < end:
        time.sleep(0.2)
    ids = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
    task = ray.remote(_pid)
    ray.get([task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(i, soft=False)).remote() for i in ids])


def _timed(prepared: Any, agent: Agent, **kw: Any) -> tuple[float, bytes]:
    t0 = time.perf_counter()
    dec = prepared.run(agent, path="reference", **kw)
    return time.perf_counter() - t0, dec.actions.tobytes()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="8 streams, 1 ms a decision")
    ap.add_argument("--streams", type=int, default=None, help="streams (= shards); default 32 (8 with --quick)")
    ap.add_argument("--ms", type=float, default=None, help="milliseconds a decision; default 2 (1 with --quick)")
    args = ap.parse_args()
    streams = args.streams or (8 if args.quick else 32)
    ms = args.ms if args.ms is not None else (1.0 if args.quick else 2.0)
    import ray

    b = make_bandit(n_streams=streams, slots_per_block=6, n_future=3)
    prepared = prepare_replay(b.history, b.futures, b.evaluator)
    shards = len(prepared.plan.streams)
    decisions = sum(len(sd.futures) for sd in prepared.streams.values()) * prepared.plan.n_decisions_per_task
    print(f"host: {os.cpu_count()} CPUs, python {sys.version.split()[0]}, ray {ray.__version__}; {shards} shards, "
          f"{decisions:,} decisions, {ms:g} ms a decision")
    t_serial, ref = _timed(prepared, _agent(ms), backend="serial")
    print(f"{'serial':>8}: {t_serial:7.2f} s")
    root = make_root()
    os.environ["RAY_TMPDIR"] = str(root)
    cluster = Cluster(root, cpus=1)
    rows: list[tuple[int, float]] = []
    failed = False
    try:
        t0 = time.perf_counter()
        cluster.start(nodes=1)
        t_start = time.perf_counter() - t0
        t0 = time.perf_counter()
        for attempt in range(20):   # a head just started may not take drivers yet on a loaded host
            try:
                ray.init(address=cluster.address, log_to_driver=False, logging_level="ERROR")
                break
            except ConnectionError:
                if attempt == 19:
                    raise
                time.sleep(3.0)
        t_init = time.perf_counter() - t0
        for nodes in (1, 2):
            if nodes == 2:
                cluster.add_node()
            t0 = time.perf_counter()
            _warm(ray, nodes)   # a worker process on each node (this driver's job keeps them)
            t_warm = time.perf_counter() - t0 + _timed(prepared, _agent(0.0), backend="ray")[0]
            t_ray, got = _timed(prepared, _agent(ms), backend="ray")
            same = got == ref
            failed |= not same
            rows.append((nodes, t_ray))
            eff = t_serial / (nodes * t_ray)
            over = (nodes * t_ray - t_serial) / shards
            print(f"{nodes:>2} node{'s' if nodes > 1 else ' '}: {t_ray:7.2f} s  efficiency per node {eff:.3f}  "
                  f"overhead {1000 * over:6.1f} ms/shard  (warm-up {t_warm:.2f} s)"
                  f"{'' if same else '  MISMATCH'}")
        print(f"cluster start (head) {t_start:.1f} s, ray.init {t_init:.1f} s (not in the times above)")
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
    effs = [t_serial / (n * t) for n, t in rows]
    over = max((n * t - t_serial) / shards for n, t in rows)
    print(f"scaling efficiency per node: {' / '.join(f'{e:.2f}' for e in effs)} on 1 / 2 nodes (target >= 0.9); "
          f"overhead per shard <= {1000 * over:.1f} ms; decisions {'identical' if not failed else 'DIFFER'}")
    return 1 if failed or len(rows) < 2 else 0


if __name__ == "__main__":
    sys.exit(main())
