"""The array path refuses an answer outside the query's menu with one line naming the stream and task,
also for an agent whose answers are copied across label maps (twins)."""

from __future__ import annotations

import numpy as np
import pytest

from replaylens.agents import RecordBatch, from_callables
from replaylens.errors import AgentError
from replaylens.records import (
    Evaluator,
    FutureTasks,
    History,
    evaluator_from_rows,
    futures_from_tasks,
    history_from_records,
)
from replaylens.replay import replay


class _AlwaysC:
    """Answers label C everywhere (in task x0's menu, not in task x1's)."""

    def __init__(self, shares: bool) -> None:
        self.shares_label_maps = shares

    def act_batch(self, records: RecordBatch, queries: object) -> np.ndarray:
        return np.full(len(queries.row), records.labels.index("C"), dtype=np.int64)  # type: ignore[attr-defined]


def _inputs() -> tuple[History, FutureTasks, Evaluator]:
    rows = [("s", "f", "c", 0, "t0", "A", 0.7), ("s", "f", "c", 1, "t1", "B", 0.6), ("s", "f", "c", 2, "t2", "C", 0.2)]
    h = history_from_records([{"stream": s, "family": fa, "context": c, "slot": t, "task": x, "key": k, "outcome": u}
                              for s, fa, c, t, x, k, u in rows])
    f = futures_from_tasks([
        {"stream": "s", "family": "f", "context": "c", "task": "x0", "menu": ["A", "B", "C"]},
        {"stream": "s", "family": "f", "context": "c", "task": "x1", "menu": ["A", "B"]}])
    e = evaluator_from_rows([{"stream": "s", "task": t.task, "key": a, "utility": 0.5} for t in f for a in t.menu])
    return h, f, e


@pytest.mark.parametrize("shares", [False, True])
def test_off_menu_code_names_stream_and_task(shares: bool) -> None:
    h, f, e = _inputs()
    ag = from_callables(lambda: None, lambda s, t, k, u: None, lambda s, t, m: "C", name="c", array=_AlwaysC(shares))
    with pytest.raises(AgentError, match=r"label code 2, which is not in the menu \(stream 's', task 'x1'\)"):
        replay(h, f, e, ag, cells="value,rename", maps="derangements", path="array")
