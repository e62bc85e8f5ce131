"""Replay engine: the worked example (core.md §1.3), the prefix rule (§2.4), where task inputs sit
under each cell, journaling / resume, determinism and agent errors."""

from __future__ import annotations

import importlib
import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from replaylens.agents import Agent, HistoryReader, ReferenceRule, from_callables, load_agent
from replaylens.bandit import make_bandit
from replaylens.errors import AgentError, AgentRaised, JournalError
from replaylens.maps import SlotLaw, SlotSpec, stream_perm
from replaylens.records import (
    Evaluator,
    FutureTasks,
    History,
    evaluator_from_rows,
    futures_from_tasks,
    history_from_records,
)
from replaylens.replay import plan_replay, prepare_replay, replay
from replaylens.replay._journal import Journal

run_mod = importlib.import_module("replaylens.replay._run")  # ``replaylens.replay`` is shadowed by the function
backends_mod = importlib.import_module("replaylens.replay._backends")  # shards run through an executor


# --------------------------------------------------------------------------- helpers


def _history(rows: list[tuple[str, str, str, int, str, str, float]]) -> History:
    """rows: (stream, family, context, slot, task, key, outcome)."""
    return history_from_records([
        {"stream": s, "family": fam, "context": ctx, "slot": sl, "task": t, "key": k,
         "outcome": None if (isinstance(u, float) and math.isnan(u)) else u}
        for s, fam, ctx, sl, t, k, u in rows
    ])


def _futures(rows: list[dict[str, object]]) -> FutureTasks:
    return futures_from_tasks(rows)


def _evaluator(futures: FutureTasks, value: dict[str, float] | None = None) -> Evaluator:
    rows = []
    for t in futures:
        for i, a in enumerate(t.menu):
            u = value[a] if value is not None else 1.0 / (i + 1)
            rows.append({"stream": t.stream, "task": t.task, "key": a, "utility": u})
    return evaluator_from_rows(rows)


def _code(dec, label: str) -> int:
    return dec.plan.labels.index(label)


@pytest.fixture(scope="module")
def bandit():
    return make_bandit(n_streams=4, slots_per_block=8, n_future=3)


# --------------------------------------------------------------------------- worked example (§1.3)


def _worked_inputs():
    h = _history([("s", "f", "c", 0, "t0", "A", 0.9), ("s", "f", "c", 1, "t1", "B", 0.1)])
    f = _futures([{"stream": "s", "family": "f", "context": "c", "task": "x", "menu": ["A", "B"]}])
    e = _evaluator(f, {"A": 1.0, "B": 0.0})
    return h, f, e


def _swapping_time_seed(h: History, f: FutureTasks) -> int:
    """A plan seed whose key-slot draw swaps the two slots (σ_t is a uniform permutation)."""
    for seed in range(200):
        plan = plan_replay(h, f, cells="key_slot", maps="", seed=seed)
        if stream_perm(plan.draws[0], "time", "s", np.array([0, 0])).tolist() == [1, 0]:
            return seed
    raise AssertionError("no seed in 0..199 gives the swapping key-slot draw")


def _first_record_agent() -> Agent:
    """First-record rule: choose the key in slot 0 of the stratum's block."""
    def update(state, task, key, outcome):
        blk = dict(state)
        blk.setdefault(task.block, key)
        return blk

    def act(state, task, menu):
        return state.get(task.stratum, menu[0])

    return from_callables(dict, update, act, name="first-record")


@pytest.mark.parametrize("path", ["array", "reference"])
def test_worked_example_mean_rule(path: str) -> None:
    h, f, e = _worked_inputs()
    seed = _swapping_time_seed(h, f)
    dec = replay(h, f, e, load_agent("mean"), cells="value,pair,key_slot,rename", maps="all", seed=seed,
                 path=path)
    plan = dec.plan
    # with 2 slots the only derangement is the swap: value/pair draws are forced
    assert stream_perm(plan.draws[0], "value", "s", np.array([0, 0])).tolist() == [1, 0]
    assert stream_perm(plan.draws[0], "pair", "s", np.array([0, 0])).tolist() == [1, 0]
    assert plan.map_names == ("id", "10")
    a = dec.actions[:, :, 0, 0, 0]
    A, B = _code(dec, "A"), _code(dec, "B")
    ci = plan.cell_names.index
    assert a[ci("aligned"), 0] == A
    assert a[ci("value"), 0] == B            # A gets 0.1, B gets 0.9
    assert a[ci("pair"), 0] == A             # (B, 0.1), (A, 0.9)
    assert a[ci("key_slot"), 0] == B         # (B, 0.9), (A, 0.1)
    assert a[ci("rename"), 1] == A           # renamed A→B, B→A in history and menu: decodes back to A
    assert a[ci("aligned"), 1] == B          # history-only rekey (menu held fixed) does move the choice


