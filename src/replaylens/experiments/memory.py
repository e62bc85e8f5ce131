"""Bounded-memory migration audit (issue 6): structural artifact checks on public-data blocks.

``memory-artifacts`` reproduces the pre-model structural checks exactly: under complete-event
reordering, which memories change their stored summaries and their retrieved text (the Changed column
of tab:memory-development over 16 development streams, and Table M-art over 48 new test streams).
"""

from __future__ import annotations

from functools import cache, partial

from ..memory import MemoryBlocks, build_memory_blocks, check_migration, make_memory
from ..reproduce import Comparison, compare, register_reproduction

DEV_SEED = 20260870
TEST_SEED = 20260871
NOTE = ("exact structural count; blocks built from the verified public data (32 events + 1 query per block, "
        f"balanced forced schedule); dev seed {DEV_SEED}, test seed {TEST_SEED}")


@cache
def _blocks(n: int, seed: int) -> MemoryBlocks:
    return build_memory_blocks(n, seed=seed)


@register_reproduction("memory-artifacts", "Bounded memories: changed artifacts after complete-event reordering",
                       issue="6")
def memory_artifacts() -> list[Comparison]:
    rows: list[Comparison] = []
    dev = _blocks(16, DEV_SEED)
    for name, label, paper in (("fifo", "FIFO", 64), ("event-time", "Event time", 0), ("reservoir", "Reservoir", 0),
                               ("binned-mean", "Binned mean", 0)):
        rep = check_migration(partial(make_memory, name), dev.events, queries=dev.queries, ops=["reorder"],
                              seed=DEV_SEED)[0]
        both = sum(1 for c in rep.changed if c.stored_changed and c.retrieved_changed)
        rows.append(compare("tab:memory-development", label, "Changed (of 64 blocks)", paper, both, 0, NOTE))
    test = _blocks(48, TEST_SEED)
    for name, label, ps, pr in (("fifo", "FIFO", 192, 192), ("binned-mean", "Binned mean (audit)", 0, 0),
                                ("binned-mean", "Binned mean (endpoint)", 0, 0), ("no-memory", "No memory", 192, 0)):
        rep = check_migration(partial(make_memory, name), test.events, queries=test.queries, ops=["reorder"],
                              seed=TEST_SEED)[0]
        rows.append(compare("tab:memory-test-artifacts", label, "stored summaries (of 192)", ps, rep.stored_changed, 0,
                            NOTE))
        rows.append(compare("tab:memory-test-artifacts", label, "retrieved text (of 192)", pr, rep.retrieved_changed,
                            0, NOTE))
    return rows
