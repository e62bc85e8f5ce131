"""Calibration of the audit's verdicts (issue 47): false alarms, coverage, power and repeatability, by simulation.

Design (Morris, White & Crowther 2019, ADEMP):

* **Data**: the built-in 4-arm bandit, drawn anew for every replicate (``make_bandit(n_streams=S, n_future=8,
  rng=derive_seed(seed, "bench-verdicts", "bandit", S, i))``) at S = 4, 8, 16 and 48 streams; each replicate's
  audit seed is derived from the same names (never positions in a list).
* **Agents with known responses** (:mod:`replaylens.testing._calibration`): an epsilon-greedy mean learner
  (epsilon 0.2; exactly invariant to ``pair`` and ``reorder``), and a visibility-shift agent that is a sharp null
  for ``value``, ``pair``, ``reorder`` and ``key_slot`` and moves ``delta`` of probability under ``mask``
  (true ``T_gr = delta²``: 0, 2, 5 and 10 pp).  Two repeats (T_gr), independent generators, maps ``id``.
* **Estimands and methods**: the product's verdicts (census for deterministic agents -- exact, not simulated;
  Student t with S - 1 df on the per-stream values, Holm over the declared family, SAFE by the shown interval)
  and the shown intervals (Student t at 95 %); beside them main's earlier rule (percentile bootstrap, "lower bound
  > margin" per cell, no correction), on the same data (common random numbers).
* **Performance measures** with Monte Carlo standard errors / exact Clopper-Pearson intervals: family-wise
  false-alarm rate (any declared invariant cell UNSAFE) at margin 0 and at the default margin; coverage of the
  T_gr, ΔU and ΔO intervals; bias of T_gr under the null; power (UNSAFE at margin 0 and 0.05; SAFE at the
  default margin under the null); repeatability (the same audit twice: the same verdict bytes) and each store
  backend's verdict over 10 identical runs (``bench/verdicts_stores.py``).

Targets: false alarms <= 5 % (95 % level) at every S; coverage 93-97 % from 8 streams.  The headline is last.

Run from the repository root (about 15-25 minutes on 2 cores at the defaults)::

    python bench/verdicts.py                       # 500 null replicates, 200 per response, S = 4, 8, 16, 48
    python bench/verdicts.py --reps 60 --power-reps 30 --streams 4,8   # smoke run
    python bench/verdicts.py --json verdicts.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from replaylens.bandit import make_bandit
from replaylens.inference import mean_inference
from replaylens.report import Expectation, JudgeContext, audit, judge_rows
from replaylens.rng import derive_seed
from replaylens.testing._calibration import epsilon_greedy, fmt_rate, rate, visibility_shift

LEVEL = 0.95
NULL_CELLS = {"epsilon-greedy": ("pair", "reorder"), "blind": ("value", "pair", "reorder", "key_slot", "mask")}
RESPONSES = {0.02: math.sqrt(0.02), 0.05: math.sqrt(0.05), 0.10: math.sqrt(0.10)}   # true T_gr -> delta
COLUMNS = ("action", "delta_utility", "delta_oracle")


def _rows(res: Any) -> dict[str, dict[str, Any]]:
    return {r["cell"]: r for r in res.summary()["rows"]}


def _judge(rows: dict[str, dict[str, Any]], cells: Sequence[str], margin: float | None) -> list[str]:
    exps = [Expectation(c, "invariant", margin) for c in cells]
    return [j.status for j in judge_rows([rows[c] for c in cells], exps, JudgeContext(level=LEVEL))]


def _old_rule(rows: dict[str, dict[str, Any]], cells: Sequence[str]) -> bool:
    """main's earlier gate (before issue 47): a cell fails when its 95 % percentile-bootstrap lower bound > 0."""
    return any((rows[c]["bootstrap_ci"]["action"][0] or 0.0) > 0.0 for c in cells)


