"""The audit: replay every cell, read out decision and utility responses, attach stream-cluster inference.

For each cell q of the plan (besides aligned) the summary reports, pooled tasks → strata → maps →
streams (paper hierarchy):

* the action response D_A^q (or the repeat-corrected T_gr when the plan has ≥ 2 repeats),
* the paired utility contrast ΔU_q and oracle contrast ΔO_q,

each with a stream-cluster percentile bootstrap interval (one paired resampling for the three),
and a two-sided cluster sign-flip test for ΔU and ΔO.  History cells compare with aligned at ρ = id;
consistent renaming compares the renamed replay at each non-identity ρ with aligned at id.  With
non-identity maps the summary adds the history-only rekey row (A_rekey, with mapped − identity
utility and oracle contrasts).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from .._cpus import statistics_threads
from .._memory import release_freed_memory
from ..agents import Agent
from ..inference import BootstrapResult, SignFlipResult, mean_inference, shared_bootstrap, shared_sign_flip_tests
from ..readouts import (
    StreamValues,
    a_rekey,
    delta,
    delta_o_direct,
    delta_u_direct,
    direct_action_contrast,
    t_gr,
)
from ..records import Evaluator, FutureTasks, History
from ..replay import (
    Decisions,
    PreparedReplay,
    ReplayPlan,
    prepare_replay,
    state_fingerprinter,
    state_response,
)
from ._json import FloatList, float_list

__all__ = ["AuditResult", "CellSummary", "extra_readouts", "pct", "plain_json", "state_responses", "strict_json",
           "stream_warning", "summarize"]

MIN_STREAMS = 8


def pct(x: float, *, signed: bool = False) -> str:
    """A share as a percentage with one decimal; never ``-0.0`` (NaN prints ``n/a``)."""
    if x is None or not np.isfinite(x):
        return "n/a"
    v = round(100 * float(x), 1) + 0.0  # + 0.0 turns -0.0 into 0.0
    return f"{v:+.1f}" if signed and v else f"{v:.1f}"


def strict_json(obj: Any) -> Any:
    """``obj`` with every non-finite float replaced by ``None`` (strict JSON: null, never NaN).

    A list or tuple of plain floats (a per-stream array) is checked with one vectorized finiteness test."""
    if isinstance(obj, float):
        return obj if np.isfinite(obj) else None
    if isinstance(obj, np.floating):
        return float(obj) if np.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: strict_json(v) for k, v in obj.items()}
    if isinstance(obj, FloatList):   # strict already
        return obj
    if isinstance(obj, (list, tuple)):
        if len(obj) > 8 and set(map(type, obj)) == {float}:
            bad = np.flatnonzero(~np.isfinite(np.fromiter(obj, dtype=np.float64, count=len(obj))))
            out = list(obj)
            for j in bad.tolist():
                out[j] = None
            return out
        return [strict_json(v) for v in obj]
    return obj


def plain_json(obj: Any) -> Any:
    """A copy of a strict JSON document (dicts, lists, scalars) for a caller that may change it: an audit's
    cached summary hands out copies, its shared per-stream lists (:class:`FloatList`) as plain lists."""
    if isinstance(obj, dict):
        return {k: plain_json(v) for k, v in obj.items()}
    if isinstance(obj, FloatList):
        return obj.tolist()
    if isinstance(obj, list):
        return [plain_json(v) for v in obj]
    return obj


def stream_warning(n_streams: int) -> str | None:
    """The warning printed (console and report) when there are too few streams for cluster intervals."""
    if n_streams < 2:
        return ("only 1 stream: stream-cluster intervals and tests are n/a (they resample whole streams; "
                "one stream gives nothing to resample)")
    if n_streams < MIN_STREAMS:
        return (f"only {n_streams} streams: stream-cluster intervals are unreliable with fewer than "
                f"{MIN_STREAMS} streams (too few clusters to resample)")
    return None

REKEY_MIGRATION = "renaming identifiers in the history only"


@dataclass(frozen=True, eq=False)
class CellSummary:
    """One row of the audit summary: a cell's action response and its consequences, with inference."""

    cell: str
    migration: str
    action_name: str
    action: StreamValues
    utility: StreamValues
    oracle: StreamValues
    interval: BootstrapResult           # paired (action, ΔU, ΔO) columns
    utility_test: SignFlipResult
    oracle_test: SignFlipResult
    n_decisions: int
    n_changed: int

    def _ci(self, j: int) -> list[float]:
        """The shown interval of column ``j`` (action, ΔU, ΔO): two-sided Student t at the audit's level on the
        per-stream values, ``S - 1`` degrees of freedom (issue 47: valid at few streams; NaN at one stream)."""
        sv = (self.action, self.utility, self.oracle)[j]
        lo, hi = mean_inference(sv.values).interval(self.interval.level)
        return [lo, hi]

    def _bootstrap_ci(self, j: int) -> list[float]:
        """The stream-cluster percentile bootstrap interval of column ``j`` (the paper's method; kept beside)."""
        return [float(np.asarray(self.interval.low)[j]), float(np.asarray(self.interval.high)[j])]

    @property
    def stochastic(self) -> bool:
        """The action readout is the signed, repeat-corrected T_gr (a stochastic agent)."""
        return self.action_name.startswith("T_gr")

    def verdict(self) -> str:
        """One plain line: does this migration operation change decisions?"""
        lo, hi = self._ci(0)
        if self.stochastic:
            ci = "n/a, one stream" if np.isnan(lo) else f"{pct(lo, signed=True)}, {pct(hi, signed=True)}"
            est = f"T_gr {pct(self.action.estimate, signed=True)}% [{ci}]"
            if np.isnan(lo) or lo <= 0:
                return f"{self.migration}: no change beyond decoding noise ({est})"
            return (f"{self.migration}: changes the decision distribution beyond decoding noise ({est}; "
                    f"utility {self.utility.estimate:+.4f})")
        if self.n_changed == 0:
            return f"{self.migration}: no change detected (0 of {self.n_decisions} decisions changed)"
        ci = "n/a, one stream" if np.isnan(lo) else f"{pct(lo)}, {pct(hi)}"
        return (f"{self.migration}: changes decisions ({self.n_changed} of {self.n_decisions} decisions "
                f"changed; pooled action response {pct(self.action.estimate)}% [{ci}]; "
                f"utility {self.utility.estimate:+.4f})")

    def to_dict(self) -> dict[str, Any]:
        """The summary.json row (a fresh dict; NaN where summary.json has null)."""
        return self._content(lambda sv: sv.values.tolist())

    @cached_property
    def _strict(self) -> dict[str, Any]:
        """The summary.json row as strict JSON, made once; its per-stream lists are shared ``FloatList`` values
        (possibly made beside the statistics, :mod:`._ahead`).  Read-only: :meth:`AuditResult.summary` copies."""
        return strict_json(self._content(lambda sv: float_list(sv, sv.values)))

    def _content(self, per_stream: Any) -> dict[str, Any]:
        iv = self.interval
        return {
            "cell": self.cell, "migration": self.migration, "action_readout": self.action_name,
            "action": self.action.estimate, "action_ci": self._ci(0),
            "delta_utility": self.utility.estimate, "delta_utility_ci": self._ci(1),
            "delta_utility_p": self.utility_test.pvalue,
            "delta_oracle": self.oracle.estimate, "delta_oracle_ci": self._ci(2),
            "delta_oracle_p": self.oracle_test.pvalue,
            "interval_method": "student-t (S-1 df) on per-stream values",
            "bootstrap_ci": {"action": self._bootstrap_ci(0), "delta_utility": self._bootstrap_ci(1),
                             "delta_oracle": self._bootstrap_ci(2)},
            "level": iv.level, "n_streams": iv.n_clusters, "n_resamples": iv.n_resamples,
            "n_decisions": self.n_decisions, "n_changed": self.n_changed,
            "per_stream": {"action": per_stream(self.action), "delta_utility": per_stream(self.utility),
                           "delta_oracle": per_stream(self.oracle)},
            "by_map": {"action": self.action.map_estimates(), "delta_utility": self.utility.map_estimates(),
                       "delta_oracle": self.oracle.map_estimates()},
            "verdict": self.verdict(),
        }


