"""Execution backends for replay shards: serial, threads, processes and Ray (:mod:`._ray`), chosen by name.

A shard is a pure function of the plan, its streams and the agent (every stochastic decision
draws from a generator seeded by :func:`decision_seeds`), so any backend gives the same bytes.
Executors only *run* shards; the coordinating thread collects the results and hands them, in order, to one
journal writer thread.
"""

from __future__ import annotations

import asyncio
import inspect
import multiprocessing
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from concurrent.futures import Executor as _PoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from .._cpus import available_cpus
from ..agents import Agent, FutureInput
from ..errors import ConfigError
from ..settings import AUTO_ARRAY_THREADS
from ._engine import StreamData, run_shard
from ._plan import ReplayPlan
from ._ray import Ray

__all__ = ["BACKENDS", "Executor", "ShardJob", "async_bridge", "auto_array_executor", "make_executor",
           "resolve_backend"]


@dataclass(frozen=True, eq=False)
class ShardJob:
    """Everything a worker needs to run any shard of one replay (sent once per worker)."""

    plan: ReplayPlan
    streams: Mapping[str, StreamData]
    agent: Agent
    path: str
    blocks: tuple[tuple[str, str], ...]
    shards: tuple[tuple[str, ...], ...]

    def run(self, k: int, tick: Callable[[int], None] | None = None) -> list[np.ndarray]:
        return run_shard(self.plan, [self.streams[s] for s in self.shards[k]], self.agent, path=self.path,
                         blocks=self.blocks, tick=tick)


Results = Iterator[tuple[int, list[np.ndarray]]]


class Executor(Protocol):
    """Runs shards of a :class:`ShardJob`, yielding ``(shard index, arrays)`` as they finish."""

    name: str

    def run(self, job: ShardJob, indices: Sequence[int], tick: Callable[[int], None]) -> Results: ...


@dataclass
class Serial:
    """One shard after another in the calling thread (progress ticks within a shard)."""

    name: str = "serial"

    def run(self, job: ShardJob, indices: Sequence[int], tick: Callable[[int], None]) -> Results:
        for k in indices:
            yield k, job.run(k, tick)


def _drain(pool: _PoolExecutor, submit: Callable[[int], Future[list[np.ndarray]]], indices: Sequence[int],
           window: int, *, ordered: bool = False) -> Results:
    """Keep at most ``window`` shards in flight (bounded memory), yield each as it finishes (``ordered``: in the
    order of ``indices``, as a serial run would, each after the ones before it)."""
    pending: dict[Future[list[np.ndarray]], int] = {}
    todo = iter(indices)
    try:
        for k in todo:
            pending[submit(k)] = k
            if len(pending) >= window:
                break
        while pending:
            if ordered:   # the earliest shard still in flight (dicts keep submission order)
                done, _ = wait([next(iter(pending))])
            else:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for f in sorted(done, key=pending.__getitem__):
                k = pending.pop(f)
                if f.exception() is not None:
                    _raise_first_failure(pending, k, f)
                yield k, f.result()
                nxt = next(todo, None)
                if nxt is not None:
                    pending[submit(nxt)] = nxt
    finally:
        for f in pending:
            f.cancel()


def _raise_first_failure(pending: dict[Future[list[np.ndarray]], int], k: int,
                         failed: Future[list[np.ndarray]]) -> None:
    """Raise the error of the lowest failing shard, the one a serial run would have raised: every
    shard before ``k`` was submitted already, so wait for those still running."""
    earlier = {f: j for f, j in pending.items() if j < k}
    wait(earlier)
    first = min(((j, f) for f, j in earlier.items() if f.exception() is not None), default=(k, failed),
                key=lambda t: t[0])[1]
    exc = first.exception()
    assert exc is not None
    raise exc


@dataclass
class Threads:
    """Shards on a thread pool: for agents whose ``act`` waits (a model or service call), and the array path of a
    thread-safe agent (``ordered``: results in shard order, see :func:`auto_array_executor`)."""

    workers: int = 4
    name: str = "threads"
    ordered: bool = False

    def run(self, job: ShardJob, indices: Sequence[int], tick: Callable[[int], None]) -> Results:
        with ThreadPoolExecutor(self.workers, thread_name_prefix="replaylens-shard") as pool:
            yield from _drain(pool, lambda k: pool.submit(job.run, k), indices, 2 * self.workers,
                              ordered=self.ordered)


_JOB: ShardJob | None = None


