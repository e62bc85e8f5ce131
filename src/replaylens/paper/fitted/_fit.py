"""Full-batch Adam fits of the associative, additive-nuisance and learned recurrent writers (numpy, float64).

Settings (spec partA §3 REC, borrowed from the paper's endpoint-separation fits, L772): full-batch
Adam (lr 0.015, β = (0.9, 0.999), ε = 1e-8), 4,800 updates, global gradient-norm clip 5 per model
(applied before the moment update), Gaussian initialization N(0, 0.05²) of every parameter from a
recorded seed, and the paper's penalty (λ/2)·Σ‖θ‖²_F with λ = 1e-4 (paper eq. selected-only-loss).

Associative models (refits, or fits on different training sets of one shape) share one Adam run
with a leading model axis K, but every model's loss and gradient are computed from its own slice
only, so a fit does not depend on which other fits share its batch (checked by the tests); learned
recurrent models are fitted one at a time (their work arrays then stay cache-resident).  BLAS is
limited to one thread while fitting.  Gradients are hand-written and checked against finite
differences in the tests.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ...agents import Agent
from ...errors import ConfigError
from ...inference import single_thread_blas
from ...rng import derive_rng
from .. import numerics as nx
from ._data import Observations, TrainingBlocks, observations
from ._writers import ARMS, additive_nuisance_agent, associative_agent, recurrent_agent

__all__ = [
    "PAPER_FIT",
    "FitSettings",
    "FittedWriter",
    "adam",
    "associative_loss_grad",
    "fit_additive",
    "fit_associative",
    "fit_recurrent",
    "init_params",
    "recurrent_loss_grad",
]

Params = dict[str, np.ndarray]
LossGrad = Callable[[Params], tuple[np.ndarray, Params]]


@dataclass(frozen=True)
class FitSettings:
    """Optimizer and model settings (defaults: ``PAPER_FIT``)."""

    updates: int = 4800
    learning_rate: float = 0.015
    beta1: float = 0.9
    beta2: float = 0.999
    epsilon: float = 1e-8
    clip_norm: float = 5.0
    l2: float = 1e-4
    init_scale: float = 0.05
    dim: int = 8

    def __post_init__(self) -> None:
        if isinstance(self.updates, bool) or not isinstance(self.updates, int) or self.updates < 0:
            raise ConfigError(f"updates must be a non-negative int; got {self.updates!r}")
        if self.dim < 1 or self.learning_rate <= 0 or self.clip_norm <= 0 or self.l2 < 0 or self.init_scale <= 0:
            raise ConfigError("dim, learning_rate, clip_norm and init_scale must be positive and l2 non-negative")


PAPER_FIT = FitSettings()


def _sigmoid(s: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + nx.tanh(0.5 * s))


def _penalty(params: Params, l2: float) -> tuple[np.ndarray, Params]:
    k = next(iter(params.values())).shape[0]
    pen = np.zeros(k)
    for p in params.values():
        pen = pen + 0.5 * l2 * (p.reshape(k, -1) ** 2).sum(axis=1)
    return pen, {name: l2 * p for name, p in params.items()}


SHAPES = {
    "associative": lambda n, d: {"P": (n, d), "Q": (n, d)},
    "additive": lambda n, d: {"P": (n, d), "Q": (n, d + 1)},
    "recurrent": lambda n, d: {"A": (d, d), "P": (n, d), "V": (n, d), "Q": (n, d)},
}


def init_params(kind: str, seeds: Sequence[int], n_labels: int, settings: FitSettings = PAPER_FIT) -> Params:
    """N(0, init_scale²) parameters of K models, model k from ``derive_rng(seeds[k], "fitted-init", kind)``
    (parameters drawn in sorted name order)."""
    if kind not in SHAPES:
        raise ConfigError(f"kind must be one of {sorted(SHAPES)}; got {kind!r}")
    shapes = SHAPES[kind](n_labels, settings.dim)
    out: dict[str, list[np.ndarray]] = {name: [] for name in shapes}
    for s in seeds:
        rng = derive_rng(int(s), "fitted-init", kind)
        for name in sorted(shapes):
            out[name].append(settings.init_scale * rng.standard_normal(shapes[name]))
    return {name: np.stack(v) for name, v in out.items()}


class _AssociativeProblem:
    """Precomputed design of an associative objective: s = Z vec(M), Z[n, ℓ·n + a] = X[n, ℓ]·1[a_n = a]."""

    def __init__(self, obs: Observations | Sequence[Observations], additive: bool) -> None:
        items = [obs] if isinstance(obs, Observations) else list(obs)
        if len({(o.X.shape, o.weight) for o in items}) != 1:
            raise ConfigError("batched training sets must share their shape and block count")
        n = items[0].X.shape[1] - (1 if additive else 0)  # labels (the additive design adds Σc)
        zs = [(o.X[:, :, None] * np.eye(n)[o.a][:, None, :]).reshape(o.X.shape[0], -1) for o in items]
        self.n_out = n
        self.z = np.ascontiguousarray(np.stack(zs))                    # (K', N, L·n)
        self.zt = np.ascontiguousarray(self.z.transpose(0, 2, 1))      # (K', L·n, N)
        self.y = np.stack([o.y for o in items])                        # (K', N)
        self.w = items[0].weight
        self.additive = additive

    def one(self, k: int, p: np.ndarray, q: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """Data loss and gradients of model k (its own design row when the training sets differ)."""
        d = p.shape[1]
        n = q.shape[0]
        if self.additive:
            m = np.concatenate([nx.matmul(p, q[:, :d].T), q[None, :, d]], axis=0)
        else:
            m = nx.matmul(p, q.T)
        if m.size != self.z.shape[2]:
            raise ConfigError(f"parameters of shape {p.shape}, {q.shape} do not fit the objective's design")
        i = k if self.z.shape[0] > 1 else 0
        s = nx.matmul(self.z[i], m.reshape(-1))                               # (N,)
        yhat = _sigmoid(s)
        err = yhat - self.y[i]
        loss = self.w * 0.5 * float(nx.matmul(err, err))
        g = self.w * err * yhat * (1.0 - yhat)
        dm = nx.matmul(self.zt[i], g).reshape(m.shape)                      # (L, n)
        if self.additive:
            dm1 = dm[:n]
            return loss, nx.matmul(dm1, q[:, :d]), np.concatenate([nx.matmul(dm1.T, p), dm[n][:, None]], axis=1)
        return loss, nx.matmul(dm, q), nx.matmul(dm.T, p)

    def __call__(self, params: Params, l2: float) -> tuple[np.ndarray, Params]:
        p, q = params["P"], params["Q"]
        k_n = p.shape[0]
        out = [self.one(k, p[k], q[k]) for k in range(k_n)]  # per model: temporaries stay small (no page faults)
        pen, dpen = _penalty(params, l2)
        loss = np.array([o[0] for o in out]) + pen
        return loss, {"P": np.stack([o[1] for o in out]) + dpen["P"], "Q": np.stack([o[2] for o in out]) + dpen["Q"]}


def associative_loss_grad(params: Params, obs: Observations | Sequence[Observations], l2: float,
                          additive: bool = False) -> tuple[np.ndarray, Params]:
    """Loss (K,) and gradients of K associative (or additive-nuisance) models.

    L = w Σ_n ½(sigmoid(s_n) − y_n)² + (λ/2)(‖P‖² + ‖Q‖²), s_n = Σ_ℓ X[n,ℓ] M[ℓ, a_n], M = P Qᵀ
    (additive: M = [[P Q_{:, :d}ᵀ], [Q_{:, d}ᵀ]]).  ``obs``: one training set for every model or one per model.
    """
    return _AssociativeProblem(obs, additive)(params, l2)


class _RecurrentProblem:
    """Precomputed designs of the recurrent objective for one training set, time-major (T·E rows)."""

    def __init__(self, blocks: TrainingBlocks) -> None:
        self.e_n, self.t_n = blocks.labels.shape
        n = blocks.n_labels
        oh = np.eye(n)[blocks.labels.T.reshape(-1)]                       # (T·E, n)
        c = (blocks.outcomes.T - 0.5).reshape(-1)
        self.oh = np.ascontiguousarray(oh)
        self.ohpv = np.ascontiguousarray(np.concatenate([oh, oh * c[:, None]], axis=1))   # [e_a, c e_a]
        self.ohpv_t = np.ascontiguousarray(self.ohpv.T)
        self.y = (blocks.outcomes.T).reshape(-1)
        self._buffers: dict[int, dict[str, np.ndarray]] = {}

    def _bufs(self, d: int) -> dict[str, np.ndarray]:
        """Work arrays reused across updates: large temporaries would otherwise be fresh page-faulting
        allocations at every update (this halves the cost of an update)."""
        if d not in self._buffers:
            t_n, e_n, n = self.t_n, self.e_n, self.oh.shape[1]
            self._buffers[d] = {"hs": np.zeros((t_n + 1, e_n, d)), "dz": np.empty((t_n, e_n, d)),
                                "z": np.empty((e_n, d)), "dh": np.empty((e_n, d)), "u": np.empty((t_n * e_n, d)),
                                "s": np.empty((t_n * e_n, n)), "gq": np.empty((t_n * e_n, n)),
                                "read": np.empty((t_n * e_n, d)), "deriv": np.empty((t_n, e_n, d))}
        return self._buffers[d]

    def one(self, a_: np.ndarray, p_: np.ndarray, v_: np.ndarray, q_: np.ndarray) -> tuple[float, Params]:
        """Data loss and gradients of one model (2-D arrays; BLAS products only on whole-sequence designs)."""
        t_n, e_n, d = self.t_n, self.e_n, a_.shape[0]
        b = self._bufs(d)
        hs, dz, z, dh = b["hs"], b["dz"], b["z"], b["dh"]
        u = nx.matmul(self.ohpv, np.concatenate([p_, v_], axis=0), out=b["u"]).reshape(t_n, e_n, d)
        at = np.ascontiguousarray(a_.T)
        for t in range(t_n):
            nx.matmul(hs[t], at, out=z)
            z += u[t]
            nx.tanh(z, out=hs[t + 1])
        hr = hs[:t_n].reshape(-1, d)                                     # h_i, rows (t, e)
        sq = nx.matmul(hr, q_.T, out=b["s"])
        sq *= self.oh
        s = sq.sum(axis=1)                                               # q_{a_i}ᵀ h_i
        yhat = _sigmoid(s)
        err = yhat - self.y
        w = 1.0 / e_n
        loss = w * 0.5 * float(nx.matmul(err, err))
        gq = np.multiply(self.oh, (w * err * yhat * (1.0 - yhat))[:, None], out=b["gq"])   # (T·E, n)
        read = nx.matmul(gq, q_, out=b["read"]).reshape(t_n, e_n, d)   # ∂L/∂h_i through the readout
        deriv = np.multiply(hs[1:], hs[1:], out=b["deriv"])
        np.subtract(1.0, deriv, out=deriv)
        dh[:] = 0.0
        for t in range(t_n - 1, -1, -1):
            np.multiply(dh, deriv[t], out=dz[t])
            nx.matmul(dz[t], a_, out=dh)
            dh += read[t]
        dzr = dz.reshape(-1, d)
        dpv = nx.matmul(self.ohpv_t, dzr)
        n = p_.shape[0]
        return loss, {"A": nx.matmul(dzr.T, hr), "P": dpv[:n], "V": dpv[n:], "Q": nx.matmul(gq.T, hr)}

    def __call__(self, params: Params, l2: float) -> tuple[np.ndarray, Params]:
        k_n = params["A"].shape[0]
        losses = np.empty(k_n)
        grads: dict[str, list[np.ndarray]] = {name: [] for name in params}
        for k in range(k_n):
            losses[k], g = self.one(params["A"][k], params["P"][k], params["V"][k], params["Q"][k])
            for name in params:
                grads[name].append(g[name])
        pen, dpen = _penalty(params, l2)
        return losses + pen, {name: np.stack(v) + dpen[name] for name, v in grads.items()}


def recurrent_loss_grad(params: Params, blocks: TrainingBlocks | Sequence[TrainingBlocks],
                        l2: float) -> tuple[np.ndarray, Params]:
    """Loss (K,) and BPTT gradients of K learned recurrent writers.

    h_{i+1} = tanh(A h_i + p_{a_i} + c_i v_{a_i}), h_0 = 0 per block; ŷ_i = sigmoid(q_{a_i}ᵀ h_i) (pre-update
    state); L = (1/E) Σ_e Σ_i ½(ŷ_i − y_i)² + (λ/2) Σ‖θ‖².
    """
    items = [blocks] if isinstance(blocks, TrainingBlocks) else list(blocks)
    if len(items) == 1:
        return _RecurrentProblem(items[0])(params, l2)
    parts = [_RecurrentProblem(b)({k: v[i:i + 1] for k, v in params.items()}, l2) for i, b in enumerate(items)]
    return np.concatenate([p[0] for p in parts]), {k: np.concatenate([p[1][k] for p in parts]) for k in params}


def adam(loss_grad: LossGrad, params: Params, settings: FitSettings = PAPER_FIT) -> tuple[Params, np.ndarray,
                                                                                      np.ndarray]:
    """Full-batch Adam on K models at once; returns (parameters, initial loss (K,), final loss (K,)).

    Each model's gradient is clipped to global norm ``clip_norm`` before the moment update."""
    with single_thread_blas():
        return _adam(loss_grad, params, settings)