def test_worked_example_rename_policy_sees_renamed_labels() -> None:
    h, f, e = _worked_inputs()
    rule = ReferenceRule("mean")
    seen: list[tuple[tuple[str, ...], str]] = []

    def act(state, task, menu):
        ans = rule.act(state, task, menu, np.random.default_rng(0))
        seen.append((menu, ans))
        return ans

    ag = from_callables(rule.init_state, rule.update, act, name="mean-spy")
    dec = replay(h, f, e, ag, cells="rename", maps="all", path="reference")
    # order of calls: cell aligned (id, swap), cell rename (id, swap)
    assert seen[3] == (("B", "A"), "B")      # the renamed 'A' (mean 0.9) is shown as 'B' ...
    assert dec.actions[1, 1, 0, 0, 0] == _code(dec, "A")  # ... and decodes back to A


@pytest.mark.parametrize("spec_kind", ["seed", "slotspec"])
def test_worked_example_first_record_rule(spec_kind: str) -> None:
    h, f, e = _worked_inputs()
    if spec_kind == "seed":
        kw: dict[str, object] = {"seed": _swapping_time_seed(h, f)}
    else:  # construct the key-slot draw explicitly: a derangement of two slots is the swap
        kw = {"draws": [SlotSpec(value_seed=3, time_seed=3, reorder_seed=3, time_law=SlotLaw.DERANGEMENT)]}
    dec = replay(h, f, e, _first_record_agent(), cells="value,pair,key_slot", maps="", path="reference",
                 **kw)  # type: ignore[arg-type]
    a = dec.actions[:, 0, 0, 0, 0]
    A, B = _code(dec, "A"), _code(dec, "B")
    assert a.tolist() == [A, A, B, B]        # aligned, value (keys unchanged), pair, key_slot


# --------------------------------------------------------------------------- prefix rule (§2.4)


def _global_agent(log: list[tuple[str, int, int]] | None = None) -> Agent:
    """A *global* writer: state = every record seen (all blocks); act = key with max total outcome."""
    def update(state, task, key, outcome):
        return (*state, (key, outcome))

    def act(state, task, menu):
        if log is not None:
            log.append((task.task, task.clock, len(state)))
        tot = {a: 0.0 for a in menu}
        for k, u in state:
            if k in tot:
                tot[k] += u
        return max(menu, key=lambda a: (tot[a], -menu.index(a)))

    return from_callables(tuple, update, act, name="global-total")


class _GlobalTotalArray:
    """The same global rule on the array path (reads exactly the positions t < cuts[row, cut])."""

    def act_batch(self, records, queries):
        out = np.empty(queries.row.shape[0], dtype=np.int64)
        for q in range(out.shape[0]):
            r, n = queries.row[q], records.cuts[queries.row[q], queries.cut[q]]
            keys, outs = records.keys[r, :n], records.outcomes[r, :n]
            menu = queries.menu[q][queries.menu[q] >= 0]
            tot = [outs[keys == a].sum() for a in menu]
            out[q] = menu[int(np.argmax(tot))]
        return out


_TWO_BLOCKS = [("s", "f", "b1", 0, "t0", "A", 0.9), ("s", "f", "b1", 1, "t1", "B", 0.1),
               ("s", "f", "b2", 2, "t2", "B", 1.0), ("s", "f", "b2", 3, "t3", "B", 1.0)]


