"""Adaptive audit: replay an agent stream-chunk by stream-chunk and stop each cell once its verdict settles.

Each round replays the round's streams (a chunk of the seeded random stream order) under the
aligned cell and the still-open cells only; a stream's observation in a cell is its direct action
response (the fraction of its decisions that differ from aligned, :func:`direct_action_contrast`).
The stopping rule is :func:`replaylens.inference.adaptive_cells` (an anytime-valid betting
confidence sequence).  For a deterministic agent (greedy decoding, scripted rules) a stream's
decisions in a cell are exactly those of the full matrix; for a stochastic agent they are fresh
seeded draws (the per-decision seed depends on the cell's position in the round's plan).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..agents import Agent
from ..errors import ConfigError
from ..inference import AdaptiveResult, adaptive_cells
from ..readouts import direct_action_contrast
from ..records import Evaluator, FutureTasks, History
from ..replay import plan_replay, prepare_replay
from ..settings import STRUCTURAL_CELLS

__all__ = ["adaptive_audit", "adaptive_summary"]


def adaptive_audit(history: History, futures: FutureTasks, evaluator: Evaluator, agent: Agent, *,
                   cells: str | Sequence[str] = STRUCTURAL_CELLS, maps: str | Sequence[str] | None = None,
                   draws: int = 1, seed: int = 0, margin: float = 0.05, rounds: int = 10, level: float = 0.95,
                   path: str = "auto") -> tuple[AdaptiveResult, int, int]:
    """Adaptive replay of ``agent``; returns the result, decisions replayed, and the full matrix's decisions."""
    plan = plan_replay(history, futures, cells=cells, maps=maps, draws=draws, repeats=1, seed=seed)
    aligned = plan.cells[0]
    by_name = {c.name: c for c in plan.cells[1:]}
    if not by_name:
        raise ConfigError("--adaptive needs at least one cell besides aligned")
    streams = plan.streams
    asked = 0

    def ask_round(open_cells: Sequence[str], idx: np.ndarray) -> Mapping[str, np.ndarray]:
        nonlocal asked
        sub = dataclasses.replace(plan, streams=tuple(streams[int(i)] for i in idx),
                                  cells=(aligned, *(by_name[c] for c in open_cells)))
        dec = prepare_replay(history, futures, evaluator, plan=sub).run(agent, path=path)
        asked += int(dec.actions.size)
        return {c: np.asarray(direct_action_contrast(dec, c).values, dtype=np.float64) for c in open_cells}

    full = prepare_replay(history, futures, evaluator, plan=plan).base
    n_full = len(full.task_text) * plan.n_decisions_per_task
    res = adaptive_cells(None, len(streams), list(by_name), margin=margin, rounds=rounds, level=level, seed=seed,
                         ask_round=ask_round)
    return res, asked, n_full


def adaptive_summary(res: AdaptiveResult, asked: int, n_full: int) -> dict[str, Any]:
    """JSON-ready record of an adaptive audit (written as ``adaptive.json``)."""
    return {"method": "hedged betting confidence sequence (Waudby-Smith & Ramdas 2023), stream-cluster rounds",
            "margin": res.margin, "level": res.level, "n_streams": res.n_streams, "decisions_replayed": asked,
            "decisions_full_matrix": n_full, "fraction_of_full": asked / n_full if n_full else 0.0,
            "cells": [dataclasses.asdict(c) for c in res.cells]}
