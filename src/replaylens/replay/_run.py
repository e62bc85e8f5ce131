"""``replay``: plan, execute (sharded, journaled, resumable) and collect decisions."""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from .._jit import preload_for
from ..agents import Agent, SupportLookup, as_agent
from ..errors import ConfigError
from ..maps import SlotSpec
from ..records import Evaluator, FutureTasks, History, check_inputs
from ..settings import STRUCTURAL_CELLS
from ._backends import ShardJob, async_bridge, auto_array_executor, make_executor, resolve_backend
from ._engine import (
    DEFAULT_SHARD_MEMORY,
    StreamData,
    block_vocabulary,
    prepare_streams,
    shard_layout,
    utilities_for,
)
from ._fingerprint import agent_fingerprint, engine_fingerprint
from ._journal import Journal, stored_key
from ._layout import ShardActions, action_dtype
from ._plan import ReplayPlan, plan_replay
from ._result import Decisions
from ._streams import future_column, task_rows

__all__ = ["PreparedReplay", "prepare_replay", "replay", "support_lookup"]

Progress = Callable[[int, int], None]


def replay(
    history: History,
    futures: FutureTasks,
    evaluator: Evaluator,
    agent: Agent | Any,
    *,
    plan: ReplayPlan | None = None,
    cells: str | Sequence[str] = STRUCTURAL_CELLS,
    maps: str | Sequence[str] | None = None,
    draws: int | Sequence[SlotSpec] = 1,
    repeats: int = 1,
    seed: int = 0,
    rng: str = "independent",
    path: str = "auto",
    journal: str | os.PathLike[str] | None = None,
    journal_key: dict[str, object] | None = None,
    shard_size: int | None = None,
    progress: Progress | None = None,
    backend: str = "auto",
    workers: int | None = None,
    concurrency: int | None = None,
    ray_address: str | None = None,
    shard_memory: int | None = None,
    restart: bool = False,
    ray_runtime_env: Mapping[str, Any] | None = None,
) -> Decisions:
    """Replay every planned transformed history through ``agent`` and score the decisions.

    ``path``: ``array`` (vectorized, needs ``agent.array``), ``reference`` (plain per-record
    loop, the oracle) or ``auto``.  With ``journal`` set, finished shards are stored there and a
    rerun with the same inputs and the same code (agent source files, ReplayLens version) resumes,
    skipping them; any other journal there is refused unless ``restart`` discards it.  ``agent`` may
    also be anything with an ``.agent()`` method (a :class:`HistoryReader`, ...).  To replay several
    agents under one plan, :func:`prepare_replay` once and call :meth:`PreparedReplay.run` per agent (same decisions).
    ``backend``/``workers``/``concurrency``/``ray_address``/``ray_runtime_env``/``shard_memory``: see
    :meth:`PreparedReplay.run` (same decisions on every backend).
    """
    prepared = prepare_replay(history, futures, evaluator, plan=plan, cells=cells, maps=maps, draws=draws,
                              repeats=repeats, seed=seed, rng=rng)
    return prepared.run(agent, path=path, journal=journal, journal_key=journal_key, shard_size=shard_size,
                        progress=progress, backend=backend, workers=workers, concurrency=concurrency,
                        ray_address=ray_address, shard_memory=shard_memory, restart=restart,
                        ray_runtime_env=ray_runtime_env)


