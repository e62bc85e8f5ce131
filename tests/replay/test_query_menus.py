"""The array path's per-query menus and read labels, built once per (combination, distinct menu) pair, equal
the query-by-query construction (issue 27)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from replaylens.records import distinct_rows
from replaylens.replay._menus import query_menus


def _direct(all_menu, q_f, q_task, cc, mm, maps, inv, menu_map, history_map, shared):
    base = all_menu[q_task]
    shown = np.where(base >= 0, maps[mm[q_f][:, None], np.maximum(base, 0)], -1)
    menu = np.where(menu_map[cc[q_f]][:, None], shown, base)
    if not shared:
        return menu, None
    inv_pad = np.concatenate([inv, np.full((inv.shape[0], 1), -1, dtype=inv.dtype)], axis=1)
    labels = np.where(history_map[cc[q_f]][:, None], inv_pad[mm[q_f][:, None], menu], menu)
    return menu, labels


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32), st.integers(2, 6), st.integers(1, 4), st.integers(1, 3), st.integers(1, 4),
       st.integers(1, 40), st.integers(0, 400), st.booleans())
def test_query_menus_equal_the_query_by_query_construction(seed: int, n_lab: int, width: int, c_n: int, m_n: int,
                                                           n_tasks: int, q_n: int, shared: bool) -> None:
    rng = np.random.default_rng(seed)
    width = min(width, n_lab)
    all_menu = np.full((n_tasks, width), -1, dtype=np.int64)
    for j in range(n_tasks):  # a prefix of a random order of the labels, −1 padded
        k = int(rng.integers(1, width + 1))
        all_menu[j, :k] = rng.permutation(n_lab)[:k]
    maps = np.stack([rng.permutation(n_lab) for _ in range(m_n)])
    inv = np.argsort(maps, axis=1)
    cc, mm = np.repeat(np.arange(c_n), m_n), np.tile(np.arange(m_n), c_n)  # one draw
    menu_map, history_map = rng.random(c_n) < 0.5, rng.random(c_n) < 0.7
    q_f, q_task = rng.integers(0, c_n * m_n, size=q_n), rng.integers(0, n_tasks, size=q_n)
    got = query_menus(all_menu, q_f, q_task, cc, mm, maps, inv, menu_map, history_map, shared=shared)
    want = _direct(all_menu, q_f, q_task, cc, mm, maps, inv, menu_map, history_map, shared)
    assert np.array_equal(got[0], want[0])
    assert (got[1] is None) == (want[1] is None)
    if want[1] is not None:
        assert np.array_equal(got[1], want[1])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(-1, 5), min_size=3, max_size=3), min_size=1, max_size=30), st.booleans())
def test_distinct_rows_index_every_row(rows: list[list[int]], wide: bool) -> None:
    arr = np.array(rows, dtype=np.int64)
    if wide:  # past the mixed-radix code: np.unique on rows
        arr = np.concatenate([arr, np.full((arr.shape[0], 40), 2**40, dtype=np.int64)], axis=1)
    first, of = distinct_rows(arr)
    uniq = arr[first]
    assert np.array_equal(uniq[of], arr)
    assert all(of[f] == j and not (of[:f] == j).any() for j, f in enumerate(first.tolist()))  # first positions
    assert len({tuple(r) for r in uniq.tolist()}) == uniq.shape[0] == len({tuple(r) for r in arr.tolist()})
