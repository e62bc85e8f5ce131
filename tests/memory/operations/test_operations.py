"""Memory operations (replaylens.memory.operations): each built-in operation's relations, the properties and
canaries, the decision verdicts (census and T_gr), and the shipped example's verdicts."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from replaylens.agents import Agent, from_callables, reference_agent
from replaylens.bandit import make_bandit
from replaylens.errors import ConfigError
from replaylens.inference import holm_adjusted, mean_inference
from replaylens.memory.operations import (
    DecisionResponse,
    OperationError,
    OperationRaised,
    apply_operation,
    build_operation_example,
    check_canaries,
    check_operation,
    check_operations,
    check_relations,
    judge_responses,
    load_operation,
    stream_records,
)
from replaylens.records import History, Record, history_from_records


def _history(rows: Sequence[tuple[str, str, str, float]], stream: str = "s0") -> History:
    """(context, task, key, outcome) rows in slot order."""
    return history_from_records([
        {"stream": stream, "family": "f", "context": c, "slot": i, "task": t, "key": k, "outcome": u,
         "event_id": f"e{i}"} for i, (c, t, k, u) in enumerate(rows)])


ROWS = [("a", "build it", "make", 0.5), ("a", "build it", "make", 0.5), ("a", "Build it!", "bazel", 0.9),
        ("a", "test it", "make", 0.2), ("b", "load csv", "pandas", 0.7), ("b", "load csv", "duckdb", float("nan"))]


def _held(op: str, rows: Sequence[tuple[str, str, str, float]] = ROWS) -> dict[str, bool]:
    h = _history(rows)
    before = stream_records(h)
    _, after = apply_operation(h, load_operation(op)[1], op, before)
    return {r.relation: r.held for r in check_relations(before, after)}


def test_dedup_removes_the_exact_duplicate_and_keeps_binding_visibility_order() -> None:
    held = _held("dedup")
    assert held == {"record_count": False, "pair_multiset": False, "key_outcome_binding": True,
                    "key_sequence": False, "visibility": True, "order": True}


def test_dedup_without_duplicates_preserves_everything() -> None:
    rows = [r for i, r in enumerate(ROWS) if i != 1]
    assert all(_held("dedup", rows).values())


def test_keep_latest_keeps_one_record_per_key() -> None:
    h = _history(ROWS)
    _, after = apply_operation(h, load_operation("keep-latest")[1])
    assert [(r.context, r.key, r.slot) for r in after["s0"]] == [("a", "bazel", 2), ("a", "make", 3),
                                                                 ("b", "pandas", 4), ("b", "duckdb", 5)]
    held = _held("keep-latest")
    assert held["key_outcome_binding"] and held["order"] and held["visibility"]
    assert not held["pair_multiset"] and not held["record_count"]


def test_forget_count_and_age_forget_old_records() -> None:
    h = _history(ROWS)
    _, after = apply_operation(h, load_operation("forget-count:1")[1])
    assert [r.slot for r in after["s0"]] == [3, 5]
    _, after = apply_operation(h, load_operation("forget-age:1")[1])
    assert [r.slot for r in after["s0"]] == [2, 3, 4, 5]   # no event time: age in slots behind the block's newest
    held = _held("forget-count:1")
    assert held["key_outcome_binding"] and held["order"]
    assert not held["visibility"]   # block a forgets bazel; block b forgets the visible pandas


def test_merge_text_averages_near_duplicates_and_breaks_binding() -> None:
    h = _history(ROWS)
    _, after = apply_operation(h, load_operation("merge-text")[1])
    rs = after["s0"]
    merged = next(r for r in rs if r.slot == 2)   # "build it" x2 and "Build it!": the newest's key, mean outcome
    assert merged.key == "bazel" and merged.outcome == pytest.approx((0.5 + 0.5 + 0.9) / 3, abs=1e-6)
    assert next(r for r in rs if r.slot == 5).outcome == 0.7   # the masked outcome is left out of the mean
    held = _held("merge-text")
    assert not held["key_outcome_binding"] and not held["visibility"]


def test_a_pair_like_op_keeps_pairs_and_breaks_order_and_key_sequence() -> None:
    """Reversing each block's records keeps every (key, outcome) pair: a pair-like operation."""
    h = _history(ROWS)

    def reverse(records: Sequence[Record]) -> list[Record]:
        slots = [r.slot for r in records]
        return [replace(r, slot=s) for r, s in zip(reversed(records), slots, strict=True)]

    before = stream_records(h)
    _, after = apply_operation(h, FnOp(reverse), "reverse", before)
    held = {r.relation: r.held for r in check_relations(before, after)}
    assert held == {"record_count": True, "pair_multiset": True, "key_outcome_binding": True,
                    "key_sequence": False, "visibility": True, "order": False}


