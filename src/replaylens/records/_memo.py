"""Results computed once per immutable input object (content fingerprints, a passed cross-check).

``History``, ``FutureTasks`` and a file-read ``Evaluator`` (its :class:`CodedTable`) are immutable values, so a
pass over their content (a fingerprint, :func:`check_inputs`) gives the same answer every time it is asked.  An
audit asks several times (planning, preparing the replay, the run manifest); the answer is kept here, keyed by
the object itself (weakly: it goes when the object goes), never by its id.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["memoized", "passed", "remember_passed"]

_lock = threading.Lock()
_values: weakref.WeakKeyDictionary[object, dict[str, Any]] = weakref.WeakKeyDictionary()
_computing: weakref.WeakKeyDictionary[object, dict[str, threading.Lock]] = weakref.WeakKeyDictionary()


def memoized(obj: object, name: str, compute: Callable[[], Any]) -> Any:
    """``compute()`` the first time ``(obj, name)`` is asked, the kept value after.  A second thread asking
    while the first computes waits for its value (one pass, not two); a failed computation is not kept."""
    with _lock:
        slot = _values.get(obj)
        if slot is not None and name in slot:
            return slot[name]
        gate = _computing.setdefault(obj, {}).setdefault(name, threading.Lock())
    with gate:   # one computation per (obj, name) at a time; the others then find its value
        with _lock:
            slot = _values.get(obj)
            if slot is not None and name in slot:
                return slot[name]
        value = compute()
        with _lock:
            _values.setdefault(obj, {})[name] = value
            _computing.get(obj, {}).pop(name, None)
        return value


def passed(obj: object, name: str, others: tuple[object, ...]) -> bool:
    """Whether a check ``name`` on ``obj`` with exactly these other objects (compared by identity) passed."""
    with _lock:
        slot = _values.get(obj)
        kept = [] if slot is None else slot.get(name, [])
        return any(len(refs) == len(others) and all(r() is o for r, o in zip(refs, others, strict=True))
                   for refs in kept)


def remember_passed(obj: object, name: str, others: tuple[object, ...]) -> None:
    """Record that check ``name`` on ``obj`` with ``others`` (weakly referenced objects) passed."""
    refs = tuple(weakref.ref(o) for o in others)
    with _lock:
        _values.setdefault(obj, {}).setdefault(name, []).append(refs)