def _adam(loss_grad: LossGrad, params: Params, settings: FitSettings) -> tuple[Params, np.ndarray, np.ndarray]:
    p = {k: v.copy() for k, v in params.items()}
    m = {k: np.zeros_like(v) for k, v in p.items()}
    v2 = {k: np.zeros_like(v) for k, v in p.items()}
    b1, b2 = settings.beta1, settings.beta2
    loss0 = None
    for t in range(1, settings.updates + 1):
        loss, g = loss_grad(p)
        if loss0 is None:
            loss0 = loss
        k_n = loss.shape[0]
        norm = np.sqrt(sum((gi.reshape(k_n, -1) ** 2).sum(axis=1) for gi in g.values()))
        coef = np.minimum(1.0, settings.clip_norm / (norm + 1e-6))
        lr_t = settings.learning_rate / (1.0 - b1 ** t)
        c2 = 1.0 - b2 ** t
        for name in p:
            gi = g[name] * coef.reshape((-1,) + (1,) * (g[name].ndim - 1))
            m[name] = b1 * m[name] + (1.0 - b1) * gi
            v2[name] = b2 * v2[name] + (1.0 - b2) * gi * gi
            p[name] = p[name] - lr_t * m[name] / (np.sqrt(v2[name] / c2) + settings.epsilon)
    final, _ = loss_grad(p)
    return p, (final if loss0 is None else loss0), final


