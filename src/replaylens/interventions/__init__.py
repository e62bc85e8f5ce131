"""Replay cells (interventions), each declaring the laws it preserves; the laws are checked."""

from ._cells import CELLS, Cell, TransformedBatch, get_cell, register_cell, resolve_cells, transform_stream
from ._laws import Law, check_law

__all__ = [
    "CELLS",
    "Cell",
    "Law",
    "TransformedBatch",
    "check_law",
    "get_cell",
    "register_cell",
    "resolve_cells",
    "transform_stream",
]
