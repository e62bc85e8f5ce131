"""The replay plan: streams × strata × cells × maps × slot draws × repeats, sharded by stream."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..interventions import Cell, resolve_cells
from ..maps import LabelMap, SlotSpec, resolve_maps
from ..records import FutureTasks, History, check_inputs
from ..settings import STRUCTURAL_CELLS

__all__ = ["ReplayPlan", "default_maps", "plan_replay"]


def default_maps(n: int) -> str:
    """Default map set: all derangements for n <= 5 labels, else the n − 1 cyclic shifts."""
    return "derangements" if n <= 5 else "cyclic"


@dataclass(frozen=True)
class ReplayPlan:
    """What to replay.  ``maps[0]`` is the identity; ``draws[d]`` seeds σ for draw d.

    A shard is a tuple of streams; each shard's decisions are a pure function of the plan,
    that shard's records and futures, and the agent.
    """

    labels: tuple[str, ...]
    streams: tuple[str, ...]
    strata: tuple[tuple[str, str], ...]
    cells: tuple[Cell, ...]
    maps: tuple[LabelMap, ...]
    draws: tuple[SlotSpec, ...]
    repeats: int
    seed: int
    check_laws: bool = True

    def __post_init__(self) -> None:
        if not self.maps or not self.maps[0].is_identity:
            raise ConfigError("the first map of a plan must be the identity")
        if self.repeats < 1:
            raise ConfigError(f"repeats must be >= 1; got {self.repeats}")
        if not self.draws:
            raise ConfigError("a plan needs at least one slot draw")
        if self.cells[0].name != "aligned":
            raise ConfigError("the first cell of a plan must be 'aligned'")
        for m in self.maps:
            if m.n != len(self.labels):
                raise ConfigError(f"map {m.name} acts on {m.n} labels but the menu vocabulary has {len(self.labels)}")

    @property
    def cell_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.cells)

    @property
    def map_names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.maps)

    def shards(self, size: int = 1) -> list[tuple[str, ...]]:
        if size < 1:
            raise ConfigError(f"shard size must be >= 1; got {size}")
        return [self.streams[i:i + size] for i in range(0, len(self.streams), size)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "labels": list(self.labels), "streams": list(self.streams),
            "strata": [list(s) for s in self.strata], "cells": list(self.cell_names),
            "maps": [list(m.images) for m in self.maps], "draws": [d.to_dict() for d in self.draws],
            "repeats": self.repeats, "seed": self.seed, "check_laws": self.check_laws,
        }

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()

    @property
    def n_decisions_per_task(self) -> int:
        return len(self.cells) * len(self.maps) * len(self.draws) * self.repeats


def plan_replay(
    history: History,
    futures: FutureTasks,
    *,
    cells: str | Sequence[str] = STRUCTURAL_CELLS,
    maps: str | Sequence[str] | None = None,
    draws: int | Sequence[SlotSpec] = 1,
    repeats: int = 1,
    seed: int = 0,
    check_laws: bool = True,
) -> ReplayPlan:
    """Build a plan over every stream with future tasks.  Validates that the inputs fit together."""
    check_inputs(history, futures)
    labels = futures.labels
    cell_objs = resolve_cells(cells)
    map_objs = resolve_maps(maps if maps is not None else default_maps(len(labels)), labels)
    if isinstance(draws, int):
        if draws < 1:
            raise ConfigError(f"draws must be >= 1; got {draws}")
        draw_specs = tuple(SlotSpec.from_seed(seed, d) for d in range(draws))
    else:
        draw_specs = tuple(draws)
    return ReplayPlan(
        labels=labels, streams=futures.streams, strata=futures.strata, cells=cell_objs, maps=map_objs,
        draws=draw_specs, repeats=int(repeats), seed=int(seed), check_laws=check_laws,
    )
