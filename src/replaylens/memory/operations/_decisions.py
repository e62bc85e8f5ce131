"""The decision-level response to an operation: the agent replayed on the original and on the operated history
(same future tasks, menus, evaluator and per-decision generators), and a verdict.

* A deterministic agent is a census: ``n_changed`` of ``N`` decisions compared with ``margin · N`` as integers
  (exact rational arithmetic on the margin's decimal); 0 of N is SAFE, more than the margin UNSAFE.
* A stochastic agent (``repeats`` >= 2) is read with the repeat-corrected disagreement T_gr per decision.  Both
  replays give repeat ``r`` of a decision the same generator (the aligned cell's), so only cross pairs with
  ``r != s`` enter (T_gr under common random numbers, docs/decisions.md).  Per-stream values (tasks → strata →
  streams) are judged with the one-sided Student t bounds on ``S - 1`` degrees of freedom: SAFE when the upper
  bound lies below the margin, UNSAFE when the lower bound lies above it, else INCONCLUSIVE.  With one repeat,
  any changed decision is INCONCLUSIVE.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ...agents import Agent, FutureInput, as_agent
from ...errors import AgentRaised
from ...inference import mean_inference
from ...readouts import pool_tasks
from ...records import Evaluator, FutureTasks, History
from ...replay import Decisions, replay
from ...report import DEFAULT_STOCHASTIC_MARGIN, INCONCLUSIVE
from ...rng import derive_rng

__all__ = ["DEFAULT_STOCHASTIC_MARGIN", "INCONCLUSIVE", "SAFE", "UNSAFE", "DecisionResponse", "decision_response"]

SAFE, UNSAFE = "SAFE", "UNSAFE"


@dataclass(frozen=True)
class DecisionResponse:
    """The agent's decisions after the operation against before it."""

    agent: str
    stochastic: bool
    repeats: int
    n_decisions: int
    n_changed: int
    margin: float
    status: str
    measure: str
    value: float
    interval: tuple[float, float]
    delta_utility: float
    example: str = ""

    def line(self) -> str:
        if self.measure == "changed":
            got = f"{self.n_changed} of {self.n_decisions} decisions changed"
        else:
            lo, hi = self.interval
            got = (f"T_gr {self.value:.3f} (one-sided bounds [{lo:.3f}, {hi:.3f}], {self.repeats} repeats; "
                   f"{self.n_changed} of {self.n_decisions} first-repeat decisions changed)")
        ex = f"; e.g. {self.example}" if self.example else ""
        return (f"{self.status}: {got}, margin {self.margin:g}; mean utility change {self.delta_utility:+.4f} "
                f"(agent {self.agent}){ex}")

    def to_dict(self) -> dict[str, Any]:
        return {"agent": self.agent, "stochastic": self.stochastic, "repeats": self.repeats,
                "n_decisions": self.n_decisions, "n_changed": self.n_changed, "margin": self.margin,
                "status": self.status, "measure": self.measure, "value": self.value,
                "interval": list(self.interval), "delta_utility": self.delta_utility, "example": self.example,
                "line": self.line()}


def _labels(dec: Decisions) -> np.ndarray:
    """(P, N) chosen labels (identity map, first draw) as text."""
    return np.asarray(dec.plan.labels, dtype=object)[dec.actions[0, 0, 0]]


def _keys(dec: Decisions) -> list[tuple[str, str]]:
    streams = dec.plan.streams
    return list(zip([streams[int(i)] for i in dec.stream_idx], dec.task_ids.tolist(), strict=True))


def _act_empty(ag: Agent, t: Any, repeat: int, seed: int) -> str:
    """The agent's decision for future task ``t`` with an empty memory (its stream's records all removed)."""
    task = FutureInput(t.stream, t.family, t.context, t.task, t.index, 0, t.metadata)
    rng = derive_rng(seed, "operation-empty-stream", t.stream, t.task, repeat)
    try:
        return str(ag.policy.act(ag.writer.init_state(), task, tuple(t.menu), rng))
    except Exception as exc:
        raise AgentRaised(ag.name, "act", {"stream": t.stream, "future task": t.task, "memory": "empty"}, exc) \
            from exc


