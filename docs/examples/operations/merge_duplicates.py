"""A user's consolidation pass, written as a memory framework would: merge requests that read the same after
lower-casing and stripping punctuation, keep the newest record's tool, and average the outcomes.

    replaylens check-operation --op docs/examples/operations/merge_duplicates.py:make --history ... --agent mean
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from replaylens.records import Record


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[\W_]+", " ", text.lower()).split())


def consolidate(records: Sequence[Record]) -> list[Record]:
    """One stream's records in, the consolidated records out (the newest of each group carries the mean)."""
    groups: dict[tuple[str, str, str], list[Record]] = {}
    for r in sorted(records, key=lambda r: r.slot):
        groups.setdefault((r.family, r.context, _norm(r.task)), []).append(r)
    out = []
    for rs in groups.values():
        mean = round(sum(r.outcome for r in rs) / len(rs), 6)
        out.append(replace(rs[-1], outcome=mean))
    return out


def make() -> object:
    """The factory check-operation calls: a plain records -> records function is an operation."""
    return consolidate
