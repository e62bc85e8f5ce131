"""Bounded memories (FIFO, event time, reservoir, binned mean), migration checks, and public-data blocks."""

from ._check import MIGRATIONS, BlockDiff, MigrationReport, apply_migration, check_migration, snapshot
from ._events import EVENT_FIELDS, read_events, write_events
from ._memories import (
    LINE_WIDTH,
    MEMORIES,
    BinnedMeanMemory,
    Event,
    EventTimeMemory,
    FIFOMemory,
    Memory,
    NoMemory,
    ReservoirMemory,
    Slot,
    identifier_priority,
    make_memory,
)
from ._policy import retrieved_mean_policy
from ._public import MemoryBlocks, build_memory_blocks

__all__ = [
    "EVENT_FIELDS",
    "LINE_WIDTH",
    "MEMORIES",
    "MIGRATIONS",
    "BinnedMeanMemory",
    "BlockDiff",
    "Event",
    "EventTimeMemory",
    "FIFOMemory",
    "Memory",
    "MemoryBlocks",
    "MigrationReport",
    "NoMemory",
    "ReservoirMemory",
    "Slot",
    "apply_migration",
    "build_memory_blocks",
    "check_migration",
    "identifier_priority",
    "make_memory",
    "read_events",
    "retrieved_mean_policy",
    "snapshot",
    "write_events",
]
