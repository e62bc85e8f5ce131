"""Prefix-causal state operators: an update law, a per-stratum linear readout and both replay paths.

A :class:`StateOperator` keeps one state per family–context block, zero at the start of the block
(a stratum without a block — survival — reads the zero state).  Its update law is one of two forms:

* **summed** — g = Σ_t inc(ℓ_t, c(u_t), j_t): each increment is rounded to the 2⁻³² grid
  (:func:`replaylens.agents.to_fixed`) and summed exactly, so the terminal statistic is the same bits
  in any order (complete-pair transport leaves a position-free sum exactly unchanged, core §4.1);
* **recurrent** — g ← step(g, ℓ_t, c(u_t), j_t) in slot order.

with c(u) = u − ½ (0 for a masked outcome) and j_t the 0-based position of the record within its
block.  The exposed state s = expose(g) is read by the stratum's readout matrix R_c (one row per
arm): the action is the first-canonical argmax of R_c s over the menu.

Every matrix product is a fixed sequence of elementwise multiply-adds (:func:`linear`, no BLAS), so
the per-record path (one record at a time) and the array path (all histories at once) compute the
same bits and agree exactly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...agents import (
    FIXED_SCALE,
    Agent,
    FutureInput,
    QueryBatch,
    RecordBatch,
    TaskInput,
    TieRule,
    choose,
    choose_batch,
    to_fixed,
)
from ...errors import AgentError, ConfigError

__all__ = [
    "ARMS",
    "STRATA",
    "Readout",
    "StateOperator",
    "UpdateLaw",
    "centered",
    "linear",
]

ARMS: tuple[str, ...] = ("coverage", "adaptive", "replicate", "mixed")
"""The synthetic substrate's canonical arm order (the coordinates of the canonical operators)."""

STRATA: tuple[tuple[str, str], ...] = (
    ("source", "low"), ("source", "high"), ("temporal", "low"), ("temporal", "high"),
    ("survival", "balanced"), ("survival", "rare"),
)
"""The six family–context strata of the synthetic substrate (context-specific readouts are drawn for these)."""

BlockState = Mapping[tuple[str, str], tuple[tuple[float, ...], int]]


def centered(u: np.ndarray | float) -> np.ndarray:
    """c(u) = u − ½, with masked (NaN) outcomes contributing 0."""
    x = np.asarray(u, dtype=np.float64) - 0.5
    return np.where(np.isnan(x), 0.0, x)


def linear(x: np.ndarray, m: np.ndarray) -> np.ndarray:
    """x @ m.T for (N, J) ``x`` and (I, J) ``m`` as J elementwise multiply-adds in a fixed order.

    Row n of the result depends only on row n of ``x`` and is the same bits for any N.
    """
    out = np.zeros((x.shape[0], m.shape[0]))
    for j in range(m.shape[1]):
        out += x[:, j : j + 1] * m[None, :, j]
    return out


