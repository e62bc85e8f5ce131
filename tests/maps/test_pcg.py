"""The vectorized generators of :mod:`replaylens.maps._pcg` draw numpy's bytes exactly (issue 27)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from replaylens.maps import SlotLaw, SlotSpec, stream_perm, stream_perms
from replaylens.maps._batch import VEC_MIN_STREAMS_PER_SLOT
from replaylens.maps._pcg import VectorPCG64, pcg64_states, shuffle_draws
from replaylens.rng import derive_seed, stable_int, stable_ints

LASTS = [0, 1, 5, 2**32 - 1, 2**32, 2**63 - 1, 2**64 - 1, stable_int("stream:a"), stable_int("b")]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 2**64 - 1), min_size=0, max_size=3), st.lists(st.integers(0, 2**64 - 1), max_size=5))
def test_seeding_and_raw_draws_equal_numpy(prefix: list[int], extra: list[int]) -> None:
    last = np.array(LASTS + extra, dtype=np.uint64)
    gen = VectorPCG64(*pcg64_states(prefix, last))
    rows = np.arange(last.size)
    got = np.stack([gen.next_uint32(rows) for _ in range(5)], axis=1)
    for g, v in enumerate(last.tolist()):
        bg = np.random.PCG64(np.random.SeedSequence([*prefix, v]))
        assert bg.state["state"]["inc"] == (int(gen.inc_hi[g]) << 64) | int(gen.inc_lo[g])
        raw = bg.random_raw(3).tolist()
        want = [w for x in raw for w in (x & 0xFFFFFFFF, x >> 32)][:5]
        assert got[g].tolist() == want


@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(st.integers(2, 20), max_size=4), min_size=1, max_size=12), st.booleans(),
       st.integers(0, 2**40))
def test_shuffles_equal_numpy_permutation(groups: list[list[int]], derangement: bool, seed: int) -> None:
    names = [f"s{i}" for i in range(len(groups))]
    sizes = np.array([n for g in groups for n in g], dtype=np.int64)
    counts = np.array([len(g) for g in groups], dtype=np.int64)
    first = np.r_[0, np.cumsum(counts)][:-1]
    gen = VectorPCG64(*pcg64_states([seed, stable_int("value")], np.array([stable_int(n) for n in names],
                                                                          dtype=np.uint64)))
    got = shuffle_draws(gen, first, first + counts, sizes, derangement)
    for g, name in enumerate(names):
        rng = np.random.default_rng(derive_seed(seed, "value", name))
        for q in range(int(first[g]), int(first[g] + counts[g])):
            n = int(sizes[q])
            p = rng.permutation(n)
            while derangement and (p == np.arange(n)).any():
                p = rng.permutation(n)
            assert got[q, :n].tolist() == p.tolist()


def test_long_blocks_and_short_streams_in_one_batch() -> None:
    # streams past the vectorized limits (a block of 70 slots, 600 drawn slots) use numpy's generator
    blocks = [np.repeat(np.arange(2), [70, 3]), np.repeat(np.arange(20), 30), np.repeat(np.arange(3), 4),
              np.zeros(1, dtype=np.int64), np.array([1, 0, 1, 0, 2, 2, 2])]
    t_n = max(b.size for b in blocks)
    padded = np.full((len(blocks), t_n), -1, dtype=np.int64)
    for i, b in enumerate(blocks):
        padded[i, : b.size] = b
    names = [f"n{i}" for i in range(len(blocks))]
    spec = SlotSpec(value_seed=20261121003, time_seed=7, reorder_seed=0, pair_shares_value=False,
                    pair_law=SlotLaw.PERMUTATION)
    got = stream_perms(spec, ("value", "pair", "time", "reorder"), names, padded)
    for role, perm in got.items():
        for i, b in enumerate(blocks):
            assert perm[i, : b.size].tolist() == stream_perm(spec, role, names[i], b).tolist(), (role, i)


def test_many_short_streams_use_the_vectorized_generators_and_agree() -> None:
    rng = np.random.default_rng(8)
    blocks = [np.repeat(np.arange(k), rng.integers(1, 5, size=k)) for k in rng.integers(1, 4, size=300)]
    blocks += [np.repeat(np.arange(2), [80, 2]), np.zeros(1, dtype=np.int64)]  # one long stream, one record
    slots = [int(sum(n for n in np.bincount(b) if n > 1)) for b in blocks[:300]]
    assert VEC_MIN_STREAMS_PER_SLOT * max(slots) <= 300  # the short streams go through shuffle_draws
    t_n = max(b.size for b in blocks)
    padded = np.full((len(blocks), t_n), -1, dtype=np.int64)
    for i, b in enumerate(blocks):
        padded[i, : b.size] = b
    names = [f"stream-{i}" for i in range(len(blocks))]
    spec = SlotSpec.from_seed(20261121, draw=2)
    got = stream_perms(spec, ("value", "pair", "time", "reorder"), names, padded)
    for role, perm in got.items():
        for i, b in enumerate(blocks):
            assert perm[i, : b.size].tolist() == stream_perm(spec, role, names[i], b).tolist(), (role, i)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.text(max_size=12), max_size=20))
def test_stable_ints_equal_stable_int(texts: list[str]) -> None:
    assert stable_ints(texts).tolist() == [stable_int(t) for t in texts]
