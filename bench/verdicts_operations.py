"""Calibration of check-operation's stochastic verdicts: false alarms with and without Holm, bound coverage, power.

Design (Morris, White & Crowther 2019, ADEMP), beside ``bench/verdicts.py`` (which calibrates the audit's cells):

* **Data**: the shipped operation example (``build_operation_example(n_streams=S, seed=...)``: a tool-choice
  assistant's log, 2 blocks x 40 records per stream, 12 future requests per block), drawn anew for every replicate
  at S = 4, 8, 16 and 48 streams; the example's seed and the check's seed are derived from names
  (``derive_seed(seed, "bench-verdicts-operations", "example" | "check", S, i)``), never positions in a list.
* **The product's path**: every row is ``decision_response`` (two replays, the original and the operated history,
  the same per-decision generators, 2 repeats, T_gr on the cross pairs r != s, pooled per stream) and is judged
  by ``judge_responses``: a family of rows as ``check_operations`` judges it (Holm over the family), and each row
  alone as ``check_operation`` judges one operation for one agent (no correction).  ``repeatability`` checks that
  ``check_operations`` / ``check_operation`` themselves give these verdicts, and the same bytes twice.
* **Why the nulls need an agent whose sample path depends on its memory.**  Both replays give repeat r of a
  decision the same generator.  An agent that draws its decision from that generator the same way whatever its
  memory holds (``testing._calibration``'s agents, a uniform-random agent, the reference rules with exploration)
  decides *identically* on both histories when the operation does not change what it reads, so T_gr is exactly 0
  on every decision, every bound is 0, and no false alarm is possible (the power runs below confirm it: their
  four built-in rows are such pathwise nulls).  The calibration question is the one an LLM agent raises: a
  changed prompt changes the sample path even where the decision *distribution* does not move.  The null agents
  here therefore re-seed each decision from the generator's first draw and a fingerprint of the block's records
  as the agent reads them (keys and outcomes, in order): the same memory gives the same draws, a changed memory
  independent ones.  Their decision laws:

  - ``uniform``: uniform over the menu, whatever the memory holds -- a sharp null for every operation
    (family of m = 4: ``dedup``, ``keep-latest``, ``merge-text``, ``forget-count:20``);
  - ``latest``: the reference ``latest`` rule (the tool of the block's most recent record) with epsilon = 0.2
    uniform exploration.  Its decision law depends only on the key of the block's last record, which
    ``keep-latest`` (the newest record of each key stays), ``merge-text`` (a merged record keeps its group's
    newest key and slot) and ``forget-count:N`` (the N newest stay) all keep: a sharp null for each (m = 3), while
    its memory (and so its sample path) changes.  ``dedup`` is left out: dropping a later exact duplicate can
    change the block's last key.
  - Both together as one check (m = 7, "uniform + latest").

* **Known response (power)**: ``testing._calibration.visibility_shift(delta)`` reads only whether any outcome is
  visible; a user-style operation in this file (``blank-outcomes``: records -> records, every outcome set to NaN)
  hides them all, so every decision's law moves by delta and the true T_gr is delta^2 = 2, 5, 10 pp exactly
  (and the four built-ins, which keep every outcome visible, are exact nulls for it).  It is judged alone and in
  the family of the five operations (4 nulls + the response).
* **Performance measures** with exact Clopper-Pearson intervals: family-wise false-alarm rate (any UNSAFE) at
  margin 0 and at the default margin 0.05, with Holm over the family and with each row alone; coverage of the
  one-sided 95 % upper bound (truth 0; under the response, truth delta^2, and of the lower bound); T_gr's mean
  under the null; power (UNSAFE at margin 0 and 0.05; at 0.05 a true 5 pp is the boundary); SAFE at the default
  margin under the null and under the response (there an error at 5 and 10 pp: the one-sided upper bound's
  non-coverage); repeatability (verdict bytes of the same check twice).

Targets: family-wise false alarms <= 5 % at every S; one-sided bound coverage >= 95 % (within Monte Carlo error).
The headline (the worst family-wise false-alarm rate with Holm, margin 0) is printed last.

Run from the repository root (637 s on the 2-core host at the defaults; 954 s beside other work)::

    python bench/verdicts_operations.py                 # 500 null replicates, 200 per response, S = 4, 8, 16, 48
    python bench/verdicts_operations.py --reps 40 --power-reps 20 --streams 4,8   # smoke run
    python bench/verdicts_operations.py --json verdicts_operations.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import zlib
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from replaylens.agents import Agent, QueryBatch, RecordBatch, reference_agent
from replaylens.agents._ties import to_micro
from replaylens.inference import mean_inference
from replaylens.maps import seeded_uniforms
from replaylens.memory.operations import (
    DecisionResponse,
    apply_operation,
    build_operation_example,
    check_operation,
    check_operations,
    decision_response,
    judge_responses,
    load_operation,
    stream_records,
)
from replaylens.records import Record
from replaylens.rng import derive_seed
from replaylens.testing._calibration import fmt_rate, rate, visibility_shift

LEVEL = 0.95
EPSILON = 0.2
BUILTINS = ("dedup", "keep-latest", "merge-text", "forget-count:20")
BLANK = "blank-outcomes"
NULL_FAMILIES: dict[str, tuple[str, ...]] = {
    "uniform": BUILTINS,
    "latest": ("keep-latest", "merge-text", "forget-count:20"),
}
BOTH = "uniform+latest"
RESPONSES = {0.02: math.sqrt(0.02), 0.05: math.sqrt(0.05), 0.10: math.sqrt(0.10)}   # true T_gr -> delta
MARGINS: dict[str, float | None] = {"margin0": 0.0, "default": None}   # None: the default 0.05

# ------------------------------------------------------------------ the user-style operation of the power runs


def blank_outcomes(records: Sequence[Record]) -> list[Record]:
    """A user's records -> records operation: every outcome hidden (NaN), keys, texts and order kept."""
    return [replace(r, outcome=math.nan) for r in records]


