"""Writer / policy protocols (per record) and the array (batch) form used by the fast replay path.

Paper symbols: a writer W_m has an initial state s_0 and a transition 𝒯_m(s, x, k, u); a policy
π_m(s, x) reads the terminal state S_{r,R} and picks an action from the held-fixed menu.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = [
    "Agent",
    "ArrayAgent",
    "FutureInput",
    "Namespace",
    "Policy",
    "PrefixPolicy",
    "QueryBatch",
    "RecordBatch",
    "TaskInput",
    "Writer",
]


@dataclass(frozen=True, slots=True)
class TaskInput:
    """The public task input x_t of a history record (it never moves, except under ``reorder``)."""

    stream: str
    family: str
    context: str
    slot: int
    task: str
    event_time: float | None = None
    event_id: str | None = None
    metadata: Mapping[str, Any] | None = None

    @property
    def block(self) -> tuple[str, str]:
        return (self.family, self.context)


@dataclass(frozen=True, slots=True)
class FutureInput:
    """A future task x ∈ X⁺_{r,R}: stratum (family, context), id, index and the policy clock T_{r,R}."""

    stream: str
    family: str
    context: str
    task: str
    index: int
    clock: int
    metadata: Mapping[str, Any] | None = None

    @property
    def stratum(self) -> tuple[str, str]:
        return (self.family, self.context)


@runtime_checkable
class Writer(Protocol):
    """W_m: turns records into state.  ``update`` must return a new state (never mutate its input)."""

    def init_state(self) -> Any: ...

    def update(self, state: Any, task: TaskInput, key: str, outcome: float) -> Any: ...


@runtime_checkable
class Policy(Protocol):
    """π_m: reads the state and picks one label of ``menu`` for a future task."""

    def act(self, state: Any, task: FutureInput, menu: tuple[str, ...], rng: np.random.Generator) -> str: ...


@runtime_checkable
class PrefixPolicy(Protocol):
    """Optional batch form of a policy: every decision that reads one prefix state, in one call.

    The per-record replay calls ``act_prefix`` once per distinct (transformed history, prefix), in
    increasing prefix order, with every (future task, repeat) of that prefix; ``rngs[i]`` is exactly
    the generator ``act`` would get for decision ``i``.  ``carry`` is what the previous call on the
    same transformed history returned (``None`` first); return ``(labels, carry)``.
    """

    def act_prefix(self, state: Any, tasks: Sequence[FutureInput], menus: Sequence[tuple[str, ...]],
                   rngs: Sequence[np.random.Generator], carry: Any) -> tuple[Sequence[str], Any]: ...


@dataclass(frozen=True, eq=False)
class RecordBatch:
    """H transformed histories as (H, T) arrays for the vectorized path.

    ``keys`` are label codes as supplied to the writer (after cell and map; −1 padding),
    ``outcomes`` the supplied utilities (NaN masked), ``blocks`` / ``tasks`` block and task-input
    codes, ``valid`` marks real records.  ``cuts[h, k]`` (ascending) are the prefix lengths at which
    states are read: a query at (row h, cut k) sees exactly the positions t < cuts[h, k] (the prefix
    rule T_{r,R}).
    """

    keys: np.ndarray
    outcomes: np.ndarray
    blocks: np.ndarray
    tasks: np.ndarray
    valid: np.ndarray
    cuts: np.ndarray
    labels: tuple[str, ...]
    block_names: tuple[tuple[str, str], ...]
    task_names: tuple[str, ...]

    @property
    def n_histories(self) -> int:
        return int(self.keys.shape[0])

    @property
    def n_labels(self) -> int:
        return len(self.labels)

    @property
    def n_blocks(self) -> int:
        return len(self.block_names)

    @property
    def n_cuts(self) -> int:
        return int(self.cuts.shape[1])

    def segments(self) -> np.ndarray:
        """(H, T): the first cut index k whose prefix contains position t (n_cuts if none)."""
        t = np.arange(self.keys.shape[1])
        return (self.cuts[:, :, None] <= t[None, None, :]).sum(axis=1)


@dataclass(frozen=True, eq=False)
class QueryBatch:
    """Q future decisions: ``row``/``cut`` locate the history and its visible prefix, ``menu`` (Q, M) the
    displayed label codes (−1 padding), ``block`` the stratum's block code, ``seed`` a per-decision
    seed for stochastic policies, ``stream``/``task`` indices into the name tuples.

    ``state_labels`` (Q, M), given only to an array agent that declares ``shares_label_maps = True``: the
    history rows are then one per (stream, cell, draw), written before the label map ρ, and menu item j of
    query q is read in the state at label ``state_labels[q, j]`` (= ρ⁻¹(menu) where ρ relabels the history);
    the answer is still a code of ``menu``.  ``None``: every row is a whole transformed history, read at ``menu``.
    """

    row: np.ndarray
    cut: np.ndarray
    block: np.ndarray
    menu: np.ndarray
    seed: np.ndarray
    stream: np.ndarray
    task: np.ndarray
    stream_names: tuple[str, ...]
    task_names: tuple[str, ...]
    state_labels: np.ndarray | None = None

    @property
    def read_labels(self) -> np.ndarray:
        """(Q, M): the label codes at which each menu item's state is read (``state_labels``, else ``menu``)."""
        return self.menu if self.state_labels is None else self.state_labels


