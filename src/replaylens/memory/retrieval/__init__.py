"""Retrieval-memory agents and store audits: ingest history records into a real vector store or memory
framework (:mod:`replaylens.memory.stores`), retrieve top-k for future tasks, decide by a documented rule, and
read every history cell and every store migration at two levels — retrieval and decision — against a
same-order rebuild."""

from ._check import StoreMigrationResult, StreamInput, check_store_migrations
from ._embedcache import CachedEmbedder, cached_embedder
from ._example import EXAMPLE_FILES, EXAMPLES, OPTIMIZERS, TOOLS, build_example, example_path, write_example
from ._items import (
    MemoryItem,
    Retrieved,
    StoreSpec,
    build_store,
    embedding_stats,
    item_from_task,
    query_store,
    text_of,
)
from ._migrations import KINDS, LAWS, Migration, plan_migrations
from ._model import ModelDecider
from ._policy import RetrievalAgent, decide, make_agent
from ._readouts import CATEGORIES, Comparison, TwoLevel, crosstab_lines, two_level
from ._streams import streams_from_history

__all__ = [
    "CATEGORIES",
    "EXAMPLE_FILES",
    "EXAMPLES",
    "OPTIMIZERS",
    "KINDS",
    "LAWS",
    "TOOLS",
    "CachedEmbedder",
    "Comparison",
    "MemoryItem",
    "Migration",
    "ModelDecider",
    "RetrievalAgent",
    "Retrieved",
    "StoreMigrationResult",
    "StoreSpec",
    "StreamInput",
    "TwoLevel",
    "build_example",
    "build_store",
    "cached_embedder",
    "check_store_migrations",
    "crosstab_lines",
    "decide",
    "embedding_stats",
    "example_path",
    "item_from_task",
    "make_agent",
    "plan_migrations",
    "query_store",
    "streams_from_history",
    "text_of",
    "two_level",
    "write_example",
]
