"""The generated list of every paper table (``tab:`` label) with its reproduction status."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from ._cells import STALE, split_row
from ._paper_tables import PAPER_TABLES, SHARED_TABLES, UNREPRODUCED
from ._registry import COMPARED_MEASURED

__all__ = ["TableStatus", "paper_table_lines", "paper_table_status", "per_table_summary"]

_LABEL = re.compile(r"tab:[A-Za-z0-9_-]+")
_COMPARED = COMPARED_MEASURED  # a table is reproduced only when a measured value is compared with the paper's
_KIND_TEXT = {"covered": "covered under another label", "hosted": "needs a hosted model",
              "no numbers": "has no numbers", "not reproduced": "**not reproduced**",
              "no measured value": "**not reproduced** (no measured value compared)",
              "stale": "kept from an earlier generation"}
_SUMMARY = {"covered": "covered under another label", "hosted": "need a hosted model", "no numbers": "have no numbers",
            "no measured value": "show only design, derived, self-check or n/a rows",
            "stale": "are kept from an earlier generation (not regenerated under the current policy)"}


@dataclass(frozen=True)
class TableStatus:
    """One paper table: ``reproduced`` (sections with compared rows), or its declared disposition."""

    label: str
    status: str  # reproduced / covered / hosted / no numbers / not reproduced / unaccounted
    sections: dict[str, Counter[str]]  # section name -> rows per status for this label
    detail: str


def _anchor(heading: str) -> str:
    """GitHub's anchor for a markdown heading (lower case; punctuation dropped; spaces to hyphens)."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def _rows_by_label(body: Iterable[str]) -> tuple[dict[str, dict[str, Counter[str]]], dict[str, str]]:
    """label -> section -> status counts, from rendered section lines; and each section's anchor."""
    by: dict[str, dict[str, Counter[str]]] = {}
    anchors: dict[str, str] = {}
    section, stale = "", False
    for line in body:
        if line.startswith("## `"):
            section, stale = line[4:].split("`", 1)[0], False
            anchors[section] = _anchor(line[3:])
        elif line.startswith(STALE):
            stale = True
        elif line.startswith("| ") and not line.startswith("| table |") and section:
            cells = split_row(line)
            m = _LABEL.match(cells[0])
            if m:
                status = "stale" if stale else cells[-1].strip("*")
                by.setdefault(m.group(0), {}).setdefault(section, Counter())[status] += 1
    return by, anchors


def _compared(sections: dict[str, Counter[str]]) -> bool:
    return any(c[s] for c in sections.values() for s in _COMPARED)


def _stale(sections: dict[str, Counter[str]]) -> bool:
    """Only rows of sections kept from an earlier generation (and n/a rows)."""
    return bool(sections) and all(set(c) <= {"stale", "n/a"} for c in sections.values()) and \
        any(c["stale"] for c in sections.values())


def paper_table_status(body: Iterable[str]) -> list[TableStatus]:
    """The status of every ``tab:`` label of the paper, in the paper's order.

    A label with compared rows is ``reproduced``; a label without them that shares its table with a
    reproduced label (``SHARED_TABLES``: a second ``\\label`` on the same table) is ``covered`` by it,
    with that label's sections; otherwise its declared disposition (``UNREPRODUCED``) applies."""
    by, _ = _rows_by_label(body)
    mates = {label: [m for m in group if m != label] for group in SHARED_TABLES for label in group}
    out = []
    for label in PAPER_TABLES:
        sections = by.get(label, {})
        mate = next((m for m in mates.get(label, []) if _compared(by.get(m, {}))), None)
        if _compared(sections):
            out.append(TableStatus(label, "reproduced", sections, ""))
        elif _stale(sections):
            out.append(TableStatus(label, "stale", sections, "its sections were not regenerated under the current "
                                   "policy; their rows are shown as last rendered and not counted"))
        elif (kept := next((m for m in mates.get(label, []) if _stale(by.get(m, {}))), None)) is not None:
            out.append(TableStatus(label, "stale", by[kept], f"same table as {kept} (second \\label), whose sections "
                                   "were not regenerated under the current policy"))
        elif mate is not None:
            out.append(TableStatus(label, "covered", by[mate], f"same table as {mate} (second \\label)"))
        elif label in UNREPRODUCED:
            kind, detail = UNREPRODUCED[label]
            out.append(TableStatus(label, kind, sections, detail))
        elif sections:
            shown = ", ".join(sorted({s for c in sections.values() for s in c}))
            out.append(TableStatus(label, "no measured value", sections,
                                   f"rows shown ({shown}) but no measured value compared with the paper's"))
        else:
            out.append(TableStatus(label, "unaccounted", sections, "paper values shown, nothing compared"
                                   if sections else "no reproduction and no declared disposition"))
    return out


def paper_table_lines(body: list[str]) -> list[str]:
    """The "Paper tables" section of docs/paper/reproduction.md."""
    _, anchors = _rows_by_label(body)
    statuses = paper_table_status(body)
    n = Counter(t.status for t in statuses)
    summary = ", ".join(f"{v} {_SUMMARY.get(k, k)}" for k, v in sorted(n.items(), key=lambda x: -x[1]))
    lines = ["## Paper tables", "",
             f"Every `tab:` label of the paper ({len(statuses)}): {summary}.", "",
             "| label | status | where / why |", "|---|---|---|"]
    for t in statuses:
        links = []
        for sec, c in t.sections.items():
            counts = ", ".join(f"{v} {k}" for k, v in sorted(c.items()))
            links.append(f"[`{sec}`](#{anchors.get(sec, sec)}) ({counts})")
        where = "; ".join(links)
        if t.status == "reproduced":
            lines.append(f"| {t.label} | reproduced | {where} |")
        else:
            extra = f" Rows shown: {where}." if where else ""
            lines.append(f"| {t.label} | {_KIND_TEXT.get(t.status, '**' + t.status + '**')} | {t.detail}.{extra} |")
    return [*lines, ""]


def per_table_summary(body: list[str]) -> list[str]:
    """One line per paper table for docs/paper/reproduction-notes.md: reproduced at value level, at sign level,
    partly, or not (measured rows only: design, derived, self-check and n/a rows are not counted)."""
    out = []
    for t in paper_table_status(body):
        c: Counter[str] = Counter()
        for per in t.sections.values():
            c.update(per)
        shown = ", ".join(f"{v} {k}" for k, v in sorted(c.items()))
        rows = f" (rows shown: {shown})" if shown else ""
        if t.status == "reproduced":
            m, s, d, a, x = c["match"], c["sign-level"], c["differs"], c["agrees"], c["disagrees"]
            v = m + s + d
            kind = ("only indicators" if v == 0 else "all at value level" if m == v
                    else "value or sign level" if d == 0 else "partly")
            extra = f" (+{c['design']} design, {c['derived']} derived)" if c["design"] or c["derived"] else ""
            out.append(f"- {t.label}: {kind}: {m} of {v} value rows match at value level, {s} sign-level only, {d} "
                       f"differ; {a} of {a + x} indicator rows agree{extra}.")
        elif t.status == "covered":
            out.append(f"- {t.label}: covered: {t.detail}.")
        elif t.status == "no measured value":
            out.append(f"- {t.label}: not reproduced: no measured value compared{rows}.")
        elif t.status == "stale":
            out.append(f"- {t.label}: kept from an earlier generation, not regenerated under the current policy{rows}.")
        elif t.status == "hosted":
            out.append(f"- {t.label}: needs a hosted model{rows}.")
        else:
            out.append(f"- {t.label}: {t.status}{rows}.")
    return out
