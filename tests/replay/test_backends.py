"""Execution backends (issue 17): serial, threads, processes and Ray give byte-identical decisions on
built-in agents, a stochastic agent, a per-record agent and a coroutine agent; the journal records shards
from the coordinating thread; ``--concurrency``/``--workers``/``--backend`` on the CLI."""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from conftest import require
from replaylens.agents import Agent, FutureInput, HistoryReader, TaskInput, load_agent
from replaylens.bandit import make_bandit
from replaylens.errors import AgentError, ConfigError
from replaylens.replay import prepare_replay, replay

pytestmark = pytest.mark.slow  # end-to-end runs: left out of the fast subset (README)

backends_mod = importlib.import_module("replaylens.replay._backends")


class _MeanWriter:
    def init_state(self) -> tuple[tuple[str, float], ...]:
        return ()

    def update(self, state: tuple, task: TaskInput, key: str, outcome: float) -> tuple:
        return (*state, (key, 0.0 if np.isnan(outcome) else float(outcome)))


class _NoisyPolicy:
    """Stochastic per-record policy: softmax-ish draw from the per-key means (uses ``rng``)."""

    def act(self, state: tuple, task: FutureInput, menu: tuple[str, ...], rng: np.random.Generator) -> str:
        means = np.array([np.mean([u for k, u in state if k == a] or [0.0]) for a in menu])
        p = np.exp(3 * means)
        return menu[int(rng.choice(len(menu), p=p / p.sum()))]


class _AsyncPolicy(_NoisyPolicy):
    async def act(self, state: tuple, task: FutureInput, menu: tuple[str, ...],  # type: ignore[override]
                  rng: np.random.Generator) -> str:
        await asyncio.sleep(0)
        return _NoisyPolicy.act(self, state, task, menu, rng)


def _stochastic() -> Agent:
    return Agent("noisy", _MeanWriter(), _NoisyPolicy(), stochastic=True)


def _last_key(records: tuple, task: FutureInput, menu: tuple[str, ...], rng: np.random.Generator) -> str:
    seen = [v.key for v in records if v.key in menu]
    return seen[-1] if seen else menu[0]


def _agents() -> dict[str, Agent]:
    return {"mean": load_agent("mean"), "commutative": load_agent("commutative"), "noisy": _stochastic(),
            "reader": HistoryReader(_last_key, name="last-key").agent()}


@pytest.fixture(scope="module")
def bandit():
    return make_bandit(n_streams=6, slots_per_block=6, n_future=3)


KW = {"cells": "value,pair,key_slot,reorder", "draws": 2, "repeats": 2, "seed": 7}


@pytest.fixture(scope="module")
def serial(bandit):
    return {n: replay(bandit.history, bandit.futures, bandit.evaluator, a, backend="serial", **KW).actions
            for n, a in _agents().items()}


@pytest.mark.parametrize("backend,opts", [("threads", {"concurrency": 3}), ("processes", {"workers": 2}),
                                          ("auto", {"concurrency": 4}), ("auto", {"workers": 2})])
def test_backends_give_serial_decisions(bandit, serial, backend, opts):
    for name, agent in _agents().items():
        for path in ("auto", "reference"):
            got = replay(bandit.history, bandit.futures, bandit.evaluator, agent, backend=backend, path=path,
                         shard_size=1, **opts, **KW)
            assert got.actions.tobytes() == serial[name].tobytes(), (name, backend, path)


def test_stochastic_agent_really_draws(bandit, serial):
    """The stochastic agent's decisions depend on the seed (so the identity above is not vacuous)."""
    other = replay(bandit.history, bandit.futures, bandit.evaluator, _stochastic(), **{**KW, "seed": 8})
    assert other.actions.tobytes() != serial["noisy"].tobytes()


def test_ray_backend_gives_serial_decisions(bandit, serial):
    try:
        import ray
    except ImportError:
        require("ray", "ray is not installed")
        return
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    except Exception as exc:  # any failure to start means no local Ray here
        require("ray", f"a local Ray instance cannot start: {exc}")
        return
    try:
        for name, agent in _agents().items():
            got = replay(bandit.history, bandit.futures, bandit.evaluator, agent, backend="ray", workers=2,
                         shard_size=2, **KW)
            assert got.actions.tobytes() == serial[name].tobytes(), name
        assert _agent_error(bandit, backend="ray", workers=2) == _agent_error(bandit, backend="serial")
    finally:
        ray.shutdown()


