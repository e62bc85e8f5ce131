"""release_freed_memory: glibc's free heap pages go back to the system (Linux), nothing breaks elsewhere."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from replaylens._memory import _malloc_trim, release_freed_memory


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not sys.platform.startswith("linux") or _malloc_trim() is None, reason="glibc only")
def test_freed_heap_pages_are_returned() -> None:
    release_freed_memory()
    # 1,500 arrays of 100 kB (below glibc's mmap threshold: they live on the heap), touched; the last one kept,
    # so the freed ones sit below the heap's top and glibc would keep them
    chunks = [np.ones(12_500) for _ in range(1_500)]
    keep = chunks[-1]
    before = _rss_mb()
    del chunks
    held = _rss_mb()
    release_freed_memory()
    after = _rss_mb()
    assert keep.sum() == 12_500
    assert held > before - 50          # freeing alone returned (almost) nothing
    assert after < held - 100          # the release gave back most of the ~150 MB


def test_release_is_harmless_without_pyarrow_or_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "pyarrow", raising=False)
    monkeypatch.setattr("replaylens._memory._malloc_trim", lambda: None)
    release_freed_memory()   # nothing to do: returns without error
    assert "pyarrow" not in sys.modules
