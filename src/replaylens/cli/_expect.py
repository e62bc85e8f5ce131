"""Expectations and console lines shared by the audit commands (issue 24)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..report import Expectation

__all__ = ["declared_expectations", "state_lines"]


def declared_expectations(invariant: Sequence[str], tolerance: float | None,
                          extra: Mapping[str, Expectation] | None = None) -> dict[str, Expectation]:
    """``--expect-invariant`` cells (with ``--tolerance``; None: the default margin) plus expectations declared
    elsewhere (a project config); the command line wins for a cell named in both."""
    out = dict(extra or {})
    tol = None if tolerance is None else float(tolerance)
    out.update({c: Expectation(c, "invariant", tol, True) for c in invariant})
    return out


def state_lines(summary: Mapping[str, Any]) -> list[str]:
    """One line per history cell with a state fingerprint: how many writer states changed.  The caveat
    "unchanged decisions do not prove invariance" is added only where states changed but no decision did."""
    changed = {r["cell"]: int(r["n_changed"]) for r in summary["rows"]}
    lines = []
    for cell, st in summary["state_response"].items():
        line = f"state response S_{cell} vs S_aligned: {int(st['changed'])} of {int(st['total'])} states changed"
        if st["changed"] and changed.get(cell, 0) == 0:
            line += " (yet no decision changed: unchanged decisions do not prove invariance)"
        lines.append(line)
    return lines
