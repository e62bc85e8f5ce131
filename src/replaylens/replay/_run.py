"""``replay``: plan, execute (sharded, journaled, resumable) and collect decisions."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import numpy as np

from ..agents import Agent, SupportLookup
from ..errors import ConfigError
from ..maps import SlotSpec
from ..records import Evaluator, FutureTasks, History, check_inputs
from ._engine import block_vocabulary, prepare_streams, run_shard, utilities_for
from ._journal import Journal
from ._plan import ReplayPlan, plan_replay
from ._result import Decisions

__all__ = ["replay", "support_lookup"]

Progress = Callable[[int, int], None]


def replay(
    history: History,
    futures: FutureTasks,
    evaluator: Evaluator,
    agent: Agent,
    *,
    plan: ReplayPlan | None = None,
    cells: str | Sequence[str] = "value,pair,key_slot",
    maps: str | Sequence[str] | None = None,
    draws: int | Sequence[SlotSpec] = 1,
    repeats: int = 1,
    seed: int = 0,
    path: str = "auto",
    journal: str | os.PathLike[str] | None = None,
    journal_key: dict[str, object] | None = None,
    shard_size: int | None = None,
    progress: Progress | None = None,
) -> Decisions:
    """Replay every planned transformed history through ``agent`` and score the decisions.

    ``path``: ``array`` (vectorized, needs ``agent.array``), ``reference`` (plain per-record
    loop, the oracle) or ``auto``.  With ``journal`` set, finished shards are stored there and a
    rerun with the same inputs resumes, skipping them.
    """
    check_inputs(history, futures, evaluator)
    if plan is None:
        plan = plan_replay(history, futures, cells=cells, maps=maps, draws=draws, repeats=repeats, seed=seed)
    if path == "auto":
        path = "array" if agent.array is not None else "reference"
    if path not in ("array", "reference"):
        raise ConfigError(f"path must be 'auto', 'array' or 'reference'; got {path!r}")
    sds = prepare_streams(plan, history, futures)
    blocks = block_vocabulary(history, futures)
    size = shard_size or (16 if path == "array" else 1)
    shards = plan.shards(size)
    total = sum(len(sds[s].futures) for s in plan.streams) * plan.n_decisions_per_task
    done = 0

    def tick(n: int) -> None:
        nonlocal done
        done += n
        if progress is not None:
            progress(done, total)

    jr = None
    if journal is not None:
        key = {"format": 1, "plan": plan.digest(), "history": history.fingerprint(),
               "futures": futures.fingerprint(), "agent": dict(agent.spec) or {"name": agent.name}, "path": path,
               "shard_size": size, **(journal_key or {})}
        jr = Journal(journal, {k: (v if isinstance(v, (str, int, float, list, dict)) else str(v))
                               for k, v in key.items()})
    per_stream: dict[str, np.ndarray] = {}
    for k, streams in enumerate(shards):
        if jr is not None and jr.done(k):
            arrays = jr.load(k)
            tick(sum(a.size for a in arrays))
        else:
            arrays = run_shard(plan, [sds[s] for s in streams], agent, path=path, blocks=blocks, tick=tick)
            if jr is not None:
                jr.record(k, list(streams), arrays)
        per_stream.update(zip(streams, arrays, strict=True))
    ordered = [sds[s] for s in plan.streams]
    actions = np.concatenate([per_stream[s] for s in plan.streams], axis=-1)
    util, oracle = utilities_for(ordered, evaluator, len(plan.labels))
    stratum_code = {r: i for i, r in enumerate(plan.strata)}
    stream_idx = np.concatenate([np.full(len(sd.futures), i) for i, sd in enumerate(ordered)])
    stratum_idx = np.array([stratum_code[f.stratum] for sd in ordered for f in sd.futures], dtype=np.int64)
    return Decisions(
        plan=plan, actions=actions, stream_idx=stream_idx.astype(np.int64), stratum_idx=stratum_idx,
        task_ids=tuple(f.task for sd in ordered for f in sd.futures),
        task_index=np.array([f.index for sd in ordered for f in sd.futures], dtype=np.int64),
        utility=util, oracle=oracle, path=path,
    )


def support_lookup(agent: Agent, history: History, futures: FutureTasks, evaluator: Evaluator) -> Agent:
    """Freeze ``agent``'s aligned identity actions into a :class:`SupportLookup` (same endpoint, no replay response)."""
    dec = replay(history, futures, evaluator, agent, cells="", maps="", path="auto")
    acts = dec.actions[0, 0, 0, 0]
    streams = dec.plan.streams
    table = {(streams[int(dec.stream_idx[i])], dec.task_ids[i]): dec.plan.labels[int(acts[i])]
             for i in range(dec.n_tasks)}
    return SupportLookup(table, name=f"lookup({agent.name})").agent()
