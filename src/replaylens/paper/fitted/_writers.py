"""Continuous-state writers (dense, cross-namespace, online commutative) and frozen fitted writers.

Every writer keeps one state vector per family–context block, zero at the start (strata without a
block read the zero state), and the policy picks the first-canonical argmax of a linear score
⟨h, q_a⟩ over the menu (the paper's bounded readout sigmoid(q_aᵀh) has the same argmax; we rank the
raw score so that float saturation of the sigmoid can never create a tie).  Both the per-record
path and the array path are provided and agree exactly:

* **commutative laws** (decay 1: online commutative namespace, fitted associative, selected-only,
  additive nuisance): each increment φ(ℓ, u) is rounded to the 2⁻³² grid (:func:`to_fixed`) and summed
  as exact integers, so any reordering of the same (label, outcome) pairs — pair transport — leaves
  the state bit for bit unchanged;
* **decayed and recurrent laws** (dense, cross-namespace, learned recurrent): float recursion in slot
  order with the same elementwise operations on both paths; dot products and matrix–vector products
  are sequential sums over the coordinates (never BLAS), so the two paths round identically.

c(u) = u − ½, and a masked outcome contributes c = 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...agents import (
    FIXED_SCALE,
    Agent,
    FutureInput,
    Namespace,
    QueryBatch,
    RecordBatch,
    TaskInput,
    TieRule,
    choose,
    choose_batch,
    to_fixed,
)
from ...errors import AgentError, ConfigError
from .. import numerics as nx
from ._features import FeatureSource, FixedFeatures, StreamFeatures

__all__ = [
    "ARMS",
    "RecurrentWriter",
    "VectorWriter",
    "additive_nuisance_agent",
    "associative_agent",
    "cross_namespace_agent",
    "dense_agent",
    "online_commutative_agent",
    "recurrent_agent",
    "seq_dot",
    "seq_matvec",
]

State = Mapping[tuple[str, str], np.ndarray]


def seq_dot(h: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Σ_j h_j q_j over the last axis as a sequential sum (identical rounding for any batch shape)."""
    acc = h[..., 0] * q[..., 0]
    for j in range(1, q.shape[-1]):
        acc = acc + h[..., j] * q[..., j]
    return np.asarray(acc)


def seq_matvec(a: np.ndarray, h: np.ndarray) -> np.ndarray:
    """A h for a (d, d) matrix and states h (..., d), as a sequential sum over columns."""
    acc = a[:, 0] * h[..., 0:1]
    for k in range(1, a.shape[1]):
        acc = acc + a[:, k] * h[..., k:k + 1]
    return np.asarray(acc)


def _c(u: np.ndarray | np.floating[Any] | float) -> np.ndarray:
    x = np.asarray(u, dtype=np.float64) - 0.5
    return np.where(np.isnan(x), 0.0, x)


def _row_streams(records: RecordBatch, queries: QueryBatch) -> np.ndarray:
    """The stream index (into ``queries.stream_names``) of every history row."""
    rs = np.zeros(records.n_histories, dtype=np.int64)
    rs[queries.row] = queries.stream
    return rs


def _label_rows(labels: tuple[str, ...], records: RecordBatch, name: str) -> np.ndarray:
    missing = [lab for lab in records.labels if lab not in labels]
    if missing:
        raise AgentError(f"agent {name!r} has no features for labels {missing} (it knows {list(labels)})")
    return np.array([labels.index(lab) for lab in records.labels], dtype=np.int64)


def _snapshots(records: RecordBatch, step: Any, init: np.ndarray) -> np.ndarray:
    """Run ``step(s, rows, t)`` (in place on s (H, B, d)) over positions; snapshot s at every cut."""
    h, kc = records.n_histories, records.n_cuts
    s = init
    snaps = np.zeros((h, kc, *s.shape[1:]))
    at0 = np.nonzero(records.cuts == 0)
    snaps[at0[0], at0[1]] = s[at0[0]]
    for t in range(records.keys.shape[1]):
        rows = np.flatnonzero(records.valid[:, t])
        if rows.size:
            step(s, rows, t)
        hit_h, hit_k = np.nonzero(records.cuts == t + 1)
        if hit_h.size:
            snaps[hit_h, hit_k] = s[hit_h]
    return snaps