def _prefix_futures() -> FutureTasks:
    menu = ["A", "B"]
    return _futures([
        {"stream": "s", "family": "f", "context": "b1", "task": "x1", "menu": menu},
        {"stream": "s", "family": "f", "context": "b2", "task": "x2", "menu": menu},
        {"stream": "s", "family": "f", "context": "held", "task": "x3", "menu": menu},
        {"stream": "s", "family": "f", "context": "held2", "task": "x4", "menu": menu,
         "feeds_family": "f", "feeds_context": "b1"},
    ])


@pytest.mark.parametrize("path", ["array", "reference"])
def test_prefix_rule_future_never_sees_later_block(path: str) -> None:
    h = _history(_TWO_BLOCKS)
    f = _prefix_futures()
    e = _evaluator(f)
    log: list[tuple[str, int, int]] = []
    ag = _global_agent(log)
    if path == "array":
        ag = from_callables(tuple, ag.writer.update, ag.policy.fn, name="global-total", array=_GlobalTotalArray())
    dec = replay(h, f, e, ag, cells="", maps="", path=path)
    A, B = _code(dec, "A"), _code(dec, "B")
    got = dict(zip(dec.task_ids, dec.actions[0, 0, 0, 0].tolist(), strict=True))
    # whole-stream totals: A 0.9, B 2.1 → B; block 1 alone: A 0.9, B 0.1 → A
    assert got == {"x1": A, "x2": B, "x3": B, "x4": A}
    if path == "reference":
        # policy clock T_{r,R} (slot of the last visible record) and number of visible records
        assert sorted(log) == [("x1", 1, 2), ("x2", 3, 4), ("x3", 3, 4), ("x4", 1, 2)]
    # the stratum-1 decision equals the decision made with block 2 deleted
    h1 = _history(_TWO_BLOCKS[:2])
    f1 = _futures([{"stream": "s", "family": "f", "context": "b1", "task": "x1", "menu": ["A", "B"]}])
    dec1 = replay(h1, f1, _evaluator(f1), ag, cells="", maps="", path=path)
    assert dec1.actions[0, 0, 0, 0, 0] == got["x1"]


def test_prefix_rule_holds_in_every_cell() -> None:
    h = _history(_TWO_BLOCKS)
    f = _prefix_futures()
    log: list[tuple[str, int, int]] = []
    replay(h, f, _evaluator(f), _global_agent(log), cells="all", maps="derangements", draws=2,
           path="reference")
    visible = {t: n for t, _c, n in log}
    assert visible == {"x1": 2, "x2": 4, "x3": 4, "x4": 2}
    assert {(t, c) for t, c, _n in log} == {("x1", 1), ("x2", 3), ("x3", 3), ("x4", 1)}


# --------------------------------------------------------------------------- task inputs under cells


