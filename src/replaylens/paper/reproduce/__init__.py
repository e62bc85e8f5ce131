"""Reproduction framework: paper value vs ours, side by side, under one declared tolerance policy."""

from ._catalog import REPRODUCTIONS, Reproduction, get_reproduction, register_reproduction
from ._check import CI_REPRODUCTIONS, SLOW_REPRODUCTIONS, differing_lines, differing_sections
from ._markdown import read_json_rows, render_reproduction_markdown, update_reproduction_markdown
from ._paper_tables import PAPER_TABLES, UNREPRODUCED
from ._policy import (
    FLOOR,
    POLICY,
    RELATIVE,
    Quantity,
    ToleranceRule,
    apply_policy,
    classify,
    is_side_indicator,
    policy_tolerance,
    sign_rows,
)
from ._registry import COMPARED_MEASURED, STATUSES, Comparison, compare
from ._tables import TableStatus, paper_table_lines, paper_table_status, per_table_summary

__all__ = [
    "CI_REPRODUCTIONS",
    "COMPARED_MEASURED",
    "FLOOR",
    "PAPER_TABLES",
    "POLICY",
    "RELATIVE",
    "REPRODUCTIONS",
    "SLOW_REPRODUCTIONS",
    "STATUSES",
    "UNREPRODUCED",
    "Comparison",
    "Quantity",
    "Reproduction",
    "TableStatus",
    "ToleranceRule",
    "apply_policy",
    "classify",
    "compare",
    "differing_lines",
    "differing_sections",
    "is_side_indicator",
    "get_reproduction",
    "paper_table_lines",
    "paper_table_status",
    "per_table_summary",
    "policy_tolerance",
    "read_json_rows",
    "register_reproduction",
    "render_reproduction_markdown",
    "sign_rows",
    "update_reproduction_markdown",
]
