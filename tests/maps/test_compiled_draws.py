"""The compiled slot draws (``fast`` extra, numba) equal :func:`stream_perm` stream by stream (issue 27).

Which path :func:`stream_perms` takes depends on whether numba is loaded in the process, so each test here
sets it: the compiled loop, then the numpy paths, against the per-stream reference.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import require
from replaylens.maps import SlotLaw, SlotSpec, stream_perm, stream_perms

batch = importlib.import_module("replaylens.maps._batch")
compiled = importlib.import_module("replaylens.maps._compiled")

ROLES = ("value", "pair", "time", "reorder")


@pytest.fixture(autouse=True)
def _needs_numba() -> None:
    if compiled.shuffle_loop() is None:
        require("fast", "numba (the fast extra) is not installed")


def _padded(blocks: list[np.ndarray]) -> np.ndarray:
    out = np.full((len(blocks), max([b.size for b in blocks] + [1])), -1, dtype=np.int64)
    for i, b in enumerate(blocks):
        out[i, : b.size] = b
    return out


def _both_paths_equal_the_reference(monkeypatch: pytest.MonkeyPatch, spec: SlotSpec, blocks: list[np.ndarray]) -> None:
    names = [f"stream-{i}" for i in range(len(blocks))]
    padded = _padded(blocks)
    got = {}
    for on in (True, False):
        monkeypatch.setattr(batch, "loaded", lambda on=on: on)
        got[on] = stream_perms(spec, ROLES, names, padded)
    for role in ROLES:
        assert np.array_equal(got[True][role], got[False][role]), role
        for i, b in enumerate(blocks):
            assert got[True][role][i, : b.size].tolist() == stream_perm(spec, role, names[i], b).tolist(), (role, i)


@pytest.mark.parametrize("law", list(SlotLaw))
def test_compiled_draws_equal_numpy_for_every_law(monkeypatch: pytest.MonkeyPatch, law: SlotLaw) -> None:
    rng = np.random.default_rng(8)
    # short blocks (the vectorized numpy path) and 5..14-slot blocks (numpy's own generators) side by side
    blocks = [np.repeat(np.arange(k), rng.integers(1, 15, size=k)) for k in rng.integers(1, 6, size=60)]
    spec = SlotSpec(value_seed=21, time_seed=22, reorder_seed=23, pair_shares_value=False, pair_seed=24,
                    value_law=law, time_law=SlotLaw.PERMUTATION, reorder_law=law, pair_law=law)
    _both_paths_equal_the_reference(monkeypatch, spec, blocks)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=40), min_size=1, max_size=8), st.integers(0, 2**31))
def test_compiled_draws_equal_numpy_on_unsorted_blocks(rows: list[list[int]], seed: int) -> None:
    with pytest.MonkeyPatch.context() as mp:
        _both_paths_equal_the_reference(mp, SlotSpec.from_seed(seed), [np.array(r, dtype=np.int64) for r in rows])
