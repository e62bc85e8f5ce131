"""Audit time and peak memory against history size (issue 17), in two shapes.

* ``many``: many short streams (2 blocks x 10 slots = 20 records each, 12 future tasks: at 10^6 records the
  50,000-stream shape of issue 27);
* ``few``: 16 long streams (records / 16 each).

Each size runs in a fresh child process: it draws the built-in bandit, then times the audit of the
``mean`` rule with the default cells and maps (plan, prepare, replay in memory-sized shards,
read-outs and 20,000-draw intervals, the default).  Peak RSS is the child's ``ru_maxrss`` (input generation
included).  With ``--cli parquet`` (or ``jsonl``) the history, future tasks and utility table are
first written to files of that format by a separate process, then ``replaylens audit`` runs on them
as its own process (reading the files, replaying, writing decisions.parquet and the reports); its
wall time and peak RSS (from ``wait4``) are what is reported.  The fitted exponents (slope of
log time / log RSS against log records over the sizes measured) are printed last; 1 means linear.
The per-size figures are also printed relative to the smallest size of the same run (its baseline).

Run from the repository root::

    python bench/scale.py                         # API, 1e4 ... 5e6 records (long: tens of minutes, ~8 GB)
    python bench/scale.py --max-records 100000    # quick: 1e4 ... 1e5
    python bench/scale.py --cli parquet           # through the command line from Parquet files
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

SIZES = (10_000, 30_000, 100_000, 300_000, 1_000_000, 2_000_000, 5_000_000)


def _substrate(shape: str, records: int):  # type: ignore[no-untyped-def]
    from replaylens.bandit import make_bandit

    if shape == "many":
        return make_bandit(n_streams=max(2, records // 20), slots_per_block=10, n_future=4)
    return make_bandit(n_streams=16, slots_per_block=max(1, records // 32), n_future=4)


def child(shape: str, records: int, resamples: int) -> None:
    from replaylens.agents import load_agent
    from replaylens.report import audit

    sub = _substrate(shape, records)
    t0 = time.perf_counter()
    res = audit(sub.history, sub.futures, sub.evaluator, load_agent("mean"), n_resamples=resamples)
    wall = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"records": len(sub.history), "decisions": int(res.decisions.actions.size), "wall": wall,
                      "rss": rss}))


def write_inputs(shape: str, records: int, fmt: str, folder: str) -> None:
    """Write the bandit's history, future tasks and utility table as ``h.FMT``, ``f.FMT``, ``u.FMT``."""
    from replaylens.records import write_evaluator, write_futures, write_history

    sub = _substrate(shape, records)
    write_history(sub.history, Path(folder, f"h.{fmt}"))
    write_futures(sub.futures, Path(folder, f"f.{fmt}"))
    write_evaluator(sub.evaluator, Path(folder, f"u.{fmt}"))
    print(json.dumps({"records": len(sub.history)}))


def _audit_process(tmp: str, fmt: str, resamples: int, out: Path, src: str | None) -> tuple[float, int]:
    """Wall time and peak RSS of ``replaylens audit`` on ``tmp``'s files (``src``: the source tree to run)."""
    cmd = [sys.executable, "-m", "replaylens", "audit", "--history", f"{tmp}/h.{fmt}",
           "--future", f"{tmp}/f.{fmt}", "--utilities", f"{tmp}/u.{fmt}", "--agent", "mean",
           "--out", str(out), "--resamples", str(resamples), "--quiet"]
    env = dict(os.environ, PYTHONPATH=src) if src else None
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode() if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(err.strip().splitlines()[-1] if err.strip() else f"exit status {status}")
    return wall, usage.ru_maxrss * 1024


def run_cli(shape: str, records: int, fmt: str, resamples: int, against: str | None = None) -> dict[str, Any]:
    """``replaylens audit`` as its own process on files written beforehand: wall time and peak RSS (with
    ``against``, the same audit run by that source tree on the same files just after, and whether its
    decisions.parquet and summary.json match)."""
    import pyarrow.parquet as pq

    with tempfile.TemporaryDirectory(prefix="rl-scale-") as tmp:
        gen = subprocess.run([sys.executable, __file__, "--write", shape, str(records), fmt, tmp],
                             capture_output=True, text=True, check=True)
        n = json.loads(gen.stdout.strip().splitlines()[-1])["records"]
        out = Path(tmp, "out")
        wall, rss = _audit_process(tmp, fmt, resamples, out, None)
        decisions = pq.ParquetFile(out / "decisions.parquet").metadata.num_rows
        row: dict[str, Any] = {"records": n, "decisions": decisions, "wall": wall, "rss": rss}
        if against:
            base = Path(tmp, "base")
            row["base_wall"], row["base_rss"] = _audit_process(tmp, fmt, resamples, base, against)
            row["same"] = outputs_agree(out, base)
    return row


