"""State-level response (the paper's S_q = S_aligned comparison): does a cell change the writer's state?

A writer can change its state under a cell while no decision flips (a tiny recency weight); "no
decision changed" must then not be read as "invariant".  An agent opts in by offering
``state_fingerprint(state) -> hashable`` on its writer (or policy), or by returning plain hashable
states (tuples, frozensets, numbers, strings).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, replace
from typing import Any

from ..agents import Agent
from ..interventions import cell_record
from ..maps import stream_perm
from ._engine import ROLES, StreamData, _agent_call
from ._plan import ReplayPlan

__all__ = ["StateResponse", "state_fingerprinter", "state_response"]

_PLAIN = (tuple, frozenset, int, float, str, bytes, bool, type(None))


def _plain(x: Any) -> bool:
    if isinstance(x, (tuple, frozenset)):
        return all(_plain(v) for v in x)
    return isinstance(x, _PLAIN)


def state_fingerprinter(agent: Agent) -> Callable[[Any], Hashable] | None:
    """The agent's ``state_fingerprint`` (writer first, then policy), or ``None`` when it offers none;
    plain hashable states are their own fingerprint (checked on the initial state) for per-record
    agents — an array agent must opt in explicitly, so a fast audit never pays a per-record pass."""
    for obj in (agent.writer, agent.policy):
        if hasattr(obj, "state_fingerprint"):  # declared (None: explicitly none, e.g. a HistoryReader's history)
            fn = obj.state_fingerprint
            return fn if callable(fn) else None
    if agent.array is not None:
        return None
    try:
        s0 = agent.writer.init_state()
    except Exception:
        return None
    return (lambda s: s) if _plain(s0) else None


@dataclass(frozen=True)
class StateResponse:
    """Share of (stream, prefix end) states whose fingerprint differs between a cell and aligned (ρ = id)."""

    cell: str
    changed: int
    total: int

    @property
    def share(self) -> float:
        return self.changed / self.total if self.total else 0.0


def _fingerprints(plan: ReplayPlan, sd: StreamData, agent: Agent, c: int,
                  fp: Callable[[Any], Hashable]) -> dict[int, Hashable]:
    cell = plan.cells[c]
    rho = plan.maps[0]
    perms = {role: stream_perm(plan.draws[0], role, sd.name, sd.block_local) for role in ROLES}
    prefixes = set(sd.prefixes.tolist())
    where = {"stream": sd.name, "cell": cell.name, "map": rho.name, "draw": 0}
    with _agent_call(agent, "init_state", where):
        state = agent.writer.init_state()
    out: dict[int, Hashable] = {}
    if 0 in prefixes:
        out[0] = fp(state)
    inputs = sd.task_inputs
    for t in range(sd.length):
        key, u, x = cell_record(cell, sd.codes, sd.outcomes, t, rho.array, perms)
        ti = replace(inputs[x], slot=int(sd.slots[t]))
        with _agent_call(agent, "update", {**where, "history record": t + 1}):
            state = agent.writer.update(state, ti, agent.namespace.kappa(plan.labels[key]), u)
        if t + 1 in prefixes:
            with _agent_call(agent, "state_fingerprint", {**where, "history record": t + 1}):
                out[t + 1] = fp(state)
    return out


def state_response(plan: ReplayPlan, streams: dict[str, StreamData], agent: Agent, cell: str) -> StateResponse | None:
    """S_cell vs S_aligned at every stream's prefix ends (first draw, identity map); ``None`` when the
    agent offers no state fingerprint or ``cell`` is not in the plan."""
    fp = state_fingerprinter(agent)
    names = [c.name for c in plan.cells]
    if fp is None or cell not in names:
        return None
    c = names.index(cell)
    changed = total = 0
    for s in plan.streams:
        a = _fingerprints(plan, streams[s], agent, 0, fp)
        b = _fingerprints(plan, streams[s], agent, c, fp)
        changed += sum(a[k] != b[k] for k in a)
        total += len(a)
    return StateResponse(cell, changed, total)
