"""Private: compiled inner loops through numba (the optional ``fast`` extra), shared by every layer that has one.

A loop is plain Python over numpy arrays; :func:`compiled` hands back its numba-compiled form (no GIL, cached on
disk beside the module) or ``None`` where numba is missing or cannot compile it, and the caller then keeps its
numpy path.  Every compiled loop reproduces its numpy path's bytes (each has a test that says so); numba only
changes how fast, so whether it is installed never changes a result.

Importing numba costs about 0.8 s and 0.12 GB resident, so callers use a loop only for work that pays for
that (:func:`worth_it`), or once numba is loaded anyway.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["compiled", "loaded", "preload", "worth_it"]

_DONE: dict[Callable[..., Any], Callable[..., Any] | None] = {}
_LOCK = threading.Lock()  # one compile per loop, whichever thread asks first


def compiled(loop: Callable[..., Any], probe: Callable[[Callable[..., Any]], object]) -> Callable[..., Any] | None:
    """``loop`` compiled by numba (``nogil``, cached), checked by calling ``probe(compiled_loop)`` once; ``None``
    where numba is not installed or the compile or the probe fails.  Memoized per loop."""
    with _LOCK:
        if loop not in _DONE:
            _DONE[loop] = _compile(loop, probe)
        return _DONE[loop]


def _compile(loop: Callable[..., Any], probe: Callable[[Callable[..., Any]], object]) -> Callable[..., Any] | None:
    fn: Callable[..., Any] | None = None
    try:  # imported by name: numba ships no type information
        numba: Any = importlib.import_module("numba")
    except ImportError:
        numba = None
    if numba is not None:
        try:
            fn = numba.njit(nogil=True, cache=True)(loop)
            probe(fn)
        except Exception:  # a numba that cannot compile here: keep the numpy path
            fn = None
    return fn


def loaded() -> bool:
    """Whether numba is imported in this process (its cost is paid)."""
    return "numba" in sys.modules


def preload() -> None:
    """Import numba now, where installed (a large run's callers then use their compiled loops)."""
    with contextlib.suppress(ImportError):
        importlib.import_module("numba")


def worth_it(work: int, threshold: int) -> bool:
    """Whether a compiled loop should be used for ``work`` units: at least ``threshold`` of them, or numba is
    already imported."""
    return work >= threshold or loaded()
