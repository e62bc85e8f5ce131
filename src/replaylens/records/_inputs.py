"""An audit's three input files read on two threads, their content fingerprints taken on two more beside the
reads (issue 27).

An audit asks for the history's, the future tasks' and the utility table's fingerprints (the run's identity, the
journal key, the manifest) before its replay starts.  Taking each one while the next file is read overlaps work
that is mostly outside the GIL (pyarrow's decoding and string kernels, sha256 over large buffers); the values are
kept per object (:func:`~replaylens.records._memo.memoized`), so whoever asks first waits for the thread's value
instead of hashing twice, and a fingerprint that failed on the thread is computed again (and its error raised)
where it is asked.  The history is read on a thread of its own while the caller's thread reads the utility table
and the future tasks; the first bad file in argument order is the one reported, as without the threads.
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
    """``(read_history(history), read_futures(futures), read_evaluator(utilities))``: the history read on a
    thread while this one reads the utilities and the future tasks, the fingerprints taken on two other threads
    beside the reads (the same objects, values and first error, in argument order, as reading them one by one)."""
    # two hashing threads: the history's and the future tasks' hashes need not wait for the utility table's (the
    # longest), and the caller, done reading, waits for the last of them before its replay (issue 27, session 19)
    pool = ThreadPoolExecutor(2, thread_name_prefix="replaylens-fingerprint")
    reader = ThreadPoolExecutor(1, thread_name_prefix="replaylens-read")
    try:
        # the history on its own thread (pyarrow's decoding and string kernels release the GIL); here the
        # utilities first: theirs is the longest hash, taken beside the two other reads.  Errors are raised in
        # argument order once every read has ended: the first bad file is the one named
        def history_then_hash() -> History:   # its hash queued as soon as it is read
            got = read_history(history)
            pool.submit(got.fingerprint)
            return got

        reading = reader.submit(history_then_hash)
        late: dict[str, Exception] = {}
        e: Evaluator | None = None
        f: FutureTasks | None = None
        try:
            e = read_evaluator(utilities)
            pool.submit(e.fingerprint)
        except Exception as exc:
            late["utilities"] = exc
        try:
            f = read_futures(futures)
            pool.submit(f.fingerprint)
        except Exception as exc:
            late["futures"] = exc
        h = reading.result()   # (the history's error, if it had one: the first in argument order)
        for name in ("futures", "utilities"):
            if name in late:
                raise late[name]
        assert e is not None and f is not None
    except BaseException:
        reader.shutdown(wait=True, cancel_futures=True)   # no read is left running past the error
        pool.shutdown(wait=False, cancel_futures=True)    # a read failed: what has not started is dropped
        raise
    reader.shutdown(wait=True)
    # the queued hashes go on beside the caller's next steps (whoever asks for one waits for it: memoized)
    pool.shutdown(wait=False)
    return h, f, e