@dataclass(frozen=True)
class BlankOutcomes:
    """:func:`blank_outcomes` as an :class:`~replaylens.memory.operations.Operation`."""

    name: str = BLANK
    monotone: bool = False

    def apply(self, records: Sequence[Record]) -> list[Record]:
        return blank_outcomes(records)


# ------------------------------------------------------------------ null agents whose sample path reads the memory

_M64 = (1 << 64) - 1
_GOLD = 0x9E3779B97F4A7C15
_LOW32 = 0xFFFFFFFF


def _splitmix(z: int) -> int:
    z = (z + _GOLD) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def _splitmix_array(z: np.ndarray) -> np.ndarray:
    """:func:`_splitmix` on a uint64 array (wrapping arithmetic, as the Python ints masked to 64 bits)."""
    z = z + np.uint64(_GOLD)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return np.asarray(z ^ (z >> np.uint64(31)), dtype=np.uint64)


def _term(key: str, outcome: float, j: int) -> int:
    """The fingerprint's summand of the block's j-th record (key, outcome in micro-units, NaN its own value)."""
    micro = _LOW32 if math.isnan(outcome) else int(to_micro(outcome)) & _LOW32
    return _splitmix(((zlib.crc32(key.encode()) << 32) | micro) ^ _splitmix(j))