def prepare_replay(
    history: History,
    futures: FutureTasks,
    evaluator: Evaluator,
    *,
    plan: ReplayPlan | None = None,
    cells: str | Sequence[str] = STRUCTURAL_CELLS,
    maps: str | Sequence[str] | None = None,
    draws: int | Sequence[SlotSpec] = 1,
    repeats: int = 1,
    seed: int = 0,
    rng: str = "independent",
) -> PreparedReplay:
    """Check the inputs, plan, and prepare once what every agent's replay shares: the transformed
    streams, the block vocabulary, the utilities g̃(x_i, a) and the oracle a*(x_i)."""
    check_inputs(history, futures, evaluator)
    if plan is None:
        plan = plan_replay(history, futures, cells=cells, maps=maps, draws=draws, repeats=repeats, seed=seed,
                           rng=rng)
    sds = prepare_streams(plan, history, futures)
    ordered = [sds[s] for s in plan.streams]
    util, oracle = utilities_for(ordered, evaluator, len(plan.labels))
    blocks = block_vocabulary(history, futures)
    stratum_of_block = np.full(len(blocks), -1, dtype=np.int64)   # block-vocabulary code -> plan.strata index
    b_pos = {b: i for i, b in enumerate(blocks)}
    for i, r in enumerate(plan.strata):
        stratum_of_block[b_pos[r]] = i
    lens = np.array([len(sd.futures) for sd in ordered], dtype=np.int64)
    stream_idx = np.repeat(np.arange(len(ordered), dtype=np.int64), lens)
    stratum_idx = (stratum_of_block[task_rows(ordered, "stratum_code")] if ordered
                   else np.zeros(0, dtype=np.int64))
    base = Decisions(
        plan=plan, actions=np.zeros((0,), dtype=np.int64), stream_idx=stream_idx, stratum_idx=stratum_idx,
        task_text=future_column(ordered, "task_text"), task_index=future_column(ordered, "index"),
        utility=util, oracle=oracle, path="",
    )
    return PreparedReplay(plan=plan, streams=sds, blocks=blocks, base=base,
                          fingerprints=(history.fingerprint(), futures.fingerprint()))


def _resolved_path(path: str, agent: Agent) -> str:
    """``array`` or ``reference`` (``auto``: the array path where the agent has one)."""
    if path == "auto":
        path = "array" if agent.array is not None else "reference"
    if path not in ("array", "reference"):
        raise ConfigError(f"path must be 'auto', 'array' or 'reference'; got {path!r}")
    return path