@dataclass(frozen=True, eq=False)
class AuditResult:
    """Decisions, per-cell summaries (with their bootstrap distributions) and the settings used."""

    decisions: Decisions
    rows: tuple[CellSummary, ...]
    seed: int
    n_resamples: int
    level: float
    agent: Agent
    settings: dict[str, Any] = field(default_factory=dict)

    def row(self, cell: str) -> CellSummary:
        for r in self.rows:
            if r.cell == cell:
                return r
        raise KeyError(cell)

    def verdicts(self) -> list[str]:
        return [r.verdict() for r in self.rows]

    def summary(self) -> dict[str, Any]:
        """The summary.json content: strict JSON (null, never NaN); a fresh copy on every call."""
        return plain_json(self.document())

    def document(self) -> dict[str, Any]:
        """:meth:`summary` without the copy, for the writers of the result files: its rows (and their per-stream
        lists, :class:`FloatList`) are made once and shared, so it must not be changed."""
        d = self.decisions
        warn = stream_warning(len(d.plan.streams))
        return strict_json({
            "format": 1,
            "agent": self.agent.name,
            "labels": list(d.plan.labels),
            "cells": list(d.plan.cell_names),
            "maps": list(d.plan.map_names),
            "n_streams": len(d.plan.streams),
            "n_strata": len(d.plan.strata),
            "n_future_tasks": d.n_tasks,
            "draws": len(d.plan.draws),
            "repeats": d.plan.repeats,
            "seed": self.seed,
            "n_resamples": self.n_resamples,
            "level": self.level,
            "path": d.path,
            "aligned": self._aligned,
            "rows": [r._strict for r in self.rows],
            "verdicts": self.verdicts(),
            "rng": d.plan.rng,
            "warnings": ([warn] if warn else []) + list(self.settings.get("warnings", [])),
            "state_response": self.settings.get("state_response", {}),
            "verdict": self.verdict(),
            **_cache_counts(self.agent),
            **({"retrieval": self.settings["retrieval"]} if self.settings.get("retrieval") else {}),
        })

    def verdict(self) -> dict[str, Any]:
        """Every row judged against its declared (``settings["expectations"]``) or default expectation."""
        from ._verdict import JudgeContext, verdict_summary

        rows = [r._strict for r in self.rows]
        plan = self.decisions.plan
        control = (self.settings.get("retrieval") or {}).get("rebuild (control)") or {}
        ctx = JudgeContext(level=self.level, on_inconclusive=str(self.settings.get("on_inconclusive", "pass")),
                           one_repeat_stochastic=bool(self.agent.stochastic) and plan.repeats < 2
                           and plan.rng == "independent",
                           noisy_store=control.get("status", "SAFE") != "SAFE")
        return verdict_summary(rows, self.settings.get("expectations", {}), self.agent.invariant_to, ctx)

    @cached_property
    def _aligned(self) -> dict[str, float]:
        d = self.decisions
        return {"mean_utility": float(_aligned_mean(d, "U")), "oracle_agreement": float(_aligned_mean(d, "O"))}


