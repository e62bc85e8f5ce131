"""The optimized per-record path (issue 27) decides exactly as the loop it replaced, and its lazy
per-decision generator is ``np.random.default_rng(seed)`` whenever the agent reads it.

The oracle is ``_perrecord_before.py``: the per-record loop before issue 27, kept verbatim.
"""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
from _perrecord_before import _reference_stream as reference_before

from replaylens.agents import Agent, FutureInput, HistoryReader, Namespace, from_callables, load_agent
from replaylens.bandit import make_bandit
from replaylens.errors import AgentError, AgentRaised
from replaylens.replay import ReplayPlan, StreamData, decision_seeds, plan_replay, prepare_streams
from replaylens.replay._engine import _reference_stream, _seed_table
from replaylens.replay._lazyrng import SeedBlock, is_seeded, lazy_generator, pcg64_words
from replaylens.replay._seeds import task_keys


@pytest.fixture(scope="module")
def sub():
    return make_bandit(n_streams=3, slots_per_block=5, n_future=3, rng=7)


def _plan(sub, **kw: Any) -> tuple[ReplayPlan, dict[str, StreamData]]:
    kw.setdefault("cells", "all")
    plan = plan_replay(sub.history, sub.futures, **kw)
    return plan, prepare_streams(plan, sub.history, sub.futures)


def _both(plan: ReplayPlan, sds: dict[str, StreamData], make: Callable[[], Agent]) -> None:
    """Every stream's decisions, new path vs the loop before issue 27 (a fresh agent each, same ticks)."""
    for s in plan.streams:
        ticks_new: list[int] = []
        ticks_old: list[int] = []
        new = _reference_stream(plan, sds[s], make(), ticks_new.append)
        old = reference_before(plan, sds[s], make(), ticks_old.append)
        np.testing.assert_array_equal(new, old)
        assert ticks_new == ticks_old


# --------------------------------------------------------------------------- agents


def _count_update(s: int, task: object, key: str, u: float) -> int:
    return s + 1 + (len(key) if u == u and u > 0.5 else 0)


def _deterministic() -> Agent:
    return from_callables(lambda: 0, _count_update, lambda s, t, m: m[s % len(m)], name="det")


def _dict_writer() -> Agent:
    """A mutable (dict) state: snapshots are deep copies."""
    def update(s: dict[str, float], task: Any, key: str, u: float) -> dict[str, float]:
        return {**s, key: s.get(key, 0.0) + (0.0 if u != u else u) + task.slot * 1e-3}

    def act(s: dict[str, float], t: FutureInput, m: tuple[str, ...]) -> str:
        return max(m, key=lambda a: (s.get(a, 0.0), a))
    return from_callables(dict, update, act, name="dict")


def _stochastic() -> Agent:
    """Draws on every decision."""
    return from_callables(lambda: 0, _count_update,
                          lambda s, t, m, rng: m[int(rng.integers(len(m)))] if rng.random() < 0.9 else m[0],
                          name="stoch", stochastic=True)


def _sometimes() -> Agent:
    """Reads its generator on some decisions only (and then several draws)."""
    def act(s: int, t: FutureInput, m: tuple[str, ...], rng: np.random.Generator) -> str:
        if (s + t.index) % 3 == 0:
            rng.random(3)
            return m[int(rng.integers(len(m)))]
        return m[s % len(m)]
    return from_callables(lambda: 0, _count_update, act, name="sometimes", stochastic=True)


def _normalizing() -> Agent:
    """Passes its generator on the way numpy code does (``default_rng(rng)``, ``isinstance``, spawn)."""
    def act(s: int, t: FutureInput, m: tuple[str, ...], rng: np.random.Generator) -> str:
        assert isinstance(rng, np.random.Generator)
        g = np.random.default_rng(rng)
        if t.index % 2:
            child = g.spawn(1)[0]
            return m[int(child.integers(len(m)))]
        return str(g.choice(np.array(m)))
    return from_callables(lambda: 0, _count_update, act, name="normalizing", stochastic=True,
                          namespace=Namespace("p:", "a:"))


def _reader(stochastic: bool) -> Callable[[], Agent]:
    def fn(recs: tuple[Any, ...], t: FutureInput, m: tuple[str, ...], rng: np.random.Generator) -> str:
        if stochastic and len(recs) % 2:
            return m[int(rng.integers(len(m)))]
        keys = [r.key for r in recs]
        return max(m, key=lambda a: (keys.count(a), a))
    return lambda: HistoryReader(fn, stochastic=stochastic).agent()


