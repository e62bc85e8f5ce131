"""Mixed embedding generations: ``check_generations`` re-embeds a seeded sample of an index's records with the
declared embedder and flags the records whose stored vector does not match (an index half-migrated to another
embedder); ``build_mixed_index`` writes the shipped 30 % mixed example."""

from ._index import (
    INDEX_FIELDS,
    GenerationReport,
    IndexRows,
    build_mixed_index,
    check_generations,
    read_index,
    write_index,
)

__all__ = [
    "INDEX_FIELDS",
    "GenerationReport",
    "IndexRows",
    "build_mixed_index",
    "check_generations",
    "read_index",
    "write_index",
]
