"""The one declared tolerance policy of the reproductions, and the sign rule.

Every compared row is classified by the kind of quantity it holds; the policy gives each kind a ceiling
on the tolerance a reproduction may declare, with its reason.  A declared tolerance above the ceiling is
narrowed to it (never widened), so a row can only move from ``match`` to ``differs``.  The sign guard
bounds every tolerance by the paper value's magnitude, so no row passes with the opposite sign of a
nonzero paper value.

The sign rule: where the paper gives an interval (``… lower`` / ``… upper`` next to ``… estimate``)
that excludes zero, no row of that (table, row) passes with the opposite sign, and a ``… sign`` row is
added comparing the sign of the paper's estimate with ours.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from enum import StrEnum

from ._registry import Comparison

__all__ = ["POLICY", "SIGN_GUARD", "Quantity", "ToleranceRule", "apply_policy", "classify", "policy_tolerance",
           "sign_rows"]


class Quantity(StrEnum):
    """The kinds of compared quantity the policy distinguishes."""

    STRUCTURAL = "structural"
    COUNT = "count"
    PROPORTION = "proportion"
    UTILITY = "utility"


@dataclass(frozen=True)
class ToleranceRule:
    """The ceiling on a declared tolerance for one kind of quantity, as a function of the paper's value."""

    quantity: Quantity
    ceiling: Callable[[float, float], float]  # (paper, declared) -> the largest allowed tolerance
    rule: str
    reason: str


POLICY: dict[Quantity, ToleranceRule] = {
    Quantity.STRUCTURAL: ToleranceRule(
        Quantity.STRUCTURAL, lambda paper, declared: 0.0, "exact (tolerance 0)",
        "fixed by the design or by a theorem (sizes, exact zeros, invariances); any difference is a defect"),
    Quantity.COUNT: ToleranceRule(
        Quantity.COUNT, lambda paper, declared: max(1.0, 0.1 * abs(paper)), "at most max(1, 10% of the paper's count)",
        "counts of discrete events on the same design; our draws differ from the paper's, but a gap of more "
        "than a tenth (or one unit) is not draw-to-draw variation of a count this design fixes in expectation"),
    Quantity.PROPORTION: ToleranceRule(
        Quantity.PROPORTION, lambda paper, declared: 0.10, "at most 0.10 absolute",
        "a share over the paper's smallest unit count (24 tasks or streams) has a standard error of at most "
        "√(0.25/24) ≈ 0.10; a larger gap is not sampling noise"),
    Quantity.UTILITY: ToleranceRule(
        Quantity.UTILITY, lambda paper, declared: declared, "the declared allowance for the row's scale",
        "utilities and signed contrasts come on several scales (unit, ×10⁻³), so the allowance is declared "
        "where the scale is known; the sign guard below bounds it by the paper value's magnitude"),
}

SIGN_GUARD = ("sign guard: for a nonzero paper value no tolerance exceeds |paper|, so a passing value lies between "
              "0 and twice the paper's and never has the opposite sign")

_UTILITY = re.compile(r"(Δ|Γ|\bU\b|U/c|U_|utility|Utility|regret|Regret|oracle|Oracle|\bO\b|−|minus|contrast|gap)")
_COUNT = re.compile(r"(count|\bN_|\bn_|\bN\b|blocks|streams|labels|Correct|of \d|tasks|trajectories|events)")


def classify(row: Comparison) -> Quantity:
    """The kind of quantity a compared row holds (from its declared tolerance, value and labels)."""
    tol, paper = row.tolerance, row.paper
    if tol is None or paper is None or tol == 0:
        return Quantity.STRUCTURAL
    text = f"{row.row} | {row.column}"
    if float(paper).is_integer() and abs(paper) >= 2 and (
            _COUNT.search(text) or (tol >= 1 and not _UTILITY.search(text))):
        return Quantity.COUNT
    if 0.0 <= paper <= 1.0 and not _UTILITY.search(text):
        return Quantity.PROPORTION
    return Quantity.UTILITY


def policy_tolerance(row: Comparison) -> float | None:
    """The tolerance the policy allows for ``row``: its declared one, narrowed to the kind's ceiling."""
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
        if parts is not None:
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


def sign_rows(rows: list[Comparison]) -> list[Comparison]:
    """One ``… sign`` row per paper interval that excludes zero: the paper estimate's sign next to ours."""
    out = []
    for (table, row, base), group in _intervals(rows).items():
        s = _excluding_zero(group)
        est = group.get("estimate")
        if s == 0 or est is None or est.status not in ("match", "differs") or est.ours is None or math.isnan(est.ours):
            continue
        ours = _sign(est.ours)
        status = "match" if ours == s else "differs"
        out.append(Comparison(table, row, f"{base} sign".strip(), s, ours, 0.0, status,
                              "sign rule: the paper's 95% interval excludes zero, so ours must have the same sign"))
    return out


def apply_policy(rows: Iterable[Comparison]) -> list[Comparison]:
    """The rows with every tolerance narrowed to the policy's ceiling, the sign rule enforced, sign rows added.

    Rows without a paper value, ``n/a`` rows and self-checks keep their status (a self-check is already
    exact).  A narrowed tolerance is recorded in the row's note.
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
            why = "the sign guard (|paper|)" if tol == abs(float(r.paper)) else f"the {kind} policy"
            note = (f"{note}; " if note else "") + f"declared tolerance {r.tolerance:g} narrowed to {tol:.4g} by {why}"
        status = "match" if abs(float(r.ours) - float(r.paper)) <= tol + 1e-12 else "differs"
        out.append(replace(r, tolerance=tol, status=status, note=note))
    groups = _intervals(out)
    excl = {key: s for key, g in groups.items() if (s := _excluding_zero(g)) != 0}
    final: list[Comparison] = []
    for r in out:
        parts = _split(r.column)
        sgn = excl.get((r.table, r.row, parts[0]), 0.0) if parts is not None else 0.0
        if sgn and r.status == "match" and r.ours is not None and _sign(float(r.ours)) == -sgn:
            r = replace(r, status="differs", note=(f"{r.note}; " if r.note else "")
                        + "sign rule: opposite sign to a paper interval that excludes zero")
        final.append(r)
    return final + sign_rows(final)
