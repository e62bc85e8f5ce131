"""Preservation laws as data, and their vectorized checks.

A law compares a transformed history with the aligned history under the same label map
(ρ acts on producer labels in every cell, so the aligned-at-ρ history is the reference).
Arrays are (H, T): H histories of one stream, T positions in slot order; ``block`` is (T,).
"""

from __future__ import annotations

from enum import Enum

import numpy as np

__all__ = ["Law", "check_law"]


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
    RECORD_COUNT = "record_count"              # the update count per block


def _nan_fill(x: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(x), -1.0, x)


def _sorted_per_block(block: np.ndarray, *cols: np.ndarray) -> tuple[np.ndarray, ...]:
    """Sort each row of the (H, T) columns by (block, cols...) and return the sorted columns."""
    h, t = cols[0].shape
    blk = np.broadcast_to(block, (h, t))
    order = np.lexsort(tuple(reversed(cols)) + (blk,), axis=-1)
    return tuple(np.take_along_axis(c, order, axis=-1) for c in cols)


def check_law(
    law: Law,
    *,
    block: np.ndarray,
    keys: np.ndarray,
    outcomes: np.ndarray,
    tasks: np.ndarray,
    ref_keys: np.ndarray,
    ref_outcomes: np.ndarray,
    ref_tasks: np.ndarray,
    sources: tuple[np.ndarray, ...] = (),
    menu_changed: bool = False,
) -> np.ndarray:
    """Per-history boolean (H,): does each transformed history satisfy ``law``?

    ``sources`` are the (H, T) source-position arrays the cell used (for block membership).
    """
    h = keys.shape[0]
    if law is Law.BLOCK_MEMBERSHIP:
        ok = np.ones(h, dtype=bool)
        for src in sources:
            ok &= np.all(block[src] == block[None, :], axis=-1)
        return ok
    if law is Law.TASK_SLOTS:
        return np.all(tasks == ref_tasks, axis=-1)
    if law is Law.KEY_SEQUENCE:
        return np.all(keys == ref_keys, axis=-1)
    if law is Law.OUTCOME_SEQUENCE:
        return np.all(_nan_fill(outcomes) == _nan_fill(ref_outcomes), axis=-1)
    if law is Law.OUTCOMES_HIDDEN:
        return np.all(np.isnan(outcomes), axis=-1)
    if law is Law.RECORD_COUNT:
        return np.ones(h, dtype=bool) if keys.shape == ref_keys.shape else np.zeros(h, dtype=bool)
    if law is Law.MENU:
        return np.full(h, not menu_changed)
    if law is Law.KEY_MULTISET:
        (a,) = _sorted_per_block(block, keys)
        (b,) = _sorted_per_block(block, ref_keys)
        return np.all(a == b, axis=-1)
    if law is Law.OUTCOME_MULTISET:
        (a,) = _sorted_per_block(block, _nan_fill(outcomes))
        (b,) = _sorted_per_block(block, _nan_fill(ref_outcomes))
        return np.all(a == b, axis=-1)
    if law is Law.PAIR_MULTISET:
        a1, a2 = _sorted_per_block(block, keys.astype(np.float64), _nan_fill(outcomes))
        b1, b2 = _sorted_per_block(block, ref_keys.astype(np.float64), _nan_fill(ref_outcomes))
        return np.all((a1 == b1) & (a2 == b2), axis=-1)
    if law is Law.EVENT_MULTISET:
        a = _sorted_per_block(block, tasks.astype(np.float64), keys.astype(np.float64), _nan_fill(outcomes))
        b = _sorted_per_block(block, ref_tasks.astype(np.float64), ref_keys.astype(np.float64),
                              _nan_fill(ref_outcomes))
        return np.all(np.all([x == y for x, y in zip(a, b, strict=True)], axis=0), axis=-1)
    raise ValueError(f"unknown law {law}")  # pragma: no cover
