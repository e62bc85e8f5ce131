"""Declared quantity kinds of compared columns, the paper's intervals and the derived targets (issue 50).

A reproduction declares, next to the tables it reproduces, what every compared column holds
(:class:`Kinds`): the policy reads the kind from the declaration, never from the labels.  Patterns
are literal except ``*`` (any text); an :class:`Interval`'s column templates use ``{}`` for the part
its estimate and limits share.  Rules and reasons: docs/decisions.md, issue 50.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from enum import StrEnum
from functools import lru_cache

from ...errors import ConfigError
from ._registry import Comparison

__all__ = ["VALUE_KINDS", "Interval", "Kind", "Kinds"]


class Kind(StrEnum):
    """What a compared column holds; the value-level bound and the statuses follow the kind."""

    DESIGN = "design constant"
    COUNT = "count"
    PROPORTION = "proportion"
    ESTIMATE = "signed estimate"
    MAGNITUDE = "non-negative estimate"
    LIMIT = "interval limit"
    INDICATOR = "indicator"


VALUE_KINDS = (Kind.COUNT, Kind.PROPORTION, Kind.ESTIMATE, Kind.MAGNITUDE, Kind.LIMIT)
"""Kinds of measured values compared at value level (match / sign-level / differs)."""


@lru_cache(maxsize=4096)
def _glob(pattern: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(p) for p in pattern.split("*")) + r"\Z", re.S)


@lru_cache(maxsize=4096)
def _template(pattern: str) -> re.Pattern[str]:
    return re.compile("(?P<base>.+?)".join(re.escape(p) for p in pattern.split("{}")) + r"\Z", re.S)


def _hit(pattern: str, text: str) -> bool:
    return _glob(pattern).match(text) is not None


@dataclass(frozen=True)
class Interval:
    """A 95% interval the paper prints: in ``table`` (pattern), for one row, the estimate column and its
    lower and upper limits (templates; ``{}`` is the part the three share, e.g. ``"{} lower"``).
    ``estimate`` is empty where the paper prints the limits only."""

    table: str
    estimate: str
    lower: str
    upper: str

    def part(self, row: Comparison) -> tuple[str, str] | None:
        """(``estimate`` / ``lower`` / ``upper``, shared base) when ``row`` is one of this interval's columns."""
        if not _hit(self.table, row.table):
            return None
        for name, tpl in (("lower", self.lower), ("upper", self.upper), ("estimate", self.estimate)):
            if not tpl:
                continue
            if "{}" in tpl:
                m = _template(tpl).match(row.column)
                if m is not None:
                    return name, m["base"]
            elif tpl == row.column:
                return name, ""
        return None


@dataclass(frozen=True)
class Kinds:
    """One reproduction's declarations.

    ``columns``: ``(table, column, kind)`` or ``(table, row, column, kind)`` patterns; a row-specific entry is
    tried before the others, then the first matching entry wins.  ``intervals``: the paper's intervals the
    reproduction compares (their limits are :attr:`Kind.LIMIT` unless declared otherwise, and :attr:`Kind.PROPORTION`
    when the interval's estimate is declared a proportion: a limit of a share is a share).  ``sign_claims``:
    ``(table, row, column, where the paper states the sign)`` for estimates whose sign the text claims without an
    interval.  ``derived``: ``(table, row, column, source)`` for expected values the paper did not print.
    ``shown``: ``(table, row, column, reason)`` for rows shown beside the paper's value but not compared (``n/a``),
    e.g. the sign of a non-negative quantity, which carries no information."""

    columns: tuple[tuple[str, str, Kind] | tuple[str, str, str, Kind], ...] = ()
    intervals: tuple[Interval, ...] = ()
    sign_claims: tuple[tuple[str, str, str, str], ...] = ()
    derived: tuple[tuple[str, str, str, str], ...] = ()
    shown: tuple[tuple[str, str, str, str], ...] = ()

    def declared(self, row: Comparison) -> Kind | None:
        """The declared kind of ``row`` (its own ``kind`` first), or None."""
        if row.kind:
            return Kind(row.kind)
        for entry in sorted(self.columns, key=lambda e: -len(e)):
            if len(entry) == 4:
                table, rname, column, kind = entry
                if _hit(table, row.table) and _hit(rname, row.row) and _hit(column, row.column):
                    return kind
            else:
                table, column, kind = entry
                if _hit(table, row.table) and _hit(column, row.column):
                    return kind
        for iv in self.intervals:
            part = iv.part(row)
            if part is not None and part[0] != "estimate":
                return Kind.PROPORTION if self._estimate_kind(iv, part[1], row) is Kind.PROPORTION else Kind.LIMIT
        return None

    def _estimate_kind(self, iv: Interval, base: str, row: Comparison) -> Kind | None:
        """The declared kind of the estimate of ``iv`` for ``row`` (one of its limits), or None when the paper prints
        no estimate or the estimate's column has no declaration."""
        if not iv.estimate:
            return None
        column = iv.estimate.replace("{}", base) if "{}" in iv.estimate else iv.estimate
        return self.declared(replace(row, column=column, kind=""))

    def kind_of(self, row: Comparison) -> Kind:
        """The declared kind of a compared row; an undeclared one is an error (issue 50)."""
        kind = self.declared(row)
        if kind is None:
            raise ConfigError(f"no kind declared for compared row {row.table!r} / {row.row!r} / {row.column!r}")
        return kind

    def sign_claim(self, row: Comparison) -> str:
        """Where the paper's text states the sign of ``row``'s estimate (empty when it does not)."""
        return _first(self.sign_claims, row)

    def derived_source(self, row: Comparison) -> str:
        """The source of ``row``'s expected value when the paper did not print it (empty otherwise)."""
        return _first(self.derived, row)

    def shown_reason(self, row: Comparison) -> str:
        """Why ``row`` is shown but not compared (empty when it is compared)."""
        return _first(self.shown, row)


def _first(entries: tuple[tuple[str, str, str, str], ...], row: Comparison) -> str:
    return next((text for t, r, c, text in entries
                 if _hit(t, row.table) and _hit(r, row.row) and _hit(c, row.column)), "")