class _PromptWriter:
    """Per block: (records seen, fingerprint) beside the inner writer's state (the block's memory as a prompt)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def init_state(self) -> tuple[Any, dict[tuple[str, str], tuple[int, int]]]:
        return (None if self.inner is None else self.inner.init_state(), {})

    def update(self, state: Any, task: Any, key: str, outcome: float) -> Any:
        inner, fps = state
        n, fp = fps.get(task.block, (0, 0))
        fp = (fp + _term(key, float(outcome), n)) & _M64
        inner = inner if self.inner is None else self.inner.update(inner, task, key, outcome)
        return (inner, {**fps, task.block: (n + 1, fp)})


class _PromptPolicy:
    """The decision's generator re-seeded from its first draw XOR the block's fingerprint; then ``greedy`` (None:
    always explore) or, with probability ``eps``, a uniform menu item."""

    def __init__(self, greedy: Any, eps: float) -> None:
        self.greedy, self.eps = greedy, eps

    def act(self, state: Any, task: Any, menu: tuple[str, ...], rng: np.random.Generator) -> str:
        inner, fps = state
        x = int(float(rng.random()) * 2.0**53)
        g = np.random.default_rng(x ^ fps.get(task.stratum, (0, 0))[1])
        u1, u2 = float(g.random()), float(g.random())
        n = len(menu)
        if self.greedy is None or u1 < self.eps:
            return menu[min(int(u2 * n), n - 1)]
        return str(self.greedy.act(inner, task, menu, rng))


def _fingerprints(records: RecordBatch) -> np.ndarray:
    """(H, K, B) uint64: each (history, cut, block)'s fingerprint, as :class:`_PromptWriter` folds it."""
    h_n = records.keys.shape[0]
    crc = np.array([zlib.crc32(lab.encode()) for lab in records.labels], dtype=np.uint64)
    keys = np.where(records.valid, records.keys, 0).astype(np.int64)
    micro = to_micro(records.outcomes)
    nan = np.isnan(micro)
    low = np.where(nan, 0.0, micro).astype(np.int64).astype(np.uint64) & np.uint64(_LOW32)
    z = (crc[keys] << np.uint64(32)) | np.where(nan, np.uint64(_LOW32), low)
    out = np.zeros((h_n, records.n_cuts, records.n_blocks), dtype=np.uint64)
    rows = np.arange(h_n)[:, None]
    for b in range(records.n_blocks):
        inb = records.valid & (records.blocks == b)
        j = np.maximum(np.cumsum(inb, axis=1) - 1, 0).astype(np.uint64)
        term = np.where(inb, _splitmix_array(z ^ _splitmix_array(j)), np.uint64(0))
        cs = np.concatenate([np.zeros((h_n, 1), dtype=np.uint64), np.cumsum(term, axis=1, dtype=np.uint64)], axis=1)
        out[:, :, b] = cs[rows, records.cuts]
    return out


class _PromptArray:
    thread_safe: ClassVar[bool] = True

    def __init__(self, greedy: Any, eps: float) -> None:
        self.greedy, self.eps = greedy, eps

    def act_batch(self, records: RecordBatch, queries: QueryBatch) -> np.ndarray:
        fp = _fingerprints(records)[queries.row, queries.cut, queries.block]
        x = (seeded_uniforms(queries.seed, 1)[0] * 2.0**53).astype(np.uint64)
        u1, u2 = seeded_uniforms(x ^ fp, 2)
        sizes = (queries.menu >= 0).sum(axis=1)
        j = np.minimum((u2 * sizes).astype(np.int64), sizes - 1)
        q = np.arange(queries.menu.shape[0])
        if self.greedy is None:
            return np.asarray(queries.menu[q, j])
        out = np.asarray(self.greedy.act_batch(records, queries)).copy()
        explore = u1 < self.eps
        out[explore] = queries.menu[q[explore], j[explore]]
        return out


def prompted_uniform() -> Agent:
    """Uniform over the menu whatever the memory holds; the sample path follows the block's records."""
    return Agent("uniform(prompted)", _PromptWriter(None), _PromptPolicy(None, 1.0), _PromptArray(None, 1.0),
                 stochastic=True)


def prompted_latest(epsilon: float = EPSILON) -> Agent:
    """The reference ``latest`` rule exploring uniformly with probability ``epsilon``; the sample path follows the
    block's records."""
    ref = reference_agent("latest")
    return Agent(f"latest-eps{epsilon:g}(prompted)", _PromptWriter(ref.writer), _PromptPolicy(ref.policy, epsilon),
                 _PromptArray(ref.array, epsilon), stochastic=True)


NULL_AGENTS = {"uniform": prompted_uniform, "latest": prompted_latest}

# ------------------------------------------------------------------ one replicate


def _int_seed(seed: int, *path: int | str) -> int:
    return int(derive_seed(seed, "bench-verdicts-operations", *path).generate_state(1)[0])


