"""Regenerate sections of docs/paper/reproduction.md in memory and name those that differ from the file (issue 28).

The CI set is checked by ``tests/paper/test_reproduction_doc.py`` in every test run; the slow ones, whose learned fits
take from minutes to tens of minutes, by the documented command in docs/paper/reproduction-notes.md.  Rows of the
``timing`` table (wall seconds) are machine-dependent and are left out of the comparison.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ._markdown import _sections, render_reproduction_markdown

__all__ = ["CI_REPRODUCTIONS", "SLOW_REPRODUCTIONS", "differing_lines", "differing_sections"]

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


CI_REPRODUCTIONS: tuple[tuple[str, ...], ...] = (
    ("family-blind", "readout-invariance", "random-operators", "content-calibration", "content-composite",
     "code-debugging", "exact-zeros", "code-debugging-embedded"),  # 128 CPU s measured, one process per section
    ("content-nonlinear", "public-data-strata", "public-data-pooled", "public-data-conditions", "public-ucb1-replay",
     "public-structural-replay", "sequential-planning", "sequential-planning-embedded"),  # ≤ 143 CPU s (shared world)
)
"""The sections the default test suite regenerates and compares (``tests/paper/test_reproduction_doc.py``), in
groups run side by side on CI's two cores.  Chosen by each reproduction's measured CPU time so that the check takes
about five minutes of wall time (figures in docs/paper/reproduction-notes.md, issue 28); every other fast section
is checked with ``REPLAYLENS_REPRO_CHECK=1``, the slow ones with ``replaylens paper reproduce --check``."""


def _comparable(lines: list[str]) -> list[str]:
    return [ln for ln in lines if not ln.startswith("| timing |")]


def differing_sections(existing: str, rows: Iterable[Mapping[str, Any]], titles: Mapping[str, str]) -> list[str]:
    """The reproductions among ``rows`` whose freshly rendered section differs from ``existing``'s (or is absent)."""
    _, fresh = _sections(render_reproduction_markdown(list(rows), titles))
    _, kept = _sections(existing)
    return [name for name, lines in fresh.items()
            if name not in kept or _comparable(kept[name]) != _comparable(lines)]


def differing_lines(existing: str, rows: Iterable[Mapping[str, Any]],
                    titles: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """Per reproduction among ``rows`` whose fresh section differs from ``existing``'s: its first differing line
    (committed, regenerated); ``"(absent)"`` stands for a missing section or line."""
    _, fresh = _sections(render_reproduction_markdown(list(rows), titles))
    _, kept = _sections(existing)
    out: dict[str, tuple[str, str]] = {}
    for name, lines in fresh.items():
        old, new = _comparable(kept.get(name, [])), _comparable(lines)
        if old == new:
            continue
        k = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), min(len(old), len(new)))
        out[name] = (old[k] if k < len(old) else "(absent)", new[k] if k < len(new) else "(absent)")
    return out