def test_task_inputs_stay_at_their_slots() -> None:
    keys = ["A", "B", "C", "A", "B"]
    outs = [0.1, 0.2, 0.3, 0.4, 0.5]
    rows = [("s", "f", "c", 10 + 3 * i, f"t{i}", k, u) for i, (k, u) in enumerate(zip(keys, outs, strict=True))]
    h = _history(rows)
    f = _futures([{"stream": "s", "family": "f", "context": "c", "task": "x", "menu": ["A", "B", "C"]}])
    seen: list[tuple] = []

    def fn(records, task, menu, rng):
        seen.append(records)
        return menu[0]

    cells = ("aligned", "value", "pair", "key_slot", "mask", "reorder")
    replay(h, f, _evaluator(f), HistoryReader(fn).agent(), cells=",".join(cells[1:]), maps="", seed=5,
           path="reference")
    assert len(seen) == len(cells)
    views = dict(zip(cells, seen, strict=True))
    slots = [10 + 3 * i for i in range(5)]
    tasks = [f"t{i}" for i in range(5)]

    def col(view, attr):
        if attr in ("key", "outcome"):
            return [getattr(v, attr) for v in view]
        return [getattr(v.task, attr) for v in view]

    for name, view in views.items():
        assert col(view, "slot") == slots, name            # slots are never re-ordered
        assert {v.task.block for v in view} == {("f", "c")}
    assert col(views["aligned"], "task") == tasks
    assert col(views["aligned"], "key") == keys
    assert col(views["aligned"], "outcome") == outs
    for name in ("value", "pair", "key_slot", "mask"):
        assert col(views[name], "task") == tasks, name     # x_t never moves
    # value: keys fixed, outcomes deranged (σ_v)
    v_out = col(views["value"], "outcome")
    assert col(views["value"], "key") == keys
    sigma_v = [outs.index(u) for u in v_out]
    assert sorted(sigma_v) == list(range(5)) and all(s != t for t, s in enumerate(sigma_v))
    # pair: intact (key, outcome) pairs pulled with σ_p = σ_v
    assert col(views["pair"], "key") == [keys[s] for s in sigma_v]
    assert col(views["pair"], "outcome") == [outs[s] for s in sigma_v]
    # key-slot: outcomes fixed, keys permuted
    assert col(views["key_slot"], "outcome") == outs
    assert Counter(col(views["key_slot"], "key")) == Counter(keys)
    # mask: keys fixed, outcomes hidden
    assert col(views["mask"], "key") == keys
    assert all(math.isnan(u) for u in col(views["mask"], "outcome"))
    # reorder: whole events move (task, key, outcome together), the task inputs move with them
    events = list(zip(tasks, keys, outs, strict=True))
    r_events = list(zip(col(views["reorder"], "task"), col(views["reorder"], "key"), col(views["reorder"], "outcome"),
                        strict=True))
    assert sorted(r_events) == sorted(events)
    assert col(views["reorder"], "task") != tasks
    assert all(a != b for a, b in zip(col(views["reorder"], "task"), tasks, strict=True))  # σ_r is a derangement


# --------------------------------------------------------------------------- journal / resume


def _spy_run_shard(monkeypatch) -> list[list[str]]:
    calls: list[list[str]] = []
    orig = backends_mod.run_shard

    def spy(plan, sds, *args, **kwargs):
        calls.append([sd.name for sd in sds])
        return orig(plan, sds, *args, **kwargs)

    monkeypatch.setattr(backends_mod, "run_shard", spy)
    return calls


def test_journal_resume_loads_shards_array(bandit, tmp_path: Path, monkeypatch) -> None:
    kw = {"cells": "value,pair", "draws": 2, "seed": 3, "journal": tmp_path, "shard_size": 1}
    first = replay(bandit.history, bandit.futures, bandit.evaluator, load_agent("mean"), **kw)
    assert len((tmp_path / "done.jsonl").read_text().splitlines()) == len(bandit.history.streams)

    def boom(self, records, queries):
        raise RuntimeError("the agent must not be called when every shard is journaled")

    monkeypatch.setattr(ReferenceRule, "act_batch", boom)
    second = replay(bandit.history, bandit.futures, bandit.evaluator, load_agent("mean"), **kw)
    assert np.array_equal(first.actions, second.actions)
    assert second.equals(first)
    with pytest.raises(AgentRaised, match="must not be called"):
        replay(bandit.history, bandit.futures, bandit.evaluator, load_agent("mean"), cells="value,pair",
               draws=2, seed=3)


def test_journal_resume_loads_shards_reference(bandit, tmp_path: Path) -> None:
    good = from_callables(lambda: 0, lambda s, t, k, u: s + 1, lambda s, t, m: m[s % len(m)], name="counter")

    def bad_act(s, t, m):
        raise RuntimeError("called")

    bad = from_callables(lambda: 0, lambda s, t, k, u: s + 1, bad_act, name="counter")
    kw = {"cells": "value", "maps": "", "seed": 1, "journal": tmp_path}
    first = replay(bandit.history, bandit.futures, bandit.evaluator, good, **kw)
    second = replay(bandit.history, bandit.futures, bandit.evaluator, bad, **kw)
    assert np.array_equal(first.actions, second.actions)


