"""The one declared tolerance policy of the reproductions: value level, sign level, design (issue 28).

Every compared row is classified by the kind of quantity it holds.  A row is ``match`` only when ours is
within the value-level bound B = min(declared tolerance, the kind's bound); the kind's bound is never more
than |paper| for a nonzero paper value (so no match has the opposite sign).  An estimate outside B with the
paper's sign is ``sign-level``.  Rows declared exact (tolerance 0) are ``design`` rows (constants of the design,
exact zeros of our own writers), except sign and threshold-side indicators, which are sign-level comparisons.
Where the paper's 95% interval excludes zero, a ``… sign`` row compares the estimate's sign and a
``… excludes 0`` row checks that our interval excludes zero on the same side.  The rule and its reasons are in
docs/decisions.md (issue 28).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from enum import StrEnum

from ._registry import Comparison

__all__ = ["FLOOR", "POLICY", "RELATIVE", "SIGN_GUARD", "Quantity", "ToleranceRule", "apply_policy", "classify",
           "is_side_indicator", "p_side_rows", "policy_tolerance", "sign_rows"]


class Quantity(StrEnum):
    """The kinds of compared quantity the policy distinguishes."""

    STRUCTURAL = "structural"
    COUNT = "count"
    PROPORTION = "proportion"
    UTILITY = "estimate"


@dataclass(frozen=True)
class ToleranceRule:
    """The value-level bound for one kind of quantity, as a function of the paper's value and the declared one."""

    quantity: Quantity
    ceiling: Callable[[float, float], float]  # (paper, declared) -> the largest allowed tolerance
    rule: str
    reason: str


EXACT = 1e-6
"""A declared tolerance at most this is a floating-point allowance on an exact check: the row is structural."""
RELATIVE = 0.25
"""The estimate bound's share of |paper| (docs/decisions.md, issue 28)."""
FLOOR = 0.010
"""The estimate bound's absolute floor for near-zero paper values, in the paper's printed units."""

POLICY: dict[Quantity, ToleranceRule] = {
    Quantity.STRUCTURAL: ToleranceRule(
        Quantity.STRUCTURAL, lambda paper, declared: 0.0,
        "exact (tolerance 0, or at most 1e-6 as a floating-point allowance): `design` / `design failed`",
        "fixed by the design or by a theorem (sizes, CI levels, quotas, exact zeros and gates of our own writers); "
        "they are not measurements of the paper's system and are never counted as matches; sign and "
        "threshold-side indicators among them are sign-level comparisons"),
    Quantity.COUNT: ToleranceRule(
        Quantity.COUNT, lambda paper, declared: max(1.0, 0.1 * abs(paper)), "at most max(1, 10% of the paper's count)",
        "counts of discrete events on the same design; our draws differ from the paper's, but a gap of more "
        "than a tenth (or one unit) is not draw-to-draw variation of a count this design fixes in expectation"),
    Quantity.PROPORTION: ToleranceRule(
        Quantity.PROPORTION, lambda paper, declared: 0.10, "at most 0.10 absolute",
        "a share over the paper's smallest unit count (24 tasks or streams) has a standard error of at most "
        "√(0.25/24) ≈ 0.10; a larger gap is not sampling noise"),
    Quantity.UTILITY: ToleranceRule(
        Quantity.UTILITY, lambda paper, declared: max(RELATIVE * abs(paper), FLOOR),
        f"at most max({RELATIVE:g}·|paper|, {FLOOR:.3f}) and the declared allowance",
        "utilities, contrasts and interval limits: the value-level claim is 'the paper's number up to a quarter "
        "of it'; the floor (ten units of the paper's third printed decimal) keeps near-zero values from "
        "demanding agreement finer than its rounding plus draw noise; outside the bound an estimate with the "
        "paper's sign is `sign-level`"),
}

SIGN_GUARD = ("sign guard: for a nonzero paper value no bound exceeds |paper|, so a `match` never has the "
              "opposite sign")

