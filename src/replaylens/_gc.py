"""Keep the cyclic garbage collector's passes off what an audit holds for its whole run (issue 27).

CPython's collector walks every tracked object of a generation when it runs; a full pass over an audit's
heap (the imported modules, the read inputs, the prepared streams: about 240,000 objects at 10^6 records)
costs about 0.2 s, and a 10^6-record audit made six of them (about 1 s of CPU in all, with the younger
generations' passes).  :class:`FrozenHeap` moves what is alive at each of its points into the collector's
permanent generation (:func:`gc.freeze`), so the passes that follow walk only what the run made since; at
the end everything is handed back (:func:`gc.unfreeze`) and collected as before.  Reference counting is
untouched: an object freed by it is freed at once, frozen or not.  Changes no result.
"""

from __future__ import annotations

import gc
import threading
from types import TracebackType

__all__ = ["FrozenHeap"]

_LOCK = threading.Lock()
_HOLDERS = 0   # runs of this process inside a FrozenHeap (nested or on other threads)


class FrozenHeap:
    """``with FrozenHeap() as heap:`` freezes what is alive now, ``heap.freeze()`` what is alive at a later
    point; on exit the frozen objects go back to the collector.  Does nothing where the caller froze objects
    of its own first (a server that forks after :func:`gc.freeze`: theirs to manage), and the unfreeze waits
    for the last of concurrent runs."""

    def __init__(self) -> None:
        self._active = False

    def __enter__(self) -> FrozenHeap:
        global _HOLDERS
        with _LOCK:
            self._active = _HOLDERS > 0 or gc.get_freeze_count() == 0
            if self._active:
                _HOLDERS += 1
        self.freeze()
        return self

    def freeze(self) -> None:
        """Freeze what is alive now (the run's inputs, prepared streams, ...)."""
        if self._active:
            gc.freeze()

    def __exit__(self, et: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        global _HOLDERS
        if not self._active:
            return
        with _LOCK:
            _HOLDERS -= 1
            if _HOLDERS == 0:
                gc.unfreeze()
        self._active = False
