"""Columnar stream preparation (issue 27) equals the per-stream loop it replaced, field by field."""

from __future__ import annotations

import importlib
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replaylens.bandit import make_bandit
from replaylens.records import History
from replaylens.records._io import futures_from_rows
from replaylens.replay import plan_replay, prepare_streams

engine = importlib.import_module("replaylens.replay._engine")
FIELDS = ("codes", "outcomes", "block_local", "block_global", "slots", "prefix", "menus", "stratum_code")


def _same(plan, history, futures) -> None:  # type: ignore[no-untyped-def]
    got = prepare_streams(plan, history, futures)
    want = engine._prepare_streams_loop(plan, history, futures)
    assert list(got) == list(want)
    for s, sd in got.items():
        w = want[s]
        assert sd.name == w.name and sd.rows == w.rows and sd.futures == w.futures and sd.history is w.history
        for f in FIELDS:
            a, b = getattr(sd, f), getattr(w, f)
            assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=True), (s, f)


@pytest.mark.parametrize("n_streams,held_out", [(7, ()), (12, ("h1",))])
def test_columnar_prepare_equals_the_loop(n_streams: int, held_out: tuple[str, ...]) -> None:
    sub = make_bandit(n_streams=n_streams, slots_per_block=5, n_future=3, held_out=held_out)
    plan = plan_replay(sub.history, sub.futures)
    _same(plan, sub.history, sub.futures)
    # a plan of a few streams, in another order (as the report's examples ask)
    few = replace(plan, streams=tuple(reversed(plan.streams[:3])))
    _same(few, sub.history, sub.futures)


def test_interleaved_blocks_feeds_and_unsorted_input() -> None:
    rows = []
    for s, blocks in (("s2", ["b", "a", "b", "c"]), ("s1", ["a", "a", "c", "b", "a"])):
        for t, b in enumerate(blocks):
            rows.append({"stream": s, "family": b, "context": "x", "slot": 10 - t, "task": f"q{t}",
                         "key": ["k1", "k2", "k3"][t % 3], "outcome": (t % 4) / 3 if t != 2 else None})
    cols = {k: [r[k] for r in rows] for k in rows[0]}
    cols["outcome"] = [np.nan if u is None else u for u in cols["outcome"]]
    history = History.from_columns(**cols)
    futures = futures_from_rows([
        {"stream": "s1", "family": "c", "context": "x", "task": "f1", "menu": ["k1", "k2"]},
        {"stream": "s2", "family": "z", "context": "x", "task": "f2", "menu": ["k3", "k1", "k2"]},
        {"stream": "s1", "family": "a", "context": "x", "task": "f3", "menu": ["k2", "k3"]},
        {"stream": "s2", "family": "b", "context": "x", "task": "f4", "menu": ["k1"], "feeds_family": "a",
         "feeds_context": "x"},
        {"stream": "s1", "family": "b", "context": "x", "task": "f5", "menu": ["k3", "k2", "k1"]},
    ], "<memory>", None)
    plan = plan_replay(history, futures)
    _same(plan, history, futures)


prepare_mod = importlib.import_module("replaylens.replay._prepare")


def _coded(col: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A text column as (vocab, codes), the vocab in reverse sorted order (its order is arbitrary)."""
    vocab = np.array(sorted(set(col.tolist()), reverse=True), dtype=str) if col.size else np.zeros(0, dtype="<U1")
    where = {v: i for i, v in enumerate(vocab.tolist())}
    return vocab, np.array([where[v] for v in col.tolist()], dtype=np.int32)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "é", "a "]), st.sampled_from(["x", "y", ""])), min_size=0,
                max_size=30), st.booleans())
def test_codes_of_coded_columns_equal_the_lookups(rows: list[tuple[str, str]], drop: bool) -> None:
    fam = np.array([f for f, _ in rows], dtype=str) if rows else np.zeros(0, dtype="<U1")
    ctx = np.array([c for _, c in rows], dtype=str) if rows else np.zeros(0, dtype="<U1")
    fam_coded, ctx_coded = _coded(fam), _coded(ctx)
    bcode = {p: i for i, p in enumerate(sorted({*rows, ("q", "q")}, reverse=True))}
    got = prepare_mod._block_codes(fam_coded, ctx_coded, bcode)
    assert got.dtype == np.int64 and got.tolist() == [bcode[r] for r in rows]
    lookup = {v: 3 * i for i, v in enumerate(sorted({f for f, _ in rows} | {"z"}))}
    if drop and rows:
        del lookup[max(f for f, _ in rows)]
        with pytest.raises(KeyError) as err:
            prepare_mod._codes_of(*fam_coded, lookup)
        assert err.value.args[0] == min(f for f in fam.tolist() if f not in lookup)
    else:
        assert prepare_mod._codes_of(*fam_coded, lookup).tolist() == [lookup[f] for f in fam.tolist()]