def _batch_reader() -> Agent:
    def fn(model: Any, t: FutureInput, m: tuple[str, ...], rng: np.random.Generator) -> str:
        return m[(model + t.index) % len(m)]

    def batch(model: Any, ts: Sequence[FutureInput], ms: Sequence[tuple[str, ...]],
              rngs: Sequence[np.random.Generator]) -> list[str]:
        return [m[int(r.integers(len(m)))] if (model + t.index) % 4 == 0 else m[(model + t.index) % len(m)]
                for t, m, r in zip(ts, ms, rngs, strict=True)]

    def extend(prev: Any, new: tuple[Any, ...]) -> int:
        return (prev or 0) + sum(len(v.key) + (1 if v.outcome == v.outcome and v.outcome > 0.5 else 0) for v in new)
    return HistoryReader(fn, name="batch", stochastic=True, batch_fn=batch, extend=extend).agent()


AGENTS: dict[str, Callable[[], Agent]] = {
    "deterministic": _deterministic,
    "dict-state": _dict_writer,
    "stochastic": _stochastic,
    "rng-sometimes": _sometimes,
    "rng-normalized": _normalizing,
    "reader": _reader(False),
    "reader-stochastic": _reader(True),
    "reader-batch-extend": _batch_reader,
    "mean": lambda: load_agent("mean"),
    "numpy-str-answers": lambda: from_callables(lambda: 0, _count_update, lambda s, t, m: np.str_(m[s % len(m)])),
}


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_decisions_identical_to_the_loop_before(sub, name: str) -> None:
    plan, sds = _plan(sub, draws=2, repeats=2, seed=11)
    _both(plan, sds, AGENTS[name])


@pytest.mark.parametrize("name", ["stochastic", "rng-sometimes", "reader-batch-extend"])
def test_decisions_identical_under_common_random_numbers(sub, name: str) -> None:
    plan, sds = _plan(sub, rng="common", repeats=3, seed=5, cells="value,rename,reorder")
    _both(plan, sds, AGENTS[name])


def test_decisions_identical_without_law_checks(sub) -> None:
    plan, sds = _plan(sub, check_laws=False, seed=3)
    _both(plan, sds, _sometimes)


def test_seed_table_is_decision_seeds(sub) -> None:
    plan, sds = _plan(sub, draws=2, repeats=3, seed=99)
    for s in plan.streams:
        sd = sds[s]
        table = _seed_table(plan, sd)
        tk = task_keys([f.task for f in sd.futures])
        for c, cell in enumerate(plan.cells):
            for m, rho in enumerate(plan.maps):
                for d, spec in enumerate(plan.draws):
                    want = decision_seeds(plan.seed, plan.rng, s, tk, plan.repeats, cell, rho, spec)
                    np.testing.assert_array_equal(table[c, m, d], want)


def test_an_agent_reading_its_generator_sometimes_gets_exactly_the_draws_it_got_before(sub) -> None:
    """Record every draw (task, repeat, values) on both paths: same decisions read, same values drawn."""
    def recorder(log: list[tuple[str, float]]) -> Agent:
        def act(s: int, t: FutureInput, m: tuple[str, ...], rng: np.random.Generator) -> str:
            if t.index % 2 == 0:
                x = float(rng.random())
                log.append((t.task, x))
                return m[int(x * len(m))]
            return m[0]
        return from_callables(lambda: 0, _count_update, act, stochastic=True)

    plan, sds = _plan(sub, repeats=2, cells="value", seed=4)
    for s in plan.streams:
        new_log: list[tuple[str, float]] = []
        old_log: list[tuple[str, float]] = []
        _reference_stream(plan, sds[s], recorder(new_log), lambda _n: None)
        reference_before(plan, sds[s], recorder(old_log), lambda _n: None)
        assert new_log == old_log
        assert 0 < len(new_log) < sum(1 for _ in sds[s].futures) * plan.repeats * len(plan.cells) * len(plan.maps)


def test_agent_errors_say_the_same_as_before(sub) -> None:
    plan, sds = _plan(sub, cells="value")
    sd = sds[plan.streams[0]]

    def failing(call: str) -> Agent:
        def update(s: int, t: Any, k: str, u: float) -> int:
            if call == "update" and s == 4:
                raise RuntimeError("bad update")
            return s + 1

        def act(s: int, t: FutureInput, m: tuple[str, ...]) -> str:
            if call == "act" and t.index == 2:
                raise KeyError("bad act")
            return "nope" if call == "menu" else m[0]
        return from_callables(lambda: 0, update, act, name="fails")

    def failing_reader(call: str) -> Agent:
        def batch(recs: Any, ts: Sequence[FutureInput], ms: Sequence[tuple[str, ...]], rngs: Any) -> list[Any]:
            if call == "raise" and len(recs) > 3:
                raise ValueError("bad batch")
            if call == "short":
                return [m[0] for m in ms][1:]
            return [m[0] if len(recs) < 5 else ["unhashable"] for m in ms]
        return HistoryReader(lambda r, t, m, g: m[0], batch_fn=batch, name="reader-fails").agent()

    cases = [(failing(c), e) for c, e in (("update", AgentRaised), ("act", AgentRaised), ("menu", AgentError))]
    cases += [(failing_reader(c), e) for c, e in (("raise", AgentRaised), ("short", AgentError), ("bad", AgentError))]
    for agent, err in cases:
        with pytest.raises(err) as new:
            _reference_stream(plan, sd, agent, lambda _n: None)
        with pytest.raises(err) as old:
            reference_before(plan, sd, agent, lambda _n: None)
        assert str(new.value) == str(old.value)


