"""The one declared tolerance policy of the reproductions: bounds by declared kind (issues 28 and 50).

Every compared row has a declared kind (``_kinds.py``).  A value row (count, proportion, signed estimate,
non-negative estimate, interval limit) is ``match`` only when |ours − paper| ≤ B = min(declared tolerance, the
kind's bound) and, for a nonzero paper value, |ours − paper| < |paper|/2 with ours not 0 at the printed precision
(the near-zero rule).  A signed estimate outside B is ``sign-level`` only where the paper claims its sign (its
interval excludes 0, or the declaration names the text) and ours has it; otherwise ``differs``.  Design constants
are exact (``design`` / ``design failed``); indicators are exact (``agrees`` / ``disagrees``).  For every declared
paper interval that excludes 0, an ``… excludes 0`` indicator (and with a signed estimate a ``… sign`` one) is
added.  The rule and its reasons: docs/decisions.md, issue 50.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from ._kinds import VALUE_KINDS, Interval, Kind, Kinds
from ._registry import Comparison

__all__ = ["EXACT", "FLOOR", "POLICY", "PRINTED", "RELATIVE", "NEAR_ZERO", "ToleranceRule", "apply_policy",
           "kind_bound", "p_side_rows", "policy_tolerance", "side_rows"]

EXACT = 1e-6
"""The largest floating-point allowance on an exact (design or indicator) comparison."""
RELATIVE = 0.25
"""The value-level claim: the paper's number up to a quarter of it (estimates; proportions of the nearer end)."""
FLOOR = 0.010
"""The estimate bound's floor for near-zero paper values, in the paper's printed units."""
PRINTED = 0.0005
"""Half a unit of the paper's third printed decimal: below it a value prints as 0.000."""
PROPORTION_CAP = 0.10
"""The standard error of a share over the paper's smallest unit count (24) is at most √(0.25/24) ≈ 0.10."""


@dataclass(frozen=True)
class ToleranceRule:
    """The value-level bound of one kind as a function of the paper's value, with its rule and reason."""

    kind: Kind
    bound: Callable[[float], float]
    rule: str
    reason: str


POLICY: dict[Kind, ToleranceRule] = {
    Kind.DESIGN: ToleranceRule(
        Kind.DESIGN, lambda p: 0.0, "exact (at most 1e-6 as a floating-point allowance): `design` / `design failed`",
        "a constant of the design or an exact consequence of it (sizes, CI levels, quotas, theorems, exact zeros of "
        "our own writers); not a measurement of the paper's system, never counted as a match"),
    Kind.COUNT: ToleranceRule(
        Kind.COUNT, lambda p: max(1.0, 0.1 * abs(p)), "at most max(1, 10% of the paper's count)",
        "a count of measured events on the same design; a gap over a tenth (or one unit, the count's resolution) is "
        "not the draw-to-draw variation of a count the design fixes in expectation; no sign level"),
    Kind.PROPORTION: ToleranceRule(
        Kind.PROPORTION, lambda p: min(PROPORTION_CAP, max(RELATIVE * min(p, 1.0 - p), PRINTED)),
        "at most min(0.10, 0.25·min(p, 1 − p)), at least 0.0005",
        "a share: a quarter of its distance to the nearer end of [0, 1] (so never half or twice the share or its "
        "complement), capped at 0.10, the standard error of a share over 24 units; no sign level"),
    Kind.ESTIMATE: ToleranceRule(
        Kind.ESTIMATE, lambda p: max(RELATIVE * abs(p), FLOOR), f"at most max({RELATIVE:g}·|paper|, {FLOOR:.3f})",
        "a signed estimate (utility, contrast, interaction): the paper's number up to a quarter of it, with a floor "
        "of ten units of its third printed decimal; outside, `sign-level` only where the paper claims the sign "
        "(its interval excludes 0, or the text states it) and ours has it"),
    Kind.MAGNITUDE: ToleranceRule(
        Kind.MAGNITUDE, lambda p: max(RELATIVE * abs(p), FLOOR), f"at most max({RELATIVE:g}·|paper|, {FLOOR:.3f})",
        "a non-negative estimate (distance, |ΔU|, max |Γ|, excess BCE): the estimate bound; its sign carries no "
        "information, so no sign level"),
    Kind.LIMIT: ToleranceRule(
        Kind.LIMIT, lambda p: max(RELATIVE * abs(p), FLOOR), f"at most max({RELATIVE:g}·|paper|, {FLOOR:.3f})",
        "a 95% interval limit of a signed or non-negative estimate: the estimate bound in the estimate's units; no "
        "sign level (the side of zero is the `… excludes 0` indicator's claim); a limit of a share is a proportion "
        "and takes the proportion bound"),
    Kind.INDICATOR: ToleranceRule(
        Kind.INDICATOR, lambda p: 0.0, "exact: `agrees` / `disagrees`",
        "a sign, the side of zero or of a threshold, a p-value below a threshold or a measured gate's outcome; "
        "reported apart from value rows"),
}