@dataclass(frozen=True, eq=False)
class PreparedReplay:
    """One plan's replay inputs, prepared once (see :func:`prepare_replay`); :meth:`run` replays an agent."""

    plan: ReplayPlan
    streams: dict[str, StreamData]
    blocks: tuple[tuple[str, str], ...]
    base: Decisions  # task layout, utilities and oracle; ``actions`` empty
    fingerprints: tuple[str, str]  # (history, futures) content fingerprints, for the journal key

    def journal_key(self, agent: Agent | Any, *, path: str = "auto", shard_size: int | None = None,
                    shard_memory: int | None = None, extra: dict[str, object] | None = None) -> dict[str, Any]:
        """The key :meth:`run` journals ``agent``'s replay under (as stored): everything that decides the
        decisions and the shard layout -- plan, inputs, agent spec and code, ReplayLens, ``extra``."""
        agent = as_agent(agent)
        path = _resolved_path(path, agent)
        size = shard_size or (1 if path == "reference" else f"memory:{shard_memory or DEFAULT_SHARD_MEMORY}")
        key = {"format": 1, "plan": self.plan.digest(), "history": self.fingerprints[0],
               "futures": self.fingerprints[1], "agent": dict(agent.spec) or {"name": agent.name},
               "path": path, "shard_size": size, "code": agent_fingerprint(agent),
               "engine": engine_fingerprint(), **(extra or {})}
        return stored_key(key)

    def run(
        self,
        agent: Agent | Any,
        *,
        path: str = "auto",
        journal: str | os.PathLike[str] | None = None,
        journal_key: dict[str, object] | None = None,
        shard_size: int | None = None,
        progress: Progress | None = None,
        backend: str = "auto",
        workers: int | None = None,
        concurrency: int | None = None,
        ray_address: str | None = None,
        shard_memory: int | None = None,
        restart: bool = False,
        ray_runtime_env: Mapping[str, Any] | None = None,
    ) -> Decisions:
        """The decisions of ``agent`` on every planned history (exactly those of :func:`replay`).

        ``backend`` (``auto``, ``serial``, ``threads``, ``processes``, ``ray``) runs the shards;
        ``concurrency`` threads (agents that wait on a model/service, or whose ``act`` is a
        coroutine), ``workers`` processes or Ray CPUs.  ``auto`` with none of them runs the shards of an array
        agent that declares ``thread_safe = True`` on up to two threads (:func:`._backends.auto_array_executor`),
        else serially.  Decisions are identical on every backend.
        Without ``shard_size``, array-path shards are sized to about ``shard_memory`` bytes.
        ``ray``: the cluster of ``ray_address`` (else ``RAY_ADDRESS``, else one running here; else a local instance
        of ``workers`` CPUs), with ``ray_runtime_env`` (:mod:`._ray`).  A ``progress`` callable with an ``info``
        keyword also receives the backend's status line (Ray: nodes, CPUs and shards).
        """
        agent = as_agent(agent)
        plan = self.plan
        path = _resolved_path(path, agent)
        sds = self.streams
        kind, n_exec = resolve_backend(backend, workers=workers, concurrency=concurrency)
        if ray_address is not None:
            kind = "ray" if backend == "auto" else kind
        shards = shard_layout(plan, sds, path=path, shard_size=shard_size, shard_memory=shard_memory)
        total = sum(len(sds[s].futures) for s in plan.streams) * plan.n_decisions_per_task
        preload_for(total)  # numba for a large run, where installed: its slot draws and statistics are compiled
        done = 0

        def tick(n: int) -> None:
            nonlocal done
            done += n
            if progress is not None:
                progress(done, total)

        jr = None
        if journal is not None:
            key = self.journal_key(agent, path=path, shard_size=shard_size, shard_memory=shard_memory,
                                   extra=journal_key)
            jr = Journal(journal, key, restart=restart)
            if jr.n_done == len(shards):
                print(f"replay already complete: all {len(shards)} shards read from the journal (--restart "
                      "replays again)", file=sys.stderr)
            elif jr.n_done:
                print(f"resuming: {jr.n_done} of {len(shards)} shards done, {len(shards) - jr.n_done} to replay",
                      file=sys.stderr)
        out = _ActionSink(plan.streams, [len(sds[s].futures) for s in plan.streams], len(plan.labels))
        todo = []
        for k, streams in enumerate(shards):
            if jr is not None and jr.done(k):
                arrays = jr.load(k)
                tick(sum(a.size for a in arrays))
                out.put(streams, arrays, check=True)
            else:
                todo.append(k)
        executor = None
        # nothing asked (a Ray address has made ``kind`` ray): a thread-safe array agent's shards two at a time
        if backend == "auto" and kind == "serial" and path == "array" and workers is None and concurrency is None:
            executor = auto_array_executor(agent, n_shards=len(todo))
        if executor is None:
            ray = None if kind != "ray" else {   # Ray's log beside the journal (OUT/ray.log), its status to the bar
                "workers": workers, "runtime_env": ray_runtime_env,
                "shard_memory": shard_memory or DEFAULT_SHARD_MEMORY,
                "log": Path(journal).parent / "ray.log" if journal is not None else None,
                "status": _status_line(progress, lambda: (done, total))}
            executor = make_executor(kind, workers=n_exec, address=ray_address, ray=ray)
        run_agent, close = async_bridge(agent, n_exec if kind == "threads" else 1)
        job = ShardJob(plan, sds, run_agent, path, self.blocks, tuple(shards))
        # results are collected here, in the coordinating thread, shard by shard, and journaled in that order
        # by one writer thread (its file writes and fsyncs overlap the next shards' replay)
        writer = ThreadPoolExecutor(1, thread_name_prefix="replaylens-journal") if jr is not None else None
        written: list[Future[None]] = []
        try:
            for k, arrays in executor.run(job, todo, tick):
                if executor.name != "serial":
                    tick(sum(a.size for a in arrays))
                if jr is not None and writer is not None:
                    written.append(writer.submit(jr.record, k, list(shards[k]), arrays))
                    if written[0].done():
                        written.pop(0).result()   # a journal error stops the run early
                out.put(shards[k], arrays)
        finally:
            close()
            if writer is not None:
                writer.shutdown(wait=True)   # every journal write started is finished (or failed) first
        for w in written:
            w.result()   # the first journal error, if any
        actions = out.result()
        return replace(self.base, actions=actions, path=path)


