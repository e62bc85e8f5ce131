"""Reference rules on a block's visible ledger: Mean, Sum, Count, Latest record, Best.

Utilities are rounded to six decimals (integer micro-units) before aggregation, so sums and
means are exact; ties go to the key that appears first in the ledger, then canonical (menu)
order.  Only observed keys compete.  Mean, Sum and Best need visible outcomes: a key with none
is undefined; if no menu key is defined, the first-appearing observed key is chosen; with an
empty ledger, the first menu action.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ._known import cell_reduce, cell_sums, first_positions, menu_reads, record_cells
from ._protocols import Agent, FutureInput, QueryBatch, RecordBatch, TaskInput
from ._ties import to_micro

__all__ = ["REFERENCE_RULES", "ReferenceRule", "reference_agent"]

REFERENCE_RULES = ("mean", "sum", "count", "latest", "best")

Ledger = dict[tuple[str, str], tuple[tuple[str, float], ...]]

_RANK_LABELS = 16
"""Up to this many labels the array path ranks each cell's labels (n passes over the state tables, an int8 per
cell and label); past it, it compares the two keys per menu item."""


def _pick(menu_n: int, defined: np.ndarray, score: np.ndarray, observed: np.ndarray, first: np.ndarray) -> int:
    """Index into the menu (shared by both paths; arrays are (M,))."""
    if defined.any():
        s = np.where(defined, score, -np.inf)
        top = defined & (s == s.max())
    elif observed.any():
        top = observed
    else:
        return 0
    f = np.where(top, first, np.inf)
    return int(np.flatnonzero(f == f.min())[0])


@dataclass(frozen=True)
class ReferenceRule:
    """One reference rule (``mean``, ``sum``, ``count``, ``latest`` or ``best``) on the stratum's block."""

    rule: str
    shares_label_maps: ClassVar[bool] = True  # ledgers per key: relabelled records give the relabelled ledger
    thread_safe: ClassVar[bool] = True  # act_batch reads only its arguments: shards may run on two threads

    def __post_init__(self) -> None:
        if self.rule not in REFERENCE_RULES:
            raise ValueError(f"unknown reference rule {self.rule!r}; use one of {REFERENCE_RULES}")

    def init_state(self) -> Ledger:
        return {}

    def update(self, state: Ledger, task: TaskInput, key: str, outcome: float) -> Ledger:
        new = dict(state)
        new[task.block] = (*state.get(task.block, ()), (key, float(to_micro(outcome))))
        return new

    def _scores(self, count: np.ndarray, nvis: np.ndarray, total: np.ndarray, best: np.ndarray,
                last: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r = self.rule
        if r == "count":
            return count > 0, count
        if r == "latest":
            return count > 0, last
        defined = nvis > 0
        if r == "sum":
            return defined, total
        if r == "best":
            return defined, best
        with np.errstate(invalid="ignore", divide="ignore"):
            return defined, np.where(defined, total / np.where(defined, nvis, 1.0), 0.0)

    def act(self, state: Ledger, task: FutureInput, menu: tuple[str, ...], rng: np.random.Generator) -> str:
        ledger = state.get(task.stratum, ())
        m = len(menu)
        pos = {a: i for i, a in enumerate(menu)}
        count, nvis, total = np.zeros(m), np.zeros(m), np.zeros(m)
        best, last, first = np.full(m, -np.inf), np.full(m, -1.0), np.full(m, np.inf)
        for t, (k, u) in enumerate(ledger):
            i = pos.get(k)
            if i is None:
                continue
            count[i] += 1
            last[i] = t
            first[i] = min(first[i], t)
            if not np.isnan(u):
                nvis[i] += 1
                total[i] += u
                best[i] = max(best[i], u)
        defined, score = self._scores(count, nvis, total, best, last)
        return menu[_pick(m, defined, score, count > 0, first)]

    def act_batch(self, records: RecordBatch, queries: QueryBatch) -> np.ndarray:
        """The per-record choice for every query, decided on the (H, K, B, n) state tables.

        Every menu item of a query reads the same (row, cut, block) cell, so the choice is the first menu
        position maximizing (score if defined else −∞, then 1 + T − first appearance if observed else 0),
        compared lexicographically: built once per cell and label, as each label's rank among its cell's labels
        (up to :data:`_RANK_LABELS` labels; else both keys), and read once per menu item (padding lowest).
        """
        cells = record_cells(records)  # the visible records, located once for every statistic
        micro = to_micro(records.outcomes[cells.hi, cells.ti])
        vis = ~np.isnan(micro)
        count = cell_sums(cells)
        if self.rule in ("count", "latest"):
            nvis = total = best = count
            last = cell_reduce(cells, cells.ti.astype(np.float64), np.maximum, -1.0) if self.rule == "latest" \
                else count
        else:
            all_seen = bool(vis.all())  # no masked outcome: the visible counts are the counts
            nvis = count if all_seen else cell_sums(cells, vis.astype(np.float64))  # the same exact integers
            total = cell_sums(cells, np.where(vis, micro, 0.0))
            best = count
            if self.rule == "best":
                seen = cells if all_seen else cells.subset(vis)
                best = cell_reduce(seen, micro if all_seen else micro[vis], np.maximum, -np.inf)
            last = count
        defined, score = self._scores(count, nvis, total, best, last)
        # first appearance before the cut (the first position overall, when it lies before the cut)
        first = first_positions(cells)[:, None]
        t_n = records.keys.shape[1]
        primary = np.where(defined, score, -np.inf)
        secondary = np.where(count > 0, float(t_n + 1) - first, 0.0)  # count > 0: first < cut
        n = records.n_labels
        if n <= _RANK_LABELS:  # one small integer per cell and label: its rank among the cell's labels
            rank = np.zeros(primary.shape, dtype=np.int8)
            for b in range(n):
                p_b, s_b = primary[..., b : b + 1], secondary[..., b : b + 1]
                rank += (p_b < primary) | ((p_b == primary) & (s_b < secondary))
            cols = menu_reads(rank, -1, queries).T
            m_n = cols.shape[0]
            key = functools.reduce(np.maximum, [c.astype(np.int16) * m_n + (m_n - 1 - j) for j, c in enumerate(cols)])
            pos = (m_n - 1) - key % m_n  # the highest rank, first in menu order
        else:
            p_q, s_q = menu_reads(primary, -np.inf, queries), menu_reads(secondary, -1.0, queries)
            pos = np.argmax(np.where(p_q == p_q.max(axis=1, keepdims=True), s_q, -2.0), axis=1)
        return np.take_along_axis(queries.menu, pos[:, None], axis=1)[:, 0]

    def agent(self) -> Agent:
        inv = ("value", "mask", "rename") if self.rule in ("count", "latest") else ("rename",)
        return Agent(self.rule, self, self, array=self, task_invariant=True, invariant_to=inv,
                     spec={"name": self.rule})


def reference_agent(rule: str) -> Agent:
    """The reference rule ``rule`` (mean, sum, count, latest, best) as an agent with both paths."""
    return ReferenceRule(rule).agent()