def test_a_value_like_op_keeps_the_key_sequence_and_breaks_binding() -> None:
    """Moving outcomes one record down (cyclic) keeps the keys in place: a value-like operation."""
    h = _history(ROWS[:4])

    def shift(records: Sequence[Record]) -> list[Record]:
        ys = [r.outcome for r in records]
        return [replace(r, outcome=ys[i - 1]) for i, r in enumerate(records)]

    before = stream_records(h)
    _, after = apply_operation(h, FnOp(shift), "shift", before)
    held = {r.relation: r.held for r in check_relations(before, after)}
    assert held["key_sequence"] and held["record_count"]
    assert not held["key_outcome_binding"] and not held["pair_multiset"]


class FnOp:
    """A tiny Operation around a function."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.name = "custom"

    def apply(self, records: Sequence[Record]) -> Any:
        return self.fn(records)


def test_identity_preserves_every_relation_on_the_bandit() -> None:
    sub = make_bandit(n_streams=4)
    before = stream_records(sub.history)
    _, after = apply_operation(sub.history, FnOp(list), "identity", before)
    assert all(r.held for r in check_relations(before, after))


# ---------------------------------------------------------------- properties and canaries


def test_properties_hold_for_the_builtins_and_fail_with_examples() -> None:
    h = _history(ROWS)
    for op in ("dedup", "keep-latest", "forget-count:2", "forget-age:2", "merge-text"):
        rep = check_operation(h, op)
        assert all(f.held for f in rep.findings), (op, [f.line() for f in rep.findings])

    def drop_first(records: Sequence[Record]) -> list[Record]:   # not idempotent
        return list(records[1:])

    rep = check_operation(h, FnOp(drop_first), expect_properties=["idempotent"])
    idem = next(f for f in rep.findings if f.check == "idempotent")
    assert not idem.held and idem.declared and "stream s0" in idem.example
    assert rep.failed_findings() == [idem]

    def first_of_list(records: Sequence[Record]) -> list[Record]:   # keeps the first record *handed in*
        return sorted({r.key: r for r in reversed(records)}.values(), key=lambda r: r.slot)

    rep = check_operation(h, FnOp(first_of_list))
    order = next(f for f in rep.findings if f.check == "order_independent")
    assert not order.held and not order.declared and "shuffled" in order.example


def test_monotonicity_where_declared() -> None:
    sub = make_bandit(n_streams=4)
    dedup = check_operation(sub.history, "dedup")   # Dedup declares monotone
    assert next(f for f in dedup.findings if f.check == "monotone").held
    latest = check_operation(sub.history, "keep-latest", expect_properties=["monotone"])
    mono = next(f for f in latest.findings if f.check == "monotone")
    assert not mono.held and "half of its records keeps" in mono.example
    assert all(f.check != "monotone" for f in check_operation(sub.history, "keep-latest").findings)
    with pytest.raises(ConfigError, match="unknown property"):
        check_operation(sub.history, "dedup", expect_properties=["commutes"])


def test_canaries_survive_are_dropped_or_altered() -> None:
    h = _history(ROWS)
    before = stream_records(h)
    _, after = apply_operation(h, load_operation("merge-text")[1], "merge-text", before)
    ok = check_canaries(before, after, ["e3"])
    assert ok.held and "1 of 1" in ok.summary
    bad = check_canaries(before, after, ["e0", "e2", "e3"])
    assert not bad.held and bad.summary.startswith("1 of 3 canaries survive intact")
    assert "e0 (stream s0, slot 0" in bad.summary and "dropped" in bad.summary
    assert "e2 (stream s0, slot 2" in bad.summary and "altered to slot 2 (bazel, 0.633333" in bad.summary
    assert check_canaries(before, after, (), lambda r: r.task == "test it").held
    pred = check_canaries(before, after, (), lambda r: r.key == "pandas")   # merged into slot 5's duckdb record
    assert not pred.held and "e4 (stream s0, slot 4 (pandas, 0.7, 'load csv')) dropped" in pred.summary
    with pytest.raises(ConfigError, match="--canary e99 marks no record"):
        check_canaries(before, after, ["e99"])


# ---------------------------------------------------------------- operations that misbehave


def test_an_operation_that_raises_names_itself_the_stream_and_the_line() -> None:
    h = _history(ROWS)

    def boom(records: Sequence[Record]) -> list[Record]:
        raise ValueError("consolidation failed")

    with pytest.raises(OperationRaised) as info:
        apply_operation(h, FnOp(boom), "boom")
    line = info.value.one_line()
    assert "operation boom raised" in line and "consolidation failed" in line and "stream s0" in line
    assert "test_operations.py:" in line


@pytest.mark.parametrize(("fn", "msg"), [
    (lambda rs: [1], "item 0 is int"),
    (lambda rs: [replace(rs[0], stream="other")], "belongs to stream 'other'"),
    (lambda rs: [rs[0], replace(rs[1], slot=rs[0].slot)], "repeats slot 0"),
    (lambda rs: [replace(rs[0], outcome=1.5)], "field 'outcome'"),
    (lambda rs: 3, "expected a sequence of records"),
])
def test_invalid_output_is_an_operation_error(fn: object, msg: str) -> None:
    with pytest.raises(OperationError, match=msg):
        apply_operation(_history(ROWS), FnOp(fn), "bad")


def test_load_operation_errors() -> None:
    for spec, msg in (("nope", "unknown operation"), ("forget-age", "needs an argument"),
                      ("forget-count:0", "integer >= 1"), ("dedup:3", "takes no argument"),
                      ("missing.py:make", "does not exist")):
        with pytest.raises(ConfigError, match=msg):
            load_operation(spec)


# ---------------------------------------------------------------- decisions


def test_shipped_example_verdicts() -> None:
    """Merge-by-text averaging breaks the key-outcome binding and is UNSAFE for the learning (mean) agent;
    keep-latest-per-key is SAFE for the recency (latest) agent and UNSAFE for the mean agent."""
    ex = build_operation_example()
    agents = [reference_agent("mean"), reference_agent("latest")]
    merge = check_operation(ex.history, "merge-text", futures=ex.futures, evaluator=ex.evaluator, agents=agents)
    assert "key_outcome_binding" in merge.broken
    assert merge.decisions[0].status == "UNSAFE" and merge.decisions[0].n_changed > 0
    latest = check_operation(ex.history, "keep-latest", futures=ex.futures, evaluator=ex.evaluator, agents=agents)
    assert latest.preserved == ("key_outcome_binding", "visibility", "order")
    mean_d, latest_d = latest.decisions
    assert (mean_d.agent, mean_d.status) == ("mean", "UNSAFE") and mean_d.n_changed > 0
    assert (latest_d.agent, latest_d.status, latest_d.n_changed) == ("latest", "SAFE", 0)
    assert latest_d.n_decisions == 8 * 2 * 12


def test_census_compares_counts_as_integers() -> None:
    ex = build_operation_example(n_streams=4)
    kw: dict[str, Any] = {"futures": ex.futures, "evaluator": ex.evaluator, "agents": [reference_agent("mean")]}
    d = check_operation(ex.history, "keep-latest", **kw).decisions[0]
    n, c = d.n_decisions, d.n_changed
    assert 0 < c < n
    exact = Fraction(c, n)
    at = check_operation(ex.history, "keep-latest", margin=float(exact), **kw).decisions[0]
    # the margin's decimal: float(c/n) may lie a hair above or below c/n; the integer comparison decides exactly
    assert at.status == ("SAFE" if Fraction(str(float(exact))) >= exact else "UNSAFE")
    below = check_operation(ex.history, "keep-latest", margin=(c - 0.5) / n, **kw).decisions[0]
    assert below.status == "UNSAFE"
    above = check_operation(ex.history, "keep-latest", margin=(c + 0.5) / n, **kw).decisions[0]
    assert above.status == "SAFE"


def _noisy_mean(eps: float) -> Agent:
    """A stochastic agent: the mean rule, or with probability ``eps`` a random menu action."""
    mean = reference_agent("mean")

    def act(state: Any, task: Any, menu: tuple[str, ...], rng: np.random.Generator) -> str:
        if rng.random() < eps:
            return menu[int(rng.integers(len(menu)))]
        return mean.policy.act(state, task, menu, rng)

    return from_callables(mean.writer.init_state, mean.writer.update, act, name=f"noisy-mean-{eps}",
                          stochastic=True)


def test_stochastic_agent_is_read_with_t_gr() -> None:
    ex = build_operation_example(n_streams=12)
    kw: dict[str, Any] = {"futures": ex.futures, "evaluator": ex.evaluator, "repeats": 4}
    random_agent = from_callables(lambda: None, lambda s, t, k, u: s,
                                  lambda s, t, m, rng: m[int(rng.integers(len(m)))], name="random", stochastic=True)
    blind = check_operation(ex.history, "merge-text", agents=[random_agent], **kw).decisions[0]
    assert blind.measure == "T_gr" and blind.margin == 0.05
    assert blind.status == "SAFE" and blind.interval[1] < 0.05 and abs(blind.value) < 0.03
    moved = check_operation(ex.history, "merge-text", agents=[_noisy_mean(0.2)], **kw).decisions[0]
    assert moved.status == "UNSAFE" and moved.interval[0] > 0.05
    one = check_operation(ex.history, "merge-text", agents=[_noisy_mean(0.2)], futures=ex.futures,
                          evaluator=ex.evaluator, repeats=1).decisions[0]
    assert one.status == "INCONCLUSIVE" and one.n_changed > 0


def test_an_emptied_stream_is_decided_on_an_empty_memory() -> None:
    """An operation may remove every record of a stream: the replay cannot hold an empty stream, so its future
    tasks are decided on the agent's initial state (the mean rule then takes the first menu action)."""
    ex = build_operation_example(n_streams=3)

    def drop_a00(records: Sequence[Record]) -> list[Record]:
        return [] if records and records[0].stream == "a00" else list(records)

    rep = check_operation(ex.history, FnOp(drop_a00), futures=ex.futures, evaluator=ex.evaluator,
                          agents=[reference_agent("mean")])
    d = rep.decisions[0]
    assert rep.records_after == len(ex.history) - 80 and d.n_decisions == 3 * 2 * 12
    base = check_operation(ex.history, "dedup", futures=ex.futures, evaluator=ex.evaluator,
                           agents=[reference_agent("mean")])
    assert base.decisions[0].n_changed == 0
    # every a00 decision is now the first menu action "make"; the other streams' decisions are unchanged
    from replaylens.replay import replay

    before = replay(ex.history, ex.futures, ex.evaluator, reference_agent("mean"), cells="", maps="")
    acts = np.asarray(before.plan.labels)[before.actions[0, 0, 0, 0]]
    in_a00 = np.asarray([before.plan.streams[int(i)] == "a00" for i in before.stream_idx])
    assert d.n_changed == int((acts[in_a00] != "make").sum()) > 0
    with pytest.raises(OperationError, match="no record is left"):
        apply_operation(ex.history, FnOp(lambda rs: []), "forget-all")


