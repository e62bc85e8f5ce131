"""Closed-loop controllers on a world with counterfactual tables, and the condition summary.

A *world* holds, per stream r, the counterfactual utility of every arm for every task:
``dev_utility[r, S, Jd, A]``, ``adapt_utility[r, B, T, A]`` (learning blocks only) and
``future_utility[r, S, Jf, A]``; ``strata`` lists the S (family, context) strata in canonical
order and ``learning_blocks`` the B strata that have an adaptation block.  Per stratum, in order:
development tasks (only the static controllers use them), then adaptation tasks (learning blocks:
choose, the executor reveals only that arm's utility, the state updates), then future tasks (state
frozen).  Adaptation actions never change the tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ...agents import Agent, FutureInput, TaskInput
from ...rng import derive_rng

__all__ = ["AgentController", "ClosedLoopResult", "Controller", "World", "condition_summary", "run_closed_loop"]


class World(Protocol):
    """What a closed-loop run needs from a substrate (read-only attributes)."""

    @property
    def n_streams(self) -> int: ...

    @property
    def strata(self) -> tuple[tuple[str, str], ...]: ...

    @property
    def arms(self) -> tuple[str, ...]: ...

    @property
    def dev_utility(self) -> np.ndarray: ...

    @property
    def adapt_utility(self) -> np.ndarray: ...

    @property
    def future_utility(self) -> np.ndarray: ...

    @property
    def learning_blocks(self) -> tuple[tuple[str, str], ...]: ...


class Controller(Protocol):
    """A closed-loop controller (arm indices refer to ``world.arms``)."""

    @property
    def name(self) -> str: ...

    @property
    def cost(self) -> float: ...

    def start(self, stream: int, rng: np.random.Generator) -> Any: ...

    def develop(self, state: Any, stratum: tuple[str, str], utilities: np.ndarray,
                rng: np.random.Generator) -> Any: ...

    def choose(self, state: Any, stratum: tuple[str, str], clock: int, rng: np.random.Generator) -> int: ...

    def observe(self, state: Any, stratum: tuple[str, str], arm: int, u: float, clock: int,
                rng: np.random.Generator) -> Any: ...

    def predict(self, state: Any, stratum: tuple[str, str], arm: int) -> float: ...


def stream_id(r: int) -> str:
    return f"r{r:02d}"


@dataclass(frozen=True)
class AgentController:
    """Run any ReplayLens :class:`Agent` closed-loop (its writer updates in adaptation only)."""

    agent: Agent
    arms: tuple[str, ...]
    cost: float = 10.0

    @property
    def name(self) -> str:
        return self.agent.name

    def start(self, stream: int, rng: np.random.Generator) -> Any:
        return (stream, self.agent.writer.init_state())

    def develop(self, state: Any, stratum: tuple[str, str], utilities: np.ndarray, rng: np.random.Generator) -> Any:
        return state

    def choose(self, state: Any, stratum: tuple[str, str], clock: int, rng: np.random.Generator) -> int:
        r, s = state
        fut = FutureInput(stream_id(r), stratum[0], stratum[1], "closed-loop", 0, clock)
        return self.arms.index(self.agent.policy.act(s, fut, self.arms, rng))

    def observe(self, state: Any, stratum: tuple[str, str], arm: int, u: float, clock: int,
                rng: np.random.Generator) -> Any:
        r, s = state
        task = TaskInput(stream_id(r), stratum[0], stratum[1], clock, f"adapt-{clock}")
        return (r, self.agent.writer.update(s, task, self.arms[arm], u))

    def predict(self, state: Any, stratum: tuple[str, str], arm: int) -> float:
        s = state[1]
        local = getattr(s, "local", None)
        if local is None:
            return 0.5
        n, tot = local.get((stratum[0], stratum[1], self.arms[arm]), (0, 0))
        if n:
            return float(tot) / n * 1e-6
        gn, gs = s.glob.get(self.arms[arm], (0, 0))
        return float(gs) / gn * 1e-6 if gn else 0.5


@dataclass(frozen=True, eq=False)
class ClosedLoopResult:
    """Actions, utilities and predictions of one controller on every stream."""

    controller: str
    cost: float
    adapt_actions: np.ndarray     # [r, B, T]
    adapt_utility: np.ndarray     # [r, B, T] realized
    adapt_predicted: np.ndarray   # [r, B, T]
    future_actions: np.ndarray    # [r, S, J]
    future_utility: np.ndarray    # [r, S, J]
    future_predicted: np.ndarray  # [r, S, J]


def run_closed_loop(world: World, controller: Controller, *, seed: int) -> ClosedLoopResult:
    """Run ``controller`` on every stream of ``world`` (per-stream generators from ``seed``)."""
    r_n = world.n_streams
    blocks = list(world.learning_blocks)
    b_n, t_n = world.adapt_utility.shape[1], world.adapt_utility.shape[2]
    s_n, j_n = world.future_utility.shape[1], world.future_utility.shape[2]
    aa = np.zeros((r_n, b_n, t_n), dtype=np.int64)
    au = np.zeros((r_n, b_n, t_n))
    ap = np.zeros((r_n, b_n, t_n))
    fa = np.zeros((r_n, s_n, j_n), dtype=np.int64)
    fu = np.zeros((r_n, s_n, j_n))
    fp = np.zeros((r_n, s_n, j_n))
    for r in range(r_n):
        rng = derive_rng(seed, "closed-loop", controller.name, r)
        state = controller.start(r, rng)
        clock = 0
        for si, stratum in enumerate(world.strata):
            state = controller.develop(state, stratum, world.dev_utility[r, si], rng)
            if stratum in blocks:
                b = blocks.index(stratum)
                for t in range(t_n):
                    a = controller.choose(state, stratum, clock, rng)
                    u = float(world.adapt_utility[r, b, t, a])
                    aa[r, b, t], au[r, b, t] = a, u
                    ap[r, b, t] = controller.predict(state, stratum, a)
                    state = controller.observe(state, stratum, a, u, clock, rng)
                    clock += 1
            choose_future = getattr(controller, "choose_future", controller.choose)
            for j in range(j_n):
                a = choose_future(state, stratum, clock, rng)
                fa[r, si, j] = a
                fu[r, si, j] = world.future_utility[r, si, j, a]
                fp[r, si, j] = controller.predict(state, stratum, a)
    return ClosedLoopResult(controller.name, float(controller.cost), aa, au, ap, fa, fu, fp)


def condition_summary(world: World, results: Sequence[ClosedLoopResult]) -> list[dict[str, Any]]:
    """tab:condition-summary rows: utility, oracle gap, cost, utility per cost, calibration MAE, failure rate."""
    rows = []
    ora = {"adaptation": world.adapt_utility.max(axis=-1), "future": world.future_utility.max(axis=-1)}
    for res in results:
        for split, util, pred in (("adaptation", res.adapt_utility, res.adapt_predicted),
                                  ("future", res.future_utility, res.future_predicted)):
            rows.append({
                "condition": res.controller, "split": split, "tasks": int(util.size),
                "utility": float(util.mean()), "oracle_gap": float((ora[split] - util).mean()),
                "cost": res.cost, "utility_per_cost": float(util.mean() / res.cost),
                "calibration_mae": float(np.abs(pred - util).mean()), "failure_rate": 0.0,
            })
    return rows