_UTILITY = re.compile(r"(Δ|Γ|\bU\b|U/c|U_|utility|Utility|regret|Regret|oracle|Oracle|\bO\b|−|minus|contrast|gap)")
_COUNT = re.compile(r"(count|\bN_|\bn_|\bN\b|blocks|streams|labels|Correct|of \d|tasks|trajectories|events)")
_SIDE = re.compile(r"(\bsign\b|[<>] ?0\b|positive|negative)")
"""A row declared exact that compares a sign or the side of a threshold (a sign-level comparison)."""


def classify(row: Comparison) -> Quantity:
    """The kind of quantity a compared row holds (from its declared tolerance, value and labels)."""
    tol, paper = row.tolerance, row.paper
    if tol is None or paper is None or tol <= EXACT:
        return Quantity.STRUCTURAL
    text = f"{row.row} | {row.column}"
    if float(paper).is_integer() and abs(paper) >= 2 and (
            _COUNT.search(text) or (tol >= 1 and not _UTILITY.search(text))):
        return Quantity.COUNT
    if 0.0 <= paper <= 1.0 and not _UTILITY.search(text):
        return Quantity.PROPORTION
    return Quantity.UTILITY


def is_side_indicator(row: Comparison) -> bool:
    """An exact row that compares a sign or the side of a threshold (``sign``, ``p < 0.001``, ``U > 0``)."""
    return bool(_SIDE.search(f"{row.row} | {row.column}"))


def policy_tolerance(row: Comparison) -> float | None:
    """The value-level bound for ``row``: its declared tolerance, narrowed to the kind's bound and the sign guard."""
    if row.tolerance is None or row.paper is None:
        return row.tolerance
    paper = float(row.paper)
    ceiling = POLICY[classify(row)].ceiling(paper, float(row.tolerance))
    if paper != 0:
        ceiling = min(ceiling, abs(paper))  # the sign guard
    return min(float(row.tolerance), ceiling)


_INTERVAL = re.compile(r"^(?P<base>.*?)\s*(?P<side>(?:pooled )?estimate|(?:95% )?lower|(?:95% )?upper)$")


def _split(column: str) -> tuple[str, str] | None:
    m = _INTERVAL.match(column)
    if m is None:
        return None
    side = m["side"].split()[-1]
    return m["base"].strip(), side


def _sign(x: float) -> float:
    return 0.0 if x == 0 else math.copysign(1.0, x)


def _intervals(rows: Iterable[Comparison]) -> dict[tuple[str, str, str], dict[str, Comparison]]:
    """(table, row, base column) → its estimate/lower/upper rows."""
    groups: dict[tuple[str, str, str], dict[str, Comparison]] = {}
    for r in rows:
        parts = _split(r.column)
        if parts is not None and r.status not in ("sensitivity", "derived"):  # shown beside, not part of it
            groups.setdefault((r.table, r.row, parts[0]), {})[parts[1]] = r
    return groups


def _excluding_zero(group: dict[str, Comparison]) -> float:
    """The sign (±1) of a paper interval that excludes zero; 0 when it does not or is incomplete."""
    lo, hi = group.get("lower"), group.get("upper")
    if lo is None or hi is None or lo.paper is None or hi.paper is None:
        return 0.0
    if lo.paper > 0 and hi.paper > 0:
        return 1.0
    if lo.paper < 0 and hi.paper < 0:
        return -1.0
    return 0.0


def _side(lo: float, hi: float) -> float:
    """+1 / −1 when [lo, hi] lies above / below zero, 0 when it contains zero."""
    return 1.0 if lo > 0 else -1.0 if hi < 0 else 0.0


