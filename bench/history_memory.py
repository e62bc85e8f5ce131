"""Bytes a history holds for its text columns: fixed-width numpy text vs (vocab, codes) (issue 27, goal 2).

One run, one history: for each text column (stream, family, context, task, key) the bytes the fixed-width
layout held (``vocab[codes]`` decoded, numpy ``<U``: 4 bytes a character of the longest value, every row) —
the in-run baseline — against what the history holds (its distinct values, as bytes when ASCII, plus an
int32 code per row); then the read's time and the resident-memory growth it left.  The headline (the ratio of
the text bytes) is last.

Run from the repository root::

    python bench/history_memory.py                       # a generated 10^6-record, 50,000-stream history
    python bench/history_memory.py --history h.parquet   # any history file
    python bench/history_memory.py --records 100000      # a smaller generated one
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        return int(f.read().split("VmRSS:")[1].split()[0]) / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--history", help="a history file (default: a generated bandit history, written as Parquet)")
    ap.add_argument("--records", type=int, default=1_000_000, help="records of the generated history")
    args = ap.parse_args()

    import pyarrow.parquet  # noqa: F401  (imported before the read, so its import is not counted)

    from replaylens.records import read_history, write_history

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.history) if args.history else Path(tmp) / "h.parquet"
        if not args.history:
            from replaylens.bandit import make_bandit

            sub = make_bandit(n_streams=max(2, args.records // 20), slots_per_block=10, n_future=4)
            write_history(sub.history, path)
            del sub
        before = _rss_mb()
        t0 = time.perf_counter()
        h = read_history(path)
        took = time.perf_counter() - t0
        grew = _rss_mb() - before
    print(f"{len(h)} records, {len(h.streams)} streams ({path.name}); read in {took:.2f} s, "
          f"resident memory +{grew:.0f} MB after the read")
    print(f"{'column':8} {'distinct':>9} {'fixed-width MB':>15} {'coded MB':>9} {'ratio':>7}")
    fixed_total = coded_total = 0
    for name in ("stream", "family", "context", "task", "key"):
        distinct = h.text_codes(name)[0].size
        fixed = h.text(name).nbytes          # the fixed-width layout's column, decoded here (one at a time)
        coded = h.held_nbytes(name)          # as held: vocab (an ASCII one as bytes) + int32 codes
        fixed_total, coded_total = fixed_total + fixed, coded_total + coded
        print(f"{name:8} {distinct:>9} {fixed / 1e6:>15.1f} {coded / 1e6:>9.1f} {fixed / coded:>6.1f}x")
    print(f"history text columns held: fixed-width {fixed_total / 1e6:.0f} MB, coded {coded_total / 1e6:.0f} MB: "
          f"{fixed_total / coded_total:.1f}x less")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