def _status_line(progress: Progress | None, counts: Callable[[], tuple[int, int]]) -> Callable[[str], None] | None:
    """The backend's status line for ``progress`` when it takes an ``info`` keyword (the CLI's bar), else None."""
    if progress is None or "info" not in inspect.signature(progress).parameters:
        return None
    show: Any = progress

    def status(line: str) -> None:
        show(*counts(), info=line)

    return status


class _ActionSink:
    """Per-stream action arrays written into one preallocated array as shards arrive.

    The result equals ``np.concatenate([a[s] for s in streams], axis=-1)`` (same values) without holding every
    stream's array and a concatenated copy at once, in the smallest integer type that holds every label code
    (:func:`action_dtype`: one byte a decision below 128 labels).
    """

    def __init__(self, streams: Sequence[str], n_tasks: Sequence[int], n_labels: int) -> None:
        self.start = dict(zip(streams, np.r_[0, np.cumsum(n_tasks)][:-1].tolist(), strict=True))
        self.total = int(sum(n_tasks))
        self.dtype = action_dtype(n_labels)
        self.n_labels = n_labels
        self.array: np.ndarray | None = None
        self.seen: set[str] = set()

    def put(self, streams: Sequence[str], arrays: Sequence[np.ndarray], *, check: bool = False) -> None:
        """Write each stream's actions in place (``check``: first make sure every code is a label's, for arrays
        read back from a journal; the replay's own are checked where they are made)."""
        block = arrays.block if isinstance(arrays, ShardActions) else None
        names, arrays = list(streams), list(arrays)
        if len(names) != len(arrays):
            raise ValueError(f"{len(names)} streams but {len(arrays)} action arrays")
        if check and (block is None or not self._codes_ok(block)):
            for name, a in zip(names, arrays, strict=True):
                if not self._codes_ok(a):
                    raise RuntimeError(f"replay gave stream {name!r} an action code outside 0 … {self.n_labels - 1}")
        if not arrays:
            return
        if self.array is None:
            self.array = np.empty((*arrays[0].shape[:-1], self.total), dtype=self.dtype)
        starts = [self.start[name] for name in names]
        ends = [s0 + a.shape[-1] for s0, a in zip(starts, arrays, strict=True)]
        if starts[1:] == ends[:-1]:   # consecutive streams (a shard's): one copy of them all
            dest = self.array[..., starts[0]:ends[-1]]
            if block is not None:   # the shard's block as it is
                dest[...] = block
            else:
                np.concatenate(arrays, axis=-1, out=dest)
        else:
            for s0, s1, a in zip(starts, ends, arrays, strict=True):
                self.array[..., s0:s1] = a
        self.seen.update(names)

    def _codes_ok(self, a: np.ndarray) -> bool:
        return not a.size or (int(a.min()) >= 0 and int(a.max()) < self.n_labels)

    def result(self) -> np.ndarray:
        missing = [s for s in self.start if s not in self.seen]
        if missing:
            raise RuntimeError(f"replay produced no decisions for stream {missing[0]!r}")
        if self.array is None:  # no stream at all: what concatenating nothing would have raised
            return np.concatenate([], axis=-1)
        return self.array


def support_lookup(agent: Agent, history: History, futures: FutureTasks, evaluator: Evaluator) -> Agent:
    """Freeze ``agent``'s aligned identity actions into a :class:`SupportLookup` (same endpoint, no replay response)."""
    dec = replay(history, futures, evaluator, agent, cells="", maps="", path="auto")
    acts = dec.actions[0, 0, 0, 0]
    streams = dec.plan.streams
    ids = dec.task_ids.tolist()
    table = {(streams[int(dec.stream_idx[i])], ids[i]): dec.plan.labels[int(acts[i])] for i in range(dec.n_tasks)}
    return SupportLookup(table, name=f"lookup({agent.name})").agent()
