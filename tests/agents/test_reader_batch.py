"""A HistoryReader is asked once per distinct (transformed history, visible prefix) with every future
task of that prefix, its snapshots are not deep-copied, and an opted-in reader is extended
incrementally (issue 17 point 5, issue 13 point 8).  The per-decision ``act`` path is the oracle."""

from __future__ import annotations

import copy
import importlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pytest

from replaylens.agents import Agent, FutureInput, HistoryReader, PrefixPolicy, Visible
from replaylens.bandit import make_bandit
from replaylens.errors import AgentRaised
from replaylens.replay import prepare_replay, replay

pytestmark = pytest.mark.slow  # batch equivalence on every backend: left out of the fast subset

engine = importlib.import_module("replaylens.replay._engine")

KW = {"cells": "value,pair,key_slot,reorder", "draws": 2, "repeats": 2, "seed": 11, "path": "reference"}


@pytest.fixture(scope="module")
def bandit():
    return make_bandit(n_streams=4, slots_per_block=5, n_future=4)


def _means(records: Sequence[Visible], menu: tuple[str, ...]) -> np.ndarray:
    sums = {a: [0.0, 0] for a in menu}
    for v in records:
        if v.key in sums and v.outcome == v.outcome:
            sums[v.key][0] += v.outcome
            sums[v.key][1] += 1
    return np.array([s / n if n else 0.5 for s, n in (sums[a] for a in menu)])


def _greedy(records: tuple[Visible, ...], task: FutureInput, menu: tuple[str, ...], rng: np.random.Generator) -> str:
    return menu[int(np.argmax(_means(records, menu)))]


def _noisy(records: tuple[Visible, ...], task: FutureInput, menu: tuple[str, ...], rng: np.random.Generator) -> str:
    p = np.exp(4 * _means(records, menu))
    return menu[int(rng.choice(len(menu), p=p / p.sum()))]


def _batch(fn):  # type: ignore[no-untyped-def]
    def many(records, tasks, menus, rngs):  # type: ignore[no-untyped-def]
        return [fn(records, t, m, r) for t, m, r in zip(tasks, menus, rngs, strict=True)]
    return many


@dataclass(frozen=True)
class _PerDecision:
    """The reader's policy with only ``act``: forces the per-decision path (the oracle)."""

    reader: HistoryReader

    def act(self, state: tuple[Visible, ...], task: FutureInput, menu: tuple[str, ...],
            rng: np.random.Generator) -> str:
        return self.reader.act(state, task, menu, rng)


def _oracle(reader: HistoryReader) -> Agent:
    a = reader.agent()
    return Agent(a.name, reader, _PerDecision(reader), stochastic=a.stochastic)


@pytest.mark.parametrize("fn,stochastic", [(_greedy, False), (_noisy, True)])
@pytest.mark.parametrize("backend", ["serial", "threads"])
def test_batch_decisions_equal_the_per_decision_reference(bandit, fn, stochastic, backend):
    plain = HistoryReader(fn, name="r", stochastic=stochastic)
    assert not isinstance(_PerDecision(plain), PrefixPolicy) and isinstance(plain, PrefixPolicy)
    want = replay(bandit.history, bandit.futures, bandit.evaluator, _oracle(plain), backend="serial", **KW).actions
    if stochastic:  # the stochastic reader really uses its rng, so equality is not vacuous
        other = replay(bandit.history, bandit.futures, bandit.evaluator, _oracle(plain), backend="serial",
                       **{**KW, "seed": 12}).actions
        assert other.tobytes() != want.tobytes()
    for reader in (plain, HistoryReader(fn, name="r", stochastic=stochastic, batch_fn=_batch(fn))):
        got = replay(bandit.history, bandit.futures, bandit.evaluator, reader.agent(), backend=backend,
                     concurrency=3 if backend == "threads" else None, **KW).actions
        assert got.tobytes() == want.tobytes()


def _layout(bandit) -> tuple[int, int, int, int, int]:
    """(cells × maps × draws, distinct prefixes summed over streams, future tasks, records, streams with
    future tasks) of the plan."""
    prep = prepare_replay(bandit.history, bandit.futures, bandit.evaluator,
                          **{k: v for k, v in KW.items() if k != "path"})
    cmd = len(prep.plan.cells) * len(prep.plan.maps) * len(prep.plan.draws)
    sds = prep.streams.values()
    return (cmd, sum(len(np.unique(sd.prefix)) for sd in sds), sum(len(sd.futures) for sd in sds),
            sum(sd.length for sd in sds), sum(1 for sd in sds if sd.futures))


