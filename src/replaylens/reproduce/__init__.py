"""Reproduction framework: paper value vs ours, side by side."""

from ._markdown import read_json_rows, render_reproduction_markdown, update_reproduction_markdown
from ._registry import REPRODUCTIONS, Comparison, Reproduction, compare, get_reproduction, register_reproduction

__all__ = [
    "REPRODUCTIONS",
    "Comparison",
    "Reproduction",
    "compare",
    "get_reproduction",
    "read_json_rows",
    "register_reproduction",
    "render_reproduction_markdown",
    "update_reproduction_markdown",
]
