"""Array-path shard leftovers: per-decision seeds and the transforms' law checks, against in-run baselines.

One shard of the issue-27 audit shape (``make_bandit(n_streams=1248, slots_per_block=10, n_future=4)``, the
audit's default cells and maps, the ``mean`` agent's plan), timed best of 9, baseline and new alternated:

* seeds: task and stream keys (SHA-256 of each name), then the query seeds of every (task, combination)
  (the array path's ``task_keys`` + ``query_seeds``) against
  the previous implementation kept here (``hashlib`` digests sliced one by one, ``mix64`` allocating per step);
  the seeds must be identical (exit 1 otherwise);
* transforms: the ``transform_batch`` calls of ``_shard`` (every cell's transform and law checks; the slot draws
  are not counted) with the multiset shortcut against the same code with the shortcut disabled (every multiset
  law sorted); the transformed histories must be identical.

Run from the repository root: ``python bench/seeds.py`` (about a minute on a 2-CPU host).
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Callable, Sequence

import numpy as np

from replaylens.agents import load_agent
from replaylens.bandit import make_bandit
from replaylens.interventions import _cells
from replaylens.replay import _engine, plan_replay, prepare_replay
from replaylens.replay._engine import _combo_keys, _shard, shares_label_maps
from replaylens.replay._seeds import query_seeds, task_keys
from replaylens.replay._streams import future_column
from replaylens.rng import stable_ints
from replaylens.settings import DEFAULT_CELLS

_U = np.uint64


def _stable_ints_before(texts: Sequence[str]) -> np.ndarray:
    sha = hashlib.sha256
    head = b"".join([sha(t.encode("utf-8")).digest()[:8] for t in texts])
    return np.frombuffer(head, dtype="<u8").astype(np.uint64) >> np.uint64(1)


def _mix64_before(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return np.asarray(x ^ (x >> np.uint64(31)), dtype=np.uint64)


def _seeds_before(seed: int, streams: Sequence[str], tasks: Sequence[str], combos: np.ndarray, q_stream: np.ndarray,
                  q_combo: np.ndarray, q_task: np.ndarray, q_repeat: np.ndarray) -> np.ndarray:
    tkeys = _stable_ints_before([f"task:{t}" for t in tasks])
    skeys = _mix64_before(_U(seed) ^ _stable_ints_before([f"stream:{s}" for s in streams]))
    first = _mix64_before(skeys[:, None] ^ combos[None, :]).reshape(-1)[q_stream * combos.shape[0] + q_combo]
    return _mix64_before(_mix64_before(first ^ tkeys[q_task]) ^ (q_repeat.astype(_U) + _U(1)))


def _seeds_now(seed: int, streams: Sequence[str], tasks: Sequence[str], combos: np.ndarray, q_stream: np.ndarray,
               q_combo: np.ndarray, q_task: np.ndarray, q_repeat: np.ndarray) -> np.ndarray:
    return query_seeds(seed, "independent", streams, combos, q_stream, q_combo, task_keys(tasks)[q_task], q_repeat)


def _best_alternated(fns: dict[str, Callable[[], object]], n: int = 9) -> dict[str, float]:
    best = dict.fromkeys(fns, float("inf"))
    for i in range(n):
        for name in (list(fns) if i % 2 == 0 else list(fns)[::-1]):
            t = time.perf_counter()
            fns[name]()
            best[name] = min(best[name], time.perf_counter() - t)
    return best


def main() -> int:
    b = make_bandit(n_streams=1248, slots_per_block=10, n_future=4)
    agent = load_agent("mean", {})
    plan = plan_replay(b.history, b.futures, cells=DEFAULT_CELLS, seed=0)
    prep = prepare_replay(b.history, b.futures, b.evaluator, plan=plan)
    sds = [prep.streams[s] for s in plan.streams]
    streams = [sd.name for sd in sds]
    tasks = future_column(sds, "task").tolist()
    combos = _combo_keys(plan.rng, plan.cells, plan.draws, plan.maps)
    per_stream = np.array([len(sd.futures) for sd in sds])
    task_stream = np.repeat(np.arange(len(sds)), per_stream)
    # every (task, combination) once, ordered (stream, combination, task) as the array path asks them
    q_task = np.concatenate([np.tile(np.flatnonzero(task_stream == s), combos.shape[0]) for s in range(len(sds))])
    q_stream = task_stream[q_task]
    q_combo = np.concatenate([np.repeat(np.arange(combos.shape[0]), n) for n in per_stream])
    q_repeat = np.zeros(q_task.shape[0], dtype=np.int64)
    args = (plan.seed, streams, tasks, combos, q_stream, q_combo, q_task, q_repeat)
    ok = np.array_equal(_seeds_before(*args), _seeds_now(*args))
    seeds = _best_alternated({"before": lambda: _seeds_before(*args), "now": lambda: _seeds_now(*args)})
    names = _best_alternated({
        "before": lambda: (_stable_ints_before([f"task:{t}" for t in tasks]),
                           _stable_ints_before([f"stream:{s}" for s in streams])),
        "now": lambda: (task_keys(tasks), stable_ints(streams, "stream:"))})

    before_maps = shares_label_maps(agent)
    shortcut = _cells._moves_within_blocks

    spent = {True: float("inf"), False: float("inf")}
    transform = _engine.transform_batch

    def transforms(on: bool) -> dict[tuple[int, int], object]:
        acc = [0.0]

        def timed(*a: object, **kw: object) -> object:
            t = time.perf_counter()
            out = transform(*a, **kw)  # type: ignore[arg-type]
            acc[0] += time.perf_counter() - t
            return out

        _cells._moves_within_blocks = shortcut if on else (lambda src, block: False)
        _engine.transform_batch = timed  # type: ignore[assignment]
        try:
            return _shard(plan, sds, before_maps=before_maps).transforms  # type: ignore[return-value]
        finally:
            _cells._moves_within_blocks = shortcut
            _engine.transform_batch = transform
            spent[on] = min(spent[on], acc[0])

    a, c = transforms(False), transforms(True)
    ok &= all(np.array_equal(a[k].keys, c[k].keys) and np.array_equal(a[k].tasks, c[k].tasks)  # type: ignore[attr-defined]
              for k in a)
    _best_alternated({"sorted": lambda: transforms(False), "shortcut": lambda: transforms(True)})
    shard = {"sorted": spent[False], "shortcut": spent[True]}
    print(f"shard: {len(sds)} streams, {len(tasks)} tasks, {q_task.shape[0]} queries, {len(plan.cells)} cells, "
          f"{len(plan.maps)} maps; identical seeds and transforms: {ok}")
    print(f"transform_batch calls of one _shard (transforms + law checks): {shard['sorted'] * 1e3:.1f} ms every "
          f"multiset law sorted, "
          f"{shard['shortcut'] * 1e3:.1f} ms with the shortcut ({shard['sorted'] / shard['shortcut']:.2f}x)")
    print(f"name keys alone (SHA-256 of every task and stream id): {names['before'] * 1e3:.1f} ms before, "
          f"{names['now'] * 1e3:.1f} ms now ({names['before'] / names['now']:.2f}x)")
    print(f"task keys + query seeds: {seeds['before'] * 1e3:.1f} ms before, {seeds['now'] * 1e3:.1f} ms now "
          f"({seeds['before'] / seeds['now']:.2f}x)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
