"""An audit's three input files read in order, each one's content fingerprint taken on a thread beside the next
read (issue 27).

An audit asks for the history's, the future tasks' and the utility table's fingerprints (the run's identity, the
journal key, the manifest) before its replay starts.  Taking each one while the next file is read overlaps work
that is mostly outside the GIL (pyarrow's decoding and string kernels, sha256 over large buffers); the values are
kept per object (:func:`~replaylens.records._memo.memoized`), so whoever asks first waits for the thread's value
instead of hashing twice, and a fingerprint that failed on the thread is computed again (and its error raised)
where it is asked.  The files are read, and their errors reported, in the same order as without it.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

from ._futures import FutureTasks
from ._history import Evaluator, History
from ._io import read_evaluator, read_futures, read_history

__all__ = ["read_inputs"]


def read_inputs(history: str | os.PathLike[str], futures: str | os.PathLike[str],
                utilities: str | os.PathLike[str]) -> tuple[History, FutureTasks, Evaluator]:
    """``(read_history(history), read_futures(futures), read_evaluator(utilities))``, the fingerprints taken
    on one thread beside the reads (the same objects, values and first error as reading them one by one)."""
    pool = ThreadPoolExecutor(1, thread_name_prefix="replaylens-fingerprint")
    try:
        # the utilities first: theirs is the longest hash, taken beside the two other reads; a bad utility file
        # is reported once the others are read, so the first bad file in argument order is the one named
        e: Evaluator | None = None
        late: Exception | None = None
        try:
            e = read_evaluator(utilities)
            pool.submit(e.fingerprint)
        except Exception as exc:
            late = exc
        h = read_history(history)
        pool.submit(h.fingerprint)
        f = read_futures(futures)
        pool.submit(f.fingerprint)
        if late is not None:
            raise late
        assert e is not None
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)   # a read failed: what has not started is dropped
        raise
    # the queued hashes go on beside the caller's next steps (whoever asks for one waits for it: memoized)
    pool.shutdown(wait=False)
    return h, f, e
