"""Give memory that the allocators freed but keep back to the operating system, between an audit's phases, and
configure the allocators of a process that runs audits (:func:`configure_process_memory`).

glibc's ``malloc`` keeps freed chunks of the heap for reuse (numpy's mid-sized temporaries land there), and
pyarrow's pool keeps freed pages; neither is reused by the other, so a large audit's peak RSS counted memory
that no array held.  :func:`release_freed_memory` is cheap (milliseconds) and changes no result."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import sys
from collections.abc import Callable

__all__ = ["configure_process_memory", "release_freed_memory"]

#: glibc ``mallopt`` parameter number of ``M_ARENA_MAX`` (malloc.h)
_M_ARENA_MAX = -8
#: heaps glibc may keep for the process's threads (its default is 8 a core)
PROCESS_ARENAS = 2


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """The C library on glibc Linux, else ``None`` (macOS, musl, Windows: nothing is tuned there)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


def configure_process_memory() -> None:
    """Allocator settings for a process that runs audits (the console script calls it first; a library caller
    may): glibc keeps at most :data:`PROCESS_ARENAS` heaps instead of 8 a core (each thread that allocates,
    writer, report and resampling threads included, otherwise gets a heap of its own, and each keeps what its
    thread freed), and pyarrow allocates from the system heap instead of its own mimalloc pool (which kept the
    pages of the read inputs for the rest of the run).  An explicit ``MALLOC_ARENA_MAX`` or
    ``ARROW_DEFAULT_MEMORY_POOL`` in the environment wins.  Changes no result: on the 10^6-record audit,
    about 0.1 GiB less peak memory at the same speed (docs/scaling.md)."""
    mallopt = getattr(_libc(), "mallopt", None)
    if mallopt is not None and "MALLOC_ARENA_MAX" not in os.environ:
        mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        mallopt(_M_ARENA_MAX, PROCESS_ARENAS)
    if "ARROW_DEFAULT_MEMORY_POOL" not in os.environ:
        pa = sys.modules.get("pyarrow")
        if pa is None:   # read when pyarrow makes its pool: before the first allocation
            os.environ["ARROW_DEFAULT_MEMORY_POOL"] = "system"
        else:
            pa.set_memory_pool(pa.system_memory_pool())


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or ``None`` off glibc (macOS, musl, Windows)."""
    trim = getattr(_libc(), "malloc_trim", None)
    if trim is None:
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def release_freed_memory() -> None:
    """Return pyarrow's unused pool pages (when pyarrow is loaded) and glibc's free heap pages to the system."""
    pa = sys.modules.get("pyarrow")
    if pa is not None:
        pa.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