@dataclass(frozen=True, eq=False)
class FittedWriter:
    """One frozen fit: its kind, objective, parameters, seed and training losses."""

    kind: str
    objective: str
    params: dict[str, np.ndarray]
    seed: int
    initial_loss: float
    loss: float
    settings: FitSettings = field(default=PAPER_FIT)

    def agent(self, labels: tuple[str, ...] = ARMS, name: str | None = None) -> Agent:
        """The frozen writer as a ReplayLens agent (exact array and per-record paths)."""
        p = self.params
        if self.kind == "associative":
            return associative_agent(p["P"], p["Q"], labels=labels, name=name or f"associative-{self.objective}")
        if self.kind == "additive":
            return additive_nuisance_agent(p["P"], p["Q"], labels=labels, name=name or "additive-nuisance")
        return recurrent_agent(p["A"], p["P"], p["V"], p["Q"], labels=labels, name=name or "learned-recurrent")


def _split(kind: str, objective: str, params: Params, seeds: Sequence[int], loss0: np.ndarray, loss: np.ndarray,
           settings: FitSettings) -> list[FittedWriter]:
    return [FittedWriter(kind, objective, {k: v[i].copy() for k, v in params.items()}, int(s), float(loss0[i]),
                         float(loss[i]), settings) for i, s in enumerate(seeds)]


