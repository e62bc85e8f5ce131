"""A scripted decision rule over retrieved memory text (for decision-level migration checks)."""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["retrieved_mean_policy"]

_LINE = re.compile(r"action=(\S+) n=(\d+) u=([0-9.eE+-]+)")


def retrieved_mean_policy(lines: Sequence[str], menu: Sequence[str]) -> str:
    """Mean rule on the retrieved slots: the menu action with the highest count-weighted mean utility;
    ties go to the action retrieved first, then menu order; with nothing retrieved, the first menu action."""
    tot: dict[str, float] = {}
    cnt: dict[str, int] = {}
    first: dict[str, int] = {}
    for i, ln in enumerate(lines):
        m = _LINE.search(ln)
        if m is None or m.group(1) not in menu:
            continue
        a, n, u = m.group(1), int(m.group(2)), float(m.group(3))
        tot[a] = tot.get(a, 0.0) + round(u * 1e6) * n
        cnt[a] = cnt.get(a, 0) + n
        first.setdefault(a, i)
    if not cnt:
        return menu[0]
    return min(cnt, key=lambda a: (-tot[a] / cnt[a], first[a], list(menu).index(a)))