def _init_worker(job: ShardJob) -> None:
    global _JOB
    _JOB = job


def _run_in_worker(k: int) -> list[np.ndarray]:
    assert _JOB is not None
    return _JOB.run(k)


@dataclass
class Processes:
    """Shards in worker processes: for CPU-bound pure-Python agents.  The job (agent included) is
    handed to each worker once, by fork where available, else pickled."""

    workers: int = 2
    name: str = "processes"

    def run(self, job: ShardJob, indices: Sequence[int], tick: Callable[[int], None]) -> Results:
        methods = multiprocessing.get_all_start_methods()
        ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
        with ProcessPoolExecutor(self.workers, mp_context=ctx, initializer=_init_worker, initargs=(job,)) as pool:
            yield from _drain(pool, lambda k: pool.submit(_run_in_worker, k), indices, 2 * self.workers)


BACKENDS: dict[str, Callable[..., Executor]] = {
    "serial": lambda workers, address: Serial(),
    "threads": lambda workers, address: Threads(workers),
    "processes": lambda workers, address: Processes(workers),
    "ray": lambda workers, address: Ray(workers, address),
}


def resolve_backend(backend: str, *, workers: int | None, concurrency: int | None) -> tuple[str, int]:
    """``auto``: processes with ``workers`` > 1, threads with ``concurrency`` > 1, else serial (which
    :meth:`PreparedReplay.run` turns into threads for a thread-safe array agent: :func:`auto_array_executor`)."""
    if backend not in ("auto", *BACKENDS):
        raise ConfigError(f"unknown backend {backend!r}; choose auto, {', '.join(BACKENDS)}")
    if (workers is not None and workers < 1) or (concurrency is not None and concurrency < 1):
        raise ConfigError("workers and concurrency must be >= 1")
    if backend == "auto":
        backend = ("processes" if (workers or 1) > 1 else "threads" if (concurrency or 1) > 1 else "serial")
    n = concurrency if backend == "threads" else workers
    return backend, int(n or (4 if backend == "threads" else 2))


def auto_array_executor(agent: Agent, *, n_shards: int) -> Executor | None:
    """The ``auto`` backend's executor for the array path when nothing else was asked: up to
    :data:`~replaylens.settings.AUTO_ARRAY_THREADS` threads for an agent whose batch form declares
    ``thread_safe = True`` (its ``act_batch`` may run on two shards at once: numpy releases the GIL in the large
    array operations, so the replay uses a second core), with two shards or more and as many CPUs; results in
    shard order (journaled as a serial run journals them).  ``None``: serial.  Decisions are the same either way."""
    if n_shards < 2 or not getattr(agent.array, "thread_safe", False):
        return None
    threads = min(AUTO_ARRAY_THREADS, available_cpus(), n_shards)
    return Threads(threads, ordered=True) if threads > 1 else None


def make_executor(backend: str, *, workers: int, address: str | None = None,
                  ray: Mapping[str, Any] | None = None) -> Executor:
    """The executor of ``backend`` (``ray``: options of :class:`~replaylens.replay._ray.Ray` in ``ray``; its
    ``workers`` there, None for all CPUs, replace ``workers``)."""
    if backend == "ray" and ray is not None:
        return Ray(address=address, **ray)
    return BACKENDS[backend](workers, address)


class _AsyncPolicy:
    """A synchronous face for a policy whose ``act`` is a coroutine: calls from any thread are run on
    one event loop, at most ``limit`` at a time (a semaphore)."""

    def __init__(self, policy: Any, limit: int) -> None:
        self.policy = policy
        self.loop = asyncio.new_event_loop()
        self.sem = threading.BoundedSemaphore(limit)
        self.thread = threading.Thread(target=self.loop.run_forever, name="replaylens-async", daemon=True)
        self.thread.start()

    def act(self, state: Any, task: FutureInput, menu: tuple[str, ...], rng: np.random.Generator) -> str:
        with self.sem:
            fut = asyncio.run_coroutine_threadsafe(self.policy.act(state, task, menu, rng), self.loop)
            return str(fut.result())

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


def async_bridge(agent: Agent, limit: int) -> tuple[Agent, Callable[[], None]]:
    """``agent`` with a coroutine ``act`` wrapped for the thread backend, and its closer (no-op otherwise)."""
    if not inspect.iscoroutinefunction(getattr(agent.policy, "act", None)):
        return agent, lambda: None
    bridge = _AsyncPolicy(agent.policy, limit)
    return replace(agent, policy=bridge), bridge.close