def outputs_agree(out: Path, base: Path) -> bool:
    """Whether the two runs' decisions.parquet and summary.json (timings aside) agree, compared in a child
    process: a 10^6-record decision table read back holds gigabytes, and a parent that grew that large would
    hand its peak RSS to every later child (Linux keeps ``ru_maxrss`` across fork and exec)."""
    got = subprocess.run([sys.executable, __file__, "--same", str(out), str(base)], capture_output=True, text=True,
                         check=True)
    return bool(json.loads(got.stdout.strip().splitlines()[-1]))


def print_whether_same(out: Path, base: Path) -> None:
    """Print whether two audit directories hold the same decisions and summary (the ``--same`` child)."""
    import pyarrow.parquet as pq

    same = (_decision_values(pq.read_table(out / "decisions.parquet"))
            .equals(_decision_values(pq.read_table(base / "decisions.parquet")))
            and _summary_sans_timings(out) == _summary_sans_timings(base))
    print(json.dumps(same))


def _decision_values(table: Any) -> Any:
    """The decision table's values whatever their encoding (labels as plain text or dictionary columns, fields
    optional or required: both layouts hold the same decisions)."""
    import pyarrow as pa

    cols = [c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c for c in table.columns]
    return pa.Table.from_arrays(cols, names=table.column_names)


def _summary_sans_timings(out: Path) -> Any:
    s = json.loads((out / "summary.json").read_text())
    s.pop("timings", None)
    return s


def run_api(shape: str, records: int, resamples: int) -> dict[str, float]:
    out = subprocess.run([sys.executable, __file__, "--child", shape, str(records), "--resamples", str(resamples)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(" ".join(out.stderr.strip().splitlines()[-1:]))
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-records", type=float, default=5e6, help="largest history size to run")
    ap.add_argument("--min-records", type=float, default=0, help="smallest history size to run")
    ap.add_argument("--resamples", type=int, default=20_000, help="bootstrap draws per interval")
    ap.add_argument("--shape", choices=("many", "few", "both"), default="both")
    ap.add_argument("--cli", choices=("parquet", "jsonl"), help="audit through `replaylens audit` from files")
    ap.add_argument("--against", metavar="SRC", help="with --cli: also run the audit from this source tree "
                    "(e.g. another checkout's src/) on the same files, as the in-run baseline")
    ap.add_argument("--child", nargs=2, metavar=("SHAPE", "RECORDS"), help=argparse.SUPPRESS)
    ap.add_argument("--write", nargs=4, metavar=("SHAPE", "RECORDS", "FMT", "DIR"), help=argparse.SUPPRESS)
    ap.add_argument("--same", nargs=2, metavar=("OUT", "BASE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), args.resamples)
        return 0
    if args.same:
        print_whether_same(Path(args.same[0]), Path(args.same[1]))
        return 0
    if args.write:
        write_inputs(args.write[0], int(args.write[1]), args.write[2], args.write[3])
        return 0
    sizes = [n for n in SIZES if args.min_records <= n <= args.max_records]
    shapes = ("many", "few") if args.shape == "both" else (args.shape,)
    mode = f"CLI from {args.cli}" if args.cli else "API"
    print(f"{mode}, {args.resamples}-draw intervals")
    print(f"{'shape':6} {'records':>9} {'decisions':>11} {'wall s':>8} {'peak RSS MB':>12} {'s/record vs first':>18}")
    fits: list[str] = []
    against: list[str] = []
    for shape in shapes:
        rows = []
        for n in sizes:
            try:
                r = (run_cli(shape, n, args.cli, args.resamples, args.against) if args.cli
                     else run_api(shape, n, args.resamples))
            except (RuntimeError, subprocess.CalledProcessError) as exc:
                print(f"{shape:6} {n:>9} failed: {exc}", flush=True)
                continue
            rows.append(r)
            per = (r["wall"] / r["records"]) / (rows[0]["wall"] / rows[0]["records"])
            print(f"{shape:6} {r['records']:>9} {r['decisions']:>11} {r['wall']:>8.2f} {r['rss'] / 2**20:>12.0f} "
                  f"{per:>17.2f}x", flush=True)
            if "base_wall" in r:
                against.append(f"{shape} {r['records']} records: baseline {r['base_wall']:.1f} s, "
                               f"{r['base_rss'] / 2**20:.0f} MB peak; this tree {r['wall']:.1f} s, "
                               f"{r['rss'] / 2**20:.0f} MB: {r['base_wall'] / r['wall']:.2f}x faster, "
                               f"{r['base_rss'] / r['rss']:.2f}x less memory; decisions and summary "
                               f"{'identical' if r['same'] else 'DIFFERENT'}")
        if len(rows) >= 2:
            x = np.log([r["records"] for r in rows])
            t_exp = np.polyfit(x, np.log([r["wall"] for r in rows]), 1)[0]
            m_exp = np.polyfit(x, np.log([r["rss"] for r in rows]), 1)[0]
            fits.append(f"{shape}: time exponent {t_exp:.2f}, memory exponent {m_exp:.2f} "
                        f"({rows[0]['records']}..{rows[-1]['records']} records; 1 = linear)")
    for line in fits + against:   # the in-run comparison, when asked for, is the headline: last
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