def _operated(history: Any, names: Iterable[str], before: dict[str, list[Record]]) -> dict[str, Any]:
    out = {}
    for name in names:
        label, op = (BLANK, BlankOutcomes()) if name == BLANK else load_operation(name)
        out[name] = apply_operation(history, op, label, before)[0]
    return out


def _judged(rows: Sequence[DecisionResponse], margin: float | None) -> tuple[list[str], list[str]]:
    """(statuses judged as one family, as check_operations does; statuses of each row alone, as check_operation)."""
    tol = [replace(d, tolerance=margin) for d in rows]
    return ([d.status for d in judge_responses(tol, level=LEVEL)],
            [judge_responses([d], level=LEVEL)[0].status for d in tol])


def _record(d: DecisionResponse) -> dict[str, Any]:
    return {"est": d.value, "lo": d.interval[0], "hi": d.interval[1],
            "zero": all(v == 0.0 for v in d.per_stream), "changed": d.n_changed}


def _family(rows: Sequence[DecisionResponse]) -> dict[str, Any]:
    out: dict[str, Any] = {"rows": [_record(d) for d in rows]}
    for key, m in MARGINS.items():
        out[key] = dict(zip(("holm", "alone"), _judged(rows, m), strict=True))
    return out


def replicate(task: tuple[int, int, int, bool]) -> dict[str, Any]:
    """One replicate at ``n_streams``: the null families (and, when ``power``, one check per known response)."""
    n_streams, i, seed, power = task
    ex = build_operation_example(n_streams=n_streams, seed=_int_seed(seed, "example", n_streams, i))
    cseed = _int_seed(seed, "check", n_streams, i)
    before = stream_records(ex.history)
    operated = _operated(ex.history, (*BUILTINS, BLANK) if power else BUILTINS, before)

    def respond(agent: Agent, op: str) -> DecisionResponse:
        return decision_response(ex.history, operated[op], ex.futures, ex.evaluator, agent, seed=cseed,
                                 level=LEVEL, op=op)

    out: dict[str, Any] = {"S": n_streams, "i": i, "null": {}, "power": {}}
    every: list[DecisionResponse] = []
    for name, ops in NULL_FAMILIES.items():
        agent = NULL_AGENTS[name]()
        rows = [respond(agent, op) for op in ops]
        every += rows
        out["null"][name] = _family(rows)
    out["null"][BOTH] = {k: v for k, v in _family(every).items() if k != "rows"}
    if power:
        for target, delta in RESPONSES.items():
            agent = visibility_shift(delta)
            rows = [respond(agent, op) for op in (*BUILTINS, BLANK)]
            fam = _family(rows)
            out["power"][str(target)] = {
                "row": fam["rows"][-1], "nulls_zero": all(r["zero"] for r in fam["rows"][:-1]),
                **{key: {"holm": fam[key]["holm"][-1], "alone": fam[key]["alone"][-1],
                         "null_unsafe": "UNSAFE" in fam[key]["holm"][:-1] + fam[key]["alone"][:-1]}
                   for key in MARGINS}}
    return out


# ------------------------------------------------------------------ summaries


def _size(name: str) -> int:
    return sum(len(v) for v in NULL_FAMILIES.values()) if name == BOTH else len(NULL_FAMILIES[name])


