"""The paper's model-level memory audit design (partC C1.5): request matrices over bounded memories and
history transformations, built on the public-data blocks."""

from ._design import (
    HISTORIES,
    MemoryCondition,
    MemoryDecisions,
    MemoryDesign,
    decision_rows,
    development_conditions,
    test_conditions,
    transform_history,
)
from ._public import MemoryBlocks, build_memory_blocks

__all__ = [
    "HISTORIES",
    "MemoryBlocks",
    "MemoryCondition",
    "MemoryDecisions",
    "MemoryDesign",
    "build_memory_blocks",
    "decision_rows",
    "development_conditions",
    "test_conditions",
    "transform_history",
]