NEAR_ZERO = ("near-zero rule: for a nonzero paper value a value row matches only if |ours − paper| < |paper|/2 and "
             "ours is not 0.000 at the printed precision (never 0, the opposite sign, half or twice the paper's)")


def kind_bound(kind: Kind, paper: float) -> float:
    """The kind's value-level bound for a paper value, the near-zero rule included."""
    b = POLICY[kind].bound(paper)
    if kind in VALUE_KINDS and (paper != 0 or kind is Kind.COUNT):
        b = min(b, abs(paper) / 2)
    return b


def policy_tolerance(row: Comparison, kind: Kind) -> float | None:
    """The value-level bound for ``row``: its declared tolerance narrowed to its kind's bound."""
    if row.tolerance is None or row.paper is None:
        return row.tolerance
    declared = float(row.tolerance)
    if kind in (Kind.DESIGN, Kind.INDICATOR):
        return min(declared, EXACT)
    return min(declared, kind_bound(kind, float(row.paper)))


def _sign(x: float) -> float:
    return 0.0 if abs(x) < PRINTED else math.copysign(1.0, x)


def _status(kind: Kind, paper: float, ours: float, tol: float, sign_claim: bool) -> str:
    d = abs(ours - paper)
    if kind is Kind.DESIGN:
        return "design" if d <= tol + 1e-12 else "design failed"
    if kind is Kind.INDICATOR:
        return "agrees" if d <= tol + 1e-12 else "disagrees"
    within = d <= tol + 1e-12
    if paper != 0:
        within = within and d < abs(paper) / 2 and abs(ours) >= PRINTED
    if within:
        return "match"
    if kind is Kind.ESTIMATE and sign_claim and paper != 0 and _sign(ours) == _sign(paper):
        return "sign-level"
    return "differs"


_KEPT = ("n/a", "derived", "sensitivity", "self-check", "self-check failed")


def _groups(rows: Iterable[Comparison], intervals: Iterable[Interval]) -> dict[tuple[str, str, int, str],
                                                                               dict[str, Comparison]]:
    """(table, row, interval index, shared base) → its estimate / lower / upper rows (declared intervals only)."""
    out: dict[tuple[str, str, int, str], dict[str, Comparison]] = {}
    ivs = list(intervals)
    for r in rows:
        if r.status in ("sensitivity", "derived"):  # shown beside an interval, not part of it
            continue
        for i, iv in enumerate(ivs):
            part = iv.part(r)
            if part is not None:
                out.setdefault((r.table, r.row, i, part[1]), {})[part[0]] = r
                break
    return out


def _excluding(group: dict[str, Comparison]) -> float:
    """±1 when the paper's interval lies above / below zero, 0 when it contains zero or is incomplete."""
    lo, hi = group.get("lower"), group.get("upper")
    if lo is None or hi is None or lo.paper is None or hi.paper is None:
        return 0.0
    return 1.0 if lo.paper > 0 and hi.paper > 0 else -1.0 if lo.paper < 0 and hi.paper < 0 else 0.0


def _name(group: dict[str, Comparison], base: str) -> str:
    """The checked quantity's name: the estimate's column, else the shared base."""
    est = group.get("estimate")
    if est is None or est.column == "estimate":
        return base
    return est.column[:-len(" estimate")] if est.column.endswith(" estimate") else est.column


def sign_claimed(rows: Iterable[Comparison], kinds: Kinds) -> set[tuple[str, str, str]]:
    """(table, row, column) of every estimate whose declared paper interval excludes zero."""
    return {(g["estimate"].table, g["estimate"].row, g["estimate"].column)
            for g in _groups(rows, kinds.intervals).values() if "estimate" in g and _excluding(g) != 0}