def test_async_act_is_gathered_under_a_semaphore(bandit, serial):
    agent = Agent("noisy-async", _MeanWriter(), _AsyncPolicy(), stochastic=True)
    got = replay(bandit.history, bandit.futures, bandit.evaluator, agent, concurrency=4, **KW)
    assert got.actions.tobytes() == serial["noisy"].tobytes()


def test_threads_overlap_waiting_agents(bandit):
    """With concurrency N, up to N per-record ``act`` calls wait at once (a serial run: exactly one)."""
    lock = threading.Lock()
    live = [0, 0]

    def slow(records: tuple, task: FutureInput, menu: tuple[str, ...], rng: np.random.Generator) -> str:
        with lock:
            live[0] += 1
            live[1] = max(live[1], live[0])
        threading.Event().wait(0.002)
        with lock:
            live[0] -= 1
        return menu[0]

    agent = HistoryReader(slow, name="slow").agent()
    replay(bandit.history, bandit.futures, bandit.evaluator, agent, cells="", maps="", backend="serial")
    assert live[1] == 1
    replay(bandit.history, bandit.futures, bandit.evaluator, agent, cells="", maps="", concurrency=4)
    assert live[1] > 1


def test_journal_is_written_by_one_writer_thread_not_the_shard_workers(bandit, serial, tmp_path, monkeypatch):
    journal_mod = importlib.import_module("replaylens.replay._journal")
    threads: set[str] = set()
    orig = journal_mod.Journal.record

    def spy(self, *a, **k):
        threads.add(threading.current_thread().name)
        return orig(self, *a, **k)

    monkeypatch.setattr(journal_mod.Journal, "record", spy)
    got = replay(bandit.history, bandit.futures, bandit.evaluator, _stochastic(), concurrency=4,
                 journal=tmp_path / "j", **KW)
    assert threads == {"replaylens-journal_0"}   # one writer beside the replay, never a shard worker
    assert got.actions.tobytes() == serial["noisy"].tobytes()
    # resume: every shard comes from the journal, identical bytes, no agent call
    again = replay(bandit.history, bandit.futures, bandit.evaluator, _stochastic(), backend="serial",
                   journal=tmp_path / "j", **KW)
    assert again.actions.tobytes() == serial["noisy"].tobytes()


def _off_menu(records: tuple, task: FutureInput, menu: tuple[str, ...], rng: np.random.Generator) -> str:
    return "zzz" if task.stream != "s00" else menu[0]


def _agent_error(bandit, **kw) -> str:
    with pytest.raises(AgentError) as got:
        replay(bandit.history, bandit.futures, bandit.evaluator, HistoryReader(_off_menu, name="bad").agent(),
               cells="", maps="", **kw)
    return str(got.value)


def test_a_failing_agent_raises_the_serial_error_on_every_backend(bandit):
    """Several shards fail; every backend raises the first one in shard order (the serial run's)."""
    want = _agent_error(bandit, backend="serial")
    assert "stream s01" in want
    for kw in ({"concurrency": 4}, {"workers": 2}):
        assert _agent_error(bandit, **kw) == want, kw


def test_backend_errors_are_config_errors(bandit):
    with pytest.raises(ConfigError, match="unknown backend"):
        replay(bandit.history, bandit.futures, bandit.evaluator, load_agent("mean"), backend="dask")
    with pytest.raises(ConfigError, match=">= 1"):
        replay(bandit.history, bandit.futures, bandit.evaluator, load_agent("mean"), concurrency=0)


def test_registry_names_every_backend():
    assert set(backends_mod.BACKENDS) == {"serial", "threads", "processes", "ray"}
    assert backends_mod.resolve_backend("auto", workers=3, concurrency=None) == ("processes", 3)
    assert backends_mod.resolve_backend("auto", workers=None, concurrency=8) == ("threads", 8)
    assert backends_mod.resolve_backend("auto", workers=None, concurrency=None)[0] == "serial"


