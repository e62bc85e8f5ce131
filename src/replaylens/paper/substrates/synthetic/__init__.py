"""The paper's hidden-world numerical substrate (source localization, temporal discount, survival risk).

``build_synthetic(48)`` realizes every (stream, task, arm) counterfactual utility of the primary
pool once: 6 strata × 24 development tasks, 4 learning blocks × 48 adaptation slots and
6 strata × 48 future tasks per stream, 4 arms each (core spec §2.4, §6).  ``SyntheticWorld``
converts an adaptation trace to a :class:`~replaylens.records.History` and gives the future task
set and evaluator; ``task_utilities`` rebuilds any single task from its own seeds.
"""

from ._layout import (
    ARMS,
    BASE_SEED,
    CONTEXTS,
    FAMILIES,
    LEARNING_BLOCKS,
    PHASES,
    SPLIT_SIZES,
    STRATA,
    TASKS_PER_STREAM,
    WORLD_ROLE,
    PublicTask,
    draw_seed,
    public_task,
    stream_id,
    task_id,
    task_index,
)
from ._world import SyntheticWorld, build_synthetic, task_utilities

__all__ = [
    "ARMS",
    "BASE_SEED",
    "CONTEXTS",
    "FAMILIES",
    "LEARNING_BLOCKS",
    "PHASES",
    "SPLIT_SIZES",
    "STRATA",
    "TASKS_PER_STREAM",
    "WORLD_ROLE",
    "PublicTask",
    "SyntheticWorld",
    "build_synthetic",
    "draw_seed",
    "public_task",
    "stream_id",
    "task_id",
    "task_index",
    "task_utilities",
]