def _readout_batch(states: np.ndarray, qtab: np.ndarray, rs: np.ndarray, records: RecordBatch,
                   queries: QueryBatch) -> np.ndarray:
    """First-canonical argmax of ⟨h, q_a⟩ for every query; states (H, K, B, d), qtab (S, n_codes, d)."""
    h = states[queries.row, queries.cut, queries.block]                 # (Q, d)
    menu = np.where(queries.menu >= 0, queries.menu, 0)
    qm = qtab[rs[queries.row][:, None], menu]                           # (Q, M, d)
    scores = seq_dot(h[:, None, :], qm)
    return choose_batch(scores, queries.menu, TieRule.FIRST_CANONICAL, records.labels)


@dataclass(frozen=True, eq=False)
class VectorWriter:
    """h ← decay·h + φ(ℓ, u) per block; policy: first-canonical argmax_a ⟨h, q_a⟩.

    φ(ℓ, u) = c(u)·p_ℓ (associative) or, with ``additive=True``, (p_ℓ, c(u)) — the additive nuisance
    state h_sep = (Σ p_ℓ, Σ c(u)) with no label–utility cross term.  ``decay == 1`` gives an exactly
    commutative sum (fixed point); ``decay < 1`` an order-sensitive float recursion.  With a
    ``namespace`` the writer only accepts producer keys κ(a) and the policy only action keys.
    """

    features: FeatureSource
    decay: float = 1.0
    additive: bool = False
    namespace: Namespace = field(default_factory=Namespace)
    name: str = "vector-writer"
    params: Mapping[str, Any] = field(default_factory=dict)
    invariant_to: tuple[str, ...] = ()
    _pkeys: dict[str, int] = field(init=False, repr=False)
    _akeys: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not 0.0 < self.decay <= 1.0:
            raise ConfigError(f"decay must lie in (0, 1]; got {self.decay}")
        labels = self.features.labels
        object.__setattr__(self, "_pkeys", {self.namespace.kappa(lab): i for i, lab in enumerate(labels)})
        object.__setattr__(self, "_akeys", {self.namespace.show(lab): i for i, lab in enumerate(labels)})

    @property
    def commutative(self) -> bool:
        return self.decay == 1.0

    @property
    def state_dim(self) -> int:
        return self.features.state_dim

    def increment(self, p: np.ndarray, c: np.ndarray) -> np.ndarray:
        """φ for producer rows p (..., d_p) and centred outcomes c (...); fixed point when commutative."""
        inc = np.concatenate([p, c[..., None]], axis=-1) if self.additive else c[..., None] * p
        return to_fixed(inc) if self.commutative else inc

    def vector(self, state_row: np.ndarray) -> np.ndarray:
        """The state h in real units (fixed-point states are scaled back)."""
        return state_row / FIXED_SCALE if self.commutative else state_row

    # ---- per-record path
    def init_state(self) -> State:
        return {}

    def update(self, state: State, task: TaskInput, key: str, outcome: float) -> State:
        try:
            i = self._pkeys[key]
        except KeyError:
            raise AgentError(f"writer {self.name!r} got key {key!r}; it accepts only {sorted(self._pkeys)}") from None
        p = self.features.producer(task.stream)[i]
        inc = self.increment(p, _c(np.float64(outcome)))
        old = state.get(task.block)
        if old is None:
            new = inc if self.commutative else np.float64(self.decay) * np.zeros(self.state_dim) + inc
        else:
            new = old + inc if self.commutative else np.float64(self.decay) * old + inc
        out = dict(state)
        out[task.block] = np.asarray(new, dtype=np.float64)
        return out

    def act(self, state: State, task: FutureInput, menu: tuple[str, ...], rng: np.random.Generator) -> str:
        try:
            idx = [self._akeys[a] for a in menu]
        except KeyError:
            raise AgentError(f"policy {self.name!r} got menu {list(menu)}; it reads only "
                             f"{sorted(self._akeys)}") from None
        st = state.get(task.stratum)
        h = self.vector(st) if st is not None else np.zeros(self.state_dim)
        scores = seq_dot(h, self.features.query(task.stream)[idx])
        return choose([float(x) for x in scores], menu, TieRule.FIRST_CANONICAL)

    # ---- array path
    def states_batch(self, records: RecordBatch, queries: QueryBatch) -> np.ndarray:
        """States (fixed point when commutative) at every cut: an (H, K, B, d) array."""
        lab = _label_rows(self.features.labels, records, self.name)
        names = queries.stream_names
        ptab = np.stack([self.features.producer(n)[lab] for n in names])      # (S, n_codes, d_p)
        rs = _row_streams(records, queries)
        keys = np.where(records.valid, records.keys, 0)
        inc = self.increment(ptab[rs[:, None], keys], _c(records.outcomes))  # (H, T, d)
        inc[~records.valid] = 0.0
        h, k, b, d = records.n_histories, records.n_cuts, records.n_blocks, inc.shape[-1]
        if self.commutative:
            seg = records.segments()
            v = records.valid & (seg < k)
            idx = ((np.arange(h)[:, None] * k + seg) * b + records.blocks)[v]
            vals = inc[v]
            per = np.stack([np.bincount(idx, weights=vals[:, j], minlength=h * k * b) for j in range(d)], axis=-1)
            return np.cumsum(per.reshape(h, k, b, d), axis=1)
        dec = np.float64(self.decay)

        def step(s: np.ndarray, rows: np.ndarray, t: int) -> None:
            blk = records.blocks[rows, t]
            s[rows, blk] = dec * s[rows, blk] + inc[rows, t]

        return _snapshots(records, step, np.zeros((h, b, d)))

    def act_batch(self, records: RecordBatch, queries: QueryBatch) -> np.ndarray:
        states = self.vector(self.states_batch(records, queries))
        lab = _label_rows(self.features.labels, records, self.name)
        qtab = np.stack([self.features.query(n)[lab] for n in queries.stream_names])
        return _readout_batch(states, qtab, _row_streams(records, queries), records, queries)

    def agent(self) -> Agent:
        return Agent(self.name, self, self, array=self, task_invariant=True, invariant_to=self.invariant_to,
                     namespace=self.namespace, spec={"name": self.name, **self.params})