def sign_rows(rows: list[Comparison]) -> list[Comparison]:
    """Per paper interval that excludes zero: a ``… sign`` row (the estimate's sign) and a ``… excludes 0`` row
    (the side of zero our interval lies on, 0 when it contains zero), each ``sign-level`` or ``differs``."""
    out = []
    for (table, row, base), group in _intervals(rows).items():
        s = _excluding_zero(group)
        est = group.get("estimate")
        if s == 0 or est is None or est.status in _NOT_COMPARED or est.ours is None or math.isnan(est.ours):
            continue
        ours = _sign(est.ours)
        out.append(Comparison(table, row, f"{base} sign".strip(), s, ours, 0.0,
                              "sign-level" if ours == s else "differs",
                              "sign rule: the paper's 95% interval excludes zero, so ours must have the same sign"))
        lo, hi = group.get("lower"), group.get("upper")
        if lo is None or hi is None or lo.ours is None or hi.ours is None or lo.status in _NOT_COMPARED:
            continue
        side = _side(float(lo.ours), float(hi.ours))
        out.append(Comparison(table, row, f"{base} excludes 0".strip(), s, side, 0.0,
                              "sign-level" if side == s else "differs",
                              "interval rule: the paper's 95% interval excludes zero; ours must exclude it on the "
                              "same side (+1 above, −1 below, 0 contains zero)"))
    return out


_NOT_COMPARED = ("n/a", "derived", "sensitivity", "self-check", "self-check failed")


def _status(r: Comparison, tol: float) -> str:
    """The issue-28 status of a row with both values and a value-level bound ``tol``."""
    paper, ours = float(r.paper or 0.0), float(r.ours or 0.0)
    equal_within = abs(ours - paper) <= tol + 1e-12
    kind = classify(r)
    if kind is Quantity.STRUCTURAL:
        if is_side_indicator(r):
            return "sign-level" if equal_within else "differs"
        return "design" if equal_within else "design failed"
    if equal_within:
        return "match"
    if kind is Quantity.UTILITY and paper != 0 and ours != 0 and _sign(ours) == _sign(paper):
        return "sign-level"
    return "differs"


def apply_policy(rows: Iterable[Comparison]) -> list[Comparison]:
    """The rows with every tolerance narrowed to the value-level bound, their statuses (``match``,
    ``sign-level``, ``differs``, ``design``, ``design failed``), and the sign and interval rows added.

    Rows without a paper value, ``n/a``, derived, sensitivity and self-check rows keep their status.  A
    narrowed tolerance is recorded in the row's note.
    """
    rows = list(rows)
    out: list[Comparison] = []
    for r in rows:
        if r.status not in ("match", "differs") or r.paper is None or r.ours is None or r.tolerance is None:
            out.append(r)
            continue
        tol = policy_tolerance(r)
        assert tol is not None
        note = r.note
        if tol < float(r.tolerance) - 1e-12:
            kind = classify(r)
            why = "the sign guard (|paper|)" if tol == abs(float(r.paper)) else f"the {kind} bound"
            note = (f"{note}; " if note else "") + f"declared tolerance {r.tolerance:g} narrowed to {tol:.4g} by {why}"
        out.append(replace(r, tolerance=tol, status=_status(r, tol), note=note))
    return out + sign_rows(out) + p_side_rows(out)


def p_side_rows(rows: list[Comparison]) -> list[Comparison]:
    """Per shown (n/a) sign-flip p-value with both sides: a row comparing the side of 0.05 it lies on.

    A p-value depends on the replicate count and the resampling draws, so it is not compared at value level;
    whether it lies below 0.05 is the claim the paper makes with it."""
    out = []
    for r in rows:
        if r.status != "n/a" or not r.column.endswith("sign-flip p") or r.paper is None or r.ours is None \
                or math.isnan(r.ours):
            continue
        paper, ours = float(r.paper < 0.05), float(r.ours < 0.05)
        out.append(Comparison(r.table, r.row, f"{r.column} < 0.05 (1 = yes)", paper, ours, 0.0,
                              "sign-level" if paper == ours else "differs",
                              "threshold side of the paper's sign-flip p (0.05); the p-value itself depends on the "
                              "replicate count and draws and is shown, not compared"))
    return out
