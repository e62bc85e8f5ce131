"""Regenerate sections of docs/paper/reproduction.md in memory and name those that differ from the file (issue 28).

The fast sections are checked by ``tests/test_reproduction_doc.py`` (in CI); the slow ones, whose learned fits
take from minutes to tens of minutes, by the documented command in docs/paper/reproduction-notes.md.  Rows of the
``timing`` table (wall seconds) are machine-dependent and are left out of the comparison.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ._markdown import _sections, render_reproduction_markdown

__all__ = ["SLOW_REPRODUCTIONS", "differing_sections"]

SLOW_REPRODUCTIONS: tuple[str, ...] = (
    "learned-control",
    "endpoint-separation",
    "learned-endpoint-fits",
    "public-persistent-agent-folds",
    "utility-resolution",
    "learned-recurrent-check",
    "independent-learned-interface",
)
"""Reproductions whose fits make them too slow for every CI run; regenerate them with the documented command."""


def _comparable(lines: list[str]) -> list[str]:
    return [ln for ln in lines if not ln.startswith("| timing |")]


def differing_sections(existing: str, rows: Iterable[Mapping[str, Any]], titles: Mapping[str, str]) -> list[str]:
    """The reproductions among ``rows`` whose freshly rendered section differs from ``existing``'s (or is absent)."""
    _, fresh = _sections(render_reproduction_markdown(list(rows), titles))
    _, kept = _sections(existing)
    return [name for name, lines in fresh.items()
            if name not in kept or _comparable(kept[name]) != _comparable(lines)]