def _census(n_changed: int, n: int, margin: float) -> str:
    m = Fraction(str(margin))
    return SAFE if n_changed * m.denominator <= m.numerator * n else UNSAFE


def decision_response(history: History, operated: History, futures: FutureTasks, evaluator: Evaluator,
                      agent: Agent | Any, *, seed: int = 0, repeats: int | None = None, rng: str = "independent",
                      margin: float | None = None, level: float = 0.95) -> DecisionResponse:
    """Replay ``agent`` on ``history`` and on ``operated`` and judge the change of its decisions."""
    ag = as_agent(agent)
    p = repeats if repeats is not None else (2 if ag.stochastic else 1)
    kw: dict[str, Any] = {"cells": "", "maps": "", "repeats": p, "seed": seed, "rng": rng}
    d0 = replay(history, futures, evaluator, ag, **kw)
    kept = set(operated.streams)
    emptied = [s for s in history.streams if s not in kept]
    rest = futures if not emptied else FutureTasks(tuple(t for t in futures.tasks if t.stream in kept),
                                                   source=futures.source)
    d1 = replay(operated, rest, evaluator, ag, **kw) if rest.tasks else None
    k0 = _keys(d0)
    y0 = _labels(d0)
    got: dict[tuple[str, str], int] = {}
    y1 = np.empty_like(y0)
    if d1 is not None:
        for i, key in enumerate(_keys(d1)):
            got[key] = i
        y1_rest = _labels(d1)
    empty = {(t.stream, t.task): t for t in futures.tasks if t.stream not in kept}
    for j, key in enumerate(k0):
        if key in got:
            y1[:, j] = y1_rest[:, got[key]]
        else:   # a stream the operation emptied: the agent decides on its initial state
            y1[:, j] = [_act_empty(ag, empty[key], r, seed) for r in range(p)]
    changed = y0[0] != y1[0]
    n, n_changed = int(changed.size), int(changed.sum())
    util = d0.utility
    col = {lab: i for i, lab in enumerate(d0.plan.labels)}
    rows = np.arange(n)
    u0 = np.mean([util[rows, [col[x] for x in y0[r]]] for r in range(p)], axis=0)
    u1 = np.mean([util[rows, [col[x] for x in y1[r]]] for r in range(p)], axis=0)
    du = float(np.nanmean(u1 - u0)) if n else 0.0
    example = ""
    if n_changed:
        i = int(np.flatnonzero(changed)[0])
        example = f"stream {k0[i][0]}, task {k0[i][1]}: {y0[0, i]} -> {y1[0, i]}"
    if not ag.stochastic:
        mg = 0.0 if margin is None else margin
        return DecisionResponse(ag.name, False, p, n, n_changed, mg, _census(n_changed, n, mg), "changed",
                                n_changed / max(n, 1), (math.nan, math.nan), du, example)
    mg = DEFAULT_STOCHASTIC_MARGIN if margin is None else margin
    if p < 2:
        status = SAFE if n_changed == 0 else INCONCLUSIVE
        return DecisionResponse(ag.name, True, p, n, n_changed, mg, status, "changed", n_changed / max(n, 1),
                                (math.nan, math.nan), du, example)
    cross = np.mean([y0[r] != y1[s] for r in range(p) for s in range(p) if r != s], axis=0)
    pairs = [(r, s) for r in range(p) for s in range(r + 1, p)]
    within = 0.5 * (np.mean([y0[r] != y0[s] for r, s in pairs], axis=0) +
                    np.mean([y1[r] != y1[s] for r, s in pairs], axis=0))
    per_stream = pool_tasks(cross - within, d0)
    s_n = per_stream.shape[0]
    est = float(per_stream.mean())
    if s_n < 2:
        return DecisionResponse(ag.name, True, p, n, n_changed, mg, INCONCLUSIVE, "T_gr", est,
                                (math.nan, math.nan), du, example)
    inf = mean_inference(per_stream)   # the audit's Student t (issue 47): one-sided bounds at ``level``
    lo, hi = round(inf.lower(1 - level), 12), round(inf.upper(1 - level), 12)
    status = SAFE if hi < mg else UNSAFE if lo > mg else INCONCLUSIVE
    return DecisionResponse(ag.name, True, p, n, n_changed, mg, status, "T_gr", est, (lo, hi), du, example)
