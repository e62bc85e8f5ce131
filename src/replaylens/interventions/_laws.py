"""Preservation laws as data, and their exact vectorized checks.

A law compares a transformed history with the aligned history under the same label map (ρ acts
on producer labels in every cell, so aligned-at-ρ is the reference).  Inputs are integer codes
with −1 as padding: keys (S, M, T) or (S, T); outcome codes (S, T) (one code per distinct
utility value, NaN included); task codes (S, T); block (S, T).  Per-block multisets are compared
exactly by sorting combined int64 codes (block, values...) per row.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum

import numpy as np

__all__ = ["Law", "check_law", "check_laws_plain"]


class Law(str, Enum):
    """What a cell leaves unchanged (checked on every transformed history)."""

    BLOCK_MEMBERSHIP = "block_membership"      # every record stays inside its block
    TASK_SLOTS = "task_slots"                  # task input x_t stays at slot t
    KEY_SEQUENCE = "key_sequence"              # key at every slot
    OUTCOME_SEQUENCE = "outcome_sequence"      # outcome at every slot
    KEY_MULTISET = "key_multiset"              # per-block multiset of keys
    OUTCOME_MULTISET = "outcome_multiset"      # per-block multiset of outcomes
    PAIR_MULTISET = "pair_multiset"            # per-block multiset of (key, outcome) pairs
    EVENT_MULTISET = "event_multiset"          # per-block multiset of whole events (task, key, outcome)
    OUTCOMES_HIDDEN = "outcomes_hidden"        # every outcome masked (NaN)
    MENU = "menu"                              # the future menu and binding are unchanged
    RECORD_COUNT = "record_count"              # the number of records (updates) per block


def _comb(*cols: np.ndarray, sizes: tuple[int, ...]) -> np.ndarray:
    """Mixed-radix int64 code of several −1-padded integer columns (broadcast together)."""
    shape = np.broadcast_shapes(*(c.shape for c in cols))
    out = np.zeros(shape, dtype=np.int64)
    for c, size in zip(cols, sizes, strict=True):
        out *= size + 1
        out += c.astype(np.int64, copy=False)
        out += 1
    return out


def _same_multiset(a: np.ndarray, b: np.ndarray, b_sorted: Callable[[], np.ndarray] | None = None) -> np.ndarray:
    """Per row (last axis): do ``a`` and ``b`` hold the same multiset?  Rows equal element by element are;
    only the others are sorted and compared (``b_sorted``, when given, returns ``b`` sorted along its rows)."""
    a, b = np.broadcast_arrays(a, b)
    same = (a == b).all(axis=-1)
    if same.all():
        return same
    rows = np.nonzero(~same)
    other = b_sorted()[rows] if b_sorted is not None and b_sorted().shape == a.shape else np.sort(b[rows], axis=-1)
    same[rows] = (np.sort(a[rows], axis=-1) == other).all(axis=-1)
    return same


def check_law(
    law: Law,
    *,
    block: np.ndarray,
    keys: np.ndarray,
    ocodes: np.ndarray,
    tasks: np.ndarray,
    ref_keys: np.ndarray,
    ref_ocodes: np.ndarray,
    ref_tasks: np.ndarray,
    masked_code: int,
    sizes: tuple[int, int, int, int],
    sources: tuple[np.ndarray, ...] = (),
    menu_changed: bool = False,
    reference: dict[object, np.ndarray] | None = None,
) -> np.ndarray:
    """Does each row satisfy ``law``?  Returns a boolean array over the leading axes of ``keys``.

    ``sizes`` = (n_blocks, n_tasks, n_labels, n_outcome_codes) bound the codes; ``sources`` are the
    (S, T) source-position arrays the cell used (for block membership).  ``reference``, when given,
    keeps the reference side's multiset codes per law (and them sorted) for the next call: pass one dict only to calls
    with the same ``block``, ``ref_*`` arrays, ``sizes`` and ``keys`` shape (the cells of one batch).
    """
    nb, nt, nk, no = sizes
    lead = keys.shape[:-1]
    three = keys.ndim == 3
    blk3 = block[:, None, :] if three else block

    def widen(x: np.ndarray) -> np.ndarray:
        return np.broadcast_to(x[:, None, :], keys.shape) if three and x.ndim == 2 else x

    def per_row(ok: np.ndarray) -> np.ndarray:
        return np.broadcast_to(ok[:, None], lead) if three and ok.ndim == 1 else ok

    def ref(make: Callable[[], np.ndarray]) -> np.ndarray:
        if reference is None:
            return make()
        if law not in reference:
            reference[law] = make()
        return reference[law]

    def ref_sorted() -> np.ndarray:  # only called after ref(...) stored this law's codes
        assert reference is not None
        key = (law, "sorted")
        if key not in reference:
            reference[key] = np.sort(reference[law], axis=-1)
        return reference[key]

    srt = ref_sorted if reference is not None else None

    if law is Law.BLOCK_MEMBERSHIP:
        ok = np.ones(block.shape[0], dtype=bool)
        rows = np.arange(block.shape[0])[:, None]
        for src in {id(x): x for x in sources}.values():  # a source used twice is checked once
            ok &= (block[rows, src] == block).all(axis=-1)
        return per_row(ok)
    if law is Law.TASK_SLOTS:
        return per_row((tasks == ref_tasks).all(axis=-1))
    if law is Law.KEY_SEQUENCE:
        return (keys == ref_keys).all(axis=-1)
    if law is Law.OUTCOME_SEQUENCE:
        return per_row((ocodes == ref_ocodes).all(axis=-1))
    if law is Law.OUTCOMES_HIDDEN:
        return per_row(((ocodes == masked_code) | (block < 0)).all(axis=-1))
    if law is Law.MENU:
        return np.full(lead, not menu_changed)
    if law is Law.RECORD_COUNT:
        return _same_multiset(_comb(blk3, (keys >= 0).astype(np.int64), sizes=(nb, 1)),
                              ref(lambda: _comb(blk3, (ref_keys >= 0).astype(np.int64), sizes=(nb, 1))), srt)
    if law is Law.KEY_MULTISET:
        return _same_multiset(_comb(blk3, keys, sizes=(nb, nk)), ref(lambda: _comb(blk3, ref_keys, sizes=(nb, nk))),
                              srt)
    if law is Law.OUTCOME_MULTISET:
        return per_row(_same_multiset(_comb(block, ocodes, sizes=(nb, no)),
                                      ref(lambda: _comb(block, ref_ocodes, sizes=(nb, no))), srt))
    if law is Law.PAIR_MULTISET:
        return _same_multiset(_comb(blk3, keys, widen(ocodes), sizes=(nb, nk, no)),
                              ref(lambda: _comb(blk3, ref_keys, widen(ref_ocodes), sizes=(nb, nk, no))), srt)
    if law is Law.EVENT_MULTISET:
        return _same_multiset(_comb(blk3, widen(tasks), keys, widen(ocodes), sizes=(nb, nt, nk, no)),
                              ref(lambda: _comb(blk3, widen(ref_tasks), ref_keys, widen(ref_ocodes),
                                                sizes=(nb, nt, nk, no))), srt)
    raise ValueError(f"unknown law {law}")  # pragma: no cover


def check_laws_plain(
    laws: frozenset[Law] | set[Law],
    *,
    block: list[int],
    keys: list[int],
    outcomes: list[float],
    tasks: list[int],
    ref_keys: list[int],
    ref_outcomes: list[float],
    sources: list[list[int]],
    menu_changed: bool,
) -> Law | None:
    """Plain per-record check of one transformed history (the reference path's independent checker).

    Returns the first violated law, or None.  NaN outcomes compare equal to each other.
    """
    from collections import Counter

    def nk(u: float) -> object:
        return "nan" if u != u else u

    n = len(keys)
    ref_tasks = list(range(n))
    for law in sorted(laws, key=lambda x: x.value):
        if law is Law.BLOCK_MEMBERSHIP:
            ok = all(block[src[t]] == block[t] for src in sources for t in range(n))
        elif law is Law.TASK_SLOTS:
            ok = tasks == ref_tasks
        elif law is Law.KEY_SEQUENCE:
            ok = keys == ref_keys
        elif law is Law.OUTCOME_SEQUENCE:
            ok = [nk(u) for u in outcomes] == [nk(u) for u in ref_outcomes]
        elif law is Law.OUTCOMES_HIDDEN:
            ok = all(u != u for u in outcomes)
        elif law is Law.MENU:
            ok = not menu_changed
        elif law is Law.RECORD_COUNT:
            ok = len(keys) == len(ref_keys) == len(outcomes) and all(isinstance(k, int) and k >= 0 for k in keys)
        elif law is Law.KEY_MULTISET:
            ok = Counter(zip(block, keys, strict=True)) == Counter(zip(block, ref_keys, strict=True))
        elif law is Law.OUTCOME_MULTISET:
            ok = Counter((b, nk(u)) for b, u in zip(block, outcomes, strict=True)) == \
                Counter((b, nk(u)) for b, u in zip(block, ref_outcomes, strict=True))
        elif law is Law.PAIR_MULTISET:
            ok = Counter((b, k, nk(u)) for b, k, u in zip(block, keys, outcomes, strict=True)) == \
                Counter((b, k, nk(u)) for b, k, u in zip(block, ref_keys, ref_outcomes, strict=True))
        elif law is Law.EVENT_MULTISET:
            ok = Counter((b, x, k, nk(u)) for b, x, k, u in zip(block, tasks, keys, outcomes, strict=True)) == \
                Counter((b, x, k, nk(u)) for b, x, k, u in zip(block, ref_tasks, ref_keys, ref_outcomes,
                                                                strict=True))
        else:  # pragma: no cover
            raise ValueError(f"unknown law {law}")
        if not ok:
            return law
    return None
