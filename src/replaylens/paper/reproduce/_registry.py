"""The reproduction framework: named comparisons of the paper's numbers with ours.

A reproduction is a function returning :class:`Comparison` rows; ``replaylens paper reproduce NAME``
prints them side by side and ``--json`` prints one object per row with the keys table, row,
column, paper, ours, tolerance, status and note.  Statuses (:data:`STATUSES`):

* ``match`` / ``sign-level`` / ``differs``: the paper printed this value for this system; ours agrees at the
  value-level bound of its declared kind (``_policy.py``, ``_kinds.py``) / agrees in sign only, where the paper
  claims a sign / agrees in neither;
* ``agrees`` / ``disagrees``: an indicator (a sign, the side of zero or of a threshold, a measured gate's outcome)
  equals / does not equal the paper's;
* ``derived``: the expected value is a target derived from the paper (e.g. in the spec), not a number it printed;
  shown with its source, never counted as a match;
* ``design``: the value is a constant of the design (a count, a CI level, a quota, an exact zero of our own
  writers), compared exactly; equal is ``design``, unequal ``design failed``;
* ``sensitivity``: ours under an alternative reading (labelled in the note), shown next to the paper's value
  and not counted;
* ``self-check`` / ``self-check failed``: the expected value is a structural property of our own agent
  (e.g. the scripted Mean agent agreeing with the Mean rule), not a number the paper printed for the
  system it ran; it holds / does not hold exactly;
* ``n/a``: one side is missing (a hosted-model value shown for reference, or a quantity the paper does not report).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ...errors import ConfigError

__all__ = ["COMPARED_MEASURED", "INDICATOR_STATUSES", "STATUSES", "VALUE_STATUSES", "Comparison", "compare"]

STATUSES = ("match", "sign-level", "differs", "agrees", "disagrees", "derived", "design", "design failed",
            "sensitivity", "self-check", "self-check failed", "n/a")
VALUE_STATUSES = ("match", "sign-level", "differs")
"""Statuses of a measured value compared at value level with a number the paper printed."""
INDICATOR_STATUSES = ("agrees", "disagrees")
"""Statuses of an indicator (sign, side of zero or of a threshold, gate outcome) compared with the paper's."""
COMPARED_MEASURED = VALUE_STATUSES + INDICATOR_STATUSES
"""Statuses of a measured value or indicator compared with the paper's (a table with one is reproduced)."""


@dataclass(frozen=True)
class Comparison:
    """The paper's value next to ours for one (table, row, column)."""

    table: str
    row: str
    column: str
    paper: float | None
    ours: float | None
    tolerance: float | None
    status: str
    note: str = ""
    kind: str = ""
    """The declared kind (``_kinds.Kind``); empty until the reproduction's declaration is applied."""

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def compare(table: str, row: str, column: str, paper: float | None, ours: float | None,
            tolerance: float | None = 0.0, note: str = "", *, self_check: bool = False, derived: str = "",
            sensitivity: str = "", kind: str = "") -> Comparison:
    """Build a row; status is ``match`` when |ours − paper| ≤ tolerance, ``differs`` otherwise,
    ``n/a`` when either side is missing (e.g. the paper's hosted-model value shown for reference).

    ``self_check``: ``paper`` is a structural expectation of our own agent, not a value the paper printed
    for the system it ran; the row is compared exactly (tolerance 0) and its status is ``self-check`` or
    ``self-check failed``.  ``derived`` (the source): ``paper`` is a target derived from the paper, not a number
    it printed; the status is ``derived``.  ``sensitivity`` (the reading): ours under an alternative reading;
    the status is ``sensitivity``.  Neither is ever counted as a match.  ``kind``: the row's quantity kind, when
    declared at the call site rather than in the reproduction's ``Kinds``."""
    if derived or sensitivity:
        label = (f"derived target, not printed by the paper: {derived}" if derived
                 else f"sensitivity row, not counted: {sensitivity}")
        return Comparison(table, row, column, None if paper is None else float(paper),
                          None if ours is None else float(ours), tolerance,
                          "derived" if derived else "sensitivity", f"{note}; {label}" if note else label, str(kind))
    if self_check:
        if paper is None or ours is None:
            raise ConfigError(f"self-check row {table}/{row}/{column} needs both the expectation and ours")
        tolerance = 0.0
    if paper is None or ours is None or tolerance is None or (isinstance(ours, float) and math.isnan(ours)):
        status = "n/a"
    else:
        ok = abs(float(ours) - float(paper)) <= float(tolerance) + 1e-12
        if self_check:
            status = "self-check" if ok else "self-check failed"
        else:
            status = "match" if ok else "differs"
    return Comparison(table, row, column, None if paper is None else float(paper),
                      None if ours is None else float(ours), tolerance, status, note, str(kind))
