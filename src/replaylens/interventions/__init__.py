"""Replay cells (interventions), each declaring the laws it preserves; the laws are checked."""

from ._apply import apply_cell
from ._cells import (
    CELLS,
    Cell,
    TransformedBatch,
    cell_record,
    changed_slots,
    get_cell,
    outcome_codes,
    register_cell,
    resolve_cells,
    transform_batch,
)
from ._laws import Law, check_law, check_laws_plain

__all__ = [
    "apply_cell",
    "CELLS",
    "Cell",
    "Law",
    "TransformedBatch",
    "cell_record",
    "changed_slots",
    "check_law",
    "check_laws_plain",
    "get_cell",
    "register_cell",
    "outcome_codes",
    "resolve_cells",
    "transform_batch",
]
