"""The vectorized fingerprints and mixer of :mod:`replaylens.rng` equal their one-at-a-time definitions."""

from __future__ import annotations

import hashlib

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from replaylens.rng import mix64, stable_int, stable_ints

texts = st.lists(st.text(max_size=24), max_size=40)


def _mix64_scalar(x: int) -> int:
    """SplitMix64's finaliser on one Python int (the published constants, mod 2**64)."""
    m = (1 << 64) - 1
    x = (x + 0x9E3779B97F4A7C15) & m
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & m
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & m
    return x ^ (x >> 31)


def test_stable_int_is_the_sha256_head() -> None:
    digest = hashlib.sha256(b"task:t-1").digest()
    assert stable_int("task:t-1") == int.from_bytes(digest[:8], "little") >> 1


@settings(max_examples=60, deadline=None)
@given(texts, st.sampled_from(["", "task:", "stream:", "é:"]))
def test_stable_ints_equal_stable_int_one_by_one(items: list[str], prefix: str) -> None:
    got = stable_ints(items, prefix)
    assert got.dtype == np.uint64 and got.shape == (len(items),)
    assert got.tolist() == [stable_int(prefix + t) for t in items]
    assert stable_ints(np.array(items, dtype=str).tolist() if items else [], prefix).tolist() == got.tolist()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=2**64 - 1), max_size=30))
def test_mix64_in_place_equals_the_scalar_definition(xs: list[int]) -> None:
    want = [_mix64_scalar(x) for x in xs]
    arr = np.array(xs, dtype=np.uint64)
    assert mix64(arr).tolist() == want
    assert arr.tolist() == xs                      # no out=: the input is left alone
    out = np.zeros(len(xs), dtype=np.uint64)
    assert mix64(arr, out=out) is out and out.tolist() == want
    assert mix64(arr, out=arr) is arr and arr.tolist() == want
    if xs:
        assert int(mix64(np.uint64(xs[0]))) == want[0] and int(mix64(xs[0])) == want[0]
