"""The compiled loops of the shared resamples (``fast`` extra, numba) against numpy's (issue 27).

The draw-and-count loop must give exactly the cluster indices of ``Generator.integers(0, n, dtype=int64)``
(through their counts), call after call, and the sign-flip sums exactly numpy's path's additions, so neither
statistic's bytes depend on whether numba is installed.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import require
from replaylens.inference import shared_bootstrap

compiled = importlib.import_module("replaylens.inference._compiled")
shared = importlib.import_module("replaylens.inference._shared")
flipsums = importlib.import_module("replaylens.inference._flipsums")


@pytest.fixture(autouse=True)
def _needs_numba() -> None:
    if not compiled.compiled_available():
        require("fast", "numba (the fast extra) is not installed")


#: 2**32 mod n = 1,019,911 for this n: about one word in 4,200 is rejected (about 250 per draw)
_REJECTING = 2**20 + 7


def _numpy_counts(gen: np.random.Generator, n: int, c: int) -> np.ndarray:
    index = gen.integers(0, n, size=(c, n), dtype=np.int64)
    return np.stack([np.bincount(row, minlength=n) for row in index]).astype(np.float64)


@settings(max_examples=40, deadline=None)
@given(n=st.one_of(st.integers(2, 70), st.sampled_from([255, 256, 1000, 4097, 65536, 99_991, _REJECTING])),
       chunks=st.lists(st.integers(1, 5), min_size=1, max_size=4), seed=st.integers(0, 2**32))
def test_counts_equal_numpy_integers_call_after_call(n: int, chunks: list[int], seed: int) -> None:
    ref = np.random.default_rng(seed)
    fill = compiled.BootstrapCounts(np.random.default_rng(seed).bit_generator, n)
    for c in chunks:
        got = np.empty((c, n))
        fill(got)
        assert got.tobytes() == _numpy_counts(ref, n, c).tobytes()


def test_rejected_words_are_skipped_as_numpy_skips_them() -> None:
    n = _REJECTING
    words = np.asarray(np.random.default_rng(5).bit_generator.random_raw(n), dtype="<u8").view("<u4")
    low = (words.astype(np.uint64) * np.uint64(n)) & np.uint64(0xFFFFFFFF)
    assert int(np.count_nonzero(low < (2**32 - n) % n)) > 100  # this stream does reject words
    got = np.empty((2, n))
    compiled.BootstrapCounts(np.random.default_rng(5).bit_generator, n)(got)
    assert got.tobytes() == _numpy_counts(np.random.default_rng(5), n, 2).tobytes()


@settings(max_examples=30, deadline=None)
@given(n=st.sampled_from([3, 7, 1000, _REJECTING]), c=st.integers(1, 3), seed=st.integers(0, 2**32),
       odd=st.booleans())
def test_the_generator_is_left_where_numpy_leaves_it(n: int, c: int, seed: int, odd: bool) -> None:
    """After a call the bit generator is where ``integers`` leaves it (its 128-bit state and the buffered
    32-bit half), whether or not it held a buffered half before: the next draw of any kind is numpy's."""
    ref, gen = np.random.default_rng(seed), np.random.default_rng(seed)
    if odd:   # a buffered half to start from
        ref.integers(0, 5, dtype=np.int64)
        gen.integers(0, 5, dtype=np.int64)
    got = np.empty((c, n))
    compiled.BootstrapCounts(gen.bit_generator, n)(got)
    assert got.tobytes() == _numpy_counts(ref, n, c).tobytes()
    assert gen.bit_generator.state == ref.bit_generator.state
    assert gen.integers(0, 2**40, size=3).tolist() == ref.integers(0, 2**40, size=3).tolist()


def test_only_a_pcg64_is_stepped() -> None:
    with pytest.raises(TypeError, match="PCG64"):
        compiled.BootstrapCounts(np.random.Philox(1), 10)


@settings(max_examples=30, deadline=None)
@given(n=st.one_of(st.integers(1, 70), st.sampled_from([1024, 1025, 3000, 65535, 65536, _REJECTING])),
       chunks=st.lists(st.integers(1, 7), min_size=1, max_size=3), k=st.integers(1, 9), seed=st.integers(0, 2**32))
