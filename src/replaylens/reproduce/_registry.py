"""The reproduction framework: named comparisons of the paper's numbers with ours.

A reproduction is a function returning :class:`Comparison` rows; ``replaylens reproduce NAME``
prints them side by side and ``--json`` prints one object per row with the keys table, row,
column, paper, ours, tolerance, status (match / differs / n/a) and note.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass

from ..errors import ConfigError

__all__ = ["REPRODUCTIONS", "Comparison", "Reproduction", "compare", "get_reproduction", "register_reproduction"]


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

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def compare(table: str, row: str, column: str, paper: float | None, ours: float | None,
            tolerance: float | None = 0.0, note: str = "") -> Comparison:
    """Build a row; status is ``match`` when |ours − paper| ≤ tolerance, ``differs`` otherwise,
    ``n/a`` when either side is missing (e.g. the paper's hosted-model value shown for reference)."""
    if paper is None or ours is None or tolerance is None or (isinstance(ours, float) and math.isnan(ours)):
        status = "n/a"
    else:
        status = "match" if abs(float(ours) - float(paper)) <= float(tolerance) + 1e-12 else "differs"
    return Comparison(table, row, column, None if paper is None else float(paper),
                      None if ours is None else float(ours), tolerance, status, note)


@dataclass(frozen=True)
class Reproduction:
    """A registered reproduction."""

    name: str
    title: str
    run: Callable[[], list[Comparison]]
    issue: str = ""


REPRODUCTIONS: dict[str, Reproduction] = {}


def register_reproduction(name: str, title: str, issue: str = "") -> Callable[[Callable[[], list[Comparison]]],
                                                                              Callable[[], list[Comparison]]]:
    """Decorator registering a reproduction under ``name``."""
    def deco(fn: Callable[[], list[Comparison]]) -> Callable[[], list[Comparison]]:
        if name in REPRODUCTIONS:
            raise ConfigError(f"reproduction {name!r} is registered twice")
        REPRODUCTIONS[name] = Reproduction(name, title, fn, issue)
        return fn
    return deco


def get_reproduction(name: str) -> Reproduction:
    """A registered reproduction (the paper's are registered by importing ``replaylens.experiments``)."""
    try:
        return REPRODUCTIONS[name]
    except KeyError:
        raise ConfigError(f"unknown reproduction {name!r}; see `replaylens reproduce --list`") from None