def side_rows(rows: list[Comparison], kinds: Kinds) -> list[Comparison]:
    """Per declared paper interval that excludes zero, with our limits: an ``… excludes 0`` indicator (ours must
    exclude zero on the same side) and, for a compared signed estimate, a ``… sign`` indicator; each note carries
    the paper's interval."""
    out = []
    for (table, row, _, base), g in _groups(rows, kinds.intervals).items():
        s = _excluding(g)
        lo, hi, est = g.get("lower"), g.get("upper"), g.get("estimate")
        if s == 0 or lo is None or hi is None or lo.status in _KEPT or hi.status in _KEPT \
                or Kind.DESIGN in (lo.kind, hi.kind):  # limits fixed by the design are not a measured claim
            continue
        name = _name(g, base)
        paper = f"the paper's 95% interval [{lo.paper:.3f}, {hi.paper:.3f}] excludes zero"
        if est is not None and est.status not in _KEPT and est.ours is not None and not math.isnan(est.ours) \
                and est.kind == Kind.ESTIMATE:
            ours = _sign(float(est.ours))
            out.append(Comparison(table, row, f"{name} sign".strip(), s, ours, 0.0,
                                  "agrees" if ours == s else "disagrees",
                                  f"sign rule: {paper}, so ours must have the same sign", str(Kind.INDICATOR)))
        if lo.ours is None or hi.ours is None or math.isnan(lo.ours) or math.isnan(hi.ours):
            continue
        side = 1.0 if lo.ours > 0 else -1.0 if hi.ours < 0 else 0.0
        out.append(Comparison(table, row, f"{name} excludes 0".strip(), s, side, 0.0,
                              "agrees" if side == s else "disagrees",
                              f"interval rule: {paper}; ours must exclude it on the same side (+1 above, −1 below, "
                              "0 contains zero)", str(Kind.INDICATOR)))
    return out


def p_side_rows(rows: list[Comparison]) -> list[Comparison]:
    """Per shown (n/a) sign-flip p-value with both sides: an indicator of the side of 0.05 it lies on.

    A p-value depends on the replicate count and the resampling draws, so it is not compared at value level;
    whether it lies below 0.05 is the claim the paper makes with it."""
    out = []
    for r in rows:
        if r.status != "n/a" or not r.column.endswith("sign-flip p") or r.paper is None or r.ours is None \
                or math.isnan(r.ours):
            continue
        paper, ours = float(r.paper < 0.05), float(r.ours < 0.05)
        out.append(Comparison(r.table, r.row, f"{r.column} < 0.05 (1 = yes)", paper, ours, 0.0,
                              "agrees" if paper == ours else "disagrees",
                              "threshold side of the paper's sign-flip p (0.05); the p-value itself depends on the "
                              "replicate count and draws and is shown, not compared", str(Kind.INDICATOR)))
    return out


def apply_policy(rows: Iterable[Comparison], kinds: Kinds | None = None) -> list[Comparison]:
    """The rows under their declared kinds' bounds and statuses, with the side-check indicators added.

    Rows declared ``derived`` get that status and their source, rows declared ``shown`` become ``n/a``; rows
    without both values, ``n/a``, derived, sensitivity and self-check rows keep their status.  Every other row
    needs a declared kind (``kinds`` or the row's own); a narrowed tolerance is recorded in the row's note."""
    kinds = kinds or Kinds()
    rows = list(rows)
    typed: list[Comparison] = []
    for r in rows:
        src = kinds.derived_source(r) if r.status in ("match", "differs") else ""
        shown = kinds.shown_reason(r) if r.status in ("match", "differs") else ""
        if shown:
            why = f"not compared: {shown}"
            r = replace(r, status="n/a", note=f"{r.note}; {why}" if r.note else why)
        elif src:
            label = f"derived target, not printed by the paper: {src}"
            r = replace(r, status="derived", note=f"{r.note}; {label}" if r.note else label)
        if r.status in ("match", "differs") and r.paper is not None and r.ours is not None \
                and r.tolerance is not None:
            r = replace(r, kind=str(kinds.kind_of(r)))
        typed.append(r)
    claimed = sign_claimed(typed, kinds)
    out: list[Comparison] = []
    for r in typed:
        if not r.kind or r.status not in ("match", "differs"):
            out.append(r)
            continue
        kind = Kind(r.kind)
        tol = policy_tolerance(r, kind)
        assert tol is not None and r.paper is not None and r.ours is not None and r.tolerance is not None
        claim = (r.table, r.row, r.column) in claimed or bool(kinds.sign_claim(r))
        note = r.note
        if tol < float(r.tolerance) - 1e-12:
            half = kind in VALUE_KINDS and tol == abs(float(r.paper)) / 2 < POLICY[kind].bound(float(r.paper))
            why = "the near-zero rule (|paper|/2)" if half else f"the {kind} bound"
            note = (f"{note}; " if note else "") + f"declared tolerance {r.tolerance:g} narrowed to {tol:.4g} by {why}"
        out.append(replace(r, tolerance=tol, note=note,
                           status=_status(kind, float(r.paper), float(r.ours), tol, claim)))
    return out + side_rows(out, kinds) + p_side_rows(out)