@pytest.mark.parametrize("cell", ["value", "pair", "key_slot", "reorder", "mask"])
def test_relations_agree_with_each_cells_declared_laws(cell: str) -> None:
    """A replay cell applied as an operation: every law the cell declares that a relation here names holds."""
    from replaylens.interventions import Law, apply_cell, get_cell

    sub = make_bandit(n_streams=4)
    moved = apply_cell(sub.history, cell, seed=5)
    per = stream_records(moved)
    held = {r.relation: r.held for r in check_relations(stream_records(sub.history), per)}
    laws = get_cell(cell).preserves
    for law, rel in ((Law.PAIR_MULTISET, "pair_multiset"), (Law.KEY_SEQUENCE, "key_sequence"),
                     (Law.RECORD_COUNT, "record_count")):
        if law in laws:
            assert held[rel], (cell, rel)
    if cell in ("value", "key_slot", "mask"):   # outcomes move to other keys or vanish: new (key, outcome) pairs
        assert not held["key_outcome_binding"]
    if cell in ("pair", "reorder"):
        assert held["key_outcome_binding"] and held["visibility"] and not held["key_sequence"]


def _response(per_stream: Sequence[float], op: str) -> DecisionResponse:
    """An unjudged stochastic response with the given per-stream T_gr values."""
    return DecisionResponse("noisy", True, 2, 96, 10, math.nan, "", "T_gr", float(np.mean(per_stream)),
                            (math.nan, math.nan), 0.0, op=op, per_stream=tuple(per_stream))


