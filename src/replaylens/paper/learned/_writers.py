"""Frozen learned writers: the additive and the 16-dimensional recurrent endpoint writer.

* additive:  h_a = Σ_t (u_t − ½)·1[ℓ_t = a] (exact, in integer micro-units), s = Q h (no bias);
* recurrent: h_t = tanh(W h_{t−1} + p_{ℓ_t} + (u_t − ½) v_{ℓ_t}), h_0 = 0, s = Q h_T (no biases).

The action is the first-canonical argmax of s over the writer's keys (an empty state gives s = 0, an
all-way tie, hence ``coverage`` for both).  Evaluation uses a fixed sequence of elementwise
operations (no BLAS), so a writer's scores for a sequence are the same bits whether it is evaluated
alone, in a batch, record by record through the ReplayLens per-record protocol, or on the
vectorized array path.

Both writers are ReplayLens agents (:meth:`AdditiveWriter.agent`, :meth:`RecurrentWriter.agent`):
the state is kept per family–context block (a sequence is one block) and a future task reads its
stratum's block; a key outside the writer's vocabulary is an :class:`~replaylens.errors.AgentError`;
a masked outcome contributes c(u) = 0.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...agents import (
    Agent,
    FutureInput,
    QueryBatch,
    RecordBatch,
    TaskInput,
    TieRule,
    block_key_sums,
    choose,
    choose_batch,
)
from ...errors import AgentError, ConfigError
from .. import numerics as nx
from ._data import ENDPOINT_KEYS, EndpointSequences, micro_centered
from ._train import TrainedModel

__all__ = ["AdditiveWriter", "RecurrentWriter", "writer_from_model"]

BlockState = Mapping[tuple[str, str], tuple[float, ...]]


def _readonly(a: np.ndarray | Any, shape: tuple[int, ...], name: str) -> np.ndarray:
    arr = np.array(a, dtype=np.float64)
    if arr.shape != shape:
        raise ConfigError(f"{name} must have shape {shape}; got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ConfigError(f"{name} has non-finite entries")
    arr.setflags(write=False)
    return arr


def _linear(x: np.ndarray, m: np.ndarray) -> np.ndarray:
    """x @ m.T for (M, J) x and (I, J) m, as J elementwise multiply-adds in a fixed order."""
    out = np.zeros((x.shape[0], m.shape[0]))
    for j in range(m.shape[1]):
        out += x[:, j : j + 1] * m[None, :, j]
    return out


def _centered(u: np.ndarray) -> np.ndarray:
    c = np.asarray(u, dtype=np.float64) - 0.5
    return np.where(np.isnan(c), 0.0, c)


def _digest(*arrays: np.ndarray) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a, dtype=np.float64).tobytes())
    return h.hexdigest()[:16]


class _LearnedBase:
    """Shared per-record and array plumbing (vocabulary lookup, menu scoring)."""

    labels: tuple[str, ...]
    name: str

    def _index(self, key: str) -> int:
        try:
            return self.labels.index(key)
        except ValueError:
            raise AgentError(f"{self.name}: key {key!r} is not in the writer's vocabulary {self.labels}") from None

    def _code_map(self, labels: tuple[str, ...]) -> np.ndarray:
        """Writer index of each record label (−1 when the writer does not know it)."""
        return np.array([self.labels.index(lab) if lab in self.labels else -1 for lab in labels], dtype=np.int64)

    def _pick(self, scores: np.ndarray, menu: tuple[str, ...]) -> str:
        return choose([float(scores[self._index(a)]) for a in menu], menu, TieRule.FIRST_CANONICAL)

    def _pick_batch(self, scores: np.ndarray, records: RecordBatch, queries: QueryBatch) -> np.ndarray:
        w = self._code_map(records.labels)
        menu_w = np.where(queries.menu >= 0, w[np.where(queries.menu >= 0, queries.menu, 0)], 0)
        if np.any((queries.menu >= 0) & (w[np.where(queries.menu >= 0, queries.menu, 0)] < 0)):
            raise AgentError(f"{self.name}: a menu holds a label outside the writer's vocabulary {self.labels}")
        ms = np.take_along_axis(scores, menu_w, axis=1)
        return choose_batch(ms, queries.menu, TieRule.FIRST_CANONICAL, records.labels)

    def scores(self, seqs: EndpointSequences) -> np.ndarray:
        raise NotImplementedError

    def actions(self, seqs: EndpointSequences) -> np.ndarray:
        """(N,) first-canonical argmax of the scores (key codes)."""
        s = self.scores(seqs)
        return np.argmax(s == s.max(axis=1, keepdims=True), axis=1).astype(np.int64)


@dataclass(frozen=True, eq=False)
class AdditiveWriter(_LearnedBase):
    """s = Q h^add over the exact key-specific sums h^add_a = Σ_t (u_t − ½)·1[ℓ_t = a]."""

    q: np.ndarray
    labels: tuple[str, ...] = ENDPOINT_KEYS
    name: str = "learned-additive"

    def __post_init__(self) -> None:
        k = len(self.labels)
        object.__setattr__(self, "q", _readonly(self.q, (k, k), "Q"))

    @property
    def fingerprint(self) -> str:
        return _digest(self.q)

    def scores_from_micro(self, micro: np.ndarray) -> np.ndarray:
        """(M, K) scores from (M, K) key sums of c(u) in micro-units."""
        return _linear(np.asarray(micro, dtype=np.float64) * 1e-6, self.q)

    def scores(self, seqs: EndpointSequences) -> np.ndarray:
        """(N, K) scores of the sequences' terminal states."""
        return self.scores_from_micro(seqs.micro_sums())

    def empty_action(self) -> int:
        s = self.scores_from_micro(np.zeros((1, len(self.labels))))[0]
        return int(np.flatnonzero(s == s.max())[0])

    # ---- ReplayLens per-record protocol
    def init_state(self) -> BlockState:
        return {}

    def update(self, state: BlockState, task: TaskInput, key: str, outcome: float) -> BlockState:
        k = self._index(key)
        m = list(state.get(task.block, (0.0,) * len(self.labels)))
        m[k] = float(np.float64(m[k]) + micro_centered(np.asarray(outcome)))
        new = dict(state)
        new[task.block] = tuple(m)
        return new

    def act(self, state: BlockState, task: FutureInput, menu: tuple[str, ...], rng: np.random.Generator) -> str:
        m = np.asarray(state.get(task.stratum, (0.0,) * len(self.labels)), dtype=np.float64)
        return self._pick(self.scores_from_micro(m[None])[0], menu)

    # ---- array path
    def act_batch(self, records: RecordBatch, queries: QueryBatch) -> np.ndarray:
        sums = block_key_sums(records, micro_centered(records.outcomes))  # (H, K, B, labels)
        per_q = sums[queries.row, queries.cut, queries.block]
        w = self._code_map(records.labels)
        micro = np.zeros((per_q.shape[0], len(self.labels)))
        for code, idx in enumerate(w):
            if idx >= 0:
                micro[:, idx] = per_q[:, code]
        return self._pick_batch(self.scores_from_micro(micro), records, queries)

    def agent(self) -> Agent:
        """This writer as a ReplayLens agent (declared invariant to pair transport and event reorder)."""
        return Agent(self.name, self, self, array=self, task_invariant=True, invariant_to=("pair", "reorder"),
                     spec={"name": self.name, "params": self.fingerprint})


