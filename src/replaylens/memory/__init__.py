"""The memory family: everything about an agent's memory beyond the core's writer/policy protocol.

* :mod:`replaylens.memory.bounded` — bounded memories (FIFO, event time, reservoir, binned mean), their
  migration checks and policy calls over their retrieved text;
* :mod:`replaylens.memory.stores` — vector stores and memory frameworks behind one text-level protocol, and the
  embedders they use;
* :mod:`replaylens.memory.retrieval` — retrieval-memory agents over those stores and the store audits
  (cells and migrations, read at the retrieval and the decision level);
* :mod:`replaylens.memory.operations` — operations that rewrite records (deduplication, consolidation,
  forgetting, merging), judged by the relations they preserve;
* :mod:`replaylens.memory.generations` — indexes whose vectors come from more than one embedder.

Layers inside the family: stores < bounded, generations < retrieval < operations (docs/architecture.md).  The
bounded memories' and the generation detector's names are re-exported here (``from replaylens.memory import
FIFOMemory`` keeps working); new code imports from the subpackage.
"""

from .bounded import (
    ACTION_ORDER,
    EVENT_FIELDS,
    LINE_WIDTH,
    MEMORIES,
    MEMORY_INSTRUCTION,
    MIGRATIONS,
    BinnedMeanMemory,
    BlockDiff,
    Decision,
    DecisionReport,
    Event,
    EventTimeMemory,
    FIFOMemory,
    Memory,
    MemoryItem,
    MemoryTemplate,
    MigrationReport,
    NoMemory,
    ReservoirMemory,
    RetrievedMeanBackend,
    Slot,
    acquire_decisions,
    apply_migration,
    audit_migration_decisions,
    check_migration,
    decide_direct,
    identifier_priority,
    item_decoder,
    load_memory_factory,
    make_memory,
    manifest_core,
    memory_backend,
    parse_memory_prompt,
    read_events,
    render_memory_item,
    render_memory_prompt,
    repeat_corrected,
    retrieved_mean_policy,
    snapshot,
    write_events,
)
from .generations import (
    INDEX_FIELDS,
    GenerationReport,
    IndexRows,
    build_mixed_index,
    check_generations,
    read_index,
    write_index,
)

__all__ = [
    "ACTION_ORDER",
    "EVENT_FIELDS",
    "INDEX_FIELDS",
    "LINE_WIDTH",
    "MEMORIES",
    "MEMORY_INSTRUCTION",
    "MIGRATIONS",
    "BinnedMeanMemory",
    "BlockDiff",
    "Decision",
    "DecisionReport",
    "Event",
    "EventTimeMemory",
    "FIFOMemory",
    "GenerationReport",
    "IndexRows",
    "Memory",
    "MemoryItem",
    "MemoryTemplate",
    "MigrationReport",
    "NoMemory",
    "ReservoirMemory",
    "RetrievedMeanBackend",
    "Slot",
    "acquire_decisions",
    "apply_migration",
    "audit_migration_decisions",
    "build_mixed_index",
    "check_generations",
    "check_migration",
    "decide_direct",
    "identifier_priority",
    "item_decoder",
    "load_memory_factory",
    "make_memory",
    "manifest_core",
    "memory_backend",
    "parse_memory_prompt",
    "read_events",
    "read_index",
    "render_memory_item",
    "render_memory_prompt",
    "repeat_corrected",
    "retrieved_mean_policy",
    "snapshot",
    "write_events",
    "write_index",
]
