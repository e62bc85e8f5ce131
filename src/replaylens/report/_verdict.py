"""Verdicts: each summary row judged against an expectation (invariant, must respond, or free).

An expectation is *declared* (``--expect-invariant``, a project config) or, for a row nobody declared,
the documented *default*: the cells (and ``rekey``) the agent declares invariance to must not change
decisions; otherwise a learning agent is expected to respond to ``value``, ``key_slot``, ``mask`` and
``rekey`` (scores move relative to identifiers, or vanish), while a response to ``pair``, ``reorder``
or ``rename`` (record order, consistent names) is a red flag.  Only declared expectations gate the exit
code; a default one is judged and shown but never fails a run.

Measured value: the raw share of changed decisions for a deterministic agent (its interval is the
stream-cluster interval of the action response D_A^q); the repeat-corrected T_gr and its interval for a
stochastic agent (where "changed" means the interval lies above the tolerance).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, cast

__all__ = ["DEFINITIONS_MD", "DEFAULT_RESPONDS", "Expectation", "Judgement", "default_expectation", "expectations_for",
           "failure_lines", "judge", "parse_expect_specs", "parse_expectations", "verdict_lines", "verdict_markdown",
           "verdict_summary"]

Kind = Literal["invariant", "responds", "free"]
KINDS: tuple[str, ...] = ("invariant", "responds", "free")

#: cells a learning agent is expected to respond to (scores move relative to identifiers, or vanish)
DEFAULT_RESPONDS = ("value", "key_slot", "mask", "rekey")
#: cells whose response is a red flag for a learning agent (record order, consistent names)
DEFAULT_INVARIANT = ("pair", "reorder", "rename")

#: the verdict words (summary.json ``status``)
SAFE, UNSAFE, EXPECTED, NOT_JUDGED = "SAFE", "UNSAFE", "EXPECTED RESPONSE", "NOT JUDGED"


@dataclass(frozen=True)
class Expectation:
    """What a row (a cell or ``rekey``) is expected to do; ``declared`` expectations gate the exit code."""

    cell: str
    kind: Kind
    tolerance: float = 0.0
    declared: bool = True
    reason: str = ""

    def spec(self) -> str:
        """The ``--expect`` form: ``CELL=KIND`` or ``CELL=KIND:TOLERANCE``."""
        return f"{self.cell}={self.kind}" + (f":{self.tolerance!r}" if self.tolerance else "")

    def describe(self) -> str:
        """E.g. ``invariant, tolerance 5% (declared)`` or ``must respond (default: ...)``."""
        tol = f", tolerance {100 * self.tolerance:g}%" if self.tolerance else ""
        what = {"invariant": "invariant", "responds": "must respond", "free": "free (no expectation)"}[self.kind]
        src = "declared" if self.declared else f"default: {self.reason}"
        return f"{what}{tol} ({src})"


@dataclass(frozen=True)
class Judgement:
    """One row judged: the expectation, what was measured and the verdict word."""

    expectation: Expectation
    migration: str
    status: str
    passed: bool
    measure: str              # "changed_share" or the stochastic readout's name (T_gr ...)
    value: float
    interval: tuple[float, float]
    n_changed: int
    n_decisions: int

    def line(self) -> str:
        """One plain line: verdict, migration, the measured value and the expectation it was judged against."""
        e = self.expectation
        if self.measure == "changed_share":
            got = f"{self.n_changed} of {self.n_decisions} decisions changed ({_pc(self.value)})"
        else:
            lo, hi = self.interval
            got = f"{self.measure} {_pc(self.value)} [{_pc(lo)}, {_pc(hi)}]"
        return f"{self.status}: {self.migration}: {got}; expected {e.describe()}"

    def failure(self) -> str:
        """The one stderr line of a failed expectation (names the cell, the count or interval, the tolerance)."""
        e, tol = self.expectation, f"{100 * self.expectation.tolerance:g}%"
        if self.measure == "changed_share":
            got = (f"{self.n_changed} of {self.n_decisions} decisions changed ({100 * self.value:.1f}% "
                   f"{'>' if e.kind == 'invariant' else '<='} tolerance {tol})")
        else:
            lo = self.interval[0]
            got = (f"{self.measure} interval lower bound {100 * lo:.1f}% "
                   f"{'>' if e.kind == 'invariant' else '<='} tolerance {tol}")
        what = "declared invariant" if e.kind == "invariant" else "declared responsive"
        return f"expectation failed: {e.cell} {what}, but {got}"

    def to_dict(self) -> dict[str, Any]:
        return {"cell": self.expectation.cell, "migration": self.migration, "status": self.status,
                "passed": self.passed, "gate": self.expectation.declared, "expectation": asdict(self.expectation),
                "measure": self.measure, "value": self.value, "interval": list(self.interval),
                "n_changed": self.n_changed, "n_decisions": self.n_decisions, "line": self.line(),
                "failure": None if self.passed else self.failure()}


def _pc(x: float) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{round(100 * x, 1) + 0.0:.1f}%"


def default_expectation(cell: str, invariant_to: Iterable[str] = ()) -> Expectation:
    """The documented default expectation of a row for an agent declaring ``invariant_to``."""
    if cell in set(invariant_to):
        return Expectation(cell, "invariant", 0.0, False, "the agent declares invariance to it")
    if cell in DEFAULT_INVARIANT:
        return Expectation(cell, "invariant", 0.0, False, "a response is a red flag for a learning agent")
    if cell in DEFAULT_RESPONDS:
        return Expectation(cell, "responds", 0.0, False, "a learning agent is expected to respond")
    return Expectation(cell, "free", 0.0, False, "no default for this cell")


def parse_expectations(spec: Mapping[str, Any], *, where: str = "expect") -> dict[str, Expectation]:
    """Declared expectations from a mapping ``cell -> "invariant" | "responds" | "free" | {kind, tolerance}``
    (a project config's ``expect`` table); one-line :class:`~replaylens.errors.ConfigError` otherwise."""
    from ..errors import ConfigError

    out: dict[str, Expectation] = {}
    for cell, val in spec.items():
        if isinstance(val, Expectation):
            out[str(cell)] = val
            continue
        kind, tol = (val, 0.0) if isinstance(val, str) else (None, 0.0)
        if isinstance(val, Mapping):
            unknown = set(val) - {"kind", "tolerance"}
            if unknown:
                raise ConfigError(f"{where}.{cell}: unknown field(s) {', '.join(sorted(unknown))} (allowed: kind, "
                                  "tolerance)")
            kind, tol = val.get("kind"), val.get("tolerance", 0.0)
        kind = {"must_respond": "responds", "must-respond": "responds", "respond": "responds"}.get(str(kind), kind)
        if kind not in KINDS:
            raise ConfigError(f"{where}.{cell}: expectation must be one of invariant, responds, free (or a table "
                              f"with kind and tolerance); got {val!r}")
        if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not 0.0 <= float(tol) <= 1.0:
            raise ConfigError(f"{where}.{cell}.tolerance must be a number in [0, 1]; got {tol!r}")
        out[str(cell)] = Expectation(str(cell), cast(Kind, kind), float(tol), True)
    return out


def parse_expect_specs(items: Iterable[str]) -> dict[str, Expectation]:
    """Expectations from ``--expect CELL=KIND[:TOLERANCE]`` values (KIND: invariant, responds, free)."""
    from ..errors import ConfigError

    table: dict[str, Any] = {}
    for item in items:
        cell, sep, rest = item.partition("=")
        kind, _, tol = rest.partition(":")
        if not sep or not cell.strip() or not kind.strip():
            raise ConfigError(f"--expect must look like CELL=KIND[:TOLERANCE] (KIND: invariant, responds, free); "
                              f"got {item!r}")
        try:
            table[cell.strip()] = {"kind": kind.strip(), "tolerance": float(tol) if tol.strip() else 0.0}
        except ValueError:
            raise ConfigError(f"--expect {item!r}: the tolerance must be a number in [0, 1]") from None
    return parse_expectations(table, where="--expect")


def expectations_for(rows: Sequence[str], declared: Mapping[str, Expectation],
                     invariant_to: Iterable[str] = ()) -> list[Expectation]:
    """One expectation per summary row: the declared one, else the documented default."""
    inv = tuple(invariant_to)
    return [declared[c] if c in declared else default_expectation(c, inv) for c in rows]


def judge(row: Mapping[str, Any], e: Expectation) -> Judgement:
    """Judge one summary.json row against its expectation."""
    lo, hi = (float("nan") if v is None else float(v) for v in row["action_ci"])
    stochastic = str(row["action_readout"]).startswith("T_gr")
    if stochastic:
        est = float("nan") if row["action"] is None else float(row["action"])
        low = lo if math.isfinite(lo) else est
        changed = bool(low > e.tolerance)
        measure, value = str(row["action_readout"]), est
    else:
        value = row["n_changed"] / max(int(row["n_decisions"]), 1)
        changed = value > e.tolerance
        measure = "changed_share"
    if e.kind == "invariant":
        passed, status = not changed, (UNSAFE if changed else SAFE)
    elif e.kind == "responds":
        passed, status = changed, (EXPECTED if changed else UNSAFE)
    else:
        passed, status = True, NOT_JUDGED
    return Judgement(e, str(row["migration"]), status, passed, measure, value, (lo, hi), int(row["n_changed"]),
                     int(row["n_decisions"]))


def verdict_summary(rows: Sequence[Mapping[str, Any]], declared: Mapping[str, Expectation],
                    invariant_to: Iterable[str] = ()) -> dict[str, Any]:
    """The machine-readable verdict of summary.json: the overall word, whether the declared expectations
    passed (the exit-code gate) and every row judged."""
    exps = expectations_for([str(r["cell"]) for r in rows], declared, invariant_to)
    judged = [judge(r, e) for r, e in zip(rows, exps, strict=True)]
    failed = [j for j in judged if not j.passed]
    gate_failed = [j.expectation.cell for j in failed if j.expectation.declared]
    return {"overall": UNSAFE if failed else SAFE, "passed": not gate_failed, "failed": gate_failed,
            "unsafe": [j.expectation.cell for j in failed], "declared": sorted(declared),
            "expectations": [j.to_dict() for j in judged]}


def verdict_lines(verdict: Mapping[str, Any]) -> list[str]:
    """The verdict lines of a summary (one per row)."""
    return [str(e["line"]) for e in verdict.get("expectations", [])]


def failure_lines(verdict: Mapping[str, Any]) -> list[str]:
    """One line per failed *declared* expectation (what makes the exit code 1)."""
    return [str(e["failure"]) for e in verdict.get("expectations", []) if e["gate"] and not e["passed"]]


#: ΔU, ΔO and the action response defined in words (report.md; report.html has the same)
DEFINITIONS_MD = (
    "- **decisions changed** (D_A^q; T_gr with repeats): share of future decisions that differ from the aligned "
    "replay when the history is transformed by intervention q.",
    "- **utility change** (ΔU): mean utility of the decisions after the intervention minus the aligned replay's, "
    "paired per task.",
    "- **oracle agreement change** (ΔO): change, in percentage points, of the share of decisions that pick the "
    "best action (the oracle).",
    "- **rekey** (A_rekey): identifiers renamed in the history only (the menu keeps its names).",
)


def verdict_markdown(summary: Mapping[str, Any]) -> list[str]:
    """The report.md verdict section: the overall word, then one line per row (verdict first)."""
    v = summary.get("verdict")
    if not v:
        return []
    if v["declared"]:
        failed = ", ".join(v["failed"])
        gate = "declared expectations passed" if v["passed"] else f"declared expectations failed: {failed}"
    else:
        gate = "no expectation declared; judged against the default expectations"
    return ["## Verdict", "", f"**{v['overall']}** ({gate})", "",
            *[f"- **{e['status']}**: {e['line'].split(': ', 1)[1]}" for e in v["expectations"]], ""]
