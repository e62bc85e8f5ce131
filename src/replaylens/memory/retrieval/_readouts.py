"""Two-level readouts: the retrieval response (top-k set changed, rank order changed, overlap) and the decision
response of the same queries, their cross-tab, and stream-cluster intervals.

The cross-tab tells a user *why* a decision moved:

* ``retrieval changed, decision did not`` — the store returned other records (or another order), the rule
  absorbed it;
* ``decision changed with identical retrieval`` — the same ids in the same order, yet another action: the
  policy reads what the records carry (their actions/outcomes, moved by a history cell), or labels;
* ``both`` and ``neither``.

Retrieval identity is the ordered tuple of retrieved ids (after mapping relabelled ids back).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...inference import cluster_bootstrap
from ...rng import derive_seed
from ._items import Retrieved

__all__ = ["CATEGORIES", "Comparison", "TwoLevel", "crosstab_lines", "two_level"]

CATEGORIES = ("retrieval changed, decision did not", "decision changed with identical retrieval", "both", "neither")
_COLUMNS = ("retrieval_changed", "set_changed", "order_changed", "overlap", "decision_changed", *CATEGORIES)


@dataclass(frozen=True, slots=True)
class Comparison:
    """One query read twice: before (reference) and after (intervention or migration)."""

    stream: str
    query: str
    before: Retrieved
    after: Retrieved
    decision_before: str
    decision_after: str

    @property
    def retrieval_changed(self) -> bool:
        return self.before.ids != self.after.ids

    @property
    def set_changed(self) -> bool:
        return set(self.before.ids) != set(self.after.ids)

    @property
    def order_changed(self) -> bool:
        """Same set of ids, another order."""
        return self.retrieval_changed and not self.set_changed

    @property
    def overlap(self) -> float:
        """|before ∩ after| / max(|before|, |after|) (1 when both are empty)."""
        n = max(len(self.before.ids), len(self.after.ids))
        return len(set(self.before.ids) & set(self.after.ids)) / n if n else 1.0

    @property
    def decision_changed(self) -> bool:
        return self.decision_before != self.decision_after

    @property
    def category(self) -> str:
        r, d = self.retrieval_changed, self.decision_changed
        return CATEGORIES[0] if r and not d else CATEGORIES[1] if d and not r else CATEGORIES[2] if r else \
            CATEGORIES[3]

    def row(self) -> list[float]:
        cat = self.category
        return [float(self.retrieval_changed), float(self.set_changed), float(self.order_changed), self.overlap,
                float(self.decision_changed), *(float(cat == c) for c in CATEGORIES)]


@dataclass(frozen=True)
class TwoLevel:
    """Counts, per-stream shares pooled over streams, and their stream-cluster percentile intervals."""

    n_queries: int
    n_streams: int
    counts: dict[str, int]
    estimate: dict[str, float]
    interval: dict[str, list[float | None]]
    level: float

    def to_dict(self) -> dict[str, Any]:
        return {"n_queries": self.n_queries, "n_streams": self.n_streams, "counts": self.counts,
                "share": self.estimate, "ci": self.interval, "level": self.level,
                "crosstab": {c: self.counts[c] for c in CATEGORIES}}


def two_level(comps: Sequence[Comparison], *, seed: int, name: str, n_resamples: int = 2000,
              level: float = 0.95) -> TwoLevel:
    """Pool the comparisons: queries within a stream, then streams equally weighted; intervals resample streams
    (:func:`replaylens.inference.cluster_bootstrap`, seed derived from ``seed`` and ``name``)."""
    streams = list(dict.fromkeys(c.stream for c in comps))
    per = np.zeros((len(streams), len(_COLUMNS)))
    pos = {s: i for i, s in enumerate(streams)}
    n_in = np.zeros(len(streams))
    for c in comps:
        per[pos[c.stream]] += c.row()
        n_in[pos[c.stream]] += 1
    if streams:
        per /= n_in[:, None]
    counts = {k: int(sum(c.row()[j] for c in comps)) for j, k in enumerate(_COLUMNS) if k != "overlap"}
    est = {k: float(per[:, j].mean()) if streams else float("nan") for j, k in enumerate(_COLUMNS)}
    ci: dict[str, list[float | None]]
    if len(streams) >= 2:
        b = cluster_bootstrap(per, n_resamples=n_resamples, level=level, rng=derive_seed(seed, "two-level", name))
        ci = {k: [float(np.asarray(b.low)[j]), float(np.asarray(b.high)[j])] for j, k in enumerate(_COLUMNS)}
    else:
        ci = {k: [None, None] for k in _COLUMNS}
    return TwoLevel(len(comps), len(streams), counts, est, ci, level)


def crosstab_lines(name: str, t: dict[str, Any]) -> list[str]:
    """Console lines for one two-level readout (``TwoLevel.to_dict()``)."""
    c, sh, ci = t["counts"], t["share"], t["ci"]

    def iv(k: str) -> str:
        lo, hi = ci[k]
        return "[n/a]" if lo is None or hi is None else f"[{100 * lo:.1f}, {100 * hi:.1f}]"

    n = t["n_queries"]
    return [
        f"{name}: retrieval changed for {c['retrieval_changed']}/{n} queries ({100 * sh['retrieval_changed']:.1f}% "
        f"{iv('retrieval_changed')}; set {c['set_changed']}, order only {c['order_changed']}, mean overlap "
        f"{sh['overlap']:.3f}); decision changed for {c['decision_changed']}/{n} "
        f"({100 * sh['decision_changed']:.1f}% {iv('decision_changed')})",
        "  " + "; ".join(f"{k}: {c[k]}" for k in CATEGORIES),
    ]