def test_prepared_replay_gives_replay_decisions_for_every_agent(bandit, tmp_path: Path, monkeypatch) -> None:
    h, f, e = bandit.history, bandit.futures, bandit.evaluator
    prepared = prepare_replay(h, f, e, cells="value,pair,key_slot", draws=2, repeats=2, seed=5)
    counter = from_callables(lambda: 0, lambda s, t, k, u: s + 1, lambda s, t, m: m[s % len(m)], name="counter")
    for agent, path in ((load_agent("mean"), "array"), (load_agent("mean"), "reference"), (counter, "auto")):
        want = replay(h, f, e, agent, cells="value,pair,key_slot", draws=2, repeats=2, seed=5, path=path)
        got = prepared.run(agent, path=path)
        assert got.equals(want) and got.path == want.path
        assert np.array_equal(got.actions, want.actions)
    # a journal written through replay() is resumed by the prepared run of the same plan, and vice versa
    kw = {"cells": "value", "seed": 2, "journal": tmp_path, "shard_size": 1}
    first = replay(h, f, e, load_agent("mean"), **kw)
    calls = _spy_run_shard(monkeypatch)
    again = prepare_replay(h, f, e, cells="value", seed=2).run(load_agent("mean"), journal=tmp_path, shard_size=1)
    assert calls == [] and again.equals(first)


def test_journal_of_a_different_plan_is_refused(bandit, tmp_path: Path) -> None:
    replay(bandit.history, bandit.futures, bandit.evaluator, load_agent("mean"), seed=1, journal=tmp_path)
    with pytest.raises(JournalError):
        replay(bandit.history, bandit.futures, bandit.evaluator, load_agent("mean"), seed=2, journal=tmp_path)
    with pytest.raises(JournalError):
        replay(bandit.history, bandit.futures, bandit.evaluator, load_agent("count"), seed=1, journal=tmp_path)


def _tear_last_line(log: Path) -> str:
    lines = log.read_text().splitlines()
    log.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:17])
    return json.loads(lines[-1])["streams"][0]


def test_journal_torn_last_line_redoes_that_shard(bandit, tmp_path: Path, monkeypatch) -> None:
    kw = {"cells": "value", "journal": tmp_path, "shard_size": 1}
    first = replay(bandit.history, bandit.futures, bandit.evaluator, load_agent("mean"), **kw)
    torn_stream = _tear_last_line(tmp_path / "done.jsonl")
    calls = _spy_run_shard(monkeypatch)
    second = replay(bandit.history, bandit.futures, bandit.evaluator, load_agent("mean"), **kw)
    assert calls == [[torn_stream]]
    assert second.equals(first)


def test_journal_after_torn_line_resume_is_recorded(bandit, tmp_path: Path, monkeypatch) -> None:
    """Regression: the redone shard's record used to be glued onto the torn fragment (lost again)."""
    kw = {"cells": "value", "journal": tmp_path, "shard_size": 1}
    replay(bandit.history, bandit.futures, bandit.evaluator, load_agent("mean"), **kw)
    _tear_last_line(tmp_path / "done.jsonl")
    replay(bandit.history, bandit.futures, bandit.evaluator, load_agent("mean"), **kw)  # redoes the torn shard
    calls = _spy_run_shard(monkeypatch)
    replay(bandit.history, bandit.futures, bandit.evaluator, load_agent("mean"), **kw)
    assert calls == []


def test_journal_corrupt_shard_is_redone(bandit, tmp_path: Path, monkeypatch) -> None:
    kw = {"cells": "pair", "journal": tmp_path, "shard_size": 2}
    first = replay(bandit.history, bandit.futures, bandit.evaluator, load_agent("latest"), **kw)
    (tmp_path / "shard-00001.npz").write_bytes(b"garbage")
    calls = _spy_run_shard(monkeypatch)
    second = replay(bandit.history, bandit.futures, bandit.evaluator, load_agent("latest"), **kw)
    assert calls == [list(bandit.history.streams[2:4])]
    assert second.equals(first)


# --------------------------------------------------------------------------- determinism and seeds


@pytest.mark.parametrize("path", ["array", "reference"])
def test_same_seed_same_bytes(bandit, path: str) -> None:
    kw = {"cells": "all", "draws": 2, "seed": 11, "path": path}
    a = replay(bandit.history, bandit.futures, bandit.evaluator, load_agent("order-sensitive"), **kw)
    b = replay(bandit.history, bandit.futures, bandit.evaluator, load_agent("order-sensitive"), **kw)
    assert a.actions.tobytes() == b.actions.tobytes()
    assert a.plan.digest() == b.plan.digest()


