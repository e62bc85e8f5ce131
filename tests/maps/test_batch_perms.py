"""σ for many streams in one batch (issue 27) equals :func:`stream_perm` stream by stream (same draws)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replaylens.maps import SlotLaw, SlotSpec, stream_perm, stream_perms, vector_draws_match_numpy

ROLES = ("value", "pair", "time", "reorder")


def _padded(blocks: list[np.ndarray]) -> np.ndarray:
    t_n = max([b.size for b in blocks] + [1])
    out = np.full((len(blocks), t_n), -1, dtype=np.int64)
    for i, b in enumerate(blocks):
        out[i, : b.size] = b
    return out


def _check(spec: SlotSpec, blocks: list[np.ndarray]) -> None:
    names = [f"s{i:03d}" for i in range(len(blocks))]
    padded = _padded(blocks)
    got = stream_perms(spec, ROLES, names, padded)
    for role in ROLES:
        assert got[role].shape == padded.shape
        for i, b in enumerate(blocks):
            want = stream_perm(spec, role, names[i], b)
            assert got[role][i, : b.size].tolist() == want.tolist(), (role, i)
            assert got[role][i, b.size :].tolist() == list(range(b.size, padded.shape[1]))


@pytest.mark.parametrize("law", list(SlotLaw))
@pytest.mark.parametrize("pair_shares_value", [True, False])
def test_batch_equals_stream_by_stream(law: SlotLaw, pair_shares_value: bool) -> None:
    rng = np.random.default_rng(3)
    blocks = [np.repeat(np.arange(k), rng.integers(1, 7, size=k)) for k in rng.integers(1, 5, size=40)]
    blocks[3] = np.zeros(1, dtype=np.int64)  # a one-record stream: nothing drawn
    spec = SlotSpec(value_seed=11, time_seed=12, reorder_seed=13, pair_shares_value=pair_shares_value,
                    value_law=law, time_law=SlotLaw.PERMUTATION, reorder_law=law, pair_law=SlotLaw.PERMUTATION)
    _check(spec, blocks)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.integers(0, 4), min_size=1, max_size=12), min_size=1, max_size=6), st.integers(0, 99))
def test_batch_equals_stream_by_stream_on_unsorted_blocks(rows: list[list[int]], seed: int) -> None:
    # blocks need not be contiguous or sorted within a stream
    _check(SlotSpec.from_seed(seed), [np.array(r, dtype=np.int64) for r in rows])


def test_the_vectorized_draws_are_checked_against_numpy_and_fall_back_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch path checks itself against numpy's generators once; if a numpy changed its seeding or
    shuffle, every stream would be drawn by numpy's own generator, giving the same permutations."""
    from replaylens.maps import _batch

    assert vector_draws_match_numpy()  # on this numpy the vectorized path is the one that runs
    rng = np.random.default_rng(5)
    blocks = [np.repeat(np.arange(k), rng.integers(1, 6, size=k)) for k in rng.integers(1, 4, size=60)]
    names = [f"s{i:03d}" for i in range(len(blocks))]
    spec = SlotSpec.from_seed(9)
    fast = stream_perms(spec, ROLES, names, _padded(blocks))
    monkeypatch.setattr(_batch, "vector_draws_match_numpy", lambda: False)
    slow = stream_perms(spec, ROLES, names, _padded(blocks))
    assert all(np.array_equal(fast[r], slow[r]) for r in ROLES)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(2, 9), min_size=0, max_size=3), st.integers(2, 60), st.integers(1, 9),
       st.sampled_from([SlotLaw.DERANGEMENT, SlotLaw.PERMUTATION]), st.integers(0, 2**32))
def test_stream_blocks_equal_block_by_block_draws(lead: list[int], n: int, tail: int, law: SlotLaw,
                                                  seed: int) -> None:
    """One stream's blocks drawn with the trailing equal-size run batched are ``draw_block`` block by block."""
    from replaylens.maps import draw_block
    from replaylens.maps._batch import _stream_blocks

    sizes = [*lead, *([n] * tail)]
    got = _stream_blocks(law, sizes, np.random.default_rng(seed))
    g = np.random.default_rng(seed)
    want = [draw_block(law, size, g) for size in sizes]
    assert [p.tolist() for p in got] == [p.tolist() for p in want]
    assert all(p.dtype == np.int64 for p in got)


def test_batch_equals_stream_by_stream_at_bench_scale() -> None:
    """48 streams of 4 blocks x 48 slots (bench/replay.py's shape: the per-stream generators' branch)."""
    blocks = [np.repeat(np.arange(4), 48) for _ in range(48)]
    _check(SlotSpec.from_seed(20261121), blocks)
