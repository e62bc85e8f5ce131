"""transform_batch skips sorting for a multiset law whose columns move through one within-block permutation:
that condition is checked here against its plain definition, and shown sufficient against check_law."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from replaylens.interventions._cells import _MULTISETS, _moves_within_blocks
from replaylens.interventions._laws import check_law


def _plain(src: np.ndarray, block: np.ndarray) -> bool:
    t_n = src.shape[1]
    for s_row, b_row in zip(src.tolist(), block.tolist(), strict=True):
        if sorted(s_row) != list(range(t_n)) or any(b_row[j] != b_row[t] for t, j in enumerate(s_row)):
            return False
    return True


@st.composite
def batches(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    s_n, t_n = draw(st.integers(1, 4)), draw(st.integers(1, 8))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    lengths = rng.integers(0, t_n + 1, s_n)
    block = np.full((s_n, t_n), -1, dtype=np.int64)
    for i, n in enumerate(lengths):
        block[i, :n] = np.sort(rng.integers(0, 3, n))
    src = np.tile(np.arange(t_n), (s_n, 1))
    for i in range(s_n):   # a within-block shuffle of each row (padding stays in place)
        for b in np.unique(block[i]):
            pos = np.flatnonzero(block[i] == b)
            src[i, pos] = rng.permutation(pos)
    kind = draw(st.sampled_from(["within", "any", "repeat"]))
    if kind == "any":
        src = np.stack([rng.permutation(t_n) for _ in range(s_n)])
    elif kind == "repeat":
        src = rng.integers(0, t_n, (s_n, t_n))
    codes = np.where(block >= 0, rng.integers(0, 3, (s_n, t_n)), -1)
    ocodes = np.where(block >= 0, rng.integers(0, 3, (s_n, t_n)), -1)
    return block, src, codes, ocodes, np.where(block >= 0, np.arange(t_n)[None, :], -1)


@settings(max_examples=150, deadline=None)
@given(batches())
def test_shortcut_is_its_definition_and_sufficient(batch: tuple[np.ndarray, ...]) -> None:
    block, src, codes, ocodes, ident = batch
    moves = _moves_within_blocks(src, block)
    assert moves == _plain(src, block)
    rows = np.arange(src.shape[0])[:, None]
    pad = block < 0
    keys, oc, tasks = (np.where(pad, -1, x[rows, src]) for x in (codes, ocodes, ident))
    sizes = (3, src.shape[1], 3, 3)
    for law in _MULTISETS:
        ok = check_law(law, block=block, keys=keys, ocodes=oc, tasks=tasks, ref_keys=codes, ref_ocodes=ocodes,
                       ref_tasks=ident, masked_code=3, sizes=sizes, sources=(src,))
        if moves:
            assert ok.all(), law


def test_out_of_range_sources_do_not_move_within_blocks() -> None:
    block = np.zeros((2, 3), dtype=np.int64)
    assert not _moves_within_blocks(np.array([[0, 1, 3], [0, 1, 2]]), block)
    assert not _moves_within_blocks(np.array([[0, 1, -1], [0, 1, 2]]), block)
    assert _moves_within_blocks(np.array([[2, 1, 0], [0, 1, 2]]), block)