def _frozen(a: Any, name: str, ndim: int | None = None) -> np.ndarray:
    arr = np.array(a, dtype=np.float64)
    if ndim is not None and arr.ndim != ndim:
        raise ConfigError(f"{name} must have {ndim} dimensions; got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ConfigError(f"{name} has non-finite entries")
    arr.setflags(write=False)
    return arr


class UpdateLaw:
    """An operator's update law on an accumulator g ∈ ℝ^dim and its exposed state s = expose(g).

    Subclasses set ``dim`` and ``summed`` and implement :meth:`increment` (summed laws) or
    :meth:`step` (recurrent laws); :meth:`expose` defaults to the identity.  All methods take
    (N,)-vectors of label coordinates ``lab``, centred utilities ``c`` and block positions ``pos``
    and must act row by row (row n of the output depends only on row n of the inputs).
    """

    dim: int = 0
    summed: bool = True

    @property
    def exposed_dim(self) -> int:
        return self.dim

    def increment(self, lab: np.ndarray, c: np.ndarray, pos: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def step(self, g: np.ndarray, lab: np.ndarray, c: np.ndarray, pos: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def expose(self, g: np.ndarray) -> np.ndarray:
        return g

    def advance(self, g: np.ndarray, lab: np.ndarray, c: np.ndarray, pos: np.ndarray) -> np.ndarray:
        """The accumulator after one record (summed laws keep g in 2⁻³² units, exactly)."""
        if self.summed:
            return g + to_fixed(self.increment(lab, c, pos))
        return self.step(g, lab, c, pos)

    def state(self, g: np.ndarray) -> np.ndarray:
        """The exposed state s of accumulators g (undoes the fixed-point scale of summed laws)."""
        return self.expose(g / FIXED_SCALE if self.summed else g)

    def params(self) -> dict[str, Any]:
        return {}


@dataclass(frozen=True, eq=False)
class Readout:
    """Arm scores R_c s: one (n_arms, exposed_dim) matrix per stratum, ``default`` for the others."""

    matrices: Mapping[tuple[str, str], np.ndarray] = field(default_factory=dict)
    default: np.ndarray | None = None
    kind: str = "linear"

    def __post_init__(self) -> None:
        object.__setattr__(self, "matrices", {k: _frozen(v, f"readout {k}", 2) for k, v in self.matrices.items()})
        if self.default is not None:
            object.__setattr__(self, "default", _frozen(self.default, "readout default", 2))

    @classmethod
    def shared(cls, matrix: np.ndarray, kind: str = "linear") -> Readout:
        """One matrix for every stratum."""
        return cls({}, np.asarray(matrix, dtype=np.float64), kind)

    @classmethod
    def coordinate(cls, n_arms: int, dim: int | None = None) -> Readout:
        """The canonical readout: the first ``n_arms`` coordinates of the state (argmax_i s_i)."""
        return cls.shared(np.eye(dim if dim is not None else n_arms)[:n_arms], "coordinate")

    def matrix(self, stratum: tuple[str, str]) -> np.ndarray:
        m = self.matrices.get(stratum, self.default)
        if m is None:
            raise AgentError(f"readout has no matrix for stratum {stratum!r} (and no default)")
        return m

    def scores(self, s: np.ndarray, stratum: tuple[str, str]) -> np.ndarray:
        """(N, n_arms) arm scores of (N, exposed_dim) states read in ``stratum``."""
        return linear(s, self.matrix(stratum))


@dataclass(frozen=True, eq=False)
class StateOperator:
    """A prefix-causal per-block state operator with a linear argmax readout, as a ReplayLens agent.

    ``arms`` are the producer labels in coordinate order (label ℓ has coordinate ``arms.index(ℓ)``)
    and the arm order of the readout rows; a key or menu label outside ``arms`` is an
    :class:`~replaylens.errors.AgentError`.
    """

    law: UpdateLaw
    readout: Readout
    name: str
    family: str = ""
    arms: tuple[str, ...] = ARMS
    params: Mapping[str, Any] = field(default_factory=dict)
    invariant_to: tuple[str, ...] = ()

    # ---- helpers
    def _coord(self, label: str) -> int:
        try:
            return self.arms.index(label)
        except ValueError:
            raise AgentError(f"{self.name}: label {label!r} is not one of the operator's arms {self.arms}") from None

    def _coords(self, labels: Sequence[str]) -> np.ndarray:
        return np.array([self.arms.index(lab) if lab in self.arms else -1 for lab in labels], dtype=np.int64)

    def zero(self) -> np.ndarray:
        return np.zeros(self.law.dim)

    # ---- per-record path (reference oracle)
    def init_state(self) -> BlockState:
        return {}

    def update(self, state: BlockState, task: TaskInput, key: str, outcome: float) -> BlockState:
        lab = self._coord(key)
        g, pos = state.get(task.block, (tuple(self.zero().tolist()), 0))
        new_g = self.law.advance(np.asarray(g, dtype=np.float64)[None], np.array([lab]),
                                 centered(np.asarray([outcome], dtype=np.float64)), np.array([pos]))
        new = dict(state)
        new[task.block] = (tuple(float(x) for x in new_g[0]), pos + 1)
        return new

    def exposed(self, state: BlockState, block: tuple[str, str]) -> np.ndarray:
        """The exposed state s of one block (the zero accumulator's exposure if the block is empty)."""
        g = state.get(block, (tuple(self.zero().tolist()), 0))[0]
        return self.law.state(np.asarray(g, dtype=np.float64)[None])[0]

    def act(self, state: BlockState, task: FutureInput, menu: tuple[str, ...], rng: np.random.Generator) -> str:
        s = self.exposed(state, task.stratum)
        scores = self.readout.scores(s[None], task.stratum)[0]
        return choose([float(scores[self._coord(a)]) for a in menu], menu, TieRule.FIRST_CANONICAL)

    # ---- array path
    def accumulators_batch(self, records: RecordBatch) -> np.ndarray:
        """(H, K, B, dim) block accumulators at every cut (summed laws: in 2⁻³² units)."""
        nh, kc, nb = records.n_histories, records.n_cuts, records.n_blocks
        coords = self._coords(records.labels)
        g = np.zeros((nh, nb, self.law.dim))
        pos = np.zeros((nh, nb), dtype=np.int64)
        snaps = np.zeros((nh, kc, nb, self.law.dim))
        c_all = centered(records.outcomes)  # a cut at 0 keeps the zero accumulator already in ``snaps``
        for t in range(records.keys.shape[1]):
            rows = np.flatnonzero(records.valid[:, t])
            if rows.size:
                blk = records.blocks[rows, t]
                lab = coords[records.keys[rows, t]]
                if np.any(lab < 0):
                    bad = records.labels[int(records.keys[rows, t][lab < 0][0])]
                    raise AgentError(f"{self.name}: label {bad!r} is not one of the operator's arms {self.arms}")
                g[rows, blk] = self.law.advance(g[rows, blk], lab, c_all[rows, t], pos[rows, blk])
                pos[rows, blk] += 1
            hit_h, hit_k = np.nonzero(records.cuts == t + 1)
            if hit_h.size:
                snaps[hit_h, hit_k] = g[hit_h]
        return snaps

    def states_batch(self, records: RecordBatch) -> np.ndarray:
        """(H, K, B, exposed_dim) exposed block states at every cut."""
        acc = self.accumulators_batch(records)
        h, k, b, d = acc.shape
        return self.law.state(acc.reshape(-1, d)).reshape(h, k, b, -1)

    def act_batch(self, records: RecordBatch, queries: QueryBatch) -> np.ndarray:
        acc = self.accumulators_batch(records)[queries.row, queries.cut, queries.block]  # (Q, dim)
        s = self.law.state(acc)
        n_arms = len(self.arms)
        scores = np.zeros((s.shape[0], n_arms))
        for b in np.unique(queries.block):
            sel = queries.block == b
            scores[sel] = self.readout.scores(s[sel], records.block_names[int(b)])
        coords = self._coords(records.labels)
        menu_ok = queries.menu >= 0
        mc = np.where(menu_ok, coords[np.where(menu_ok, queries.menu, 0)], 0)
        if np.any(menu_ok & (mc < 0)):
            raise AgentError(f"{self.name}: a menu holds a label outside the operator's arms {self.arms}")
        ms = np.take_along_axis(scores, mc, axis=1)
        return choose_batch(ms, queries.menu, TieRule.FIRST_CANONICAL, records.labels)

    def agent(self) -> Agent:
        """This operator as a ReplayLens agent (task-invariant: the readout sees only the stratum)."""
        return Agent(self.name, self, self, array=self, task_invariant=True, invariant_to=self.invariant_to,
                     spec={"name": self.name, "family": self.family, **self.params})
