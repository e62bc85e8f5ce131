"""The decision-level response to an operation: the agent replayed on the original and on the operated history
(same future tasks, menus, evaluator and per-decision generators), and a verdict by the audit's rules
(:func:`replaylens.report.judge_rows`, docs/guide/verdicts.md).

* A deterministic agent is a census: ``n_changed`` of ``N`` decisions compared with ``margin · N`` as integers
  (exact rational arithmetic on the margin's decimal); 0 of N is SAFE, more than the margin UNSAFE.
* A stochastic agent (``repeats`` >= 2) is read with the repeat-corrected disagreement T_gr per decision.  Both
  replays give repeat ``r`` of a decision the same generator (the aligned cell's), so only cross pairs with
  ``r != s`` enter (:func:`replaylens.readouts.repeat_corrected_disagreement`).  Per-stream values (tasks →
  strata → streams) are judged with the one-sample Student t on ``S - 1`` degrees of freedom: SAFE when the
  one-sided upper bound lies below the margin, UNSAFE when the "exceeds the margin" test rejects after Holm's
  step-down over the *family* — every (operation, stochastic agent) response of one check
  (:func:`judge_responses`) — else INCONCLUSIVE.  With one repeat, any changed decision is INCONCLUSIVE.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ...agents import Agent, FutureInput, as_agent
from ...errors import AgentRaised
from ...readouts import pool_tasks, repeat_corrected_disagreement
from ...records import Evaluator, FutureTasks, History
from ...replay import Decisions, replay
from ...report import DEFAULT_STOCHASTIC_MARGIN, INCONCLUSIVE, Expectation, JudgeContext, Judgement, judge_rows
from ...rng import derive_rng

__all__ = ["DEFAULT_STOCHASTIC_MARGIN", "INCONCLUSIVE", "SAFE", "UNSAFE", "DecisionResponse", "decision_response",
           "judge_responses"]

SAFE, UNSAFE = "SAFE", "UNSAFE"


@dataclass(frozen=True)
class DecisionResponse:
    """The agent's decisions after the operation against before it, and their verdict.

    ``per_stream``: the per-stream values the verdict reads (T_gr, or the share of changed decisions);
    ``p_value``: the Holm-adjusted one-sided p of "exceeds the margin" within the check's family (T_gr rows;
    ``family`` its size); ``evidence``: the verdict's reason in words (bounds, detectable response, streams
    that would decide)."""

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
    op: str = ""
    per_stream: tuple[float, ...] = ()
    p_value: float = math.nan
    family: int = 0
    evidence: str = ""
    detectable: float = math.nan
    streams_needed: int | None = None
    tolerance: float | None = None   # the declared margin (None: the default, 0 census / 0.05 T_gr)

    def line(self) -> str:
        if self.measure == "changed":
            got = f"{self.n_changed} of {self.n_decisions} decisions changed"
        else:
            fam = f", Holm over {self.family} T_gr rows" if self.family > 1 else ""
            got = (f"T_gr {self.value:.3f} ({len(self.per_stream)} streams, {self.repeats} repeats{fam}; "
                   f"{self.n_changed} of {self.n_decisions} first-repeat decisions changed)")
        ex = f"; e.g. {self.example}" if self.example else ""
        why = f"; {self.evidence}" if self.evidence else ""
        return (f"{self.status}: {got}, margin {self.margin:g}{why}; mean utility change {self.delta_utility:+.4f} "
                f"(agent {self.agent}){ex}")

    def to_dict(self) -> dict[str, Any]:
        return {"agent": self.agent, "stochastic": self.stochastic, "repeats": self.repeats,
                "n_decisions": self.n_decisions, "n_changed": self.n_changed, "margin": self.margin,
                "tolerance": self.tolerance, "status": self.status, "measure": self.measure, "value": self.value,
                "interval": list(self.interval), "delta_utility": self.delta_utility, "example": self.example,
                "per_stream": list(self.per_stream), "p_value": self.p_value, "family": self.family,
                "detectable": self.detectable, "streams_needed": self.streams_needed, "evidence": self.evidence,
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


def decision_response(history: History, operated: History, futures: FutureTasks, evaluator: Evaluator,
                      agent: Agent | Any, *, seed: int = 0, repeats: int | None = None, rng: str = "independent",
                      margin: float | None = None, level: float = 0.95, op: str = "") -> DecisionResponse:
    """Replay ``agent`` on ``history`` and on ``operated`` (by operation ``op``) and judge the change of its
    decisions on its own (a family of one; :func:`judge_responses` judges several together)."""
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
    if ag.stochastic and p >= 2:
        # both replays give repeat r the same generator: only the cross pairs r != s are independent
        per_stream = pool_tasks(repeat_corrected_disagreement(y0, y1, common=True), d0)
        measure, value = "T_gr", float(per_stream.mean())
    else:
        per_stream = pool_tasks(changed.astype(np.float64), d0)
        measure, value = "changed", n_changed / max(n, 1)
    response = DecisionResponse(ag.name, ag.stochastic, p, n, n_changed, math.nan, "", measure, value,
                                (math.nan, math.nan), du, example, op=op,
                                per_stream=tuple(float(v) for v in per_stream), tolerance=margin)
    return judge_responses([response], level=level)[0]


def _row(d: DecisionResponse) -> dict[str, Any]:
    """The response as a summary row for :func:`replaylens.report.judge_rows`."""
    return {"migration": d.op or "operation", "cell": d.op, "n_changed": d.n_changed, "n_decisions": d.n_decisions,
            "action_ci": [math.nan, math.nan], "action_readout": "T_gr" if d.measure == "T_gr" else "D_A",
            "per_stream": {"action": list(d.per_stream)}}


def _judged(d: DecisionResponse, j: Judgement, family: int) -> DecisionResponse:
    stochastic_t = d.measure == "T_gr"
    return replace(d, status=j.status, margin=j.margin, p_value=j.p_value if stochastic_t else math.nan,
                   family=family if stochastic_t else 0, interval=j.bounds if stochastic_t else (math.nan, math.nan),
                   evidence=j.evidence(), detectable=j.detectable if stochastic_t else math.nan,
                   streams_needed=j.streams_needed)


def judge_responses(responses: Sequence[DecisionResponse], *, level: float = 0.95) -> list[DecisionResponse]:
    """Judge every response of one check as one family (the audit's rules, :func:`replaylens.report.judge_rows`):
    a deterministic agent's by its census, a stochastic agent's T_gr by Student t with Holm's step-down over all
    the family's T_gr rows (several operations × agents: the family-wise false-alarm rate stays at
    ``1 - level``); a stochastic agent read with one repeat is INCONCLUSIVE where decisions changed.  The
    measurements are kept, so a family can be re-judged (:func:`check_operations`)."""
    out = list(responses)
    t_idx = [i for i, d in enumerate(responses) if d.measure == "T_gr"]
    exps = [Expectation(responses[i].op or "operation", "invariant", responses[i].tolerance) for i in t_idx]
    for i, j in zip(t_idx, judge_rows([_row(responses[i]) for i in t_idx], exps, JudgeContext(level=level)),
                    strict=True):
        out[i] = _judged(responses[i], j, len(t_idx))
    for i, d in enumerate(responses):
        if d.measure != "T_gr":
            ctx = JudgeContext(level=level, one_repeat_stochastic=d.stochastic)
            e = Expectation(d.op or "operation", "invariant", d.tolerance)
            out[i] = _judged(d, judge_rows([_row(d)], [e], ctx)[0], 0)
    return out