def _cache_counts(agent: Agent) -> dict[str, Any]:
    """``request_cache`` of summary.json (an LLM agent behind the request cache): hits and discarded entries."""
    st = agent.spec.get("request_cache")
    if not isinstance(st, dict):
        return {}
    return {"request_cache": {"path": st.get("path"), "active": st.get("active"),
                              "hits": st.get("decisions_from_cache", 0), "misses": st.get("misses", 0),
                              "discarded": st.get("discarded", 0)}}


def _aligned_mean(d: Decisions, y: str) -> float:
    from ..readouts import mean_utility, oracle_agreement

    return (mean_utility(d) if y == "U" else oracle_agreement(d)).estimate


def _row(d: Decisions, cell: str, migration: str, action: StreamValues, util: StreamValues, orac: StreamValues,
         n_changed: int, n_decisions: int, *,
         inference: tuple[BootstrapResult, SignFlipResult, SignFlipResult]) -> CellSummary:
    iv, tu, to = inference
    return CellSummary(cell, migration, action.name, action, util, orac, iv, tu, to, n_decisions, n_changed)


def _inference(stacks: list[np.ndarray], seed: int, n_resamples: int,
               level: float) -> list[tuple[BootstrapResult, SignFlipResult, SignFlipResult]]:
    """Every row's paired (action, ΔU, ΔO) interval and ΔU / ΔO sign-flip tests, all from one set of shared
    resamples (:func:`~replaylens.inference.shared_bootstrap`; docs/decisions.md, issue 27)."""
    if not stacks:
        return []
    if stacks[0].shape[0] < 2:  # one stream: no cluster inference is possible; report NaN intervals
        out = []
        for stack in stacks:
            nan3 = np.full(3, np.nan)
            iv = BootstrapResult(stack.mean(0), nan3, nan3, level, 1, 0, "none (one stream)", None,
                                 np.zeros((0, 3)), nan3)
            tu = SignFlipResult(float(stack[0, 1]), float("nan"), 1, 0, True, None, np.zeros(0))
            to = SignFlipResult(float(stack[0, 2]), float("nan"), 1, 0, True, None, np.zeros(0))
            out.append((iv, tu, to))
        return out
    values = np.hstack(stacks)
    threads = statistics_threads()
    ivs = shared_bootstrap(values, n_resamples=n_resamples, level=level, seed=seed, groups=[3] * len(stacks),
                           threads=threads)
    tests = shared_sign_flip_tests(np.delete(values, np.s_[::3], axis=1), n_resamples=n_resamples, seed=seed,
                                   threads=threads)
    return [(iv, tests[2 * r], tests[2 * r + 1]) for r, iv in enumerate(ivs)]


