"""Bounded-memory blocks on the public-data executor (C1.1): 32 historical events + 1 query per block.

Each block is one (data set, context) stratum of a stream: 32 historical tasks whose actions follow a
balanced forced schedule (each of the four actions exactly 8 times, seeded shuffle) with the measured
utility of the scheduled action, and one future query task with the counterfactual utility of every
action.  Descriptors are public: d1 / d2 = mean / sd of the candidate pool's first standardized
feature, d3 = mean of its second.  Logical time = the chronological index 1..32; identifiers
``ev-{stream}-{block}-{t:02d}``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ...memory.bounded import Event
from ...rng import derive_rng
from ..data import load
from ..substrates.public import ARMS, PublicConfig, build_public, standardize

__all__ = ["MemoryBlocks", "build_memory_blocks"]

N_EVENTS = 32


@dataclass(frozen=True, eq=False)
class MemoryBlocks:
    """Events, queries and query utilities of every (stream, block)."""

    events: dict[tuple[str, str], list[Event]]
    queries: dict[tuple[str, str], tuple[float, ...]]
    query_utility: dict[tuple[str, str], np.ndarray]  # counterfactual utility of each action, ARMS order
    arms: tuple[str, ...]


def build_memory_blocks(n_streams: int, *, seed: int, data_dir: str | os.PathLike[str] | None = None
                        ) -> MemoryBlocks:
    """Build the memory experiment's blocks from the verified public data (needs `replaylens paper data fetch`)."""
    world = build_public(n_streams, seed=seed, data_dir=data_dir, config=PublicConfig(tasks_per_split=N_EVENTS))
    z = {d: standardize(load(d, data_dir=data_dir)[0]) for d in dict.fromkeys(s[0] for s in world.strata)}
    events: dict[tuple[str, str], list[Event]] = {}
    queries: dict[tuple[str, str], tuple[float, ...]] = {}
    qutil: dict[tuple[str, str], np.ndarray] = {}

    def desc(zz: np.ndarray, rows: np.ndarray) -> tuple[float, float, float]:
        return (float(zz[rows, 0].mean()), float(zz[rows, 0].std()), float(zz[rows, 1].mean()))

    for r in range(n_streams):
        stream = world.streams[r]
        for s, (family, context) in enumerate(world.strata):
            block = f"{family}/{context}"
            sched = np.repeat(np.arange(len(ARMS)), N_EVENTS // len(ARMS))
            derive_rng(seed, "memory-schedule", r, s).shuffle(sched)
            evs = []
            for t in range(N_EVENTS):
                rows = world.candidates[r, s, 1, t]
                a = int(sched[t])
                evs.append(Event(desc(z[family], rows), ARMS[a], float(world.adapt_utility[r, s, t, a]),
                                 float(t + 1), f"ev-{stream}-{family}-{context}-{t + 1:02d}"))
            events[(stream, block)] = evs
            queries[(stream, block)] = desc(z[family], world.candidates[r, s, 2, 0])
            qutil[(stream, block)] = np.asarray(world.future_utility[r, s, 0], dtype=np.float64)
    return MemoryBlocks(events, queries, qutil, tuple(ARMS))