@runtime_checkable
class ArrayAgent(Protocol):
    """Batch form: decide Q future tasks for H histories at once; returns (Q,) displayed label codes.

    Must give exactly the actions of the per-record writer and policy (checked by the tests).  An agent
    whose decisions are equivariant under relabelling (its state at label ρ(ℓ) after ρ-relabelled records
    is its state at ℓ, ties included) may set ``shares_label_maps = True``: it is then given one history
    row per (stream, cell, draw) for all label maps, and :attr:`QueryBatch.state_labels`; unless the agent is
    declared stochastic, its decisions must not depend on ``QueryBatch.seed`` (it is asked once for the maps of a
    cell that relabels neither the history nor the menu, and the other maps copy the answer).  An agent whose
    ``act_batch`` writes no shared state may set ``thread_safe = True``: the ``auto`` backend then runs two shards
    at once on threads (the decisions are the same).
    """

    def act_batch(self, records: RecordBatch, queries: QueryBatch) -> np.ndarray: ...


@dataclass(frozen=True)
class Namespace:
    """Producer / action namespaces and their bindings (shared when both prefixes are empty).

    The writer receives κ(a) = producer_prefix + a; the policy sees the menu as
    action_prefix + a and its answer is decoded back.
    """

    producer_prefix: str = ""
    action_prefix: str = ""

    @property
    def shared(self) -> bool:
        return self.producer_prefix == self.action_prefix

    def kappa(self, label: str) -> str:
        return self.producer_prefix + label

    def show(self, label: str) -> str:
        return self.action_prefix + label

    def decode(self, shown: str) -> str:
        if self.action_prefix and shown.startswith(self.action_prefix):
            return shown[len(self.action_prefix):]
        return shown


@dataclass(frozen=True, eq=False)
class Agent:
    """A writer and its policy, plus an optional array implementation and a rebuildable spec.

    ``invariant_to`` lists the relations the agent declares it ignores (checked by ``check-writer``);
    ``task_invariant`` declares that the policy reads a future task only through its stratum and
    menu (the paper's reduced query x̃ = (family, context)); the array path then asks one
    representative task per (history, prefix, stratum, menu).  The reference path always asks
    every task, so the declaration is checked wherever the two paths are compared.
    """

    name: str
    writer: Writer
    policy: Policy
    array: ArrayAgent | None = None
    stochastic: bool = False
    task_invariant: bool = False
    invariant_to: tuple[str, ...] = ()
    """Cells (and ``rekey``) under which the agent declares its decisions unchanged; checked by
    :func:`replaylens.testing.check_writer`."""
    namespace: Namespace = field(default_factory=Namespace)
    spec: Mapping[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"Agent({self.name!r}, array={'yes' if self.array is not None else 'no'})"
