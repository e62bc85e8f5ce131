"""Replay decisions with stable ids, the evaluator's utilities and the oracle."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ._plan import ReplayPlan

__all__ = ["DECISION_COLUMNS", "Decisions"]

DECISION_COLUMNS = ("stream", "stratum", "task", "task_index", "cell", "map", "draw", "repeat", "action",
                    "utility", "oracle", "oracle_utility")


@dataclass(frozen=True, eq=False)
class Decisions:
    """All future decisions of a replay.

    ``actions[c, m, d, p, i]`` is the label code chosen in cell c, map m (0 = id), draw d, repeat p,
    for future task i (tasks of all streams, stream-major).  ``utility[i, a]`` is g̃(x_i, a)
    (NaN off-menu) and ``oracle[i]`` the first-maximum oracle a*(x_i).
    """

    plan: ReplayPlan
    actions: np.ndarray
    stream_idx: np.ndarray
    stratum_idx: np.ndarray
    task_ids: tuple[str, ...]
    task_index: np.ndarray
    utility: np.ndarray
    oracle: np.ndarray
    path: str = "array"

    @property
    def n_tasks(self) -> int:
        return int(self.actions.shape[-1])

    def chosen_utility(self, cell: int | None = None) -> np.ndarray:
        """g̃(x, a) of every chosen action, same shape as ``actions`` (or ``actions[cell]`` for one cell index)."""
        a = self.actions if cell is None else self.actions[cell]
        return np.asarray(self.utility[np.arange(self.n_tasks), a])

    def correct(self, cell: int | None = None) -> np.ndarray:
        """1[a = a*(x)] for every decision (or for those of one cell index)."""
        return (self.actions if cell is None else self.actions[cell]) == self.oracle

    def cell_index(self, name: str) -> int:
        try:
            return self.plan.cell_names.index(name)
        except ValueError:
            raise KeyError(f"cell {name!r} is not in this replay ({', '.join(self.plan.cell_names)})") from None

    def frame(self) -> Any:
        """The tidy decision table (one row per decision) with the documented columns."""
        import pandas as pd

        c_n, m_n, d_n, p_n, n = self.actions.shape
        grid = np.indices((c_n, m_n, d_n, p_n, n)).reshape(5, -1)
        c, m, d, p, i = grid
        labels = np.asarray(self.plan.labels, dtype=object)
        acts = self.actions.reshape(-1)
        strata = np.asarray(["/".join(s) for s in self.plan.strata], dtype=object)
        streams = np.asarray(self.plan.streams, dtype=object)
        util = self.chosen_utility().reshape(-1)
        return pd.DataFrame({
            "stream": pd.Categorical(streams[self.stream_idx[i]], categories=list(self.plan.streams)),
            "stratum": pd.Categorical(strata[self.stratum_idx[i]], categories=list(dict.fromkeys(strata))),
            "task": np.asarray(self.task_ids, dtype=object)[i],
            "task_index": self.task_index[i],
            "cell": pd.Categorical(np.asarray(self.plan.cell_names, dtype=object)[c],
                                   categories=list(self.plan.cell_names)),
            "map": pd.Categorical(np.asarray(self.plan.map_names, dtype=object)[m],
                                  categories=list(dict.fromkeys(self.plan.map_names))),
            "draw": d,
            "repeat": p,
            "action": labels[acts],
            "utility": util,
            "oracle": labels[self.oracle[i]],
            "oracle_utility": self.utility[i, self.oracle[i]],
        })

    def to_parquet(self, path: Any, *, rows_per_group: int = 1 << 20) -> None:
        """Write :meth:`frame` to Parquet in row groups built from the integer codes (no per-decision
        Python objects), so memory stays bounded by one row group whatever the number of decisions.
        ``pandas.read_parquet`` gives back exactly :meth:`frame`."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        c_n, m_n, d_n, p_n, n = self.actions.shape
        strata = ["/".join(s) for s in self.plan.strata]

        def categorical(names: list[str]) -> tuple[np.ndarray, pa.Array]:
            cats = list(dict.fromkeys(names))   # categories in first-seen order, as frame() builds them
            pos = {v: k for k, v in enumerate(cats)}
            return np.array([pos[v] for v in names], dtype=np.int32), pa.array(cats, type=pa.string())

        st_code, st_dict = categorical(list(self.plan.streams))
        sr_code, sr_dict = categorical(strata)
        ce_code, ce_dict = categorical(list(self.plan.cell_names))
        ma_code, ma_dict = categorical(list(self.plan.map_names))
        labels = pa.array(list(self.plan.labels), type=pa.string())
        tasks = pa.array(list(self.task_ids), type=pa.string())
        acts = self.actions.reshape(-1)
        chosen = self.chosen_utility().reshape(-1)
        oracle_u = self.utility[np.arange(self.n_tasks), self.oracle]
        writer = None
        try:
            for lo in range(0, acts.size, rows_per_group):
                hi = min(acts.size, lo + rows_per_group)
                c, m, d, p, i = np.unravel_index(np.arange(lo, hi), (c_n, m_n, d_n, p_n, n))

                def dic(codes: np.ndarray, dictionary: pa.Array) -> pa.DictionaryArray:
                    return pa.DictionaryArray.from_arrays(pa.array(codes, type=pa.int32()), dictionary)

                table = pa.table({
                    "stream": dic(st_code[self.stream_idx[i]], st_dict),
                    "stratum": dic(sr_code[self.stratum_idx[i]], sr_dict),
                    "task": tasks.take(pa.array(i)),
                    "task_index": pa.array(self.task_index[i].astype(np.int64)),
                    "cell": dic(ce_code[c], ce_dict),
                    "map": dic(ma_code[m], ma_dict),
                    "draw": pa.array(d.astype(np.int64)),
                    "repeat": pa.array(p.astype(np.int64)),
                    "action": labels.take(pa.array(acts[lo:hi])),
                    "utility": pa.array(chosen[lo:hi]),
                    "oracle": labels.take(pa.array(self.oracle[i])),
                    "oracle_utility": pa.array(oracle_u[i]),
                })
                if writer is None:
                    writer = pq.ParquetWriter(path, table.schema)
                writer.write_table(table)
            if writer is None:   # no decision: an empty table with the same columns
                pq.write_table(pa.Table.from_pandas(self.frame(), preserve_index=False), path)
        finally:
            if writer is not None:
                writer.close()

    def equals(self, other: Decisions) -> bool:
        return bool(np.array_equal(self.actions, other.actions) and np.array_equal(self.oracle, other.oracle))