def state_responses(history: History, futures: FutureTasks, evaluator: Evaluator, agent: Agent,
                    plan: ReplayPlan) -> dict[str, dict[str, float]]:
    """State-level responses (S_cell vs S_aligned) of every history cell, when the agent offers a state
    fingerprint (``state_fingerprint(state)`` or plain hashable states); else empty."""
    if state_fingerprinter(agent) is None:
        return {}
    return prepared_state_responses(prepare_replay(history, futures, evaluator, plan=plan), agent)


def prepared_state_responses(prepared: PreparedReplay, agent: Agent) -> dict[str, dict[str, float]]:
    """:func:`state_responses` of a prepared replay (an audit's own: its inputs are not prepared again)."""
    if state_fingerprinter(agent) is None:
        return {}
    out: dict[str, dict[str, float]] = {}
    for cell in prepared.plan.cells[1:]:
        if cell.menu_map:
            continue  # consistent renaming is the identity at ρ = id
        sr = state_response(prepared.plan, prepared.streams, agent, cell.name)
        if sr is not None:
            out[cell.name] = {"changed": sr.changed, "total": sr.total, "share": sr.share}
    return out


def extra_readouts(history: History, futures: FutureTasks, agent: Agent, plan: ReplayPlan, d: Decisions, *,
                   seed: int, n_resamples: int, level: float) -> dict[str, Any]:
    """Readouts an agent's policy adds itself through ``extra_readouts(...)`` (a retrieval agent's retrieval
    level and cross-tab per cell, :mod:`replaylens.memory.retrieval`); empty for every other agent."""
    fn = getattr(agent.policy, "extra_readouts", None)
    if not callable(fn):
        return {}
    return dict(fn(history, futures, plan, d, seed=seed, n_resamples=n_resamples, level=level))


def summarize(d: Decisions, *, seed: int = 0, n_resamples: int = 20_000, level: float = 0.95,
              on_readouts: Callable[[list[tuple[str, StreamValues, StreamValues, StreamValues]]], None] | None = None,
              ) -> list[CellSummary]:
    """Summary rows for every non-aligned cell (and the rekey row when the plan has non-identity maps).

    Every row's interval and tests come from one set of resamples shared by all rows (paired across rows),
    drawn in blocks on a few threads.  ``on_readouts`` receives every row's (name, action, ΔU, ΔO) readouts
    before the statistics start (an audit writing a report starts on what does not need the intervals)."""
    pending: list[tuple[Any, ...]] = []
    plan = d.plan
    has_maps = len(plan.maps) > 1
    for c, cell in enumerate(plan.cells):
        if c == 0 or (cell.baseline == "identity" and not has_maps):
            continue
        if plan.repeats >= 2:
            action = t_gr(d, cell.name, "aligned", "nonidentity" if cell.baseline == "identity" else "identity")
        else:
            action = direct_action_contrast(d, cell.name)
        util = delta_u_direct(d, cell.name)
        orac = delta_o_direct(d, cell.name)
        sel = np.arange(1, len(plan.maps)) if cell.baseline == "identity" else np.array([0])
        base = d.actions[0, 0][None] if cell.baseline == "identity" else d.actions[0][sel]
        changed = d.actions[c][sel] != base
        pending.append((d, cell.name, f"{cell.migration} ({cell.name})", action, util, orac, int(changed.sum()),
                        int(changed.size)))
    if has_maps:
        act = a_rekey(d)
        du = delta(d, "U", "aligned")
        util = StreamValues("ΔU_rekey", "aligned", -du.values, -du.by_map, du.maps)
        orac = delta(d, "O", "aligned")
        changed = d.actions[0][1:] != d.actions[0][:1]
        pending.append((d, "rekey", f"{REKEY_MIGRATION} (rekey)", act, util, orac, int(changed.sum()),
                        int(changed.size)))
    if on_readouts is not None:
        on_readouts([(p[1], p[3], p[4], p[5]) for p in pending])
    release_freed_memory()   # the readouts' per-decision temporaries, before the resampling allocates its blocks
    stats = _inference([np.column_stack([p[3].values, p[4].values, p[5].values]) for p in pending], seed,
                       n_resamples, level)
    return [_row(*p, inference=inference) for p, inference in zip(pending, stats, strict=True)]