def _uniform_pick(state, task, menu, rng):
    return menu[int(rng.integers(len(menu)))]


def test_stochastic_agent_is_reproducible_and_repeats_differ(bandit) -> None:
    ag = from_callables(lambda: None, lambda s, t, k, u: None, _uniform_pick, name="uniform", stochastic=True)
    kw = {"cells": "value", "maps": "", "repeats": 2, "seed": 4}
    a = replay(bandit.history, bandit.futures, bandit.evaluator, ag, **kw)
    b = replay(bandit.history, bandit.futures, bandit.evaluator, ag, **kw)
    assert a.actions.tobytes() == b.actions.tobytes()
    assert (a.actions[:, :, :, 0] != a.actions[:, :, :, 1]).any()
    # cells draw fresh randomness too (seeds depend on the cell)
    assert (a.actions[0] != a.actions[1]).any()
    c = replay(bandit.history, bandit.futures, bandit.evaluator, ag, cells="value", maps="", repeats=2, seed=5)
    assert (c.actions != a.actions).any()
    # chosen labels cover the menu roughly uniformly
    counts = np.bincount(a.actions.ravel(), minlength=4) / a.actions.size
    assert np.all(np.abs(counts - 0.25) < 0.1)


class _UniformArray:
    """Array form of :func:`_uniform_pick`: one generator per decision from ``queries.seed``."""

    def act_batch(self, records, queries):
        out = np.empty(queries.row.shape[0], dtype=np.int64)
        for q in range(out.shape[0]):
            rng = np.random.default_rng(int(queries.seed[q]))
            menu = queries.menu[q][queries.menu[q] >= 0]
            out[q] = menu[int(rng.integers(menu.shape[0]))]
        return out


def test_stochastic_seeds_agree_between_paths(bandit) -> None:
    ag = from_callables(lambda: None, lambda s, t, k, u: None, _uniform_pick, name="uniform", stochastic=True,
                        array=_UniformArray())
    kw = {"cells": "value,rename", "maps": "derangements", "repeats": 2, "seed": 9}
    a = replay(bandit.history, bandit.futures, bandit.evaluator, ag, path="array", **kw)
    r = replay(bandit.history, bandit.futures, bandit.evaluator, ag, path="reference", **kw)
    assert np.array_equal(a.actions, r.actions)


# --------------------------------------------------------------------------- agent errors


def _small_inputs():
    h = _history([("s", "f", "c", 0, "t0", "A", 0.7), ("s", "f", "c", 1, "t1", "B", 0.6),
                  ("s", "f", "c", 2, "t2", "C", 0.2)])
    f = _futures([{"stream": "s", "family": "f", "context": "c", "task": "x0", "menu": ["A", "B", "C"]},
                  {"stream": "s", "family": "f", "context": "c", "task": "x1", "menu": ["A", "B"]}])
    return h, f, _evaluator(f)


def test_policy_label_outside_menu_raises_reference() -> None:
    h, f, e = _small_inputs()
    ag = from_callables(lambda: None, lambda s, t, k, u: None, lambda s, t, m: "Z", name="bad")
    with pytest.raises(AgentError, match="not in the menu"):
        replay(h, f, e, ag, cells="", maps="", path="reference")
    # a label of the vocabulary that this task's menu does not show is refused as well
    ag2 = from_callables(lambda: None, lambda s, t, k, u: None, lambda s, t, m: "C", name="bad2")
    with pytest.raises(AgentError, match="x1"):
        replay(h, f, e, ag2, cells="", maps="", path="reference")


class _ConstArray:
    def __init__(self, fn):
        self.fn = fn

    def act_batch(self, records, queries):
        return self.fn(queries)


def _array_agent(fn) -> Agent:
    return from_callables(lambda: None, lambda s, t, k, u: None, lambda s, t, m: m[0], name="arr",
                          array=_ConstArray(fn))


