"""Full-batch training of the additive and recurrent endpoint writers (numpy, hand-written BPTT).

Paper settings (L772, core spec §10.3): mean binary cross-entropy between sigmoid(s_a) and the soft
target over the sequences and the 4 keys; Adam (β₁ 0.9, β₂ 0.999, ε 1e-8), learning rate 0.015,
exactly 4,800 full-batch updates, no early stopping; ℓ2 coefficient 1e-4 in the form of the paper's one
written objective (eq. selected-only-loss: the per-sequence sum of the loss over the K keys averaged over
sequences, + (λ/2)·Σθ²; ``l2_form="paper"``, docs/decisions.md issue 28; the spec's earlier reading
"mean BCE + 1e-4·Σθ²" is ``l2_form="sum"``); global gradient-norm cap 5 applied before the Adam moment
update; recurrent parameters i.i.d. N(0, 0.05²), additive readout N(0, 0.08²); recurrent restart offsets
{0, 1009, 2017, 3023} added to the fit's recurrent base seed, the restart with the lowest final training loss retained.

Speed: models are trained as one array computation with a leading model axis (restarts, and
restarts of several fits, in one batch).  Every per-model quantity is computed from that model's
slice only (per-slice BLAS calls, elementwise arithmetic, row reductions), so a model's parameters
do not depend on which other models share its batch (checked by the tests).  The recurrence keeps
its state as (model, feature, slot, sequence) so each step is one small matrix product per model
and the parameter gradient is one product per key over all of that key's slots.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import ConfigError
from ...inference import single_thread_blas
from ...rng import derive_rng
from .. import numerics as nx
from ._data import EndpointSequences

__all__ = [
    "PAPER_SETTINGS",
    "TrainSettings",
    "TrainedModel",
    "additive_loss_grad",
    "init_additive",
    "init_recurrent",
    "numerical_path",
    "recurrent_loss_grad",
    "train_additive_models",
    "train_recurrent_models",
]

Params = dict[str, np.ndarray]
RECURRENT_PARAMS = ("W", "P", "V", "Q")
ADDITIVE_PARAMS = ("Q",)


@dataclass(frozen=True)
class TrainSettings:
    """Optimizer and initialization settings; the defaults are the paper's (``PAPER_SETTINGS``)."""

    updates: int = 4800
    learning_rate: float = 0.015
    beta1: float = 0.9
    beta2: float = 0.999
    epsilon: float = 1e-8
    l2: float = 1e-4
    l2_form: str = "paper"
    """``"paper"``: the paper's written objective, K·(mean BCE) (per-sequence sum over the K keys, averaged
    over sequences) + (l2/2)·Σθ²; ``"sum"``: mean BCE + l2·Σθ² (the spec's REC, the reading before issue
    28); ``"half"``: mean BCE + (l2/2)·Σθ² (gradient term l2·θ)."""
    clip_norm: float = 5.0
    hidden: int = 16
    recurrent_init_scale: float = 0.05
    additive_init_scale: float = 0.08
    restart_offsets: tuple[int, ...] = (0, 1009, 2017, 3023)
    dtype: str = "float64"
    """Arithmetic of the training computation: ``"float64"`` (the pinned numerical path, issue 28) or
    ``"float32"`` (PyTorch's default precision, 2.4× faster in numpy; the reading before issue 28).  Frozen
    writers are always evaluated in float64."""

    def __post_init__(self) -> None:
        if isinstance(self.updates, bool) or not isinstance(self.updates, int) or self.updates < 0:
            raise ConfigError(f"updates must be a non-negative int; got {self.updates!r}")
        if self.l2_form not in ("paper", "sum", "half"):
            raise ConfigError(f"l2_form must be 'paper', 'sum' or 'half'; got {self.l2_form!r}")
        if self.dtype not in ("float64", "float32"):
            raise ConfigError(f"dtype must be 'float64' or 'float32'; got {self.dtype!r}")
        if not self.restart_offsets:
            raise ConfigError("restart_offsets must name at least one restart")
        if self.hidden < 1 or self.clip_norm <= 0 or self.learning_rate <= 0:
            raise ConfigError("hidden, clip_norm and learning_rate must be positive")

    @property
    def l2_grad_factor(self) -> float:
        """d/dθ of the penalty is ``l2_grad_factor·θ``."""
        return 2.0 * self.l2 if self.l2_form == "sum" else self.l2

    def data_scale(self, n_keys: int) -> float:
        """The data term's factor on the mean BCE: K under the written objective (a per-sequence sum over
        the K keys, averaged over sequences), 1 otherwise."""
        return float(n_keys) if self.l2_form == "paper" else 1.0

    def penalty(self, params: Mapping[str, np.ndarray], n_models: int | None = None) -> np.ndarray:
        """The ℓ2 penalty per model (leading axis) or of one model (``n_models=None``)."""
        coef = self.l2 if self.l2_form == "sum" else self.l2 / 2.0  # "paper" and "half": (λ/2)·Σθ²
        if n_models is None:
            return np.asarray(coef * sum(float(np.sum(np.square(np.asarray(p, dtype=np.float64))))
                                         for p in params.values()))
        tot = np.zeros(n_models)
        for p in params.values():
            tot += np.square(np.asarray(p, dtype=np.float64)).reshape(n_models, -1).sum(axis=1)
        return coef * tot