def summarize(results: list[dict[str, Any]], streams: Sequence[int]) -> dict[str, Any]:
    doc: dict[str, Any] = {"false_alarms": {}, "per_operation": {}, "coverage": {}, "mean": {}, "power": {}}
    for s in streams:
        rs = [r for r in results if r["S"] == s]
        for name in (*NULL_FAMILIES, BOTH):
            fams = [r["null"][name] for r in rs]
            cell: dict[str, Any] = {"m": _size(name)}
            for key in MARGINS:
                cell[f"holm_{key}"] = rate("UNSAFE" in f[key]["holm"] for f in fams)
                cell[f"alone_{key}"] = rate("UNSAFE" in f[key]["alone"] for f in fams)
            cell["safe_default"] = rate(all(x == "SAFE" for x in f["default"]["holm"]) for f in fams)
            doc["false_alarms"][f"{name}@{s}"] = cell
        for name, ops in NULL_FAMILIES.items():
            fams = [r["null"][name] for r in rs]
            for j, op in enumerate(ops):
                doc["per_operation"][f"{name}:{op}@{s}"] = {
                    "alone_margin0": rate(f["margin0"]["alone"][j] == "UNSAFE" for f in fams),
                    "all_zero": rate(f["rows"][j]["zero"] for f in fams)}
            cells = [row for f in fams for row in f["rows"]]
            doc["coverage"][f"{name}@{s}"] = {"upper": rate(row["hi"] >= 0.0 for row in cells),
                                              "lower": rate(row["lo"] <= 0.0 for row in cells)}
            # one value per replicate (its rows share the original replay, so they are not independent)
            inf = mean_inference([sum(row["est"] for row in f["rows"]) / len(ops) for f in fams])
            doc["mean"][f"{name}@{s}"] = {"mean": inf.estimate, "se": inf.se, "n": inf.n}
        for target in RESPONSES:
            pw = [r["power"][str(target)] for r in rs if r["power"]]
            if not pw:
                continue
            doc["power"][f"{target}@{s}"] = {
                **{f"{how}_{key}": rate(p[key][how] == "UNSAFE" for p in pw)
                   for key in MARGINS for how in ("alone", "holm")},
                **{f"safe_{how}": rate(p["default"][how] == "SAFE" for p in pw) for how in ("alone", "holm")},
                "upper_covers": rate(p["row"]["hi"] >= target for p in pw),
                "lower_covers": rate(p["row"]["lo"] <= target for p in pw),
                "null_rows_unsafe": rate(p[key]["null_unsafe"] for p in pw for key in MARGINS),
                "null_rows_zero": rate(p["nulls_zero"] for p in pw)}
    return doc


def _bytes(reports: Sequence[Any]) -> str:
    return json.dumps([r.to_dict() for r in reports], sort_keys=True, default=str)


