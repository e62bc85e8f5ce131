"""Array agents that share history rows across label maps (``shares_label_maps``) decide exactly as when every
(stream, cell, draw, map) row is written (issue 27): same actions, and the per-record path agrees."""

from __future__ import annotations

import dataclasses
import math

import hypothesis.strategies as hs
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from replaylens.agents import QueryBatch, RecordBatch, load_agent
from replaylens.bandit import make_bandit
from replaylens.records import evaluator_from_rows, futures_from_tasks, history_from_records
from replaylens.replay import replay

RULES = ("mean", "sum", "count", "latest", "best")


class _Unshared:
    """The same array agent without the declaration: written one row per label map, read at the menu."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.seen_state_labels: list[bool] = []

    def act_batch(self, records: RecordBatch, queries: QueryBatch) -> np.ndarray:
        self.seen_state_labels.append(queries.state_labels is not None)
        return self.inner.act_batch(records, queries)  # type: ignore[attr-defined,no-any-return]


def _both(h, f, e, name: str, **kw):  # type: ignore[no-untyped-def]
    agent = load_agent(name)
    assert getattr(agent.array, "shares_label_maps", False)
    plain = _Unshared(agent.array)
    shared = replay(h, f, e, agent, path="array", **kw)
    unshared = replay(h, f, e, dataclasses.replace(agent, array=plain), path="array", **kw)
    assert plain.seen_state_labels and not any(plain.seen_state_labels)
    return shared, unshared


@pytest.mark.parametrize("name", RULES)
def test_shared_rows_equal_one_row_per_map_on_the_bandit(name: str) -> None:
    sub = make_bandit(n_streams=5, slots_per_block=8, n_future=4)
    kw = {"cells": "all", "maps": "all", "draws": 2, "seed": 3}
    shared, unshared = _both(sub.history, sub.futures, sub.evaluator, name, **kw)
    assert shared.actions.shape[1] > 1  # several label maps
    assert np.array_equal(shared.actions, unshared.actions)
    ref = replay(sub.history, sub.futures, sub.evaluator, load_agent(name), path="reference", **kw)
    assert np.array_equal(shared.actions, ref.actions)


@hs.composite
def _inputs(draw):  # type: ignore[no-untyped-def]
    """1-3 streams, 2-4 labels, partial menus in random orders, NaN and tied outcomes, interleaved blocks."""
    labels = ["A", "B", "C", "D"][: draw(hs.integers(2, 4))]
    hist, futs, ev = [], [], []
    for r in range(draw(hs.integers(1, 3))):
        s = f"s{r}"
        n = draw(hs.integers(1, 9))
        slots = draw(hs.lists(hs.integers(0, 40), min_size=n, max_size=n, unique=True))
        for sl in slots:
            u = draw(hs.sampled_from((0.0, 0.25, 0.5, 1.0, math.nan)))
            hist.append({"stream": s, "family": "f", "context": f"c{draw(hs.integers(0, 1))}", "slot": sl,
                         "task": f"{s}-t{sl}", "key": draw(hs.sampled_from(labels)),
                         "outcome": None if math.isnan(u) else u})
        for j in range(draw(hs.integers(1, 3))):
            menu = list(draw(hs.permutations(labels)))
            if j > 0:
                menu = menu[: draw(hs.integers(1, len(labels)))]
            futs.append({"stream": s, "family": "f", "context": draw(hs.sampled_from(["c0", "c1", "held"])),
                         "task": f"{s}-x{j}", "menu": menu})
            ev += [{"stream": s, "task": f"{s}-x{j}", "key": a, "utility": 0.5} for a in menu]
    return history_from_records(hist), futures_from_tasks(futs), evaluator_from_rows(ev)


@pytest.mark.parametrize("name", RULES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inputs=_inputs(), seed=hs.integers(0, 30))
def test_shared_rows_equal_one_row_per_map_on_random_histories(name: str, inputs, seed: int) -> None:  # type: ignore[no-untyped-def]
    h, f, e = inputs
    shared, unshared = _both(h, f, e, name, cells="all", maps="all", draws=2, seed=seed)
    assert np.array_equal(shared.actions, unshared.actions)


def test_actions_are_stored_in_the_smallest_integer_type() -> None:
    from replaylens.replay._run import action_dtype

    assert [action_dtype(n) for n in (1, 128, 129, 32768, 32769, 2**31 + 1)] == \
        [np.int8, np.int8, np.int16, np.int16, np.int32, np.int64]
    sub = make_bandit(n_streams=3, slots_per_block=4, n_future=2)
    dec = replay(sub.history, sub.futures, sub.evaluator, load_agent("mean"), cells="value", path="array")
    ref = replay(sub.history, sub.futures, sub.evaluator, load_agent("mean"), cells="value", path="reference")
    assert dec.actions.dtype == np.int8 and np.array_equal(dec.actions, ref.actions)