PAPER_SETTINGS = TrainSettings()


@dataclass(frozen=True, eq=False)
class TrainedModel:
    """One trained (frozen) writer candidate."""

    kind: str
    """``"additive"`` or ``"recurrent"``."""
    params: Mapping[str, np.ndarray]
    """Read-only float64 arrays: additive ``Q`` (K, K); recurrent ``W`` (H, H), ``P``, ``V``, ``Q`` (K, H)."""
    init_seed: int
    final_bce: float
    """Mean BCE at the frozen (final) parameters."""
    final_loss: float
    """Final training loss = final BCE + ℓ2 penalty (the restart-selection criterion)."""
    trace: np.ndarray
    """BCE before each update, shape (updates,)."""
    seconds: float
    """Wall time of the batch that trained it, divided by the batch's models."""
    meta: Mapping[str, Any] = field(default_factory=dict)


def numerical_path() -> str:
    """The BLAS library, kernel and thread count a fit runs under (inside :func:`single_thread_blas`).

    On the pinned path (:mod:`replaylens.paper.numerics`, the default) the fit uses no BLAS and its label says
    so.  On the numpy/BLAS path a chaotic fit's bytes depend on the BLAS kernel (float64 included: OpenBLAS's
    Haswell and Sandybridge kernels give different parameters after 150 updates) and on numpy's SIMD dispatch
    (docs/decisions.md, issue 28)."""
    if nx.is_pinned():
        return nx.path_label()
    try:
        tpc = importlib.import_module("threadpoolctl")
    except ImportError:
        return "BLAS unknown (threadpoolctl not installed)"
    with single_thread_blas():
        info = [i for i in tpc.threadpool_info() if i.get("user_api") == "blas"]
    if not info:
        return "BLAS unknown"
    b = info[0]
    return (f"{b.get('internal_api')} {b.get('version')} kernel {b.get('architecture')}, "
            f"{b.get('num_threads')} thread(s)")


# ---------------------------------------------------------------------------------------------- init


def init_recurrent(rng: np.random.Generator, n_keys: int = 4, hidden: int = 16, scale: float = 0.05) -> Params:
    """W (H, H), P, V, Q (K, H) i.i.d. N(0, scale²), drawn in that order."""
    return {"W": rng.normal(0.0, scale, (hidden, hidden)), "P": rng.normal(0.0, scale, (n_keys, hidden)),
            "V": rng.normal(0.0, scale, (n_keys, hidden)), "Q": rng.normal(0.0, scale, (n_keys, hidden))}


def init_additive(rng: np.random.Generator, n_keys: int = 4, scale: float = 0.08) -> Params:
    """The additive readout Q (K, K), i.i.d. N(0, scale²)."""
    return {"Q": rng.normal(0.0, scale, (n_keys, n_keys))}


def _init_seed_rng(seed: int, kind: str) -> np.random.Generator:
    return derive_rng(int(seed), "learned-pair", f"{kind}-init")


# ---------------------------------------------------------------------------------------------- losses


def _sigmoid(s: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + nx.tanh(0.5 * s))


