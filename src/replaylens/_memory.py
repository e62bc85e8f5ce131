"""Give memory that the allocators freed but keep back to the operating system, between an audit's phases.

glibc's ``malloc`` keeps freed chunks of the heap for reuse (numpy's mid-sized temporaries land there), and
pyarrow's pool keeps freed pages; neither is reused by the other, so a large audit's peak RSS counted memory
that no array held.  :func:`release_freed_memory` is cheap (milliseconds) and changes no result."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys
from collections.abc import Callable

__all__ = ["release_freed_memory"]


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or ``None`` off glibc (macOS, musl, Windows)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
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