# --------------------------------------------------------------------------- the lazy generator


def test_lazy_generator_is_default_rng_of_its_seed_when_read() -> None:
    seed = 2**63 + 12345
    lazy = lazy_generator(seed)
    assert not is_seeded(lazy)  # nothing seeded until the agent reads it
    assert isinstance(lazy, np.random.Generator)
    np.testing.assert_array_equal(lazy.random(5), np.random.default_rng(seed).random(5))
    assert is_seeded(lazy)
    # a copy, a pickle and a spawned child continue as they would for the real generator
    ref = np.random.default_rng(seed)
    ref.random(5)
    assert copy.deepcopy(lazy).integers(1000, size=4).tolist() == copy.deepcopy(ref).integers(1000, size=4).tolist()
    back = pickle.loads(pickle.dumps(lazy))
    assert type(back) is np.random.Generator
    assert back.normal(size=3).tolist() == copy.deepcopy(ref).normal(size=3).tolist()
    assert lazy.spawn(2)[1].random() == ref.spawn(2)[1].random()
    assert lazy.random() == ref.random()
    assert str(lazy) == str(ref) == "Generator(PCG64)"
    assert np.random.default_rng(lazy) is lazy


@pytest.mark.parametrize("first", ["bit_generator", "integers", "__reduce__", "spawn"])
def test_lazy_generator_seeds_on_any_first_read(first: str) -> None:
    lazy = lazy_generator(77)
    getattr(lazy, first)
    assert is_seeded(lazy)
    assert lazy.bit_generator.state == np.random.default_rng(77).bit_generator.state


def test_pcg64_words_are_seed_sequence_state() -> None:
    rng = np.random.default_rng(0)
    seeds = np.concatenate([rng.integers(0, 2**64 - 1, 300, dtype=np.uint64, endpoint=True),
                            rng.integers(0, 2**32, 50, dtype=np.uint64), np.array([0, 2**32, 2**64 - 1], np.uint64)])
    want = np.stack([np.random.SeedSequence(int(s)).generate_state(4, np.uint64) for s in seeds])
    np.testing.assert_array_equal(pcg64_words(seeds), want)


def test_a_seed_block_gives_each_decision_default_rng_of_its_seed() -> None:
    seeds = np.array([5, 2**40 + 3, 2**63 + 7, 0], dtype=np.uint64)
    block = SeedBlock(seeds)
    gens = [block.generator(i) for i in range(len(seeds))]
    for i in (2, 0, 3, 1):  # seeded in any order, each its own stream
        ref = np.random.default_rng(int(seeds[i]))
        assert gens[i].bit_generator.state == ref.bit_generator.state
        assert gens[i].integers(10**9, size=3).tolist() == ref.integers(10**9, size=3).tolist()
        # what the agent can ask of its seed sequence is SeedSequence(seed)'s
        ss = gens[i].bit_generator.seed_seq
        assert ss.entropy == int(seeds[i])
        assert ss.generate_state(3).tolist() == ref.bit_generator.seed_seq.generate_state(3).tolist()
        assert [c.random() for c in gens[i].spawn(2)] == [c.random() for c in ref.spawn(2)]
        assert pickle.dumps(gens[i]) == pickle.dumps(ref)


def test_history_reader_prefix_states_are_the_states_update_reaches(sub) -> None:
    reader = HistoryReader(lambda r, t, m, g: m[0])
    plan, sds = _plan(sub, cells="")
    sd = sds[plan.streams[0]]
    tasks, keys, outs = list(sd.task_inputs), [f"k{i % 3}" for i in range(sd.length)], sd.outcomes.tolist()
    state, by_update = reader.init_state(), {0: reader.init_state()}
    for t in range(sd.length):
        state = reader.update(state, tasks[t], keys[t], outs[t])
        by_update[t + 1] = state
    cuts = [0, 1, sd.length // 2, sd.length]
    assert reader.prefix_states(tasks, keys, outs, cuts) == {n: by_update[n] for n in cuts}

    class Redefined(HistoryReader):
        def update(self, state: Any, task: Any, key: str, outcome: float) -> Any:
            return (*state, key)
    assert Redefined(lambda r, t, m, g: m[0]).prefix_states(tasks, keys, outs, cuts) is None
    _both(plan, sds, lambda: Redefined(lambda r, t, m, g: m[len(r) % len(m)]).agent())