def _bce_rows(s: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Mean BCE(sigmoid(s), y) per model for (R, K, N) scores: softplus(s) − y·s, averaged."""
    r = s.shape[0]
    return (nx.softplus(s) - y * s).reshape(r, -1).mean(axis=1, dtype=np.float64)


class _RecurrentBatch:
    """Buffers and data of R recurrent models trained on sequences with one shared key order."""

    def __init__(self, keys: np.ndarray, utilities: np.ndarray, targets: np.ndarray, hidden: int,
                 dtype: np.dtype[Any]) -> None:
        r, n, t = utilities.shape
        h = hidden
        self.r, self.n, self.t, self.h, self.k = r, n, t, h, targets.shape[1]
        self.keys = [int(k) for k in keys]
        self.dtype = dtype
        # Z[:, :, t, :] is step t's input column block: rows 0..H−1 the state h_t (h_0 = 0), row H a
        # constant 1 (carries p_k), row H+1 the centered utility c_t = u_t − ½ (carries v_k).
        self.z = np.zeros((r, h + 2, t, n), dtype=dtype)
        self.z[:, h] = 1.0
        self.z[:, h + 1] = (utilities - 0.5).transpose(0, 2, 1)
        self.y = targets.astype(dtype)
        self.h_last = np.empty((r, h, n), dtype=dtype)
        self.a = np.empty((r, h, n), dtype=dtype)
        self.da = np.empty((r, h, t, n), dtype=dtype)
        self.g = np.empty((r, h, n), dtype=dtype)
        self.dh = np.empty((r, h, n), dtype=dtype)
        groups: list[tuple[int, slice | np.ndarray]] = []
        for k in sorted(set(self.keys)):
            idx = np.flatnonzero(np.asarray(self.keys) == k)
            contiguous = idx[-1] - idx[0] + 1 == idx.size
            groups.append((k, slice(int(idx[0]), int(idx[-1]) + 1) if contiguous else idx))
        self.groups = groups

    def state(self, step: int) -> np.ndarray:
        """h_step for step = 1..T, shape (R, H, N) (a view)."""
        return self.h_last if step == self.t else self.z[:, : self.h, step, :]

    def forward(self, p: Params) -> np.ndarray:
        """Run the recurrence; returns the scores s (R, K, N)."""
        h, w = self.h, p["W"]
        k = p["P"].shape[1]
        theta = np.empty((k, self.r, h, h + 2), dtype=self.dtype)
        theta[..., :h] = w[None]
        theta[..., h] = p["P"].transpose(1, 0, 2)
        theta[..., h + 1] = p["V"].transpose(1, 0, 2)
        for t in range(self.t):
            th = theta[self.keys[t]]
            if t == 0:  # h_0 = 0: only p_k + c·v_k
                nx.matmul(th[:, :, h:], self.z[:, h:, 0, :], out=self.a)
            else:
                nx.matmul(th, self.z[:, :, t, :], out=self.a)
            nx.tanh(self.a, out=self.state(t + 1))
        return nx.matmul(p["Q"], self.h_last)

    def loss_grad(self, p: Params, need_grad: bool = True) -> tuple[np.ndarray, Params]:
        """Mean BCE per model and its gradient (BPTT through all T steps)."""
        s = self.forward(p)
        bce = _bce_rows(s, self.y)
        if not need_grad:
            return bce, {}
        h, r = self.h, self.r
        ds = (_sigmoid(s) - self.y) / (self.k * self.n)
        d_q = nx.matmul(ds, self.h_last.transpose(0, 2, 1))
        nx.matmul(p["Q"].transpose(0, 2, 1), ds, out=self.dh)
        w_t = np.ascontiguousarray(p["W"].transpose(0, 2, 1))
        for t in range(self.t - 1, -1, -1):
            hs = self.state(t + 1)
            np.multiply(hs, hs, out=self.g)
            np.subtract(1.0, self.g, out=self.g)
            np.multiply(self.dh, self.g, out=self.da[:, :, t, :])
            if t:
                nx.matmul(w_t, self.da[:, :, t, :], out=self.dh)
        d_w = np.zeros_like(p["W"])
        d_p = np.zeros_like(p["P"])
        d_v = np.zeros_like(p["V"])
        for k, sl in self.groups:
            da = self.da[:, :, sl, :].reshape(r, h, -1)
            z = self.z[:, :, sl, :].reshape(r, h + 2, -1)
            d = nx.matmul(da, z.transpose(0, 2, 1))
            d_w += d[..., :h]
            d_p[:, k] = d[..., h]
            d_v[:, k] = d[..., h + 1]
        return bce, {"W": d_w, "P": d_p, "V": d_v, "Q": d_q}


class _AdditiveBatch:
    """R additive readouts over fixed key-sum features."""

    def __init__(self, features: np.ndarray, targets: np.ndarray, dtype: np.dtype[Any]) -> None:
        self.f = features.transpose(0, 2, 1).astype(dtype)  # (R, K, N)
        self.y = targets.astype(dtype)
        self.k, self.n = targets.shape[1], targets.shape[2]

    def loss_grad(self, p: Params, need_grad: bool = True) -> tuple[np.ndarray, Params]:
        s = nx.matmul(p["Q"], self.f)
        bce = _bce_rows(s, self.y)
        if not need_grad:
            return bce, {}
        ds = (_sigmoid(s) - self.y) / (self.k * self.n)
        return bce, {"Q": nx.matmul(ds, self.f.transpose(0, 2, 1))}


# ---------------------------------------------------------------------------------------------- Adam


def _adam(params: Params, loss_grad: Callable[[Params], tuple[np.ndarray, Params]], s: TrainSettings,
          n_models: int, data_scale: float = 1.0) -> np.ndarray:
    """``s.updates`` Adam steps in place (torch conventions); returns the mean-BCE trace (R, updates).

    ``loss_grad`` gives the mean BCE and its gradient; the objective differentiated is
    ``data_scale``·(mean BCE) + the penalty of ``s``."""
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v2 = {k: np.zeros_like(v) for k, v in params.items()}
    trace = np.empty((n_models, s.updates))
    lam = s.l2_grad_factor
    for it in range(1, s.updates + 1):
        bce, grads = loss_grad(params)
        trace[:, it - 1] = bce
        sq = np.zeros(n_models)
        for k, g in grads.items():
            if data_scale != 1.0:
                g *= data_scale
            g += lam * params[k]
            sq += np.square(g).reshape(n_models, -1).sum(axis=1, dtype=np.float64)
        coef = np.minimum(1.0, s.clip_norm / (np.sqrt(sq) + 1e-6))
        step = s.learning_rate / (1.0 - s.beta1**it)
        root = np.sqrt(1.0 - s.beta2**it)
        for k, g in grads.items():
            g *= coef.reshape((n_models,) + (1,) * (g.ndim - 1)).astype(g.dtype)
            m[k] *= s.beta1
            m[k] += (1.0 - s.beta1) * g
            v2[k] *= s.beta2
            v2[k] += (1.0 - s.beta2) * (g * g)
            params[k] -= step * m[k] / (np.sqrt(v2[k]) / root + s.epsilon)
    return trace


def _stack(params: Sequence[Params], names: tuple[str, ...], dtype: np.dtype[Any]) -> Params:
    return {k: np.stack([np.asarray(p[k], dtype=np.float64) for p in params]).astype(dtype) for k in names}


def _frozen(a: np.ndarray) -> np.ndarray:
    out = np.array(a, dtype=np.float64)
    out.setflags(write=False)
    return out


def _finish(kind: str, params: Params, batch: _RecurrentBatch | _AdditiveBatch, trace: np.ndarray,
            seeds: Sequence[int], s: TrainSettings, seconds: float) -> list[TrainedModel]:
    n = len(seeds)
    bce, _ = batch.loss_grad(params, need_grad=False)
    loss = s.data_scale(batch.k) * bce + s.penalty(params, n)
    return [TrainedModel(kind, {k: _frozen(v[i]) for k, v in params.items()}, int(seeds[i]), float(bce[i]),
                         float(loss[i]), _frozen(trace[i]), seconds / n,
                         {"updates": s.updates, "dtype": s.dtype, "batch_models": n}) for i in range(n)]


def _check_datasets(datasets: Sequence[EndpointSequences], seeds: Sequence[int]) -> None:
    if len(datasets) != len(seeds) or not datasets:
        raise ConfigError("give one training set per model (and at least one)")
    first = datasets[0]
    for d in datasets:
        if d.keys.shape != first.keys.shape or d.n_keys != first.n_keys:
            raise ConfigError("all models of a batch need training sets of one shape")


def train_recurrent_models(datasets: Sequence[EndpointSequences], init_seeds: Sequence[int],
                           settings: TrainSettings = PAPER_SETTINGS) -> list[TrainedModel]:
    """Train one recurrent writer per (training set, init seed) in one batched computation.

    Every training sequence must present the keys in one shared slot order (the paper's fixed source
    order).  Initialization: :func:`init_recurrent` from ``derive_rng(seed, "learned-pair",
    "recurrent-init")``.
    """
    _check_datasets(datasets, init_seeds)
    keys = datasets[0].keys[0]
    for d in datasets:
        if not np.array_equal(d.keys, np.broadcast_to(keys, d.keys.shape)):
            raise ConfigError("recurrent training needs one shared key order (the fixed source order)")
    dt = np.dtype(settings.dtype)
    start = time.perf_counter()
    inits = [init_recurrent(_init_seed_rng(s, "recurrent"), datasets[0].n_keys, settings.hidden,
                            settings.recurrent_init_scale) for s in init_seeds]
    params = _stack(inits, RECURRENT_PARAMS, dt)
    batch = _RecurrentBatch(keys, np.stack([d.utilities for d in datasets]),
                            np.stack([d.soft_targets().T for d in datasets]), settings.hidden, dt)
    with single_thread_blas():
        trace = _adam(params, batch.loss_grad, settings, len(datasets), settings.data_scale(batch.k))
        return _finish("recurrent", params, batch, trace, init_seeds, settings, time.perf_counter() - start)


def train_additive_models(datasets: Sequence[EndpointSequences], init_seeds: Sequence[int],
                          settings: TrainSettings = PAPER_SETTINGS) -> list[TrainedModel]:
    """Train one additive readout per (training set, init seed), batched like the recurrent writers."""
    _check_datasets(datasets, init_seeds)
    dt = np.dtype(settings.dtype)
    start = time.perf_counter()
    inits = [init_additive(_init_seed_rng(s, "additive"), d.n_keys, settings.additive_init_scale)
             for s, d in zip(init_seeds, datasets, strict=True)]
    params = _stack(inits, ADDITIVE_PARAMS, dt)
    batch = _AdditiveBatch(np.stack([d.centered_sums() for d in datasets]),
                           np.stack([d.soft_targets().T for d in datasets]), dt)
    with single_thread_blas():
        trace = _adam(params, batch.loss_grad, settings, len(datasets), settings.data_scale(batch.k))
        return _finish("additive", params, batch, trace, init_seeds, settings, time.perf_counter() - start)


# ---------------------------------------------------------------------------------------------- single model


def recurrent_loss_grad(params: Mapping[str, np.ndarray], data: EndpointSequences,
                        settings: TrainSettings = PAPER_SETTINGS) -> tuple[float, float, Params]:
    """(training loss, BCE, gradient of the loss) of one recurrent writer, in float64.

    The loss is the data term (``settings.data_scale``·mean BCE) plus the ℓ2 penalty of ``settings``; this is
    exactly what each training update differentiates (before clipping), exposed for finite-difference checks.
    """
    keys = data.keys[0]
    if not np.array_equal(data.keys, np.broadcast_to(keys, data.keys.shape)):
        raise ConfigError("recurrent_loss_grad needs one shared key order")
    p = {k: np.asarray(params[k], dtype=np.float64)[None].copy() for k in RECURRENT_PARAMS}
    batch = _RecurrentBatch(keys, data.utilities[None], data.soft_targets().T[None],
                            p["W"].shape[1], np.dtype(np.float64))
    bce, g = batch.loss_grad(p)
    lam, sc = settings.l2_grad_factor, settings.data_scale(batch.k)
    grads = {k: sc * g[k][0] + lam * p[k][0] for k in RECURRENT_PARAMS}
    loss = sc * float(bce[0]) + float(settings.penalty({k: v[0] for k, v in p.items()}))
    return loss, float(bce[0]), grads


def additive_loss_grad(params: Mapping[str, np.ndarray], data: EndpointSequences,
                       settings: TrainSettings = PAPER_SETTINGS) -> tuple[float, float, Params]:
    """(training loss, BCE, gradient of the loss) of one additive readout, in float64."""
    q = np.asarray(params["Q"], dtype=np.float64)[None].copy()
    batch = _AdditiveBatch(data.centered_sums()[None], data.soft_targets().T[None], np.dtype(np.float64))
    bce, g = batch.loss_grad({"Q": q})
    sc = settings.data_scale(batch.k)
    loss = sc * float(bce[0]) + float(settings.penalty({"Q": q[0]}))
    return loss, float(bce[0]), {"Q": sc * g["Q"][0] + settings.l2_grad_factor * q[0]}