def test_batch_reader_is_called_once_per_distinct_prefix(bandit):
    calls: list[int] = []

    def many(records, tasks, menus, rngs):  # type: ignore[no-untyped-def]
        calls.append(len(tasks))
        return [_greedy(records, t, m, r) for t, m, r in zip(tasks, menus, rngs, strict=True)]

    per_decision: list[int] = []

    def one(records, task, menu, rng):  # type: ignore[no-untyped-def]
        per_decision.append(1)
        return _greedy(records, task, menu, rng)

    replay(bandit.history, bandit.futures, bandit.evaluator, HistoryReader(one, name="r", batch_fn=many).agent(),
           backend="serial", **KW)
    cmd, k, j, _, _ = _layout(bandit)
    assert k < j  # several future tasks share a prefix, so batching is a real saving
    assert len(calls) == k * cmd  # K calls per (cell, map, draw), not J × repeats
    assert sum(calls) == j * KW["repeats"] * cmd  # every (task, repeat) asked exactly once
    assert per_decision == []  # fn is never called per decision when batch_fn is given
    # without batch_fn the reader's fn is still asked once per decision, through act_prefix
    replay(bandit.history, bandit.futures, bandit.evaluator, HistoryReader(one, name="r").agent(),
           backend="serial", **KW)
    assert len(per_decision) == j * KW["repeats"] * cmd


def test_incremental_reader_processes_each_record_once_per_history(bandit):
    fed: list[int] = []
    built: list[int] = []

    def extend(prev, new):  # type: ignore[no-untyped-def]
        fed.append(len(new))
        if prev is None:
            built.append(1)
        sums = dict(prev or {})  # never mutates prev
        for v in new:
            if v.outcome == v.outcome:
                s, n = sums.get(v.key, (0.0, 0))
                sums[v.key] = (s + v.outcome, n + 1)
        return sums

    def decide(model, task, menu, rng):  # type: ignore[no-untyped-def]
        return menu[int(np.argmax([model[a][0] / model[a][1] if a in model else 0.5 for a in menu]))]

    inc = HistoryReader(decide, name="inc", extend=extend)
    want = replay(bandit.history, bandit.futures, bandit.evaluator, HistoryReader(_greedy).agent(),
                  backend="serial", **KW).actions
    got = replay(bandit.history, bandit.futures, bandit.evaluator, inc.agent(), backend="serial", **KW).actions
    assert got.tobytes() == want.tobytes()
    cmd, k, j, t, n_streams = _layout(bandit)
    # one model built from scratch per transformed history; every record fed at most once per history
    assert len(built) == n_streams * cmd
    assert sum(fed) <= t * cmd
    assert len(fed) <= k * cmd
    incremental = sum(fed)
    fed.clear()
    built.clear()
    replay(bandit.history, bandit.futures, bandit.evaluator, _oracle(inc), backend="serial", **KW)
    assert len(built) == j * KW["repeats"] * cmd  # per decision: rebuilt from the whole prefix every time
    assert sum(fed) > 3 * incremental


def test_immutable_reader_states_are_not_deep_copied(bandit, monkeypatch):
    copies = [0]
    real = copy.deepcopy

    def counting(x, *a):  # type: ignore[no-untyped-def]
        copies[0] += 1
        return real(x, *a)

    monkeypatch.setattr(engine.copy, "deepcopy", counting)
    replay(bandit.history, bandit.futures, bandit.evaluator, HistoryReader(_greedy).agent(), backend="serial", **KW)
    assert copies[0] == 0
    replay(bandit.history, bandit.futures, bandit.evaluator, _oracle(_NotImmutable(_greedy)), backend="serial", **KW)
    assert copies[0] > 0  # everybody else is still snapshotted by deep copy


@dataclass(frozen=True)
class _NotImmutable(HistoryReader):
    immutable_state = False  # type: ignore[misc]


def test_a_raising_batch_reader_names_stream_cell_map_draw_and_task(bandit):
    def many(records, tasks, menus, rngs):  # type: ignore[no-untyped-def]
        if len(records) >= 3:
            raise RuntimeError("model exploded")
        return [m[0] for m in menus]

    reader = HistoryReader(lambda r, t, m, g: m[0], name="boom", batch_fn=many)
    with pytest.raises(AgentRaised) as got:
        replay(bandit.history, bandit.futures, bandit.evaluator, reader.agent(), backend="serial", **KW)
    msg = str(got.value)
    for part in ("RuntimeError: model exploded", "in act_prefix", "stream ", "cell ", "map ", "draw ",
                 "future task ", "test_reader_batch.py:"):
        assert part in msg, (part, msg)
    assert "\n" not in msg
