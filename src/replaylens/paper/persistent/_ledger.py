"""The commutative count–sum ledger with an arm-indexed mean readout (paper: structural replay on measured outcomes).

State per family–context block and key: the count N and the sum S of the selected outcomes, in integer
micro-units (six decimals), so sums are exact in any order and pair transport leaves the state bit-for-bit
unchanged.  Future tasks never update it.  Readout: the menu arm with the largest mean S/N over the *observed*
arms of the task's own block (unobserved arms are excluded); exact ties, and an empty block (every arm
unobserved), go to the lexicographically largest label (the ledger tie rule).  A masked outcome is skipped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ...agents import (
    Agent,
    FutureInput,
    QueryBatch,
    RecordBatch,
    TaskInput,
    TieRule,
    block_key_sums,
    choose,
    choose_batch,
    to_micro,
)

__all__ = ["CountSumLedger", "count_sum_agent"]

LedgerBlocks = Mapping[tuple[str, str], Mapping[str, tuple[int, int]]]


def _at_queries(state: np.ndarray, queries: QueryBatch) -> np.ndarray:
    """(H, K, B, n) per-label state read at each query's (row, cut, block), over its menu: (Q, M)."""
    per_q = state[queries.row, queries.cut, queries.block]
    return np.take_along_axis(per_q, np.where(queries.menu >= 0, queries.menu, 0), axis=1)


def _means(n: np.ndarray, s: np.ndarray) -> np.ndarray:
    """S/N where N > 0, −inf where the arm is unobserved (exact: S and N are integers, the division is
    correctly rounded, so equal rational means give equal floats)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(n > 0, s / np.maximum(n, 1.0), -np.inf)


@dataclass(frozen=True)
class CountSumLedger:
    """Count–sum ledger per (block, key) with the observed-mean readout (both replay paths)."""

    name: str = "count-sum"

    # ---- per-record path
    def init_state(self) -> LedgerBlocks:
        return {}

    def update(self, state: LedgerBlocks, task: TaskInput, key: str, outcome: float) -> LedgerBlocks:
        if outcome != outcome:  # masked: nothing is written
            return state
        blk = dict(state.get(task.block, {}))
        n, s = blk.get(key, (0, 0))
        blk[key] = (n + 1, s + int(to_micro(outcome)))
        new = dict(state)
        new[task.block] = blk
        return new

    def act(self, state: LedgerBlocks, task: FutureInput, menu: tuple[str, ...], rng: np.random.Generator) -> str:
        blk = state.get(task.stratum, {})
        n = np.array([blk.get(a, (0, 0))[0] for a in menu], dtype=np.float64)
        s = np.array([blk.get(a, (0, 0))[1] for a in menu], dtype=np.float64)
        return choose(_means(n, s).tolist(), menu, TieRule.LEX_LARGEST)

    # ---- array path
    def act_batch(self, records: RecordBatch, queries: QueryBatch) -> np.ndarray:
        visible = ~np.isnan(records.outcomes)
        micro = np.where(visible, to_micro(np.where(visible, records.outcomes, 0.0)), 0.0)
        n = _at_queries(block_key_sums(records, np.ones(records.keys.shape), mask=visible), queries)
        s = _at_queries(block_key_sums(records, micro, mask=visible), queries)
        return choose_batch(_means(n, s), queries.menu, TieRule.LEX_LARGEST, records.labels)

    def agent(self) -> Agent:
        """The ledger as a replayable agent (declared invariant to pair transport and event reorder)."""
        return Agent(self.name, self, self, array=self, task_invariant=True, invariant_to=("pair", "reorder"),
                     spec={"name": self.name})


def count_sum_agent() -> Agent:
    """The commutative count–sum ledger (mean readout over observed arms, lexicographically-largest ties)."""
    return CountSumLedger().agent()