@pytest.mark.parametrize("bad", ["out_of_range", "off_menu", "wrong_shape"])
def test_array_agent_label_outside_menu_raises(bad: str) -> None:
    h, f, e = _small_inputs()
    fns = {
        "out_of_range": lambda q: np.full(q.row.shape[0], 7),
        "off_menu": lambda q: np.full(q.row.shape[0], 2),       # 'C' is not on x1's menu
        "wrong_shape": lambda q: np.zeros(q.row.shape[0] + 1, dtype=np.int64),
    }
    with pytest.raises(AgentError):
        replay(h, f, e, _array_agent(fns[bad]), cells="", maps="", path="array")


def test_array_agent_returning_padding_code_raises() -> None:
    """Regression: code −1 matched the −1 padding of a shorter menu and leaked into the actions."""
    h, f, e = _small_inputs()
    ag = _array_agent(lambda q: np.where((q.menu < 0).any(axis=1), -1, q.menu[:, 0]))
    with pytest.raises(AgentError):
        replay(h, f, e, ag, cells="", maps="", path="array")


@pytest.mark.parametrize("rows", [1, 37, 1 << 20])
def test_decisions_parquet_is_the_tidy_frame_whatever_the_row_groups(rows: int, tmp_path: Path) -> None:
    """decisions.parquet is written from integer codes in row groups; reading it back gives frame()."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    sub = make_bandit(n_streams=5, slots_per_block=3, n_future=3, held_out=("h1",))
    dec = replay(sub.history, sub.futures, sub.evaluator, load_agent("mean"), cells="value,pair", repeats=2)
    assert len(dec.plan.maps) > 1 and dec.actions.size > 37
    dec.to_parquet(tmp_path / "d.parquet", rows_per_group=rows)
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "d.parquet"), dec.frame())
    # the labels are written from their codes (a dictionary of the plan's labels), every field required
    schema = pq.read_schema(tmp_path / "d.parquet")
    for name in ("action", "oracle"):
        assert pa.types.is_dictionary(schema.field(name).type)
    assert not any(f.nullable for f in schema)
    assert list(dec.frame()["action"].cat.categories) == list(dec.plan.labels)
    # a block longer than a row group is written a row group at a time: its rows split at rows_per_group
    meta = pq.ParquetFile(tmp_path / "d.parquet").metadata
    sizes = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
    n, blocks = dec.n_tasks, dec.actions.size // dec.n_tasks
    if rows < n:
        per_block = [min(rows, n - r0) for r0 in range(0, n, rows)]
        assert sizes == per_block * blocks
        # a row group of part of a block carries only its own streams' names (tasks go stream by stream)
        pf = pq.ParquetFile(tmp_path / "d.parquet")
        for g in range(meta.num_row_groups):
            col = pf.read_row_group(g, columns=["stream"]).column("stream").combine_chunks()
            assert list(col.dictionary.to_pylist()) == list(dict.fromkeys(col.to_pylist()))
    else:
        assert sum(sizes) == dec.actions.size and all(s <= rows for s in sizes)


def test_journal_writer_thread_keeps_shard_order_and_raises_its_error(bandit, tmp_path: Path, monkeypatch) -> None:
    """The journal is written by one thread beside the replay: lines in shard order, and a failed write (a fault
    injected into the second shard's record) stops the run with that error, the shards before it kept."""
    kw = {"cells": "value", "journal": tmp_path, "shard_size": 1}
    replay(bandit.history, bandit.futures, bandit.evaluator, load_agent("mean"), **kw)
    shards = [json.loads(x)["shard"] for x in (tmp_path / "done.jsonl").read_text().splitlines()]
    assert shards == list(range(len(bandit.history.streams)))

    again = tmp_path / "again"
    orig = Journal.record

    def failing(self, shard, streams, arrays):  # type: ignore[no-untyped-def]
        if shard == 1:
            raise OSError(28, "No space left on device")
        return orig(self, shard, streams, arrays)

    monkeypatch.setattr(Journal, "record", failing)
    with pytest.raises(OSError, match="No space left"):
        replay(bandit.history, bandit.futures, bandit.evaluator, load_agent("mean"), **dict(kw, journal=again))
    done = [json.loads(x)["shard"] for x in (again / "done.jsonl").read_text().splitlines()]
    assert done[0] == 0 and 1 not in done