def _as_list(blocks: TrainingBlocks | Sequence[TrainingBlocks], k: int) -> list[TrainingBlocks]:
    items = [blocks] if isinstance(blocks, TrainingBlocks) else list(blocks)
    if len(items) not in (1, k):
        raise ConfigError(f"give one training set or one per seed ({k}); got {len(items)}")
    return items


def fit_associative(blocks: TrainingBlocks | Sequence[TrainingBlocks], objective: str, seeds: Sequence[int],
                    settings: FitSettings = PAPER_FIT) -> list[FittedWriter]:
    """Fit the low-rank associative writer (P, Q ∈ R^{n×d}) with ``objective`` ``loo`` (selected-only,
    leave-one-out), ``prefix`` (selected-only, blocks' recorded order) or ``privileged`` (counterfactual
    future targets); one model per seed, on one shared training set or one per seed."""
    items = _as_list(blocks, len(seeds))
    prob = _AssociativeProblem([observations(b, objective) for b in items], additive=False)
    p0 = init_params("associative", seeds, items[0].n_labels, settings)
    p, l0, l1 = adam(lambda q: prob(q, settings.l2), p0, settings)
    return _split("associative", objective, p, seeds, l0, l1, settings)


def fit_additive(blocks: TrainingBlocks | Sequence[TrainingBlocks], seeds: Sequence[int],
                 settings: FitSettings = PAPER_FIT) -> list[FittedWriter]:
    """Fit the additive nuisance writer (P ∈ R^{n×d}, Q ∈ R^{n×(d+1)}) with the selected-only LOO objective."""
    items = _as_list(blocks, len(seeds))
    prob = _AssociativeProblem([observations(b, "additive-loo") for b in items], additive=True)
    p0 = init_params("additive", seeds, items[0].n_labels, settings)
    p, l0, l1 = adam(lambda q: prob(q, settings.l2), p0, settings)
    return _split("additive", "additive-loo", p, seeds, l0, l1, settings)


def fit_recurrent(blocks: TrainingBlocks | Sequence[TrainingBlocks], seeds: Sequence[int],
                  settings: FitSettings = PAPER_FIT) -> list[FittedWriter]:
    """Fit the learned recurrent writer on blocks in their recorded (chronological) order."""
    items = _as_list(blocks, len(seeds))
    out: list[FittedWriter] = []
    for i, s in enumerate(seeds):  # one model at a time: its arrays stay cache-resident (faster than a batch)
        prob = _RecurrentProblem(items[i if len(items) > 1 else 0])
        p0 = init_params("recurrent", [s], items[0].n_labels, settings)
        p, l0, l1 = adam(functools.partial(prob, l2=settings.l2), p0, settings)
        out += _split("recurrent", "prefix-recurrent", p, [s], l0, l1, settings)
    return out