def test_several_operations_are_one_holm_family() -> None:
    """Three rows each UNSAFE on its own (one-sided p just under 5 %) are INCONCLUSIVE as one family: Holm
    multiplies the smallest p by 3.  The adjusted p-values are Holm's of the raw ones, the family size is shown."""
    base = [0.08, 0.12, 0.10, 0.16, 0.09, 0.15, 0.11, 0.13]   # mean 0.1175, one-sided p vs 0.05 ≈ 0.0006
    alone = judge_responses([_response(base, "a")])[0]
    assert alone.status == "UNSAFE" and alone.family == 1
    weak = [0.02, 0.20, 0.05, 0.17, 0.04, 0.16, 0.03, 0.14]   # mean 0.10125, p ≈ 0.03 on its own
    raw = mean_inference(weak).p_exceeds(0.05)
    assert 0.01 < raw < 0.05 and judge_responses([_response(weak, "x")])[0].status == "UNSAFE"
    family = judge_responses([_response(weak, op) for op in ("x", "y", "z")])
    assert [d.status for d in family] == ["INCONCLUSIVE"] * 3
    assert [d.p_value for d in family] == pytest.approx(holm_adjusted([raw] * 3))
    assert all(d.family == 3 and "Holm over 3 T_gr rows" in d.line() for d in family)
    # SAFE needs no adjustment (intersection-union): an upper bound below the margin stays SAFE in any family
    flat = [0.0, 0.01, -0.01, 0.0, 0.005, -0.005, 0.0, 0.0]
    mixed = judge_responses([_response(flat, "f"), *(_response(weak, op) for op in ("x", "y"))])
    assert mixed[0].status == "SAFE" and mixed[0].family == 3


def test_check_operations_judges_every_operation_together() -> None:
    ex = build_operation_example(n_streams=8)
    ops = ["merge-text", "keep-latest", "dedup"]
    kw: dict[str, Any] = {"futures": ex.futures, "evaluator": ex.evaluator, "repeats": 2,
                          "agents": [_noisy_mean(0.2), reference_agent("latest")]}
    reports = check_operations(ex.history, ops, **kw)
    assert [r.op for r in reports] == ops
    t_rows = [d for r in reports for d in r.decisions if d.measure == "T_gr"]
    assert len(t_rows) == 3 and all(d.family == 3 for d in t_rows)
    raw = [mean_inference(d.per_stream).p_exceeds(d.margin) for d in t_rows]
    assert [d.p_value for d in t_rows] == pytest.approx(holm_adjusted(raw))
    # the deterministic agent's census rows are not in the family and equal the single-operation check's
    for r in reports:
        single = check_operation(ex.history, r.op, **kw)
        assert [d.status for d in single.decisions][1] == r.decisions[1].status
        assert r.decisions[1].measure == "changed" and r.decisions[1].family == 0
        # the measurements are the same; only the family (and so the adjusted p) differs
        assert single.decisions[0].per_stream == r.decisions[0].per_stream
