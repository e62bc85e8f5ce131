"""Reading, cross-checking and fingerprinting an audit's three input files (issue 27, io), against a baseline tree.

Each tree runs in its own process on the same files: ``read_history``, ``read_futures``, ``read_evaluator``,
``check_inputs(strict=True)`` and the three content fingerprints (what ``replaylens audit`` does before and
after the replay besides replaying, writing and statistics), each step timed (wall clock and the process's CPU
time, all threads), with the process's peak RSS.  ``--repeat N`` runs the two trees N times, alternating, and
keeps each step's least time (a shared host's load only ever adds time).  The fingerprints must agree between
the trees.  The ratios (baseline / this tree) of the totals are printed last, CPU time last of all.

Run from the repository root, on files written by ``bench/scale.py --write many N parquet DIR``::

    python bench/inputs.py DIR --against /path/to/other/checkout/src [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

STEPS = ("read_history", "read_futures", "read_evaluator", "check_inputs", "fingerprints")


def child(folder: str) -> None:
    import resource
    import time

    import pyarrow.compute
    import pyarrow.parquet

    from replaylens.records import check_inputs, read_evaluator, read_futures, read_history

    del pyarrow  # imported before the timings (the same for both trees), not used here

    times: dict[str, float] = {}
    cpu: dict[str, float] = {}

    def timed(name: str, fn, *args, **kw):  # type: ignore[no-untyped-def]
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn(*args, **kw)
        times[name], cpu[name] = time.perf_counter() - t0, time.process_time() - c0
        return out

    d = Path(folder)
    h = timed("read_history", read_history, d / "h.parquet")
    f = timed("read_futures", read_futures, d / "f.parquet")
    e = timed("read_evaluator", read_evaluator, d / "u.parquet")
    timed("check_inputs", check_inputs, h, f, e, strict=True)
    prints = timed("fingerprints", lambda: [h.fingerprint(), f.fingerprint(), e.fingerprint()])
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"times": times, "cpu": cpu, "prints": prints, "rss": rss, "records": len(h)}))


def run(folder: str, src: str | None) -> dict[str, object]:
    env = dict(os.environ, PYTHONPATH=src) if src else None
    out = subprocess.run([sys.executable, __file__, folder, "--child"], capture_output=True, text=True, env=env,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", help="folder with h.parquet, f.parquet, u.parquet")
    ap.add_argument("--against", metavar="SRC", required="--child" not in sys.argv,
                    help="the baseline source tree (another checkout's src/)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each tree, alternating (least time kept)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.folder)
        return 0
    news, bases = [], []
    for _ in range(max(args.repeat, 1)):
        news.append(run(args.folder, None))
        bases.append(run(args.folder, args.against))

    def least(runs: list[dict[str, object]], key: str) -> dict[str, float]:
        return {s: min(float(r[key][s]) for r in runs) for s in STEPS}  # type: ignore[index]

    nt, bt, nc, bc = least(news, "times"), least(bases, "times"), least(news, "cpu"), least(bases, "cpu")
    print(f"{'step':16} {'baseline s':>11} {'this tree s':>12} {'ratio':>7}   {'baseline cpu':>12} "
          f"{'this tree cpu':>13} {'ratio':>7}")
    for step in STEPS:
        print(f"{step:16} {bt[step]:>11.2f} {nt[step]:>12.2f} {bt[step] / nt[step]:>6.1f}x   {bc[step]:>12.2f} "
              f"{nc[step]:>13.2f} {bc[step] / nc[step]:>6.1f}x")
    same = all(r["prints"] == bases[0]["prints"] for r in news + bases)
    rss_n, rss_b = min(int(str(r["rss"])) for r in news), min(int(str(r["rss"])) for r in bases)
    print(f"peak RSS: baseline {rss_b / 2**20:.0f} MB, this tree {rss_n / 2**20:.0f} MB; "
          f"fingerprints {'identical' if same else 'DIFFERENT'}")
    b, n = sum(bt.values()), sum(nt.values())
    print(f"{news[0]['records']} records, reading + checking + fingerprints, wall clock: baseline {b:.1f} s, "
          f"this tree {n:.1f} s: {b / n:.2f}x")
    b, n = sum(bc.values()), sum(nc.values())
    print(f"{news[0]['records']} records, reading + checking + fingerprints, CPU time: baseline {b:.1f} s, "
          f"this tree {n:.1f} s: {b / n:.2f}x")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
