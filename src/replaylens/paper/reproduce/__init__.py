"""Reproduction framework: paper value vs ours, side by side, under one declared tolerance policy."""

from ._catalog import REPRODUCTIONS, Reproduction, get_reproduction, register_reproduction
from ._cells import STALE
from ._check import CI_REPRODUCTIONS, SLOW_REPRODUCTIONS, differing_lines, differing_sections
from ._kinds import VALUE_KINDS, Interval, Kind, Kinds
from ._markdown import (
    mark_stale,
    read_json_rows,
    render_reproduction_markdown,
    stale_sections,
    update_reproduction_markdown,
)
from ._paper_tables import PAPER_TABLES, UNREPRODUCED
from ._policy import (
    FLOOR,
    POLICY,
    RELATIVE,
    ToleranceRule,
    apply_policy,
    kind_bound,
    p_side_rows,
    policy_tolerance,
    side_rows,
)
from ._registry import (
    COMPARED_MEASURED,
    INDICATOR_STATUSES,
    STATUSES,
    VALUE_STATUSES,
    Comparison,
    compare,
)
from ._tables import TableStatus, paper_table_lines, paper_table_status, per_table_summary

__all__ = [
    "CI_REPRODUCTIONS",
    "COMPARED_MEASURED",
    "FLOOR",
    "INDICATOR_STATUSES",
    "VALUE_KINDS",
    "VALUE_STATUSES",
    "Interval",
    "Kind",
    "Kinds",
    "kind_bound",
    "p_side_rows",
    "side_rows",
    "PAPER_TABLES",
    "POLICY",
    "RELATIVE",
    "REPRODUCTIONS",
    "STALE",
    "SLOW_REPRODUCTIONS",
    "STATUSES",
    "UNREPRODUCED",
    "Comparison",
    "Reproduction",
    "TableStatus",
    "ToleranceRule",
    "apply_policy",
    "compare",
    "differing_lines",
    "differing_sections",
    "get_reproduction",
    "paper_table_lines",
    "paper_table_status",
    "per_table_summary",
    "policy_tolerance",
    "read_json_rows",
    "mark_stale",
    "register_reproduction",
    "render_reproduction_markdown",
    "stale_sections",
    "update_reproduction_markdown",
]
