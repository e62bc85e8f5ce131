"""``gather_labels`` (the array path's state read) gives exactly the two-step read it replaces."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from replaylens.agents._known import gather_labels


@settings(max_examples=200, deadline=None)
@given(shape=st.lists(st.integers(1, 5), min_size=2, max_size=4), q=st.integers(0, 30), m=st.integers(1, 4),
       seed=st.integers(0, 2**32 - 1), transposed=st.booleans())
def test_gather_labels_equals_take_along_axis(shape: list[int], q: int, m: int, seed: int, transposed: bool) -> None:
    rng = np.random.default_rng(seed)
    table = rng.normal(size=shape)
    if transposed:  # a table that is not C-contiguous takes the two-step read
        table = np.asfortranarray(table)
    lead = shape[:-1]
    index = tuple(rng.integers(0, d, size=q) for d in lead)
    labels = rng.integers(-1, shape[-1], size=(q, m))
    expected = np.take_along_axis(table[index], np.where(labels >= 0, labels, 0), axis=1)
    got = gather_labels(table, index, labels)
    assert got.shape == expected.shape
    assert np.array_equal(got, expected)


def test_gather_labels_reads_a_negative_index_as_numpy_does() -> None:
    table = np.arange(24.0).reshape(2, 3, 4)
    index = (np.array([-1, 0]), np.array([2, -3]))
    labels = np.array([[3, -1], [0, 2]])
    assert np.array_equal(gather_labels(table, index, labels),
                          np.take_along_axis(table[index], np.where(labels >= 0, labels, 0), axis=1))


@settings(max_examples=150, deadline=None)
@given(shape=st.lists(st.integers(1, 5), min_size=4, max_size=4), q=st.integers(0, 30), m=st.integers(1, 4),
       seed=st.integers(0, 2**32 - 1), shared=st.booleans(), negative=st.booleans())
def test_menu_reads_equal_query_values_with_padding_filled(shape: list[int], q: int, m: int, seed: int,
                                                           shared: bool, negative: bool) -> None:
    """``menu_reads`` (flat positions, a label −1 column for the padding) equals ``query_values`` off the
    padding and ``fill`` on it; negative row/cut/block indexes count from the end."""
    from replaylens.agents import QueryBatch
    from replaylens.agents._known import menu_reads, query_values

    rng = np.random.default_rng(seed)
    table = rng.normal(size=shape)
    row, cut, block = (rng.integers(-d if negative else 0, d, size=q) for d in shape[:3])
    menu = rng.integers(0, shape[3], size=(q, m))
    menu[:, 1:][rng.random((q, m - 1)) < 0.3] = -1  # padding (the first item is real)
    labels = np.where(menu >= 0, rng.integers(0, shape[3], size=(q, m)), -1) if shared else None
    queries = QueryBatch(row=row, cut=cut, block=block, menu=menu, seed=np.zeros(q, dtype=np.uint64),
                         stream=np.zeros(q, dtype=np.int64), task=np.zeros(q, dtype=np.int64), stream_names=("s",),
                         task_names=("t",), state_labels=labels)
    want = np.where(menu >= 0, query_values(table, queries), -7.5)
    assert np.array_equal(menu_reads(table, -7.5, queries), want)