def test_bootstrap_sums_equal_the_numpy_products_byte_for_byte(n: int, chunks: list[int], k: int, seed: int) -> None:
    """The compiled loop (counts kept as uint16, or uint32 from 2**16 clusters; sums reordered and fused by the
    compiler) gives the numpy path's bytes: counts of ``Generator.integers`` times the grid values through BLAS.
    Values over 24 orders of magnitude, where an inexact sum would show; an odd number of draws (the loop takes
    two at a time); call after call, the generator left where numpy leaves it."""
    rng = np.random.default_rng(seed)
    grid = shared._on_grid(rng.normal(size=(n, k)) * 10.0 ** rng.integers(-8, 16, size=(n, 1)))
    ref, gen = np.random.default_rng(seed), np.random.default_rng(seed)
    sums = compiled.BootstrapSums(gen.bit_generator, shared._padded_transpose(grid))
    for c in chunks:
        got = np.full((c, 4 * -(-k // 4)), 7.0)
        sums(got)
        want = _numpy_counts(ref, n, c) @ grid
        assert (got[:, :k] + 0.0).tobytes() == (want + 0.0).tobytes()
        assert not got[:, k:].any()   # the padding rows of zeros
    assert gen.bit_generator.state == ref.bit_generator.state


@pytest.mark.parametrize("n", [2, 257, 3000])
def test_shared_bootstrap_bytes_do_not_depend_on_the_compiled_loop(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    values = np.random.default_rng(n).normal(size=(n, 4))
    monkeypatch.setattr(shared, "compiled_available", lambda: False)
    assert not shared._use_compiled(n, 700)
    plain = shared_bootstrap(values, n_resamples=700, seed=17, groups=[3, 1], threads=2)
    monkeypatch.setattr(shared, "compiled_available", compiled.compiled_available)
    monkeypatch.setattr(shared, "COMPILED_CELLS", 0)
    assert shared._use_compiled(n, 700)
    fast = shared_bootstrap(values, n_resamples=700, seed=17, groups=[3, 1], threads=2)
    for a, b in zip(plain, fast, strict=True):
        assert a.distribution.tobytes() == b.distribution.tobytes()
        assert a.low.tobytes() == b.low.tobytes() and a.high.tobytes() == b.high.tobytes()


@settings(max_examples=40, deadline=None)
@given(width=st.integers(1, 40), c=st.integers(1, 9), quads=st.integers(1, 5), seed=st.integers(0, 2**32))
def test_flip_sums_equal_the_numpy_sums_byte_for_byte(width: int, c: int, quads: int, seed: int) -> None:
    """The compiled signed sums add what numpy's path adds, in its order: values spread over 24 orders of
    magnitude (where any other order of the additions changes the bytes), every bit set or none in a word,
    draws not a multiple of the four the compiled loop takes at once, tables in several chunks."""
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 2**64, size=c * width, dtype=np.uint64)
    raw[:1] = [0xFFFF_FFFF_FFFF_FFFF] if seed % 2 else [0]
    padded = rng.normal(size=(64 * width, 4 * quads)) * 10.0 ** rng.integers(-8, 16, size=(64 * width, 1))
    got, want = np.full((c, 4 * quads), 7.0), np.full((c, 4 * quads), 7.0)
    kernel = compiled.flip_sums()
    assert kernel is not None
    kernel(raw, padded, got)
    flipsums.flip_sums(raw, padded, want)
    assert got.tobytes() == want.tobytes()
    signs = 1.0 - 2.0 * ((raw.view(np.uint8)[:, None] >> np.arange(8)) & 1).reshape(c, 64 * width)
    exact = signs @ padded   # any order: equal to within the rounding of the sums
    assert np.allclose(got, exact, rtol=1e-12, atol=1e-12 * np.abs(padded).sum(axis=0).max())


@pytest.mark.parametrize("n", [70, 257, 3000])
def test_sign_flip_bytes_do_not_depend_on_the_compiled_loop(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    values = np.random.default_rng(n).normal(size=(n, 3))
    monkeypatch.setattr(shared, "compiled_available", lambda: False)
    assert not shared._use_compiled(n, 700)
    plain = shared.shared_sign_flip_tests(values, n_resamples=700, seed=17, threads=2)
    monkeypatch.setattr(shared, "compiled_available", compiled.compiled_available)
    monkeypatch.setattr(shared, "COMPILED_CELLS", 0)
    assert shared._use_compiled(n, 700)
    fast = shared.shared_sign_flip_tests(values, n_resamples=700, seed=17, threads=2)
    for a, b in zip(plain, fast, strict=True):
        assert a.null_distribution.tobytes() == b.null_distribution.tobytes() and a.pvalue == b.pvalue