@dataclass(frozen=True, eq=False)
class RecurrentWriter(_LearnedBase):
    """h_t = tanh(W h_{t−1} + p_{ℓ_t} + (u_t − ½) v_{ℓ_t}), h_0 = 0; s = Q h_T."""

    w: np.ndarray
    p: np.ndarray
    v: np.ndarray
    q: np.ndarray
    labels: tuple[str, ...] = ENDPOINT_KEYS
    name: str = "learned-recurrent"

    def __post_init__(self) -> None:
        k = len(self.labels)
        h = int(np.shape(self.w)[0]) if np.ndim(self.w) == 2 else -1
        object.__setattr__(self, "w", _readonly(self.w, (h, h), "W"))
        for nm in ("p", "v", "q"):
            object.__setattr__(self, nm, _readonly(getattr(self, nm), (k, h), nm.upper()))

    @property
    def hidden(self) -> int:
        return int(self.w.shape[0])

    @property
    def fingerprint(self) -> str:
        return _digest(self.w, self.p, self.v, self.q)

    def step(self, h: np.ndarray, keys: np.ndarray, c: np.ndarray) -> np.ndarray:
        """One recurrence step for M states (M, H) with key codes (M,) and centered utilities (M,)."""
        a = self.p[keys] + c[:, None] * self.v[keys]
        for j in range(self.hidden):
            a += h[:, j : j + 1] * self.w[None, :, j]
        return nx.tanh(a)

    def final_states(self, seqs: EndpointSequences) -> np.ndarray:
        """(N, H) h_T of each sequence."""
        h = np.zeros((seqs.n, self.hidden))
        c = _centered(seqs.utilities)
        for t in range(seqs.n_slots):
            h = self.step(h, seqs.keys[:, t], c[:, t])
        return h

    def scores_from_state(self, h: np.ndarray) -> np.ndarray:
        return _linear(np.asarray(h, dtype=np.float64), self.q)

    def scores(self, seqs: EndpointSequences) -> np.ndarray:
        return self.scores_from_state(self.final_states(seqs))

    def empty_action(self) -> int:
        s = self.scores_from_state(np.zeros((1, self.hidden)))[0]
        return int(np.flatnonzero(s == s.max())[0])

    # ---- ReplayLens per-record protocol
    def init_state(self) -> BlockState:
        return {}

    def update(self, state: BlockState, task: TaskInput, key: str, outcome: float) -> BlockState:
        k = self._index(key)
        h = np.asarray(state.get(task.block, (0.0,) * self.hidden), dtype=np.float64)[None]
        h = self.step(h, np.array([k]), _centered(np.asarray([outcome])))
        new = dict(state)
        new[task.block] = tuple(float(x) for x in h[0])
        return new

    def act(self, state: BlockState, task: FutureInput, menu: tuple[str, ...], rng: np.random.Generator) -> str:
        h = np.asarray(state.get(task.stratum, (0.0,) * self.hidden), dtype=np.float64)
        return self._pick(self.scores_from_state(h[None])[0], menu)

    # ---- array path
    def states_batch(self, records: RecordBatch) -> np.ndarray:
        """(H, K, B, hidden) block states at every cut."""
        nh, kc, nb = records.n_histories, records.n_cuts, records.n_blocks
        w = self._code_map(records.labels)
        s = np.zeros((nh, nb, self.hidden))
        snaps = np.zeros((nh, kc, nb, self.hidden))
        c = _centered(records.outcomes)
        for t in range(records.keys.shape[1]):
            rows = np.flatnonzero(records.valid[:, t])
            if rows.size:
                blk = records.blocks[rows, t]
                kw = w[records.keys[rows, t]]
                if np.any(kw < 0):
                    bad = records.labels[int(records.keys[rows, t][kw < 0][0])]
                    raise AgentError(f"{self.name}: key {bad!r} is not in the writer's vocabulary {self.labels}")
                s[rows, blk] = self.step(s[rows, blk], kw, c[rows, t])
            hit_h, hit_k = np.nonzero(records.cuts == t + 1)
            if hit_h.size:
                snaps[hit_h, hit_k] = s[hit_h]
        return snaps

    def act_batch(self, records: RecordBatch, queries: QueryBatch) -> np.ndarray:
        h = self.states_batch(records)[queries.row, queries.cut, queries.block]
        return self._pick_batch(self.scores_from_state(h), records, queries)

    def agent(self) -> Agent:
        """This writer as a ReplayLens agent (no declared invariances: its state depends on record order)."""
        return Agent(self.name, self, self, array=self, task_invariant=True,
                     spec={"name": self.name, "params": self.fingerprint})


def writer_from_model(model: TrainedModel, labels: tuple[str, ...] = ENDPOINT_KEYS) -> AdditiveWriter | RecurrentWriter:
    """The frozen writer of a trained model."""
    p = model.params
    if model.kind == "additive":
        return AdditiveWriter(p["Q"], labels)
    if model.kind == "recurrent":
        return RecurrentWriter(p["W"], p["P"], p["V"], p["Q"], labels)
    raise ConfigError(f"unknown model kind {model.kind!r}")
