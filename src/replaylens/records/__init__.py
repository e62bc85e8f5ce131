"""Typed histories, future task sets and evaluators, with validated IO (``docs/guide/schema.md``)."""

from ._codes import distinct_rows
from ._columns import Field, read_raw
from ._futures import FutureColumns, FutureRows, FutureTask, FutureTasks
from ._history import Evaluator, History, Record, block_name
from ._inputs import read_inputs
from ._io import (
    EVALUATOR_FIELDS,
    FUTURE_FIELDS,
    HISTORY_FIELDS,
    check_inputs,
    evaluator_from_rows,
    futures_from_tasks,
    history_from_records,
    read_evaluator,
    read_futures,
    read_history,
    write_evaluator,
    write_futures,
    write_history,
)
from ._layout import to_arrow_text as arrow_text
from ._storable import check_storable
from ._text_codes import decode_bytes as unpack_text

__all__ = [
    "EVALUATOR_FIELDS",
    "FUTURE_FIELDS",
    "HISTORY_FIELDS",
    "Evaluator",
    "Field",
    "FutureColumns",
    "FutureRows",
    "FutureTask",
    "FutureTasks",
    "History",
    "Record",
    "arrow_text",
    "block_name",
    "check_inputs",
    "check_storable",
    "distinct_rows",
    "evaluator_from_rows",
    "futures_from_tasks",
    "history_from_records",
    "read_evaluator",
    "read_futures",
    "read_history",
    "read_inputs",
    "read_raw",
    "unpack_text",
    "write_evaluator",
    "write_futures",
    "write_history",
]
