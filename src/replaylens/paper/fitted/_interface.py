"""Generic tanh RNN encoder with a future action–query readout (paper L1851–1878, spec partA §3.6).

State h_{t+1} = tanh(W h_t + p_{k_t} + (u_t − ½) v + b), h_0 = 0, h ∈ R^d (separate key input p_k
and utility input v); readout ŷ_{j,a} = sigmoid(r_{j,a}ᵀ h_T + c_{j,a}) for every fixed future query
j and arm a; the action for query j is the first-canonical argmax_a of r_{j,a}ᵀ h_T + c_{j,a}.
Objective: L = (1/E) Σ_e Σ_{j,a} ½(ŷ_{e,j,a} − y_{e,j,a})² + (λ/2) Σ‖θ‖² (sum inside the episode
mean, as in the other fitted objectives), fitted with the shared full-batch Adam (:func:`adam`).
K models (one per seed) share one Adam run; each model's loss and gradient use only its own slice.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ...errors import ConfigError
from ...rng import derive_rng
from .. import numerics as nx
from ._fit import PAPER_FIT, FitSettings, _sigmoid, adam

__all__ = ["INTERFACE_FIT", "InterfaceEpisodes", "InterfaceFit", "fit_interface", "init_interface",
           "interface_loss_grad", "interface_scores"]

INTERFACE_FIT = replace(PAPER_FIT, dim=16)
"""The fitted settings of spec §3 with the 16-dim state of the independent learned-interface encoder."""

Params = dict[str, np.ndarray]


@dataclass(frozen=True, eq=False)
class InterfaceEpisodes:
    """E episodes: keys (E, T) in 0..n−1, utilities (E, T) in [0, 1], future targets (E, J, n) or None."""

    keys: np.ndarray
    utilities: np.ndarray
    targets: np.ndarray | None
    n_keys: int

    def __post_init__(self) -> None:
        if self.keys.shape != self.utilities.shape or self.keys.ndim != 2:
            raise ConfigError("keys and utilities must be (episodes, slots) arrays of one shape")
        if self.keys.size and (self.keys.min() < 0 or self.keys.max() >= self.n_keys):
            raise ConfigError(f"keys must lie in 0..{self.n_keys - 1}")
        if self.targets is not None and (self.targets.ndim != 3 or self.targets.shape[0] != self.keys.shape[0]
                                         or self.targets.shape[2] != self.n_keys):
            raise ConfigError("targets must be an (episodes, queries, keys) array")


def _shapes(n: int, j: int, d: int) -> dict[str, tuple[int, ...]]:
    return {"W": (d, d), "P": (n, d), "v": (d,), "b": (d,), "R": (j, n, d), "c": (j, n)}


def init_interface(seeds: Sequence[int], n_keys: int, n_queries: int,
                   settings: FitSettings = INTERFACE_FIT) -> Params:
    """N(0, init_scale²) parameters of K encoders; model k from ``derive_rng(seeds[k], "fitted-init", "interface")``
    (parameters drawn in sorted name order)."""
    shapes = _shapes(n_keys, n_queries, settings.dim)
    out: dict[str, list[np.ndarray]] = {name: [] for name in shapes}
    for s in seeds:
        rng = derive_rng(int(s), "fitted-init", "interface")
        for name in sorted(shapes):
            out[name].append(settings.init_scale * rng.standard_normal(shapes[name]))
    return {name: np.stack(v) for name, v in out.items()}


def _states(params: Params, keys: np.ndarray, utilities: np.ndarray) -> np.ndarray:
    """All states H (K, T+1, E, d) of K encoders."""
    w, p, v, b = params["W"], params["P"], params["v"], params["b"]
    k_n, d = w.shape[0], w.shape[1]
    e_n, t_n = keys.shape
    c = utilities - 0.5
    x = p[:, keys.T] + c.T[None, :, :, None] * v[:, None, None, :] + b[:, None, None, :]   # (K, T, E, d)
    hs = np.zeros((k_n, t_n + 1, e_n, d))
    wt = np.ascontiguousarray(w.transpose(0, 2, 1))
    for t in range(t_n):
        hs[:, t + 1] = nx.tanh(nx.matmul(hs[:, t], wt) + x[:, t])
    return hs


def interface_scores(params: Params, keys: np.ndarray, utilities: np.ndarray) -> np.ndarray:
    """Raw readout scores r_{j,a}ᵀ h_T + c_{j,a}: (K, E, J, n) for K encoders (or (E, J, n) for 2-D W)."""
    single = params["W"].ndim == 2
    ps = {k: v[None] for k, v in params.items()} if single else params
    h_t = _states(ps, keys, utilities)[:, -1]                                  # (K, E, d)
    r = ps["R"]
    k_n, j_n, n, d = r.shape
    s = nx.matmul(h_t, r.reshape(k_n, j_n * n, d).transpose(0, 2, 1)).reshape(k_n, -1, j_n, n) + ps["c"][:, None]
    return s[0] if single else s


class _InterfaceProblem:
    """Precomputed designs of one training set (time-major rows t·E + e) and reusable work arrays."""

    def __init__(self, episodes: InterfaceEpisodes) -> None:
        if episodes.targets is None:
            raise ConfigError("fitting needs future targets")
        self.e_n, self.t_n = episodes.keys.shape
        self.n = episodes.n_keys
        self.j_n = episodes.targets.shape[1]
        oh = np.eye(self.n)[episodes.keys.T.reshape(-1)]                     # (T·E, n)
        c = (episodes.utilities.T - 0.5).reshape(-1, 1)
        self.design = np.ascontiguousarray(np.concatenate([oh, c, np.ones_like(c)], axis=1))   # [e_k, c, 1]
        self.design_t = np.ascontiguousarray(self.design.T)
        self.y = np.ascontiguousarray(episodes.targets.reshape(self.e_n, -1))    # (E, J·n)
        self._bufs: dict[int, dict[str, np.ndarray]] = {}

    def _buf(self, d: int) -> dict[str, np.ndarray]:
        if d not in self._bufs:
            t_n, e_n, m = self.t_n, self.e_n, self.j_n * self.n
            self._bufs[d] = {"hs": np.zeros((t_n + 1, e_n, d)), "dz": np.empty((t_n, e_n, d)),
                             "x": np.empty((t_n * e_n, d)), "s": np.empty((e_n, m)), "dh": np.empty((e_n, d)),
                             "deriv": np.empty((t_n, e_n, d))}
        return self._bufs[d]

    def one(self, w: np.ndarray, p: np.ndarray, v: np.ndarray, b: np.ndarray, r: np.ndarray,
            c: np.ndarray) -> tuple[float, Params]:
        """Data loss and gradients of one model (unbatched arrays)."""
        t_n, e_n, d = self.t_n, self.e_n, w.shape[0]
        bf = self._buf(d)
        hs, dz, dh = bf["hs"], bf["dz"], bf["dh"]
        x = nx.matmul(self.design, np.concatenate([p, v[None], b[None]], axis=0), out=bf["x"]).reshape(t_n, e_n, d)
        wt = np.ascontiguousarray(w.T)
        for t in range(t_n):
            z = nx.matmul(hs[t], wt, out=hs[t + 1])
            z += x[t]
            nx.tanh(z, out=z)
        h_t = hs[t_n]
        rm = r.reshape(-1, d)                                                 # (J·n, d)
        s = nx.matmul(h_t, rm.T, out=bf["s"])
        s += c.reshape(-1)
        yhat = _sigmoid(s)
        err = yhat - self.y
        loss = 0.5 * nx.dot(err, err) / e_n
        g = err * yhat
        g *= 1.0 - yhat
        g /= e_n                                                              # (E, J·n)
        grads: Params = {"R": nx.matmul(g.T, h_t).reshape(r.shape), "c": g.sum(axis=0).reshape(c.shape)}
        nx.matmul(g, rm, out=dh)
        deriv = np.multiply(hs[1:], hs[1:], out=bf["deriv"])
        np.subtract(1.0, deriv, out=deriv)
        for t in range(t_n - 1, -1, -1):
            np.multiply(dh, deriv[t], out=dz[t])
            nx.matmul(dz[t], w, out=dh)
        dzf = dz.reshape(-1, d)
        grads["W"] = nx.matmul(dzf.T, hs[:t_n].reshape(-1, d))
        dx = nx.matmul(self.design_t, dzf)                                          # (n + 2, d)
        grads["P"], grads["v"], grads["b"] = dx[:self.n], dx[self.n], dx[self.n + 1]
        return loss, grads

    def __call__(self, params: Params, l2: float) -> tuple[np.ndarray, Params]:
        k_n = params["W"].shape[0]
        losses = np.empty(k_n)
        grads: dict[str, list[np.ndarray]] = {name: [] for name in params}
        for k in range(k_n):
            lk, gk = self.one(*(params[nm][k] for nm in ("W", "P", "v", "b", "R", "c")))
            losses[k] = lk + sum(0.5 * l2 * nx.dot(params[nm][k], params[nm][k]) for nm in params)
            for nm in params:
                grads[nm].append(gk[nm] + l2 * params[nm][k])
        return losses, {nm: np.stack(v) for nm, v in grads.items()}


def interface_loss_grad(params: Params, episodes: InterfaceEpisodes, l2: float) -> tuple[np.ndarray, Params]:
    """Loss (K,) and BPTT gradients of K encoders on the same training episodes:
    L = (1/E) Σ_e Σ_{j,a} ½(sigmoid(r_{j,a}ᵀh_T + c_{j,a}) − y_{e,j,a})² + (λ/2) Σ‖θ‖²."""
    return _InterfaceProblem(episodes)(params, l2)


@dataclass(frozen=True, eq=False)
class InterfaceFit:
    """One frozen encoder: parameters, seed and training losses."""

    params: dict[str, np.ndarray]
    seed: int
    initial_loss: float
    loss: float
    settings: FitSettings = field(default=INTERFACE_FIT)

    def scores(self, keys: np.ndarray, utilities: np.ndarray) -> np.ndarray:
        """Readout scores (E, J, n) after reading each episode's key–utility sequence in slot order."""
        return interface_scores(self.params, keys, utilities)

    def actions(self, keys: np.ndarray, utilities: np.ndarray) -> np.ndarray:
        """First-canonical argmax actions (E, J)."""
        return np.argmax(self.scores(keys, utilities), axis=-1)


def fit_interface(episodes: InterfaceEpisodes, seeds: Sequence[int],
                  settings: FitSettings = INTERFACE_FIT) -> list[InterfaceFit]:
    """Fit one encoder per seed with full-batch Adam on the per-arm future-utility MSE."""
    if episodes.targets is None:
        raise ConfigError("fitting needs future targets")
    prob = _InterfaceProblem(episodes)
    out: list[InterfaceFit] = []
    for s in seeds:  # one model at a time: its work arrays stay cache-resident
        p0 = init_interface([s], episodes.n_keys, episodes.targets.shape[1], settings)
        p, l0, l1 = adam(functools.partial(prob, l2=settings.l2), p0, settings)
        out.append(InterfaceFit({k: v[0].copy() for k, v in p.items()}, int(s), float(l0[0]), float(l1[0]), settings))
    return out
