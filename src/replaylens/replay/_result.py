"""Replay decisions with stable ids, the evaluator's utilities and the oracle."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..records import arrow_text, unpack_text
from ._plan import ReplayPlan

__all__ = ["DECISION_COLUMNS", "Decisions"]

DECISION_COLUMNS = ("stream", "stratum", "task", "task_index", "cell", "map", "draw", "repeat", "action",
                    "utility", "oracle", "oracle_utility")


def _tile(x: np.ndarray, k: int, r0: int, r1: int) -> np.ndarray:
    """A per-task column's rows in a written piece: tasks ``r0:r1`` of one block, or every task of ``k`` blocks."""
    return x[r0:r1] if k == 1 else np.tile(x, k)


def _pieces(n_blocks: int, n: int, per_write: int, rows_per_group: int) -> list[tuple[int, int, int, int]]:
    """(first block, end block, first task, end task) of each table the decision table is written as: several
    small blocks whole, or one block a row group at a time (the row groups a whole block split at
    ``rows_per_group`` would get, without the block's columns built all at once)."""
    out: list[tuple[int, int, int, int]] = []
    for b0 in range(0, n_blocks, per_write):
        b1 = min(n_blocks, b0 + per_write)
        step = n if b1 - b0 > 1 else rows_per_group
        out.extend((b0, b1, r0, min(n, r0 + step)) for r0 in range(0, n, step))
    return out


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
    task_text: np.ndarray  # (N,) task ids as held (records.FutureColumns.task_text: bytes when ASCII); see task_ids
    task_index: np.ndarray
    utility: np.ndarray
    oracle: np.ndarray
    path: str = "array"

    @property
    def task_ids(self) -> np.ndarray:
        """(N,) task ids as numpy text (decoded on each access: bind it once)."""
        return unpack_text(self.task_text)

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
        labels = pd.CategoricalDtype(list(self.plan.labels))
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
            "action": pd.Categorical.from_codes(acts, dtype=labels),
            "utility": util,
            "oracle": pd.Categorical.from_codes(self.oracle[i], dtype=labels),
            "oracle_utility": self.utility[i, self.oracle[i]],
        })

    def to_parquet(self, path: Any, *, rows_per_group: int = 1 << 18) -> None:
        """Write :meth:`frame` to Parquet from the integer codes, one (cell, map, draw, repeat) block of tasks
        (or several small ones) at a time: the per-task columns are built once, the chosen utilities per block,
        so memory stays bounded by one block whatever the number of decisions and no per-decision Python
        object is made.  ``pandas.read_parquet`` gives back exactly :meth:`frame`."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        c_n, m_n, d_n, p_n, n = self.actions.shape
        n_blocks = c_n * m_n * d_n * p_n
        if n_blocks * n == 0:   # no decision: an empty table with the same columns
            pq.write_table(pa.Table.from_pandas(self.frame(), preserve_index=False), path)
            return
        strata = ["/".join(s) for s in self.plan.strata]

        def categorical(names: list[str]) -> tuple[np.ndarray, pa.Array]:
            cats = list(dict.fromkeys(names))   # categories in first-seen order, as frame() builds them
            pos = {v: k for k, v in enumerate(cats)}
            return np.array([pos[v] for v in names], dtype=np.int32), pa.array(cats, type=pa.string())

        def dic(codes: np.ndarray, dictionary: pa.Array) -> pa.DictionaryArray:   # (codes in range by construction)
            return pa.DictionaryArray.from_arrays(pa.array(codes, type=pa.int32()), dictionary, safe=False)

        st_code, st_dict = categorical(list(self.plan.streams))
        sr_code, sr_dict = categorical(strata)
        ce_code, ce_dict = categorical(list(self.plan.cell_names))
        ma_code, ma_dict = categorical(list(self.plan.map_names))
        labels = pa.array(list(self.plan.labels), type=pa.string())
        l_type = pa.from_numpy_dtype(self.actions.dtype)   # the label codes' integer type (action_dtype)
        rows = np.arange(n)
        per_task = {   # the columns that depend on the task alone: the same in every block
            "stream": st_code[self.stream_idx], "stratum": sr_code[self.stratum_idx],
            "task_index": self.task_index.astype(np.int64), "oracle": self.oracle,
            "oracle_utility": self.utility[rows, self.oracle],
        }
        tasks = arrow_text(self.task_text)   # from the ids as held (bytes where ASCII): no decoded copy
        # the tasks go stream by stream through every stream (as a plan lays them out): each row group of a block
        # then carries only its own streams' names as its dictionary page (the row groups of the first block
        # name them all, in order, so a reader's categories are the same), not all of them every time
        s_codes = per_task["stream"]
        steps = np.diff(s_codes)
        own_streams = bool(s_codes.size and s_codes[0] == 0 and s_codes[-1] == len(st_dict) - 1
                           and ((steps == 0) | (steps == 1)).all())

        def stream_column(k: int, r0: int, r1: int) -> pa.DictionaryArray:
            if k > 1 or not own_streams:
                return dic(_tile(s_codes, k, r0, r1), st_dict)
            lo, hi = int(s_codes[r0]), int(s_codes[r1 - 1]) + 1
            return dic(s_codes[r0:r1] - lo, st_dict.slice(lo, hi - lo))
        acts = self.actions.reshape(n_blocks, n)
        per_write = max(1, rows_per_group // n)   # small blocks are written several at once
        # high-cardinality columns (task ids, utilities) are written plainly: their dictionaries cost more than
        # they save; the rest keep parquet's dictionary encoding, the label columns (action, oracle) written from
        # their codes as arrow dictionaries (no per-value hashing of text; read back as categoricals, as
        # frame()).  Every field is required (no column has a null: no definition levels to encode).  Row-group
        # statistics (min/max) only for the block columns a reader filters row groups on; the utilities are not
        # compressed (random doubles: snappy gains nothing there); values are encoded 65,536 at a time (pyarrow's
        # default 1,024 cost ~15% more time on 4*10^6 decisions; the pages, and so the content, are unchanged).
        # A 24 M-decision table: 6.3 s -> 3.5 s of CPU with the dictionaries and required fields (session 13).
        plain = {"task", "utility", "oracle_utility"}
        with_stats = ["task_index", "cell", "map", "draw", "repeat"]
        compression = {name: "none" if name in ("utility", "oracle_utility") else "snappy" for name in DECISION_COLUMNS}
        writer = None
        schema: Any = None
        try:
            for b0, b1, r0, r1 in _pieces(n_blocks, n, per_write, rows_per_group):
                k, w = b1 - b0, r1 - r0
                c, m, d, p = np.unravel_index(np.arange(b0, b1), (c_n, m_n, d_n, p_n))   # of each block
                a = acts[b0:b1, r0:r1]
                chosen = (np.take_along_axis(self.utility, a.T, axis=1).T if k > 1
                          else self.utility[rows[r0:r1], a[0]])

                cols = {
                    "stream": stream_column(k, r0, r1),
                    "stratum": dic(_tile(per_task["stratum"], k, r0, r1), sr_dict),
                    "task": tasks.slice(r0, w) if k == 1 else tasks.take(pa.array(_tile(rows, k, r0, r1))),
                    "task_index": pa.array(_tile(per_task["task_index"], k, r0, r1)),
                    "cell": dic(np.repeat(ce_code[c], w), ce_dict),   # (each block's value, w rows of it)
                    "map": dic(np.repeat(ma_code[m], w), ma_dict),
                    "draw": pa.array(np.repeat(d.astype(np.int64), w)),
                    "repeat": pa.array(np.repeat(p.astype(np.int64), w)),
                    "action": pa.DictionaryArray.from_arrays(pa.array(a.reshape(-1)), labels, safe=False),
                    "utility": pa.array(np.ascontiguousarray(chosen).reshape(-1)),
                    "oracle": pa.DictionaryArray.from_arrays(
                        pa.array(_tile(per_task["oracle"], k, r0, r1), type=l_type), labels, safe=False),
                    "oracle_utility": pa.array(_tile(per_task["oracle_utility"], k, r0, r1)),
                }
                if schema is None:   # no column has a null: required fields (the writer encodes no definition levels)
                    schema = pa.schema([pa.field(name, col.type, nullable=False) for name, col in cols.items()])
                table = pa.Table.from_pydict(cols, schema=schema)
                if writer is None:
                    writer = pq.ParquetWriter(path, table.schema,
                                              use_dictionary=[x for x in table.column_names if x not in plain],
                                              write_statistics=with_stats, compression=compression,
                                              write_batch_size=1 << 16)
                writer.write_table(table, row_group_size=rows_per_group)
        finally:
            if writer is not None:
                writer.close()

    def equals(self, other: Decisions) -> bool:
        return bool(np.array_equal(self.actions, other.actions) and np.array_equal(self.oracle, other.oracle))
