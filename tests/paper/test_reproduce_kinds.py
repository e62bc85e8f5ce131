"""Issue 50: every compared row of docs/paper/reproduction.md has a kind declared next to its table, its status is
the one its kind allows, and the document renders as a table of seven cells per row (``|`` escaped)."""

from __future__ import annotations

import re
from pathlib import Path

from replaylens.paper.experiments import all_reproductions
from replaylens.paper.reproduce import (
    INDICATOR_STATUSES,
    VALUE_KINDS,
    VALUE_STATUSES,
    Comparison,
    Kind,
    compare,
    kind_bound,
    render_reproduction_markdown,
)
from replaylens.paper.reproduce._markdown import escape_cell, split_row, stale_sections

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "paper" / "reproduction.md"
_SHOWN = {"**differs**": "differs", "**design failed**": "design failed", "**disagrees**": "disagrees",
          "**self-check failed**": "self-check failed"}
_ADDED = re.compile(r"(^| )(sign|excludes 0)$|sign-flip p < 0\.05 \(1 = yes\)$")
"""Columns of the indicators the policy adds (side checks of declared intervals, the side of a shown p)."""


def _doc_rows() -> list[tuple[str, list[str]]]:
    out, section = [], ""
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("## `"):
            section = line[4:].split("`", 1)[0]
        elif section and line.startswith("|") and not line.startswith(("| table |", "|---")):
            out.append((section, split_row(line)))
    return out


def test_every_row_of_the_document_has_seven_cells() -> None:
    rows = _doc_rows()
    assert len(rows) > 3000
    bad = [(s, cells) for s, cells in rows if len(cells) != 7]
    assert not bad, bad[:3]
    text = DOC.read_text(encoding="utf-8")
    assert "\\|ΔU\\|" in text  # the utility-resolution columns |ΔU| are escaped, not split
    assert not [ln for ln in text.splitlines() if ln.startswith("| ") and " |ΔU| " in ln]


def test_rendering_escapes_cell_separators() -> None:
    rows = [{"reproduction": "a", **compare("tab:x", "max |Γ| row", "|ΔU| | S", 0.5, 0.5, 0.1).to_dict()}]
    text = render_reproduction_markdown(rows, {"a": "A"})
    line = next(ln for ln in text.splitlines() if ln.startswith("| tab:x"))
    cells = split_row(line)
    assert len(cells) == 7 and cells[1:3] == ["max |Γ| row", "|ΔU| | S"]
    assert escape_cell("a|b") == "a\\|b" and split_row("| a\\|b | c |") == ["a|b", "c"]


def test_every_compared_row_has_a_declared_kind_and_the_status_its_kind_allows() -> None:
    """Sections kept from an earlier generation (marked stale at their heading) hold the earlier policy's statuses
    and are left out; their declarations are checked when they are regenerated."""
    regs = all_reproductions()
    stale = set(stale_sections(DOC.read_text(encoding="utf-8").splitlines()))
    checked, undeclared, wrong, wider = 0, [], [], []
    for section, cells in _doc_rows():
        if section in stale:
            continue
        table, row, column, paper, ours, tol, shown = cells
        status = _SHOWN.get(shown, shown)
        if status not in (*VALUE_STATUSES, *INDICATOR_STATUSES, "design", "design failed"):
            continue
        if status in INDICATOR_STATUSES and _ADDED.search(column):
            continue  # a side check the policy adds for a declared interval (test_reproduce_intervals)
        r = Comparison(table, row, column, float(paper), float(ours), float(tol), status)
        kind = regs[section].kinds.declared(r)
        if kind is None:
            undeclared.append((section, table, row, column))
            continue
        checked += 1
        allowed = (VALUE_STATUSES if kind in VALUE_KINDS else INDICATOR_STATUSES if kind is Kind.INDICATOR
                   else ("design", "design failed"))
        if status not in allowed or (status == "sign-level" and kind is not Kind.ESTIMATE):
            wrong.append((section, table, row, column, kind, status))
        # the shown bound is at most its kind's (a limit of a share takes the proportion bound; printed at 3 decimals)
        if kind in VALUE_KINDS and float(tol) > kind_bound(kind, float(paper)) + 0.0006:
            wider.append((section, table, row, column, kind, tol))
    assert not undeclared, undeclared[:10]
    assert not wrong, wrong[:10]
    assert not wider, wider[:10]
    assert checked > 1000  # 1,257 when the three learned sections were kept stale, more as they are regenerated
