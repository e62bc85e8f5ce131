"""Private: compiled inner loops through numba (the optional ``fast`` extra), shared by every layer that has one.

A loop is plain Python over numpy arrays; :func:`compiled` hands back its numba-compiled form (no GIL, cached on
disk beside the module) or ``None`` where numba is missing or cannot compile it, and the caller then keeps its
numpy path.  Every compiled loop reproduces its numpy path's bytes (each has a test that says so); numba only
changes how fast, so whether it is installed never changes a result.

Loading numba costs about 1.4 s (import, then LLVM starting on the first compiled loop) and 0.1 GB resident,
so callers use a loop only for work that pays for that (:func:`worth_it`), or once numba is loaded anyway
(:func:`preload_for` loads it on a thread of its own for a large run).
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["LARGE_RUN_DECISIONS", "compiled", "loaded", "preload_for", "worth_it"]

#: from this many decisions a run loads numba where installed (about 1.4 s on a thread of its own, paid back
#: by the compiled slot draws and statistics of such a run; the results are the same either way)
LARGE_RUN_DECISIONS = 1 << 24

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


def _noop(x: int) -> int:
    return x + 1


def _load() -> None:
    """Import numba and bring up its compiler (the first compiled loop costs about 0.9 s: LLVM starts)."""
    with contextlib.suppress(Exception):
        compiled(_noop, lambda fn: fn(1))


def preload_for(decisions: int) -> threading.Thread | None:
    """For a run of ``decisions`` (at least :data:`LARGE_RUN_DECISIONS`), load numba on a daemon thread now,
    beside the run's other work, so its compiled loops are ready when the run reaches them; else nothing."""
    if decisions < LARGE_RUN_DECISIONS or loaded():
        return None
    thread = threading.Thread(target=_load, name="replaylens-numba", daemon=True)
    thread.start()
    return thread


def worth_it(work: int, threshold: int) -> bool:
    """Whether a compiled loop should be used for ``work`` units: at least ``threshold`` of them, or numba is
    already imported."""
    return work >= threshold or loaded()