def test_auto_runs_a_thread_safe_array_agent_on_two_threads_in_shard_order(bandit, serial, tmp_path, monkeypatch):
    """Nothing asked: the built-in agents' shards run two at a time on threads (two CPUs or more), results taken in
    shard order -- identical decisions, the journal's lines in shard order; one CPU, one shard, a per-record path,
    an agent that does not declare ``thread_safe``, or an explicit ``concurrency=1``: serial."""
    mean = load_agent("mean")
    assert getattr(mean.array, "thread_safe", False) is True
    monkeypatch.setattr(backends_mod, "available_cpus", lambda: 2)
    made = backends_mod.auto_array_executor(mean, n_shards=5)
    assert isinstance(made, backends_mod.Threads) and made.workers == 2 and made.ordered
    assert backends_mod.auto_array_executor(mean, n_shards=1) is None
    unsafe = Agent("unsafe", mean.writer, mean.policy, array=_NotDeclared(mean.array))
    assert backends_mod.auto_array_executor(unsafe, n_shards=5) is None
    threads_run: set[str] = set()
    orig = backends_mod.ShardJob.run

    def spy(self, k, tick=None):   # type: ignore[no-untyped-def]
        threads_run.add(threading.current_thread().name.rsplit("_", 1)[0])
        return orig(self, k, tick)

    monkeypatch.setattr(backends_mod.ShardJob, "run", spy)
    got = replay(bandit.history, bandit.futures, bandit.evaluator, mean, shard_size=1, journal=tmp_path / "j", **KW)
    assert threads_run == {"replaylens-shard"}
    assert got.actions.tobytes() == serial["mean"].tobytes()
    lines = [json.loads(x)["shard"] for x in (tmp_path / "j" / "done.jsonl").read_text().splitlines()]
    assert lines == list(range(len(bandit.history.streams)))
    for kw in ({"concurrency": 1}, {"path": "reference"}):
        threads_run.clear()
        again = replay(bandit.history, bandit.futures, bandit.evaluator, mean, shard_size=1, **kw, **KW)
        assert threads_run == {"MainThread"} and again.actions.tobytes() == serial["mean"].tobytes(), kw
    monkeypatch.setattr(backends_mod, "available_cpus", lambda: 1)
    assert backends_mod.auto_array_executor(mean, n_shards=5) is None


class _NotDeclared:
    """An array agent's batch form without the ``thread_safe`` declaration."""

    def __init__(self, inner: object) -> None:
        self.inner = inner

    def act_batch(self, records, queries):   # type: ignore[no-untyped-def]
        return self.inner.act_batch(records, queries)   # type: ignore[attr-defined]


def test_ordered_threads_yield_in_shard_order_even_when_later_shards_finish_first():
    """``Threads(ordered=True)`` hands results over in the order of the indices (a slow first shard holds the
    rest back), and a failing shard raises its own error after the ones before it were handed over."""
    done_order: list[int] = []

    class Job:
        def run(self, k: int, tick=None) -> list[np.ndarray]:   # type: ignore[no-untyped-def]
            threading.Event().wait(0.05 if k == 0 else 0.0)
            if k == 3:
                raise ValueError("shard 3 failed")
            done_order.append(k)
            return [np.array([k])]

    got = []
    with pytest.raises(ValueError, match="shard 3 failed"):
        for k, arrays in backends_mod.Threads(2, ordered=True).run(Job(), [0, 1, 2, 3, 4], lambda n: None):
            got.append((k, int(arrays[0][0])))
    assert got == [(0, 0), (1, 1), (2, 2)]
    assert done_order[0] != 0   # shard 1 finished before shard 0: the order above is the ordering's doing


def test_prepared_replay_runs_on_any_backend(bandit, serial):
    prepared = prepare_replay(bandit.history, bandit.futures, bandit.evaluator, **KW)
    got = prepared.run(load_agent("mean"), backend="processes", workers=2, shard_size=1)
    assert got.actions.tobytes() == serial["mean"].tobytes()


def test_cli_concurrency_and_workers_give_identical_decisions(bandit, tmp_path: Path):
    import pandas as pd

    from replaylens.cli._main import cli
    from replaylens.records import write_evaluator, write_futures, write_history

    write_history(bandit.history, tmp_path / "h.jsonl")
    write_futures(bandit.futures, tmp_path / "f.jsonl")
    write_evaluator(bandit.evaluator, tmp_path / "u.jsonl")
    decisions = {}
    for tag, extra in {"serial": [], "threads": ["--concurrency", "3", "--path", "reference"],
                       "procs": ["--workers", "2", "--backend", "processes", "--max-shard-memory", "1"]}.items():
        args = ["audit", "--history", str(tmp_path / "h.jsonl"), "--future", str(tmp_path / "f.jsonl"),
                "--utilities", str(tmp_path / "u.jsonl"), "--agent", "mean", "--out", str(tmp_path / tag),
                "--resamples", "200", "--quiet", *extra]
        res = CliRunner().invoke(cli, args)
        assert res.exit_code == 0, res.output
        df = pd.read_parquet(tmp_path / tag / "decisions.parquet")
        decisions[tag] = df.drop(columns=[c for c in df.columns if c == "path"])
    pd.testing.assert_frame_equal(decisions["threads"], decisions["serial"])
    pd.testing.assert_frame_equal(decisions["procs"], decisions["serial"])
