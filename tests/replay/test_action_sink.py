"""The replay's action sink (replay._run._ActionSink): shards put consecutive streams with one copy, journal
reads may come in any order; either way the result is the streams' arrays concatenated in plan order."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replaylens.replay._run import _ActionSink


@settings(max_examples=60, deadline=None)
@given(lengths=st.lists(st.integers(0, 4), min_size=1, max_size=12), cuts=st.lists(st.integers(0, 12), max_size=4),
       shuffled=st.booleans(), seed=st.integers(0, 2**16))
def test_sink_equals_concatenation_in_plan_order(lengths: list[int], cuts: list[int], shuffled: bool,
                                                 seed: int) -> None:
    rng = np.random.default_rng(seed)
    names = [f"s{i}" for i in range(len(lengths))]
    arrays = [rng.integers(0, 5, (2, 3, 1, 2, n)) for n in lengths]   # int64, as a shard returns them
    order = list(rng.permutation(len(names))) if shuffled else list(range(len(names)))
    sink = _ActionSink(names, lengths, 5)
    bounds = [0, *sorted(c for c in cuts if c < len(order)), len(order)]
    for a, b in itertools.pairwise(bounds):
        sink.put([names[k] for k in order[a:b]], [arrays[k] for k in order[a:b]])
    got = sink.result()
    assert got.dtype == np.int8
    assert np.array_equal(got, np.concatenate(arrays, axis=-1))


def test_sink_refuses_a_missing_stream_and_a_bad_code() -> None:
    sink = _ActionSink(["a", "b"], [1, 1], 3)
    sink.put(["a"], [np.zeros((1, 1, 1, 1, 1), dtype=np.int64)])
    with pytest.raises(RuntimeError, match="stream 'b'"):
        sink.result()
    with pytest.raises(RuntimeError, match="outside 0 … 2"):
        sink.put(["b"], [np.full((1, 1, 1, 1, 1), 3, dtype=np.int64)], check=True)


def test_a_shard_block_is_put_with_one_copy_and_checked_when_read_back() -> None:
    from replaylens.replay._layout import ShardActions

    rng = np.random.default_rng(3)
    arrays = [rng.integers(0, 5, (2, 3, 1, 2, n)) for n in (3, 1, 4, 2)]
    sink = _ActionSink(["a", "b", "c", "d"], [3, 1, 4, 2], 5)
    sink.put(["a"], [arrays[0]])
    sink.put(["b", "c", "d"], ShardActions.from_block(np.concatenate(arrays[1:], axis=-1), [1, 4, 2]), check=True)
    assert np.array_equal(sink.result(), np.concatenate(arrays, axis=-1))
    bad = ShardActions.from_block(np.full((2, 3, 1, 2, 4), 5), [4])
    with pytest.raises(RuntimeError, match="stream 'c' an action code outside 0 … 4"):
        sink.put(["c"], bad, check=True)
