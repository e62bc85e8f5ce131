"""Cells of the rendered reproduction tables: escaping, splitting, the mark of a section kept from an earlier
generation (shared by the renderer and the paper-table index, so neither imports the other)."""

from __future__ import annotations

import re

__all__ = ["STALE", "escape_cell", "split_row"]


def escape_cell(text: object) -> str:
    """A table cell's text with Markdown's cell separator escaped (``|ΔU|`` → ``\\|ΔU\\|``), on one line."""
    return str(text).replace("|", "\\|").replace("\n", " ")


_SEPARATOR = re.compile(r"(?<!\\)\|")


def split_row(line: str) -> list[str]:
    """The cells of a rendered table row, escaped separators unescaped."""
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    return [c.strip().replace("\\|", "|") for c in _SEPARATOR.split(body)]


STALE = "> **Not regenerated under the current policy**"
"""First line of a section kept from an earlier generation (``mark_stale``): its rows are shown as then rendered
and left out of the header's counts."""