def repeatability(seed: int, n_streams: int = 8) -> dict[str, bool]:
    """The product's own calls on one replicate: ``check_operations`` twice gives the same report bytes, and its
    verdicts (Holm over the family) and ``check_operation``'s (each operation alone) are the ones this bench
    computes from ``decision_response`` + ``judge_responses``."""
    out: dict[str, bool] = {"same_bytes": True, "holm_matches": True, "alone_matches": True}
    res = replicate((n_streams, 0, seed, False))
    ex = build_operation_example(n_streams=n_streams, seed=_int_seed(seed, "example", n_streams, 0))
    cseed = _int_seed(seed, "check", n_streams, 0)
    for name, ops in NULL_FAMILIES.items():
        kw: dict[str, Any] = {"futures": ex.futures, "evaluator": ex.evaluator, "seed": cseed, "margin": 0.0,
                              "level": LEVEL}
        runs = [check_operations(ex.history, list(ops), agents=[NULL_AGENTS[name]()], **kw) for _ in range(2)]
        out["same_bytes"] &= _bytes(runs[0]) == _bytes(runs[1])
        out["holm_matches"] &= [r.decisions[0].status for r in runs[0]] == res["null"][name]["margin0"]["holm"]
        alone = [check_operation(ex.history, op, agents=[NULL_AGENTS[name]()], **kw).decisions[0].status
                 for op in ops]
        out["alone_matches"] &= alone == res["null"][name]["margin0"]["alone"]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=500, help="null replicates per stream count")
    ap.add_argument("--power-reps", type=int, default=200, help="replicates per known response and stream count")
    ap.add_argument("--streams", default="4,8,16,48")
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    streams = [int(s) for s in args.streams.split(",")]
    tasks = [(s, i, args.seed, i < args.power_reps) for s in streams for i in range(args.reps)]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        results = list(pool.map(replicate, tasks, chunksize=4))
    elapsed = time.perf_counter() - t0
    doc = summarize(results, streams)
    print(f"check-operation verdict calibration: {args.reps} null replicates and {min(args.power_reps, args.reps)} "
          f"per known response at S = {streams} ({elapsed:.0f} s, {args.workers} workers, seed {args.seed})\n")
    print("Family-wise false alarms under sharp nulls (any UNSAFE; target <= 5 %), rate [95 % CP] (k/n):")
    print(f"  {'family@S':<20} {'m':>2}  {'Holm, margin 0':<28} {'alone, margin 0':<28} {'Holm, margin 5%':<28} "
          f"{'alone, margin 5%':<28}")
    for key, v in doc["false_alarms"].items():
        print(f"  {key:<20} {v['m']:>2}  {fmt_rate(v['holm_margin0']):<28} {fmt_rate(v['alone_margin0']):<28} "
              f"{fmt_rate(v['holm_default']):<28} {fmt_rate(v['alone_default']):<28}")
    print("\nEach row alone at margin 0 (UNSAFE), and rows whose T_gr was 0 on every stream (memory unchanged):")
    for key, v in doc["per_operation"].items():
        print(f"  {key:<32} {fmt_rate(v['alone_margin0']):<28} all-zero {fmt_rate(v['all_zero'])}")
    print("\nCoverage of the one-sided 95 % bounds at the null (truth 0; rows of a replicate pooled):")
    for key, v in doc["coverage"].items():
        print(f"  {key:<20} upper >= 0 {fmt_rate(v['upper']):<28} lower <= 0 {fmt_rate(v['lower'])}")
    print("\nT_gr under the null (should be 0): mean over replicates (each the mean of its rows) ± SE:")
    for key, v in doc["mean"].items():
        print(f"  {key:<20} {100 * v['mean']:+.3f} pp ± {100 * v['se']:.3f} (n = {v['n']})")
    print("\nPower for a known response (blank-outcomes under visibility_shift: true T_gr), alone and in the family "
          "of 5 operations:")
    print(f"  {'T_gr@S':<10} {'alone, margin 0':<28} {'Holm(5), margin 0':<28} {'alone, margin 5%':<28} "
          f"{'Holm(5), margin 5%':<28} {'upper bound covers':<28}")
    for key, v in doc["power"].items():
        print(f"  {key:<10} {fmt_rate(v['alone_margin0']):<28} {fmt_rate(v['holm_margin0']):<28} "
              f"{fmt_rate(v['alone_default']):<28} {fmt_rate(v['holm_default']):<28} "
              f"{fmt_rate(v['upper_covers']):<28}")
    print("  (the lower bound covers, and the 4 built-in rows -- pathwise nulls -- stayed at T_gr = 0 exactly:)")
    for key, v in doc["power"].items():
        print(f"  {key:<10} lower covers {fmt_rate(v['lower_covers']):<28} null rows all 0 "
              f"{fmt_rate(v['null_rows_zero']):<28} null rows UNSAFE {fmt_rate(v['null_rows_unsafe'])}")
    print("\nSAFE for the known response at the default margin 5 % (right below 5 pp; an error at 5 pp, the "
          "boundary, and at 10 pp):")
    for key, v in doc["power"].items():
        print(f"  {key:<10} alone {fmt_rate(v['safe_alone']):<28} Holm(5) {fmt_rate(v['safe_holm'])}")
    print("\nSAFE at the default margin (5 %) under the null (every row of the family SAFE):")
    for key, v in doc["false_alarms"].items():
        print(f"  {key:<20} {fmt_rate(v['safe_default'])}")
    rep = repeatability(args.seed)
    doc["repeatability"] = rep
    print(f"\nRepeatability: check_operations twice gives the same report bytes: {'yes' if rep['same_bytes'] else 'NO'}"
          f"; its verdicts are this bench's (Holm: {'yes' if rep['holm_matches'] else 'NO'}; check_operation alone: "
          f"{'yes' if rep['alone_matches'] else 'NO'})")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=2, default=str)
    worst = max((v["holm_margin0"][0], k) for k, v in doc["false_alarms"].items())
    alone = max((v["alone_margin0"][0], k) for k, v in doc["false_alarms"].items())
    print(f"\nheadline: check-operation family-wise false alarms with Holm at most {100 * worst[0]:.1f}% ({worst[1]}, "
          f"margin 0; target <= 5%); each operation judged alone: up to {100 * alone[0]:.1f}% ({alone[1]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