def _interval_record(row: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k in COLUMNS:
        ci = row[f"{k}_ci"] if k != "action" else row["action_ci"]
        out[k] = {"est": row[k], "t": ci, "boot": row["bootstrap_ci"][k]}
    return out


def replicate(task: tuple[int, int, int, bool]) -> dict[str, Any]:
    """One replicate at ``n_streams``: the null audits (and, when ``power``, one audit per known response)."""
    n_streams, i, seed, power = task
    sub = make_bandit(n_streams=n_streams, n_future=8, rng=derive_seed(seed, "bench-verdicts", "bandit", n_streams, i))
    aseed = int(derive_seed(seed, "bench-verdicts", "audit", n_streams, i).generate_state(1)[0])
    out: dict[str, Any] = {"S": n_streams, "i": i, "null": {}, "power": {}}
    for name, agent in (("epsilon-greedy", epsilon_greedy(0.2)), ("blind", visibility_shift(0.0))):
        cells = NULL_CELLS[name]
        res = audit(sub.history, sub.futures, sub.evaluator, agent, cells=",".join(cells), maps="id", repeats=2,
                    seed=aseed, n_resamples=2000, level=LEVEL)
        rows = _rows(res)
        out["null"][name] = {"v0": _judge(rows, cells, 0.0), "vdef": _judge(rows, cells, None),
                             "old": _old_rule(rows, cells), "rows": {c: _interval_record(rows[c]) for c in cells}}
    if power:
        for target, delta in RESPONSES.items():
            res = audit(sub.history, sub.futures, sub.evaluator, visibility_shift(delta), cells="mask", maps="id",
                        repeats=2, seed=aseed, n_resamples=2000, level=LEVEL)
            rows = _rows(res)
            out["power"][str(target)] = {"v0": _judge(rows, ["mask"], 0.0)[0],
                                         "vdef": _judge(rows, ["mask"], None)[0],
                                         "old": _old_rule(rows, ["mask"]), "row": _interval_record(rows["mask"])}
    return out


# ------------------------------------------------------------------ summaries

def _covers(ci: Sequence[float | None], truth: float) -> bool:
    lo, hi = (math.nan if v is None else float(v) for v in ci)
    return lo <= truth <= hi


def summarize(results: list[dict[str, Any]], streams: Sequence[int]) -> dict[str, Any]:
    doc: dict[str, Any] = {"false_alarms": {}, "coverage": {}, "bias": {}, "power": {}}
    for s in streams:
        rs = [r for r in results if r["S"] == s]
        for name in NULL_CELLS:
            nulls = [r["null"][name] for r in rs]
            doc["false_alarms"][f"{name}@{s}"] = {
                "margin0": rate("UNSAFE" in v["v0"] for v in nulls),
                "default": rate("UNSAFE" in v["vdef"] for v in nulls),
                "old_rule": rate(v["old"] for v in nulls),
                "safe_default": rate(all(x == "SAFE" for x in v["vdef"]) for v in nulls),
                "m": len(NULL_CELLS[name])}
            for k in COLUMNS:
                cells = [v["rows"][c][k] for v in nulls for c in NULL_CELLS[name]]
                doc["coverage"][f"{name}@{s}:{k}"] = {"t": rate(_covers(x["t"], 0.0) for x in cells),
                                                      "boot": rate(_covers(x["boot"], 0.0) for x in cells)}
            # one value per replicate (its cells share the aligned replay, so they are not independent)
            ests = [sum(v["rows"][c]["action"]["est"] for c in NULL_CELLS[name]) / len(NULL_CELLS[name])
                    for v in nulls]
            inf = mean_inference(ests)
            doc["bias"][f"{name}@{s}"] = {"mean": inf.estimate, "se": inf.se, "n": inf.n}
        for target in RESPONSES:
            pw = [r["power"][str(target)] for r in rs if r["power"]]
            if not pw:
                continue
            doc["power"][f"{target}@{s}"] = {
                "unsafe_margin0": rate(p["v0"] == "UNSAFE" for p in pw),
                "unsafe_default": rate(p["vdef"] == "UNSAFE" for p in pw),
                "safe_default": rate(p["vdef"] == "SAFE" for p in pw),
                "old_rule": rate(p["old"] for p in pw),
                "coverage_t": rate(_covers(p["row"]["action"]["t"], target) for p in pw),
                "coverage_boot": rate(_covers(p["row"]["action"]["boot"], target) for p in pw)}
    return doc


def repeatability(seed: int) -> bool:
    """The same audit twice: identical verdict documents (bytes of their JSON)."""
    sub = make_bandit(n_streams=8, n_future=8, rng=derive_seed(seed, "bench-verdicts", "repeat"))
    docs = []
    for _ in range(2):
        res = audit(sub.history, sub.futures, sub.evaluator, epsilon_greedy(0.2), cells="pair,reorder,value",
                    maps="id", repeats=2, seed=seed, n_resamples=2000,
                    expect={"pair": "invariant", "reorder": "invariant"})
        docs.append(json.dumps(res.summary()["verdict"], sort_keys=True))
    return docs[0] == docs[1]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=500, help="null replicates per stream count (>= 500 for the docs)")
    ap.add_argument("--power-reps", type=int, default=200, help="replicates per known response and stream count")
    ap.add_argument("--streams", default="4,8,16,48")
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--no-stores", action="store_true", help="skip the store backends' repeatability")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    streams = [int(s) for s in args.streams.split(",")]
    tasks = [(s, i, args.seed, i < args.power_reps) for s in streams for i in range(args.reps)]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        results = list(pool.map(replicate, tasks, chunksize=4))
    elapsed = time.perf_counter() - t0
    doc = summarize(results, streams)
    print(f"verdict calibration: {args.reps} null replicates and {args.power_reps} per known response at "
          f"S = {streams} ({elapsed:.0f} s, {args.workers} workers, seed {args.seed})\n")
    print("Family-wise false alarms (any declared invariant cell UNSAFE; target <= 5 %), rate [95 % CP] (k/n):")
    print(f"  {'agent@S':<20} {'m':>2}  {'margin 0':<28} {'default margin 5%':<28} {'main before (bootstrap)':<28}")
    for key, v in doc["false_alarms"].items():
        print(f"  {key:<20} {v['m']:>2}  {fmt_rate(v['margin0']):<28} {fmt_rate(v['default']):<28} "
              f"{fmt_rate(v['old_rule']):<28}")
    print("\nCoverage of the 95 % intervals at the null (target 93-97 % from 8 streams):")
    for key, v in doc["coverage"].items():
        print(f"  {key:<34} t {fmt_rate(v['t']):<28} bootstrap {fmt_rate(v['boot'])}")
    print("\nT_gr under the null (should be 0): mean over replicates (each the mean of its cells) ± SE:")
    for key, v in doc["bias"].items():
        print(f"  {key:<20} {100 * v['mean']:+.3f} pp ± {100 * v['se']:.3f} (n = {v['n']})")
    print("\nPower for a known response (true T_gr) of one declared invariant cell (mask), and SAFE at the null:")
    print(f"  {'T_gr@S':<10} {'UNSAFE @ margin 0':<28} {'UNSAFE @ margin 5%':<28} {'main before':<28} "
          f"{'t covers':<28}")
    for key, v in doc["power"].items():
        print(f"  {key:<10} {fmt_rate(v['unsafe_margin0']):<28} {fmt_rate(v['unsafe_default']):<28} "
              f"{fmt_rate(v['old_rule']):<28} {fmt_rate(v['coverage_t']):<28}")
    print("\n  SAFE at the default margin (5 %) under the known response (at 5 pp, the boundary, SAFE is an error;"
          " target <= 5 %):")
    for key, v in doc["power"].items():
        print(f"  {key:<10} {fmt_rate(v['safe_default'])}")
    print("\n  SAFE at the default margin (5 %) when the agent is invariant (share of replicates, all cells SAFE):")
    for key, v in doc["false_alarms"].items():
        print(f"  {key:<20} {fmt_rate(v['safe_default'])}")
    same = repeatability(args.seed)
    doc["repeatable"] = same
    print(f"\nRepeatability: the same audit twice gives the same verdict bytes: {'yes' if same else 'NO'}")
    stores: list[dict[str, Any]] = []
    if not args.no_stores:
        try:
            sys.path.insert(0, "bench")
            from verdicts_stores import store_repeatability  # type: ignore[import-not-found]

            stores = store_repeatability(10)
        except ImportError as exc:
            print(f"store repeatability: skipped ({exc})")
        for st in stores:
            if "skipped" in st:
                print(f"  store {st.get('backend')}: skipped ({st['skipped']})")
                continue
            print(f"  store {st['backend']:<22} {st['n_modal']}/{st['runs']} identical runs: "
                  f"{', '.join(st['modal'])} (judged by {', '.join(st['judged_by'])})")
    doc["stores"] = stores
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=2, default=str)
    worst = max((v["margin0"][0], k) for k, v in doc["false_alarms"].items())
    at8 = [v["t"][0] for k, v in doc["coverage"].items() if "@4:" not in k]
    ran = [st for st in stores if "skipped" not in st]
    repeat = (f"; store verdicts identical in {min(st['n_modal'] for st in ran)}/10 runs or better on {len(ran)} "
              "backends" if ran else "")
    print(f"\nheadline: family-wise false alarms at most {100 * worst[0]:.1f}% ({worst[1]}, margin 0; target <= 5%); "
          + (f"interval coverage from 8 streams {100 * min(at8):.1f}-{100 * max(at8):.1f}% (target 93-97%)" if at8
             else "interval coverage: no stream count of 8 or more run") + repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
