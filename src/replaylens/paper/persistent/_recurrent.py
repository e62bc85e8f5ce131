"""The cross-fitted persistent recurrent agent on measured outcomes (paper: eq. public-persistent-agent).

Per family–context block a state h ∈ ℝ¹⁶, zero-initialised, with parameters shared across blocks::

    h_t = tanh(W_h h_{t−1} + W_u [onehot₄(ℓ_t); onehot₄(f, c); u_t] + b_h)
    û_a = sigmoid(w_aᵀ h_T + b_a)           (one output per arm, canonical order)

* **Adaptation policy**: an 8-task arm-balanced warm-up (C, A, R, M, C, A, R, M), then the frozen readout on
  the current state, a_t = argmax û(h_{t−1}); the selected measured utility updates h.  Future tasks never
  update the state, and every future task of a block gets the same action (the readout depends on h_T only).
* **Fitting** (:func:`fit_persistent`): the target of a training (stream, block) is each arm's mean utility over
  that block's future tasks, formed inside the training fold only; loss = the paper's written objective form
  (eq. selected-only-loss; docs/decisions.md issue 28): per block the sum over arms of ½(û − y)², averaged over
  blocks, + (λ/2)·Σ (weight matrices)², λ = 1e-4 (``objective="paper"``; the reading before issue 28, mean
  squared error over blocks and arms + 1e-4·Σ (weight matrices)², is ``objective="mean"``); 500 full-batch Adam
  epochs (lr 0.012, β 0.9/0.999, ε 1e-8) with the
  gradient's global norm clipped to 8 before the moment update; weights i.i.d. N(0, 0.1²), biases 0; the
  training traces are the parameter-free arm-balanced round-robin over all adaptation tasks (C, A, R, M
  repeated; every arm 6 times in 24 tasks).
* **Cross-fitting** (:func:`cross_fit`): fold I fits on streams 0–23 and generates evaluation traces on 24–47,
  fold II swaps them; three parameter seeds per fold, no selection among them.

Exactness: evaluation (the closed-loop trace, the per-record writer and the array path) uses one fixed sequence
of elementwise operations (no BLAS), so a state has the same bits record by record, in any batch, and on either
replay path; the aligned replay of a trace therefore reproduces the closed-loop future actions exactly.
A masked outcome enters the input as u = 0.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ...agents import Agent, FutureInput, QueryBatch, RecordBatch, TaskInput, TieRule, choose, choose_batch
from ...errors import AgentError, ConfigError
from ...inference import single_thread_blas
from ...rng import check_rng
from .. import numerics as nx

__all__ = [
    "PARAMETER_SEEDS",
    "WARMUP",
    "PersistentAgent",
    "PersistentFit",
    "PersistentFold",
    "PersistentParams",
    "PersistentSettings",
    "adaptation_trace",
    "cross_fit",
    "fit_persistent",
    "round_robin_actions",
]

PARAMETER_SEEDS: tuple[int, ...] = (20260861, 20260862, 20260863)
WARMUP: tuple[int, ...] = (0, 1, 2, 3, 0, 1, 2, 3)
"""The arm-balanced warm-up (arm indices in canonical order C, A, R, M, twice)."""

BlockStates = Mapping[tuple[str, str], tuple[float, ...]]


@dataclass(frozen=True)
class PersistentSettings:
    """Model and optimizer settings; the defaults are the paper's (with the spec's CHOICEs, see module doc)."""

    hidden: int = 16
    epochs: int = 500
    learning_rate: float = 0.012
    l2: float = 1e-4
    objective: str = "paper"
    """``"paper"``: (1/N)·Σ_blocks Σ_arms ½(û − y)² + (λ/2)·Σ W²; ``"mean"``: mean (û − y)² + λ·Σ W²."""
    clip_norm: float = 8.0
    init_scale: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.999
    epsilon: float = 1e-8
    seeds: tuple[int, ...] = PARAMETER_SEEDS
    warmup: tuple[int, ...] = WARMUP

    def __post_init__(self) -> None:
        if self.hidden < 1 or self.epochs < 0 or self.learning_rate <= 0 or self.l2 < 0 or self.clip_norm <= 0 \
                or self.init_scale < 0 or not self.seeds or self.objective not in ("paper", "mean"):
            raise ConfigError(f"invalid persistent-agent settings: {self}")


def _ro(a: np.ndarray) -> np.ndarray:
    out = np.array(a, dtype=np.float64)
    out.setflags(write=False)
    return out


@dataclass(frozen=True, eq=False)
class PersistentParams:
    """Frozen parameters: ``wh`` (H, H), ``wu`` (H, A + S + 1), ``bh`` (H,), ``wo`` (A, H), ``bo`` (A,).

    ``arms`` (A labels, canonical order) index the action one-hot and the readout rows; ``strata`` (S
    family–context pairs) index the context one-hot.
    """

    wh: np.ndarray
    wu: np.ndarray
    bh: np.ndarray
    wo: np.ndarray
    bo: np.ndarray
    arms: tuple[str, ...]
    strata: tuple[tuple[str, str], ...]

    def __post_init__(self) -> None:
        h = int(np.shape(self.wh)[0])
        a, s = len(self.arms), len(self.strata)
        shapes = {"wh": (h, h), "wu": (h, a + s + 1), "bh": (h,), "wo": (a, h), "bo": (a,)}
        for name, shape in shapes.items():
            arr = _ro(getattr(self, name))
            if arr.shape != shape:
                raise ConfigError(f"{name} must have shape {shape}; got {arr.shape}")
            if not np.all(np.isfinite(arr)):
                raise ConfigError(f"{name} has non-finite entries")
            object.__setattr__(self, name, arr)

    @property
    def hidden(self) -> int:
        return int(self.wh.shape[0])

    @property
    def fingerprint(self) -> str:
        h = hashlib.sha256(repr((self.arms, self.strata)).encode())
        for a in (self.wh, self.wu, self.bh, self.wo, self.bo):
            h.update(np.ascontiguousarray(a).tobytes())
        return h.hexdigest()[:16]

    # ---- exact evaluation (fixed elementwise order, no BLAS)
    def step(self, h: np.ndarray, arm: np.ndarray, stratum: np.ndarray, u: np.ndarray) -> np.ndarray:
        """(n, H) next states from (n, H) states, (n,) arm and stratum indices and (n,) utilities."""
        a_n = len(self.arms)
        z = np.zeros((h.shape[0], self.hidden))
        for j in range(self.hidden):
            z += h[:, j : j + 1] * self.wh[None, :, j]
        z += self.wu.T[arm]
        z += self.wu.T[a_n + stratum]
        z += np.where(np.isnan(u), 0.0, u)[:, None] * self.wu[None, :, a_n + len(self.strata)]
        z += self.bh[None, :]
        return nx.tanh(np.ascontiguousarray(z))

    def readout(self, h: np.ndarray) -> np.ndarray:
        """(n, A) predicted arm utilities û = sigmoid(W_o h + b_o) from (n, H) states."""
        z = np.zeros((h.shape[0], len(self.arms)))
        for j in range(self.hidden):
            z += h[:, j : j + 1] * self.wo[None, :, j]
        z += self.bo[None, :]
        return 1.0 / (1.0 + nx.exp(-np.ascontiguousarray(z)))

    def choose_arms(self, h: np.ndarray) -> np.ndarray:
        """(n,) argmax of the readout, exact ties to the lexicographically largest arm label."""
        s = self.readout(h)
        top = s == s.max(axis=1, keepdims=True)
        rank = np.argsort(np.argsort(np.asarray(self.arms, dtype=object)))
        return np.argmax(np.where(top, rank[None, :], -1), axis=1).astype(np.int64)


def round_robin_actions(n_streams: int, n_blocks: int, n_tasks: int, n_arms: int = 4) -> np.ndarray:
    """[r, b, t] the parameter-free arm-balanced training trace: arm t mod n_arms."""
    return np.broadcast_to(np.arange(n_tasks) % n_arms, (n_streams, n_blocks, n_tasks)).astype(np.int64)


def adaptation_trace(params: PersistentParams, adapt_utility: np.ndarray,
                     warmup: Sequence[int] = WARMUP) -> tuple[np.ndarray, np.ndarray]:
    """Closed-loop adaptation actions [r, b, t] and terminal future actions [r, b] of the frozen agent.

    ``adapt_utility`` [r, b, t, a] holds the measured adaptation utilities (block b = stratum b of
    ``params.strata``).  The first ``len(warmup)`` tasks take the warm-up arms, later ones the readout of
    the current state; only the selected arm's utility is revealed and written.
    """
    u = np.asarray(adapt_utility, dtype=np.float64)
    r_n, b_n, t_n, a_n = u.shape
    if b_n != len(params.strata) or a_n != len(params.arms):
        raise ConfigError(f"adapt_utility must be [r, {len(params.strata)}, t, {len(params.arms)}]; got {u.shape}")
    h = np.zeros((r_n * b_n, params.hidden))
    stratum = np.tile(np.arange(b_n), r_n)
    flat = u.reshape(r_n * b_n, t_n, a_n)
    rows = np.arange(r_n * b_n)
    acts = np.empty((r_n * b_n, t_n), dtype=np.int64)
    for t in range(t_n):
        a = np.full(r_n * b_n, int(warmup[t])) if t < len(warmup) else params.choose_arms(h)
        acts[:, t] = a
        h = params.step(h, a, stratum, flat[rows, t, a])
    return acts.reshape(r_n, b_n, t_n), params.choose_arms(h).reshape(r_n, b_n)


# ------------------------------------------------------------------ fitting (BPTT, Adam)

_WEIGHTS = ("wh", "wu", "wo")
_ORDER = ("wh", "wu", "bh", "wo", "bo")


def _loss_grad(p: dict[str, np.ndarray], x: np.ndarray, target: np.ndarray, l2: float, objective: str = "paper"
               ) -> tuple[float, dict[str, np.ndarray]]:
    """Loss and gradients for sequences ``x`` [N, T, D] and targets [N, A] (plain BLAS; training only).

    ``objective="paper"``: (1/N)·Σ_n Σ_a ½(û − y)² + (l2/2)·Σ W²; ``"mean"``: mean (û − y)² + l2·Σ W²."""
    n, t_n, _ = x.shape
    hs = [np.zeros((n, p["wh"].shape[0]))]
    for t in range(t_n):
        hs.append(nx.tanh(nx.matmul(hs[-1], p["wh"].T) + nx.matmul(x[:, t], p["wu"].T) + p["bh"]))
    pred = 1.0 / (1.0 + nx.exp(-(nx.matmul(hs[-1], p["wo"].T) + p["bo"])))
    err = pred - target
    wsq = sum(float(np.sum(p[k] ** 2)) for k in _WEIGHTS)
    if objective == "paper":
        loss = float(0.5 * np.sum(err**2) / n + 0.5 * l2 * wsq)
        dlogit = err / n * pred * (1.0 - pred)
        pen = l2
    else:
        loss = float(np.mean(err**2) + l2 * wsq)
        dlogit = 2.0 * err / err.size * pred * (1.0 - pred)
        pen = 2.0 * l2
    g = {k: np.zeros_like(v) for k, v in p.items()}
    g["wo"] = nx.matmul(dlogit.T, hs[-1])
    g["bo"] = dlogit.sum(axis=0)
    dh = nx.matmul(dlogit, p["wo"])
    for t in range(t_n, 0, -1):
        dz = dh * (1.0 - hs[t] ** 2)
        g["wh"] += nx.matmul(dz.T, hs[t - 1])
        g["wu"] += nx.matmul(dz.T, x[:, t - 1])
        g["bh"] += dz.sum(axis=0)
        dh = nx.matmul(dz, p["wh"])
    for k in _WEIGHTS:
        g[k] += pen * p[k]
    return loss, g


def _inputs(actions: np.ndarray, utilities: np.ndarray, n_arms: int, n_strata: int) -> np.ndarray:
    """[r·b, t, A + S + 1] one-hot arm, one-hot stratum and the selected utility."""
    r_n, b_n, t_n = actions.shape
    x = np.zeros((r_n, b_n, t_n, n_arms + n_strata + 1))
    idx = np.indices((r_n, b_n, t_n))
    x[idx[0], idx[1], idx[2], actions] = 1.0
    x[:, np.arange(b_n), :, n_arms + np.arange(b_n)] = 1.0
    x[..., -1] = utilities
    return x.reshape(r_n * b_n, t_n, -1)


@dataclass(frozen=True, eq=False)
class PersistentFit:
    """One fitted parameter set with its training loss history (first and final)."""

    seed: int
    params: PersistentParams
    initial_loss: float
    final_loss: float
    train_rows: tuple[int, ...]


def fit_persistent(adapt_utility: np.ndarray, future_utility: np.ndarray, *, arms: Sequence[str],
                   strata: Sequence[tuple[str, str]], seed: int,
                   settings: PersistentSettings = PersistentSettings(),
                   train_rows: Sequence[int] | None = None) -> PersistentFit:
    """Fit the recurrent agent on the training streams' round-robin traces (targets: future arm means).

    ``adapt_utility`` [r, b, t, a] and ``future_utility`` [r, b, j, a] are the training fold's tables (block b
    = stratum b).  Only the selected (round-robin) adaptation utilities and the future arm means enter.
    """
    au = np.asarray(adapt_utility, dtype=np.float64)
    fu = np.asarray(future_utility, dtype=np.float64)
    arms, strata = tuple(arms), tuple((str(s[0]), str(s[1])) for s in strata)
    r_n, b_n, t_n, a_n = au.shape
    if fu.shape[:2] != (r_n, b_n) or fu.shape[3] != a_n or b_n != len(strata) or a_n != len(arms):
        raise ConfigError(f"tables do not fit: adapt {au.shape}, future {fu.shape}, {len(strata)} strata, "
                          f"{len(arms)} arms")
    acts = round_robin_actions(r_n, b_n, t_n, a_n)
    sel = np.take_along_axis(au, acts[..., None], axis=3)[..., 0]
    x = _inputs(acts, sel, a_n, b_n)
    target = fu.mean(axis=2).reshape(r_n * b_n, a_n)
    s = settings
    g = check_rng(int(seed))
    hdim, d = s.hidden, x.shape[2]
    p = {"wh": g.normal(0.0, s.init_scale, (hdim, hdim)), "wu": g.normal(0.0, s.init_scale, (hdim, d)),
         "bh": np.zeros(hdim), "wo": g.normal(0.0, s.init_scale, (a_n, hdim)), "bo": np.zeros(a_n)}
    with single_thread_blas():
        first, last = _adam_persistent(p, x, target, s)
    params = PersistentParams(p["wh"], p["wu"], p["bh"], p["wo"], p["bo"], arms, strata)
    rows = tuple(range(r_n)) if train_rows is None else tuple(int(i) for i in train_rows)
    return PersistentFit(int(seed), params, first, last, rows)


def _adam_persistent(p: dict[str, np.ndarray], x: np.ndarray, target: np.ndarray, s: PersistentSettings
                     ) -> tuple[float, float]:
    """``s.epochs`` full-batch Adam epochs on ``p`` in place; (first, final) training loss."""
    m = {k: np.zeros_like(v) for k, v in p.items()}
    v = {k: np.zeros_like(v_) for k, v_ in p.items()}
    first = float("nan")
    for epoch in range(1, s.epochs + 1):
        loss, grad = _loss_grad(p, x, target, s.l2, s.objective)
        if epoch == 1:
            first = loss
        norm = float(np.sqrt(sum(float(np.sum(grad[k] ** 2)) for k in _ORDER)))
        scale = min(1.0, s.clip_norm / norm) if norm > 0 else 1.0
        for k in _ORDER:
            gk = grad[k] * scale
            m[k] = s.beta1 * m[k] + (1.0 - s.beta1) * gk
            v[k] = s.beta2 * v[k] + (1.0 - s.beta2) * gk**2
            mhat = m[k] / (1.0 - s.beta1**epoch)
            vhat = v[k] / (1.0 - s.beta2**epoch)
            p[k] = p[k] - s.learning_rate * mhat / (np.sqrt(vhat) + s.epsilon)
    last = _loss_grad(p, x, target, s.l2, s.objective)[0]
    if s.epochs == 0:
        first = last
    return first, last


@dataclass(frozen=True, eq=False)
class PersistentFold:
    """One cross-fitting fold: the fits (one per parameter seed) and their evaluation traces.

    ``adapt_actions[k]`` [r, b, t] is fit k's aligned closed-loop adaptation trace on the evaluation streams
    ``eval_rows`` and ``future_actions[k]`` [r, b] its frozen future action per block.
    """

    name: str
    train_rows: tuple[int, ...]
    eval_rows: tuple[int, ...]
    fits: tuple[PersistentFit, ...]
    adapt_actions: tuple[np.ndarray, ...]
    future_actions: tuple[np.ndarray, ...]


def cross_fit(adapt_utility: np.ndarray, future_utility: np.ndarray, *, arms: Sequence[str],
              strata: Sequence[tuple[str, str]],
              folds: Sequence[tuple[str, Sequence[int], Sequence[int]]] | None = None,
              settings: PersistentSettings = PersistentSettings()) -> tuple[PersistentFold, ...]:
    """Fit on each fold's training streams and generate the frozen agents' traces on its evaluation streams.

    Default folds (48 streams): ``("I", 0–23, 24–47)`` and ``("II", 24–47, 0–23)``; with R streams the halves
    are ⌊R/2⌋.  Parameters are frozen before any evaluation-fold outcome is seen.
    """
    au = np.asarray(adapt_utility, dtype=np.float64)
    fu = np.asarray(future_utility, dtype=np.float64)
    r_n = au.shape[0]
    if folds is None:
        if r_n < 2:
            raise ConfigError("cross-fitting needs at least two streams")
        half = r_n // 2
        lo, hi = tuple(range(half)), tuple(range(half, r_n))
        folds = (("I", lo, hi), ("II", hi, lo))
    out = []
    for name, train, ev in folds:
        tr, evr = tuple(int(i) for i in train), tuple(int(i) for i in ev)
        if set(tr) & set(evr):
            raise ConfigError(f"fold {name}: training and evaluation streams overlap")
        fits = tuple(fit_persistent(au[list(tr)], fu[list(tr)], arms=arms, strata=strata, seed=sd,
                                    settings=settings, train_rows=tr) for sd in settings.seeds)
        traces = [adaptation_trace(f.params, au[list(evr)], settings.warmup) for f in fits]
        out.append(PersistentFold(name, tr, evr, fits, tuple(t[0] for t in traces), tuple(t[1] for t in traces)))
    return tuple(out)


# ------------------------------------------------------------------ the replayable agent


@dataclass(frozen=True, eq=False)
class PersistentAgent:
    """A frozen fit as a ReplayLens writer/policy (per-record and array paths agree exactly).

    The state is one h per family–context block; a future task reads its stratum's block (zero if the block
    is empty) and takes the menu arm with the largest û (lexicographically-largest label on an exact tie).
    """

    params: PersistentParams
    name: str = "persistent-recurrent"
    extra: Mapping[str, object] = field(default_factory=dict)

    def _arm(self, key: str) -> int:
        try:
            return self.params.arms.index(key)
        except ValueError:
            raise AgentError(f"{self.name}: key {key!r} is not an arm {self.params.arms}") from None

    def _stratum(self, block: tuple[str, str]) -> int:
        try:
            return self.params.strata.index((block[0], block[1]))
        except ValueError:
            raise AgentError(f"{self.name}: block {block!r} is not a fitted stratum {self.params.strata}") from None

    # ---- per-record path
    def init_state(self) -> BlockStates:
        return {}

    def update(self, state: BlockStates, task: TaskInput, key: str, outcome: float) -> BlockStates:
        h = np.asarray(state.get(task.block, (0.0,) * self.params.hidden), dtype=np.float64)[None]
        nh = self.params.step(h, np.array([self._arm(key)]), np.array([self._stratum(task.block)]),
                              np.array([outcome], dtype=np.float64))
        new = dict(state)
        new[task.block] = tuple(float(x) for x in nh[0])
        return new

    def act(self, state: BlockStates, task: FutureInput, menu: tuple[str, ...], rng: np.random.Generator) -> str:
        h = np.asarray(state.get(task.stratum, (0.0,) * self.params.hidden), dtype=np.float64)[None]
        s = self.params.readout(h)[0]
        return choose([float(s[self._arm(a)]) for a in menu], menu, TieRule.LEX_LARGEST)

    # ---- array path
    def _codes(self, names: Sequence[object], lookup: Sequence[object]) -> np.ndarray:
        return np.array([lookup.index(x) if x in lookup else -1 for x in names], dtype=np.int64)

    def act_batch(self, records: RecordBatch, queries: QueryBatch) -> np.ndarray:
        arm_of = self._codes(records.labels, self.params.arms)
        stratum_of = self._codes([tuple(b) for b in records.block_names], list(self.params.strata))
        h_n, k_n, b_n = records.n_histories, records.n_cuts, records.n_blocks
        state = np.zeros((h_n, b_n, self.params.hidden))
        snaps = np.zeros((h_n, k_n, b_n, self.params.hidden))
        at0 = np.nonzero(records.cuts == 0)
        snaps[at0[0], at0[1]] = state[at0[0]]
        for t in range(records.keys.shape[1]):
            rows = np.flatnonzero(records.valid[:, t])
            if rows.size:
                blk, key = records.blocks[rows, t], records.keys[rows, t]
                arm, st = arm_of[key], stratum_of[blk]
                if np.any(arm < 0):
                    raise AgentError(f"{self.name}: a record key is not an arm {self.params.arms}")
                if np.any(st < 0):
                    raise AgentError(f"{self.name}: a record block is not a fitted stratum {self.params.strata}")
                state[rows, blk] = self.params.step(state[rows, blk], arm, st, records.outcomes[rows, t])
            hh, kk = np.nonzero(records.cuts == t + 1)
            if hh.size:
                snaps[hh, kk] = state[hh]
        h = snaps[queries.row, queries.cut, queries.block]
        scores = self.params.readout(np.ascontiguousarray(h))
        menu = np.where(queries.menu >= 0, queries.menu, 0)
        arm = arm_of[menu]
        if np.any((queries.menu >= 0) & (arm < 0)):
            raise AgentError(f"{self.name}: a menu holds a label that is not an arm {self.params.arms}")
        ms = np.take_along_axis(scores, np.where(arm >= 0, arm, 0), axis=1)
        return choose_batch(ms, queries.menu, TieRule.LEX_LARGEST, records.labels)

    def agent(self) -> Agent:
        return Agent(self.name, self, self, array=self, task_invariant=True,
                     spec={"name": self.name, "params": self.params.fingerprint, **self.extra})
