"""Regression baselines (issue 24): a run compared with a stored run of the same plan and inputs, per row
the paired difference (B − A, B the new run) with its stream-cluster interval, and ``--fail-on`` thresholds.

``--fail-on`` is a comma list of ``[CELL.]METRIC:THRESHOLD``:

* ``action:0.05`` — the share of decisions changed (D_A^q, or T_gr) rose by more than 5 pp;
* ``utility:0.01`` — the utility change ΔU fell by more than 0.01;
* ``oracle:0.02`` — the oracle agreement change ΔO fell by more than 2 pp.

A threshold applies to every row unless prefixed by a cell (``pair.action:0``).  For a deterministic agent
the point estimate of the paired difference is compared with the threshold (it is exact on fixed inputs); for
a stochastic agent it is judged with the audit's statistics (Student t on the per-stream differences, Holm):
REGRESSED, NO REGRESSION or INCONCLUSIVE (:func:`regression_verdicts`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError

__all__ = ["Threshold", "baseline_dir", "parse_fail_on", "regression_verdicts", "regressions", "response_masks"]

METRICS = {"action": ("action", +1), "utility": ("delta_utility", -1), "oracle": ("delta_oracle", -1)}


@dataclass(frozen=True)
class Threshold:
    """Fail when ``metric`` moves the wrong way by more than ``limit`` (in ``cell`` only, when given)."""

    metric: str
    limit: float
    cell: str | None = None

    def describe(self) -> str:
        sign = METRICS[self.metric][1]
        unit = f"{100 * self.limit:g}pp" if self.metric != "utility" else f"{self.limit:g}"
        return f"{self.cell + '.' if self.cell else ''}{self.metric} {'rose' if sign > 0 else 'fell'} by > {unit}"


def parse_fail_on(spec: str | Iterable[str]) -> list[Threshold]:
    """Thresholds from ``--fail-on`` (see the module docstring); one-line ConfigError otherwise."""
    items = [s for part in ([spec] if isinstance(spec, str) else spec) for s in part.split(",") if s.strip()]
    out = []
    for item in items:
        name, sep, val = item.strip().partition(":")
        cell, _, metric = name.rpartition(".")
        try:
            limit = float(val)
        except ValueError:
            limit = math.nan
        if not sep or metric not in METRICS or not math.isfinite(limit) or limit < 0:
            raise ConfigError(f"--fail-on must be a comma list of [CELL.]METRIC:THRESHOLD (METRIC: action, utility, "
                              f"oracle; THRESHOLD >= 0); got {item.strip()!r}")
        out.append(Threshold(metric, limit, cell or None))
    return out


def regression_verdicts(comparison: Mapping[str, Any], thresholds: Sequence[Threshold], *,
                        on_inconclusive: str = "pass") -> list[dict[str, Any]]:
    """Every (row, threshold) judged: ``REGRESSED`` (shown to move the wrong way by more than the threshold),
    ``NO REGRESSION`` or ``INCONCLUSIVE``, with its line and whether it fails the gate.

    A deterministic agent's paired difference is exact (a census of the same decisions): its point estimate
    decides.  A stochastic agent's (T_gr rows) is judged as the audit's verdicts are: one-sample Student t on
    the per-stream differences, REGRESSED after Holm's step-down over every judged (row, threshold) at
    ``1 - level``, NO REGRESSION when the upper end of the two-sided ``level`` interval is within the threshold
    and at least ``MIN_STREAMS_WITHIN`` streams were replayed (docs/guide/verdicts.md)."""
    from ..inference import MeanInference, holm_adjusted
    from ._verdict import MIN_STREAMS_WITHIN

    alpha = 1.0 - float(comparison.get("level", 0.95))
    rows = {r["cell"]: r for r in comparison["rows"]}
    judged: list[dict[str, Any]] = []
    for t in thresholds:
        if t.cell is not None and t.cell not in rows:
            raise ConfigError(f"--fail-on {t.cell}.{t.metric}: {t.cell!r} is not a row of these runs "
                              f"({', '.join(rows)})")
        key, sign = METRICS[t.metric]
        for cell, r in rows.items():
            if t.cell is not None and cell != t.cell:
                continue
            d = r[key]
            if d is None or not np.isfinite(d):
                continue
            se = (r.get("se") or {}).get(key)
            n = int(comparison.get("n_streams") or 0)
            s = float(se) if se is not None else math.nan
            noisy = bool(r.get("stochastic")) and math.isfinite(s) and n >= 2
            # the move in the wrong direction, summarized as the audit's one-sample t (the same tests and bounds)
            inf = MeanInference(sign * float(d), s, s * math.sqrt(n), n)
            judged.append({"cell": cell, "threshold": t, "key": key, "value": float(d), "noisy": noisy,
                           "p": inf.p_exceeds(t.limit) if noisy else math.nan,
                           "upper": inf.upper(alpha / 2) if noisy else math.nan})   # the interval's upper end
    adjusted = holm_adjusted([j["p"] for j in judged])
    out = []
    for j, p_adj in zip(judged, adjusted, strict=True):
        t, key, d = j["threshold"], j["key"], j["value"]
        sign = METRICS[t.metric][1]
        if not j["noisy"]:
            status = "REGRESSED" if sign * d > t.limit + 1e-12 else "NO REGRESSION"
        elif p_adj <= alpha:
            status = "REGRESSED"
        elif round(t.limit - j["upper"], 12) > 0 and int(comparison.get("n_streams") or 0) >= MIN_STREAMS_WITHIN:
            status = "NO REGRESSION"
        else:
            status = "INCONCLUSIVE"
        r = rows[j["cell"]]
        lo, hi = r[f"{key}_ci"]
        fmt = _fmt_pp if t.metric != "utility" else _fmt_num
        ci = f"[{fmt(lo)}, {fmt(hi)}]" if lo is not None and np.isfinite(lo) else "[n/a]"
        how = f"Holm-adjusted p = {p_adj:.3g}" if j["noisy"] else "exact: a deterministic agent's census"
        word = "regression" if status == "REGRESSED" else status.lower()
        line = f"{word}: {j['cell']}: {t.metric} {fmt(d)} {ci} against the baseline ({t.describe()}; {how})"
        fails = status == "REGRESSED" or (status == "INCONCLUSIVE" and on_inconclusive == "fail")
        out.append({"cell": j["cell"], "threshold": t.describe(), "status": status, "line": line, "fails": fails})
    return out


def regressions(comparison: Mapping[str, Any], thresholds: Sequence[Threshold], *,
                on_inconclusive: str = "pass") -> list[str]:
    """One line per (row, threshold) that fails the gate: REGRESSED, or INCONCLUSIVE under
    ``on_inconclusive="fail"`` (see :func:`regression_verdicts`)."""
    return [v["line"] for v in regression_verdicts(comparison, thresholds, on_inconclusive=on_inconclusive)
            if v["fails"]]


def _fmt_pp(x: float) -> str:
    return f"{100 * x:+.1f}pp"


def _fmt_num(x: float) -> str:
    return f"{x:+.4f}"


def baseline_dir(path: Path) -> Path:
    """The audit directory of ``--baseline`` (a directory, or the summary.json inside one)."""
    p = Path(path)
    if p.is_file() and p.name == "summary.json":
        return p.parent
    if p.is_dir():
        return p
    raise ConfigError(f"--baseline {p}: not an audit output directory or its summary.json")


def response_masks(summary: Mapping[str, Any], actions: np.ndarray) -> dict[str, np.ndarray]:
    """Per summary row, which of its decisions changed against that run's own aligned replay (the
    comparison behind ``n_changed``).  ``actions``: the decision table's action column in its row order
    (cell, map, draw, repeat, task)."""
    shape = (len(summary["cells"]), len(summary["maps"]), int(summary["draws"]), int(summary["repeats"]),
             int(summary["n_future_tasks"]))
    a = np.asarray(actions).reshape(shape)
    out = {}
    for r in summary["rows"]:
        if r["cell"] == "rekey":
            out["rekey"] = a[0][1:] != a[0][:1]
        elif list(r["by_map"]["action"]) == [summary["maps"][0]]:   # a history cell, read at ρ = id
            c = summary["cells"].index(r["cell"])
            out[r["cell"]] = a[c][:1] != a[0][:1]
        else:                                                         # consistent renaming, ρ ≠ id vs aligned id
            c = summary["cells"].index(r["cell"])
            out[r["cell"]] = a[c][1:] != a[0, :1]
    return out
