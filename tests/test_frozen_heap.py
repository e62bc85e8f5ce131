"""FrozenHeap (replaylens._gc): what a run holds is left out of the collector's passes while it runs, handed
back afterwards; a caller's own freeze is left alone; nested and concurrent runs unfreeze once, at the last."""

from __future__ import annotations

import gc
import weakref

import pytest

from replaylens._gc import FrozenHeap


class _Node:
    def __init__(self) -> None:
        self.me = self   # a reference cycle: only the cyclic collector frees it


@pytest.fixture(autouse=True)
def _nothing_frozen() -> None:
    gc.unfreeze()


def test_the_heap_is_frozen_inside_and_handed_back_after() -> None:
    before = _Node()
    with FrozenHeap() as heap:
        assert gc.get_freeze_count() > 0
        frozen = gc.get_freeze_count()
        later = _Node()
        heap.freeze()   # a later point: what the run made since is frozen too
        assert gc.get_freeze_count() > frozen
        ref = weakref.ref(later)
        del later
        gc.collect()
        assert ref() is not None   # frozen cyclic garbage waits for the end of the run
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert ref() is None   # and is collected once handed back
    assert before.me is before


def test_nested_runs_unfreeze_once_at_the_outermost_exit() -> None:
    with FrozenHeap():
        with FrozenHeap() as inner:
            inner.freeze()
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0


def test_a_callers_own_freeze_is_left_alone() -> None:
    gc.freeze()
    theirs = gc.get_freeze_count()
    with FrozenHeap() as heap:
        _Node()
        heap.freeze()
        assert gc.get_freeze_count() == theirs
    assert gc.get_freeze_count() == theirs
    gc.unfreeze()
