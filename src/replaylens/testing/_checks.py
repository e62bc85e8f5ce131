"""Conformance kit for a user's writer/policy (like scikit-learn's ``check_estimator``).

``check_writer(agent)`` replays every cell on the built-in bandit substrate and reports, per
relation, whether the agent's decisions depend on it, whether each declared invariance
(``Agent.invariant_to``) holds exactly, and general contract checks: determinism, no mutation of
the input state, and — when the agent has an array form — exact agreement with the per-record path.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..agents import Agent, FutureInput, TaskInput, as_agent
from ..bandit import make_bandit
from ..errors import AgentRaised, ConfigError
from ..readouts import a_rekey, direct_action_contrast
from ..replay import Decisions, prepare_replay, replay, state_fingerprinter, state_response

__all__ = ["CheckResult", "RelationCheck", "WriterReport", "check_writer"]

RELATIONS = {
    "value": "which outcome belongs to which key",
    "pair": "where intact key-outcome pairs sit (order)",
    "key_slot": "which key sits over each outcome",
    "mask": "whether outcomes are visible",
    "reorder": "the ingestion order of whole events",
    "rename": "consistent relabelling of history and menu",
    "rekey": "the labels in the history alone",
}


@dataclass(frozen=True)
class RelationCheck:
    """Response of the agent to one relation."""

    relation: str
    description: str
    response: float
    changed: int
    decisions: int
    declared_invariant: bool
    state_changed: int | None = None  # states (stream × prefix end) that differ from aligned; None: not read
    states: int = 0

    @property
    def depends(self) -> bool:
        return self.changed > 0

    @property
    def state_depends(self) -> bool:
        return bool(self.state_changed)

    @property
    def violated(self) -> bool:
        return self.declared_invariant and (self.depends or self.state_depends)

    @property
    def state(self) -> str:
        """The state-level response S_cell vs S_aligned ("n/a" without a state fingerprint)."""
        return "n/a" if self.state_changed is None else f"{self.state_changed}/{self.states}"

    @property
    def status(self) -> str:
        if self.declared_invariant:
            if self.depends:
                return "VIOLATED (declared invariant)"
            if self.state_depends:
                return "VIOLATED at the state level (declared invariant; no decision changed)"
            return "ok (declared invariant, exactly zero)"
        if not self.depends and self.state_depends:
            return "no decision change, but the state changes"
        return "depends" if self.depends else "no change"


@dataclass(frozen=True)
class CheckResult:
    """One contract check."""

    name: str
    passed: bool
    detail: str


@dataclass(frozen=True)
class WriterReport:
    """Everything ``check_writer`` found."""

    agent: str
    relations: tuple[RelationCheck, ...]
    checks: tuple[CheckResult, ...]
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks) and not any(r.violated for r in self.relations)

    def depends_on(self) -> list[str]:
        return [r.relation for r in self.relations if r.depends]


def _changed(dec: Decisions, cell: str) -> tuple[int, int]:
    c = dec.cell_index(cell)
    cobj = dec.plan.cells[c]
    if cobj.baseline == "identity":
        ch = dec.actions[c][1:] != dec.actions[0, 0][None]
    else:
        ch = dec.actions[c][:1] != dec.actions[0][:1]
    return int(ch.sum()), int(ch.size)


ALL_CELLS = ("value", "pair", "key_slot", "mask", "reorder", "rename")


def check_writer(agent: Agent | Any, *, n_streams: int = 8, seed: int = 0,
                 cells: str | tuple[str, ...] = ALL_CELLS) -> WriterReport:
    """Run the conformance checks on ``agent`` (an Agent or anything with ``.agent()``; a few seconds for
    array agents).  ``cells`` picks the replayed relations (the rekey relation is always read)."""
    agent = as_agent(agent)
    sub = make_bandit(n_streams=n_streams, slots_per_block=16, n_future=6, rng=seed + 11)
    h, f, e = sub.history, sub.futures, sub.evaluator
    chosen = tuple(c.strip() for c in (cells.split(",") if isinstance(cells, str) else cells) if c.strip())
    cell_list = ",".join(chosen)
    for c in chosen:
        if c not in RELATIONS or c == "rekey":
            raise ConfigError(f"unknown cell {c!r} in cells; choose from {', '.join(ALL_CELLS)}")
    try:
        dec = replay(h, f, e, agent, cells=cell_list, seed=seed, path="auto")
    except AgentRaised as exc:
        if "mask" not in chosen:
            raise
        rest = ",".join(c for c in chosen if c != "mask")
        try:  # did the masked (NaN) outcomes cause it?  The same replay without mask tells.
            replay(h, f, e, agent, cells=rest, seed=seed, path="auto")
        except AgentRaised:
            raise exc from exc.exc
        hint = (f"agent raised on a masked (NaN) outcome in cell mask; handle NaN or run without it "
                f"(--cells {rest})")
        raise AgentRaised(agent.name, exc.call, {**exc.where, "cell": "mask"}, exc.exc, hint=hint) from exc.exc
    declared = set(agent.invariant_to)
    rels: list[RelationCheck] = []
    prepared = prepare_replay(h, f, e, cells=cell_list, seed=seed) if state_fingerprinter(agent) else None
    for cell in chosen:
        ch, n = _changed(dec, cell)
        sr = None if prepared is None or cell == "rename" else \
            state_response(prepared.plan, prepared.streams, agent, cell)
        rels.append(RelationCheck(cell, RELATIONS[cell], direct_action_contrast(dec, cell).estimate, ch, n,
                                  cell in declared, None if sr is None else sr.changed, 0 if sr is None else sr.total))
    ch = int((dec.actions[0][1:] != dec.actions[0][:1]).sum())
    rels.append(RelationCheck("rekey", RELATIONS["rekey"], a_rekey(dec).estimate, ch,
                              int(dec.actions[0][1:].size), "rekey" in declared))
    checks: list[CheckResult] = []
    again = replay(h, f, e, agent, cells=cell_list, seed=seed, path="auto")
    checks.append(CheckResult("deterministic given the seed", again.equals(dec),
                              "two runs with the same seed gave identical decisions" if again.equals(dec)
                              else "two runs with the same seed gave different decisions (randomness outside "
                                   "the rng handed to act?)"))
    if agent.array is not None:
        ref = replay(h, f, e, agent, cells=cell_list, seed=seed, path="reference")
        same = ref.equals(dec)
        n_diff = int((ref.actions != dec.actions).sum())
        checks.append(CheckResult("array path == per-record path", same,
                                  "identical actions" if same else f"{n_diff} decisions differ"))
    checks.append(_purity(agent, h))
    if not agent.stochastic:
        checks.append(_undeclared_stochastic(agent, h))
    return WriterReport(agent.name, tuple(rels), tuple(checks),
                        {"streams": n_streams, "seed": seed, "decisions": int(dec.actions.size)})


def _undeclared_stochastic(agent: Agent, history: Any, n_asks: int = 8) -> CheckResult:
    """Ask the same decision several times with different per-decision generators: a deterministic
    agent must answer the same each time."""
    state = agent.writer.init_state()
    recs = list(history.records(history.streams[0]))[:24]
    for r in recs:
        task = TaskInput(r.stream, r.family, r.context, r.slot, r.task, r.event_time, r.event_id, r.metadata)
        state = agent.writer.update(state, task, agent.namespace.kappa(r.key), r.outcome)
    fut = FutureInput(recs[0].stream, recs[0].family, recs[0].context, "probe", 0, recs[-1].slot)
    menu = tuple(agent.namespace.show(k) for k in dict.fromkeys(r.key for r in history.records(history.streams[0])))
    answers = {str(agent.policy.act(state, fut, menu, np.random.default_rng(i))) for i in range(n_asks)}
    ok = len(answers) == 1
    return CheckResult("deterministic agent answers the same decision the same way", ok,
                       "the same decision asked 8 times gave one answer" if ok else
                       f"the same decision asked {n_asks} times gave {len(answers)} different answers: the agent "
                       "is stochastic but not declared so; declare stochastic=True and audit with --repeats 2")


def _purity(agent: Agent, history: Any) -> CheckResult:
    """``update`` must return a new state and leave its input state unchanged."""
    state = agent.writer.init_state()
    recs = list(history.records(history.streams[0]))[:12]
    for r in recs:
        before = copy.deepcopy(state)
        task = TaskInput(r.stream, r.family, r.context, r.slot, r.task, r.event_time, r.event_id, r.metadata)
        new = agent.writer.update(state, task, agent.namespace.kappa(r.key), r.outcome)
        if not _equal(before, state):
            return CheckResult("update does not mutate its input state", False,
                               f"update changed its input state at slot {r.slot}")
        state = new
    fut = FutureInput(recs[0].stream, recs[0].family, recs[0].context, "probe", 0, recs[-1].slot)
    menu = tuple(dict.fromkeys(r.key for r in recs))
    before = copy.deepcopy(state)
    agent.policy.act(state, fut, menu, np.random.default_rng(0))
    ok = _equal(before, state)
    return CheckResult("update/act do not mutate their input state", ok,
                       "input states unchanged" if ok else "act changed the state it read")


def _equal(a: Any, b: Any) -> bool:
    try:
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            return bool(np.array_equal(a, b, equal_nan=True))
        return bool(a == b) or repr(a) == repr(b)
    except (TypeError, ValueError):
        return repr(a) == repr(b)