@dataclass(frozen=True, eq=False)
class RecurrentWriter:
    """Learned recurrent writer h ← tanh(A h + p_ℓ + c(u) v_ℓ) per block; argmax_a ⟨h, q_a⟩ (order-sensitive)."""

    labels: tuple[str, ...]
    A: np.ndarray
    P: np.ndarray
    V: np.ndarray
    Q: np.ndarray
    name: str = "learned-recurrent"
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n, d = len(self.labels), self.A.shape[0]
        for nm, arr, shape in (("A", self.A, (d, d)), ("P", self.P, (n, d)), ("V", self.V, (n, d)),
                               ("Q", self.Q, (n, d))):
            if arr.shape != shape:
                raise ConfigError(f"recurrent writer {nm} must have shape {shape}; got {arr.shape}")
            frozen = np.array(arr, dtype=np.float64, copy=True)
            frozen.setflags(write=False)
            object.__setattr__(self, nm, frozen)

    @property
    def state_dim(self) -> int:
        return int(self.A.shape[0])

    def step(self, h: np.ndarray, p: np.ndarray, v: np.ndarray, c: np.ndarray) -> np.ndarray:
        """One transition for states h (..., d), rows p, v (..., d), centred outcomes c (...)."""
        return nx.tanh(seq_matvec(self.A, h) + p + c[..., None] * v)

    def init_state(self) -> State:
        return {}

    def update(self, state: State, task: TaskInput, key: str, outcome: float) -> State:
        i = self.labels.index(key) if key in self.labels else -1
        if i < 0:
            raise AgentError(f"writer {self.name!r} got key {key!r}; it accepts only {list(self.labels)}")
        old = state.get(task.block)
        h = old if old is not None else np.zeros(self.state_dim)
        out = dict(state)
        out[task.block] = self.step(h, self.P[i], self.V[i], _c(np.float64(outcome)))
        return out

    def act(self, state: State, task: FutureInput, menu: tuple[str, ...], rng: np.random.Generator) -> str:
        st = state.get(task.stratum)
        h = st if st is not None else np.zeros(self.state_dim)
        scores = seq_dot(h, self.Q[[self.labels.index(a) for a in menu]])
        return choose([float(x) for x in scores], menu, TieRule.FIRST_CANONICAL)

    def act_batch(self, records: RecordBatch, queries: QueryBatch) -> np.ndarray:
        lab = _label_rows(self.labels, records, self.name)
        keys = np.where(records.valid, records.keys, 0)
        p, v, c = self.P[lab][keys], self.V[lab][keys], _c(records.outcomes)

        def step(s: np.ndarray, rows: np.ndarray, t: int) -> None:
            blk = records.blocks[rows, t]
            s[rows, blk] = self.step(s[rows, blk], p[rows, t], v[rows, t], c[rows, t])

        h_n, b = records.n_histories, records.n_blocks
        states = _snapshots(records, step, np.zeros((h_n, b, self.state_dim)))
        qtab = self.Q[lab][None]
        return _readout_batch(states, qtab, np.zeros(h_n, dtype=np.int64), records, queries)

    def agent(self) -> Agent:
        return Agent(self.name, self, self, array=self, task_invariant=True, spec={"name": self.name, **self.params})


