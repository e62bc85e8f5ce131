"""Adapters: plain callables, history readers (a function of the whole transformed history), and loading."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from ..errors import ConfigError, ReplayLensError
from ._protocols import Agent, ArrayAgent, FutureInput, Namespace, Policy, TaskInput, Writer

__all__ = ["AGENTS", "HistoryReader", "Visible", "as_agent", "from_callables", "load_agent", "register_agent"]


@dataclass(frozen=True)
class _CallableWriter:
    init: Callable[[], Any]
    step: Callable[[Any, TaskInput, str, float], Any]

    def init_state(self) -> Any:
        return self.init()

    def update(self, state: Any, task: TaskInput, key: str, outcome: float) -> Any:
        return self.step(state, task, key, outcome)


@dataclass(frozen=True)
class _CallablePolicy:
    fn: Callable[..., str]
    takes_rng: bool

    def act(self, state: Any, task: FutureInput, menu: tuple[str, ...], rng: np.random.Generator) -> str:
        if self.takes_rng:
            return self.fn(state, task, menu, rng)
        return self.fn(state, task, menu)


def from_callables(
    init: Callable[[], Any],
    update: Callable[[Any, TaskInput, str, float], Any],
    act: Callable[..., str],
    *,
    name: str = "callable",
    stochastic: bool = False,
    namespace: Namespace | None = None,
    array: ArrayAgent | None = None,
    invariant_to: tuple[str, ...] | str = (),
    task_invariant: bool = False,
) -> Agent:
    """Wrap plain functions: ``init() -> s``, ``update(s, task, key, outcome) -> s``,
    ``act(s, task, menu[, rng]) -> label``.  ``update`` must not mutate ``s``; ``rng`` is the
    per-decision generator, the only randomness the agent should use."""
    takes_rng = len(inspect.signature(act).parameters) >= 4
    return Agent(name, _CallableWriter(init, update), _CallablePolicy(act, takes_rng), array=array,
                 stochastic=stochastic, task_invariant=task_invariant, invariant_to=_cells(invariant_to),
                 namespace=namespace or Namespace(), spec={"name": name})


def _cells(x: tuple[str, ...] | str) -> tuple[str, ...]:
    return tuple(c.strip() for c in x.split(",") if c.strip()) if isinstance(x, str) else tuple(x)


@dataclass(frozen=True, slots=True)
class Visible:
    """One visible record as a history reader sees it (after the cell transform)."""

    task: TaskInput
    key: str
    outcome: float


@dataclass(frozen=True)
class HistoryReader:
    """Adapter for agents that read the whole transformed history (LLM prompts, memory pipelines).

    The state is the (immutable) tuple of visible records; ``fn(records, task, menu, rng) -> label``
    decides.  ``rng`` is the per-decision generator, the only randomness the reader should use.

    The replay asks a reader once per distinct (transformed history, visible prefix), in increasing
    prefix order, with every (future task, repeat) that sees that prefix (:meth:`act_prefix`):

    - ``batch_fn(records, tasks, menus, rngs) -> labels`` (optional) answers all of them in one call
      (one label per task, in order; ``rngs[i]`` is the generator ``fn`` would get for task ``i``);
      without it ``fn`` is called per decision on the same records.
    - ``extend(prev_model, new_records) -> model`` (optional, incremental): with it, ``fn`` and
      ``batch_fn`` receive the model instead of the record tuple.  The first prefix of a history
      gets ``extend(None, records)``; each later prefix of the same history gets
      ``extend(previous model, the records added since)`` (not called when none were added).
      Contract: ``extend(extend(None, a), b)`` must decide exactly as ``extend(None, a + b)`` and
      must not mutate ``prev_model`` (a decision asked alone is answered from ``extend(None, records)``).
    """

    immutable_state: ClassVar[bool] = True
    """States are tuples that ``update`` never mutates: the replay snapshots them without copying."""

    fn: Callable[[Any, FutureInput, tuple[str, ...], np.random.Generator], str]
    name: str = "history-reader"
    stochastic: bool = False
    invariant_to: tuple[str, ...] | str = ()
    task_invariant: bool = False
    state_fingerprint: Callable[[tuple[Visible, ...]], Any] | None = None
    """Optional: a fingerprint of what the reader keeps of the history (its state is the raw history,
    so no state-level response is read without one)."""
    batch_fn: Callable[[Any, tuple[FutureInput, ...], tuple[tuple[str, ...], ...],
                        tuple[np.random.Generator, ...]], Sequence[str]] | None = None
    extend: Callable[[Any, tuple[Visible, ...]], Any] | None = None

    def init_state(self) -> tuple[Visible, ...]:
        return ()

    def update(self, state: tuple[Visible, ...], task: TaskInput, key: str, outcome: float) -> tuple[Visible, ...]:
        return (*state, Visible(task, key, outcome))

    def prefix_states(self, tasks: Sequence[TaskInput], keys: Sequence[str], outcomes: Sequence[float],
                      prefixes: Sequence[int]) -> dict[int, tuple[Visible, ...]] | None:
        """The states ``update`` would reach after each prefix length, built at once (the replay's per-record
        path asks this instead of one ``update`` per record, which copies the tuple each time); ``None``
        when a subclass redefines ``init_state`` or ``update``."""
        if type(self).update is not HistoryReader.update or type(self).init_state is not HistoryReader.init_state:
            return None
        visible = [Visible(t, k, u) for t, k, u in zip(tasks, keys, outcomes, strict=True)]
        return {n: tuple(visible[:n]) for n in prefixes}

    def act(self, state: tuple[Visible, ...], task: FutureInput, menu: tuple[str, ...],
            rng: np.random.Generator) -> str:
        return self.fn(state if self.extend is None else self.extend(None, state), task, menu, rng)

    def act_prefix(self, state: tuple[Visible, ...], tasks: Sequence[FutureInput], menus: Sequence[tuple[str, ...]],
                   rngs: Sequence[np.random.Generator], carry: Any) -> tuple[Sequence[str], Any]:
        """Every decision at one prefix (see the class docstring); ``carry`` is ``(length, model)``."""
        model: Any = state
        if self.extend is not None:
            n_prev, prev = carry if carry is not None and carry[0] <= len(state) else (0, None)
            model = prev if prev is not None and n_prev == len(state) else self.extend(prev, state[n_prev:])
            carry = (len(state), model)
        if self.batch_fn is not None:
            return list(self.batch_fn(model, tuple(tasks), tuple(menus), tuple(rngs))), carry
        return [self.fn(model, t, m, r) for t, m, r in zip(tasks, menus, rngs, strict=True)], carry

    def agent(self) -> Agent:
        return Agent(self.name, self, self, stochastic=self.stochastic, task_invariant=self.task_invariant,
                     invariant_to=_cells(self.invariant_to), spec={"name": self.name})


AGENTS: dict[str, Callable[..., Agent]] = {}


def register_agent(name: str, factory: Callable[..., Agent]) -> None:
    """Register a built-in agent factory under ``name`` (used by ``--agent NAME``)."""
    AGENTS[name] = factory


def _coerce(obj: Any, where: str) -> Agent:
    if isinstance(obj, Agent):
        return obj
    if hasattr(obj, "agent") and callable(obj.agent):
        got = obj.agent()
        if isinstance(got, Agent):
            return got
    if isinstance(obj, Writer) and isinstance(obj, Policy):
        arr = obj if isinstance(obj, ArrayAgent) else None
        nm = getattr(obj, "name", type(obj).__name__)
        return Agent(str(nm), obj, obj, array=arr, spec={"name": str(nm), "source": where}, **_declared(obj, where))
    raise ConfigError(f"{where} did not produce an Agent (or an object with init_state/update/act)")


def _declared(obj: Any, where: str) -> dict[str, Any]:
    """A plain class's declarations, read from its attributes: ``stochastic``, ``task_invariant``
    (bools) and ``invariant_to`` (cell names, a tuple or a comma string)."""
    out: dict[str, Any] = {}
    for flag in ("stochastic", "task_invariant"):
        v = getattr(obj, flag, False)
        if not isinstance(v, bool):
            raise ConfigError(f"{where}: {flag} must be True or False; got {type(v).__name__}")
        out[flag] = v
    inv = getattr(obj, "invariant_to", ())
    if not isinstance(inv, (str, tuple, list)) or not all(isinstance(c, str) for c in inv):
        raise ConfigError(f"{where}: invariant_to must be cell names (a tuple or 'pair,reorder')")
    out["invariant_to"] = _cells(inv if isinstance(inv, str) else tuple(inv))
    return out


def as_agent(obj: Any) -> Agent:
    """``obj`` as an :class:`Agent`: an Agent, anything with ``.agent()`` (:class:`HistoryReader`, ...) or an
    object with ``init_state``/``update``/``act``."""
    return _coerce(obj, type(obj).__name__)


def load_agent(spec: str, params: Mapping[str, Any] | None = None) -> Agent:
    """Resolve ``--agent``: a registered name (``mean``, ``commutative``, ...) or ``module:factory``.

    ``params`` are passed to the factory as keyword arguments.
    """
    kwargs = dict(params or {})
    if ":" not in spec:
        if spec.endswith(".py"):
            raise ConfigError(f"--agent {spec} names a file but not its factory; give {spec}:FACTORY (the function "
                              "in the file that returns the agent, e.g. {spec}:make)".replace("{spec}", spec))
        if spec not in AGENTS:
            raise ConfigError(f"unknown agent {spec!r}; built-in agents: {', '.join(sorted(AGENTS))}; "
                              "or give module:factory")
        try:
            built = AGENTS[spec](**kwargs)
        except TypeError as exc:
            raise ConfigError(f"bad parameters for agent {spec!r}: {exc}") from None
        return _coerce(built, spec)
    from .._imports import import_target

    target = import_target(spec, "agent")
    try:
        obj = target(**kwargs) if callable(target) and not isinstance(target, Agent) else target
    except ReplayLensError:  # already one clear line (a damaged request cache, a missing key, ...)
        raise
    except Exception as exc:  # user code: one clear line instead of a traceback
        raise ConfigError(f"calling the agent factory {spec} failed: {type(exc).__name__}: {exc}") from None
    agent = _coerce(obj, spec)
    if not agent.spec:
        agent = replace(agent, spec={"name": spec, **kwargs})
    return agent
