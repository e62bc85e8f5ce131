"""Audit time and peak memory against history size (issue 17), in two shapes.

* ``many``: many short streams (2 blocks x 10 slots = 20 records each);
* ``few``: 16 long streams (records / 16 each).

Each size runs in a fresh child process: it draws the built-in bandit, then times the audit of the
``mean`` rule with the default cells and maps (plan, prepare, replay in memory-sized shards,
read-outs and 2,000-draw intervals).  Peak RSS is the child's ``ru_maxrss`` (input generation
included).  The fitted exponents (slope of log time / log RSS against log records over the sizes
measured) are printed last; 1 means linear.

Run from the repository root::

    python bench/scale.py                         # 1e4 ... 5e6 records (long: tens of minutes, ~8 GB)
    python bench/scale.py --max-records 100000    # quick: 1e4 ... 1e5
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np

SIZES = (10_000, 30_000, 100_000, 300_000, 1_000_000, 2_000_000, 5_000_000)


def child(shape: str, records: int, resamples: int) -> None:
    from replaylens.agents import load_agent
    from replaylens.report import audit
    from replaylens.substrates import make_bandit

    if shape == "many":
        sub = make_bandit(n_streams=max(2, records // 20), slots_per_block=10, n_future=2)
    else:
        sub = make_bandit(n_streams=16, slots_per_block=max(1, records // 32), n_future=2)
    t0 = time.perf_counter()
    res = audit(sub.history, sub.futures, sub.evaluator, load_agent("mean"), n_resamples=resamples)
    wall = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"records": len(sub.history), "decisions": int(res.decisions.actions.size), "wall": wall,
                      "rss": rss}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-records", type=float, default=5e6, help="largest history size to run")
    ap.add_argument("--resamples", type=int, default=2000, help="bootstrap draws per interval")
    ap.add_argument("--child", nargs=2, metavar=("SHAPE", "RECORDS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), args.resamples)
        return 0
    sizes = [n for n in SIZES if n <= args.max_records]
    fits = []
    print(f"{'shape':6} {'records':>9} {'decisions':>11} {'wall s':>8} {'peak RSS MB':>12}")
    for shape in ("many", "few"):
        rows = []
        for n in sizes:
            out = subprocess.run([sys.executable, __file__, "--child", shape, str(n), "--resamples",
                                  str(args.resamples)], capture_output=True, text=True)
            if out.returncode != 0:
                print(f"{shape:6} {n:>9} failed: {out.stderr.strip().splitlines()[-1:]}")
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append(r)
            print(f"{shape:6} {r['records']:>9} {r['decisions']:>11} {r['wall']:>8.2f} {r['rss'] / 2**20:>12.0f}",
                  flush=True)
        if len(rows) >= 2:
            x = np.log([r["records"] for r in rows])
            t_exp = np.polyfit(x, np.log([r["wall"] for r in rows]), 1)[0]
            m_exp = np.polyfit(x, np.log([r["rss"] for r in rows]), 1)[0]
            fits.append(f"{shape}: time exponent {t_exp:.2f}, memory exponent {m_exp:.2f} "
                        f"({rows[0]['records']}..{rows[-1]['records']} records; 1 = linear)")
    for line in fits:
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
