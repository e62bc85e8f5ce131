"""release_freed_memory: glibc's free heap pages go back to the system (Linux), nothing breaks elsewhere;
configure_process_memory: the console script's allocator settings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from replaylens._memory import PROCESS_ARENAS, _malloc_trim, release_freed_memory


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


def _pool_after_configure(env: dict[str, str], import_first: bool) -> str:
    code = ("import pyarrow as pa\n" if import_first else "") + (
        "from replaylens._memory import configure_process_memory\n"
        "configure_process_memory()\n"
        "import pyarrow as pa\n"
        "pa.array([1, 2, 3])\n"
        "print(pa.default_memory_pool().backend_name)\n")
    clean = {k: v for k, v in os.environ.items() if k not in ("ARROW_DEFAULT_MEMORY_POOL", "MALLOC_ARENA_MAX")}
    out = subprocess.run([sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True,
                         check=True)
    return out.stdout.strip()


@pytest.mark.parametrize("import_first", [False, True])
def test_configured_process_allocates_arrow_from_the_system_heap(import_first: bool) -> None:
    """The console script's process: pyarrow on the system heap, whether or not pyarrow was imported first."""
    assert _pool_after_configure({}, import_first) == "system"


def test_an_explicit_arrow_pool_wins() -> None:
    assert _pool_after_configure({"ARROW_DEFAULT_MEMORY_POOL": "jemalloc"}, False) == "jemalloc"


@pytest.mark.skipif(not sys.platform.startswith("linux") or _malloc_trim() is None, reason="glibc only")
def test_configured_process_keeps_few_heaps() -> None:
    """Eight threads that each allocate and keep 4 MB get at most PROCESS_ARENAS glibc heaps (else one each)."""
    code = (
        "import ctypes, threading\n"
        "from replaylens._memory import configure_process_memory\n"
        "import sys\n"
        "if sys.argv[1] == 'yes':\n"
        "    configure_process_memory()\n"
        "libc = ctypes.CDLL('libc.so.6')\n"
        "libc.malloc.restype = ctypes.c_void_p\n"
        "go = threading.Barrier(8)\n"
        "def work():\n"
        "    go.wait()\n"
        "    for _ in range(2000):\n"
        "        libc.malloc(2048)\n"
        "ts = [threading.Thread(target=work) for _ in range(8)]\n"
        "[t.start() for t in ts]; [t.join() for t in ts]\n"
        "libc.malloc_info(0, ctypes.c_void_p.in_dll(libc, 'stdout'))\n")
    clean = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}

    def heaps(flag: str) -> int:
        out = subprocess.run([sys.executable, "-c", code, flag], env=clean, capture_output=True, text=True,
                             check=True).stdout
        return out.count("<heap nr=")

    assert heaps("yes") <= PROCESS_ARENAS
    assert heaps("no") > PROCESS_ARENAS