ARMS = ("coverage", "adaptive", "replicate", "mixed")
"""The synthetic substrate's canonical arms (default label order of the continuous controls)."""


def dense_agent(seed: int, *, labels: tuple[str, ...] = ARMS, dim: int = 32, decay: float = 0.985) -> Agent:
    """Dense-state control: h ← 0.985h + (u − ½)e_ℓ with per-replicate unit features e_a ∈ R^32 (n_fit = 0)."""
    feats = StreamFeatures(labels, seed, "dense", dim, binding=False)
    return VectorWriter(feats, decay=decay, name="dense", params={"seed": seed, "dim": dim, "decay": decay}).agent()


def cross_namespace_agent(seed: int, *, labels: tuple[str, ...] = ARMS, dim: int = 32, decay: float = 0.985,
                          namespace: Namespace | None = None) -> Agent:
    """Cross-namespace control: disjoint producer/action keys, p_a = B q_a (Haar B), h ← 0.985h + (u − ½)p_ℓ,
    the policy scores action a with the bound query p_a."""
    ns = namespace or Namespace(producer_prefix="P_", action_prefix="A_")
    feats = StreamFeatures(labels, seed, "cross-namespace", dim, binding=True)
    return VectorWriter(feats, decay=decay, namespace=ns, name="cross-namespace",
                        params={"seed": seed, "dim": dim, "decay": decay}).agent()


def online_commutative_agent(seed: int, *, labels: tuple[str, ...] = ARMS, dim: int = 32,
                             namespace: Namespace | None = None) -> Agent:
    """Online commutative namespace control: h = Σ (u − ½)p_ℓ with the cross-namespace binding (no decay)."""
    ns = namespace or Namespace(producer_prefix="P_", action_prefix="A_")
    feats = StreamFeatures(labels, seed, "cross-namespace", dim, binding=True)
    return VectorWriter(feats, namespace=ns, name="online-commutative", params={"seed": seed, "dim": dim},
                        invariant_to=("pair", "reorder")).agent()


def associative_agent(P: np.ndarray, Q: np.ndarray, *, labels: tuple[str, ...] = ARMS,
                      name: str = "fitted-associative") -> Agent:
    """Frozen low-rank associative writer h = Σ (u − ½)p_ℓ, action argmax sigmoid(q_aᵀh) (exactly commutative)."""
    return VectorWriter(FixedFeatures(labels, P, Q), name=name, invariant_to=("pair", "reorder"),
                        params={"P": np.asarray(P).tolist(), "Q": np.asarray(Q).tolist()}).agent()


def additive_nuisance_agent(P: np.ndarray, Q: np.ndarray, *, labels: tuple[str, ...] = ARMS,
                            name: str = "additive-nuisance") -> Agent:
    """Additive nuisance writer h_sep = (Σ p_ℓ, Σ (u − ½)) ∈ R^{d+1}, readout q_a ∈ R^{d+1}."""
    if Q.shape[1] != P.shape[1] + 1:
        raise ConfigError(f"additive nuisance queries need dimension d + 1 = {P.shape[1] + 1}; got {Q.shape[1]}")
    return VectorWriter(FixedFeatures(labels, P, Q), additive=True, name=name,
                        invariant_to=("value", "pair", "key_slot", "reorder"),
                        params={"P": np.asarray(P).tolist(), "Q": np.asarray(Q).tolist()}).agent()


def recurrent_agent(A: np.ndarray, P: np.ndarray, V: np.ndarray, Q: np.ndarray, *,
                    labels: tuple[str, ...] = ARMS, name: str = "learned-recurrent") -> Agent:
    """Frozen learned recurrent writer h ← tanh(A h + p_ℓ + (u − ½)v_ℓ), argmax q_aᵀh."""
    return RecurrentWriter(labels, A, P, V, Q, name=name).agent()
