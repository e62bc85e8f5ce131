"""The update laws of the operator studies (paper L1364–1585; partA §1.2–§1.6).

Notation: ℓ the supplied producer label (its coordinate), c = c(u) = u − ½, j the 0-based position of
the record in its block, e_ℓ the basis vector of ℓ.  φ(ℓ, u) = b_ℓ + c v_ℓ and
ψ(ℓ, u) = sin(w + 0.15 w²) with w = b_ℓ + c v_ℓ (the blind-challenge feature map).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import ConfigError
from ._core import UpdateLaw, _frozen, linear

__all__ = [
    "AffineLaw",
    "BilinearLaw",
    "FeatureSumLaw",
    "KeyOrderLaw",
    "KeyValueLaw",
    "NonlinearRecurrentLaw",
    "NonlinearSumLaw",
    "PositionMixedLaw",
    "SecondOrderLaw",
    "ValueOrderLaw",
    "psi",
]


def _onehot(lab: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros((lab.shape[0], n))
    out[np.arange(lab.shape[0]), lab] = 1.0
    return out


def psi(b: np.ndarray, v: np.ndarray, lab: np.ndarray, c: np.ndarray) -> np.ndarray:
    """ψ(ℓ, u) = sin(w + 0.15 w²), w = b_ℓ + c(u) v_ℓ (elementwise), for (N,) labels: (N, d)."""
    w = b[lab] + c[:, None] * v[lab]
    return np.sin(w + 0.15 * (w * w))


def _freeze_law(law: Any, arrays: Mapping[str, int], *, summed: bool) -> None:
    """Freeze ``law``'s array fields (name → ndim), then set its state width (columns of ``b``) and
    whether its state is a sum of per-record increments."""
    for name, nd in arrays.items():
        object.__setattr__(law, name, _frozen(getattr(law, name), name, nd))
    object.__setattr__(law, "dim", int(law.b.shape[1]))
    object.__setattr__(law, "summed", summed)


@dataclass(frozen=True, eq=False)
class ValueOrderLaw(UpdateLaw):
    """U_vo(s, ℓ, u) = d·s + γ c(u) v: label-free (the label is ignored), order-sensitive through d."""

    d: float
    gamma: float
    direction: np.ndarray

    def __post_init__(self) -> None:
        object.__setattr__(self, "direction", _frozen(self.direction, "direction", 1))
        object.__setattr__(self, "dim", int(self.direction.shape[0]))
        object.__setattr__(self, "summed", False)

    def step(self, g: np.ndarray, lab: np.ndarray, c: np.ndarray, pos: np.ndarray) -> np.ndarray:
        return self.d * g + (self.gamma * c)[:, None] * self.direction[None, :]

    def params(self) -> dict[str, Any]:
        return {"d": self.d, "gamma": self.gamma, "direction": self.direction.tolist()}


@dataclass(frozen=True, eq=False)
class KeyValueLaw(UpdateLaw):
    """U_kv(s, ℓ, u) = s + (κ + γ c(u)) e_ℓ (commutative: summed exactly)."""

    kappa: float
    gamma: float
    n: int = 4

    def __post_init__(self) -> None:
        object.__setattr__(self, "dim", self.n)
        object.__setattr__(self, "summed", True)

    def increment(self, lab: np.ndarray, c: np.ndarray, pos: np.ndarray) -> np.ndarray:
        return _onehot(lab, self.n) * (self.kappa + self.gamma * c)[:, None]

    def params(self) -> dict[str, Any]:
        return {"kappa": self.kappa, "gamma": self.gamma}


@dataclass(frozen=True, eq=False)
class KeyOrderLaw(UpdateLaw):
    """U_ko(s, ℓ, u) = d·s + (κ + γ c(u)) e_ℓ (recurrent in slot order)."""

    d: float
    kappa: float
    gamma: float
    n: int = 4

    def __post_init__(self) -> None:
        object.__setattr__(self, "dim", self.n)
        object.__setattr__(self, "summed", False)

    def step(self, g: np.ndarray, lab: np.ndarray, c: np.ndarray, pos: np.ndarray) -> np.ndarray:
        return self.d * g + _onehot(lab, self.n) * (self.kappa + self.gamma * c)[:, None]

    def params(self) -> dict[str, Any]:
        return {"d": self.d, "kappa": self.kappa, "gamma": self.gamma}


@dataclass(frozen=True, eq=False)
class AffineLaw(UpdateLaw):
    """s ← s + b_ℓ + c(u) v_ℓ (``a`` is None: commutative sum) or s ← A s + b_ℓ + c(u) v_ℓ (affine recurrent)."""

    b: np.ndarray
    v: np.ndarray
    a: np.ndarray | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "b", _frozen(self.b, "b", 2))
        object.__setattr__(self, "v", _frozen(self.v, "v", 2))
        if self.b.shape != self.v.shape:
            raise ConfigError(f"b and v must have the same shape; got {self.b.shape} and {self.v.shape}")
        object.__setattr__(self, "dim", int(self.b.shape[1]))
        object.__setattr__(self, "summed", self.a is None)
        if self.a is not None:
            object.__setattr__(self, "a", _frozen(self.a, "A", 2))

    def increment(self, lab: np.ndarray, c: np.ndarray, pos: np.ndarray) -> np.ndarray:
        return self.b[lab] + c[:, None] * self.v[lab]

    def step(self, g: np.ndarray, lab: np.ndarray, c: np.ndarray, pos: np.ndarray) -> np.ndarray:
        assert self.a is not None
        return linear(g, self.a) + self.b[lab] + c[:, None] * self.v[lab]


@dataclass(frozen=True, eq=False)
class NonlinearSumLaw(UpdateLaw):
    """z ← z + φ(ℓ, u), exposed state s = (z, tanh z) ∈ ℝ^{2d} (nonlinear coordinates of an order-free sum)."""

    b: np.ndarray
    v: np.ndarray

    def __post_init__(self) -> None:
        _freeze_law(self, {"b": 2, "v": 2}, summed=True)

    @property
    def exposed_dim(self) -> int:
        return 2 * self.dim

    def increment(self, lab: np.ndarray, c: np.ndarray, pos: np.ndarray) -> np.ndarray:
        return self.b[lab] + c[:, None] * self.v[lab]

    def expose(self, g: np.ndarray) -> np.ndarray:
        return np.concatenate([g, np.tanh(g)], axis=1)


@dataclass(frozen=True, eq=False)
class NonlinearRecurrentLaw(UpdateLaw):
    """s ← tanh(A s + φ(ℓ, u) + ε s ⊙ (B s)), ε = 0.08 (state-dependent interaction)."""

    b: np.ndarray
    v: np.ndarray
    a: np.ndarray
    bmat: np.ndarray
    eps: float = 0.08

    def __post_init__(self) -> None:
        _freeze_law(self, {"b": 2, "v": 2, "a": 2, "bmat": 2}, summed=False)

    def step(self, g: np.ndarray, lab: np.ndarray, c: np.ndarray, pos: np.ndarray) -> np.ndarray:
        phi = self.b[lab] + c[:, None] * self.v[lab]
        return np.tanh(linear(g, self.a) + phi + self.eps * (g * linear(g, self.bmat)))


@dataclass(frozen=True, eq=False)
class FeatureSumLaw(UpdateLaw):
    """Blind law 1: g ← g + ψ(ℓ, u); exposed only after the prefix as s = tanh(M g + β)."""

    b: np.ndarray
    v: np.ndarray
    m: np.ndarray
    bias: np.ndarray

    def __post_init__(self) -> None:
        _freeze_law(self, {"b": 2, "v": 2, "m": 2, "bias": 1}, summed=True)

    @property
    def exposed_dim(self) -> int:
        return int(self.m.shape[0])

    def increment(self, lab: np.ndarray, c: np.ndarray, pos: np.ndarray) -> np.ndarray:
        return psi(self.b, self.v, lab, c)

    def expose(self, g: np.ndarray) -> np.ndarray:
        return np.tanh(linear(g, self.m) + self.bias[None, :])


@dataclass(frozen=True, eq=False)
class SecondOrderLaw(UpdateLaw):
    """Blind law 2: G ← G + ψψᵀ (kept as vech G, the upper triangle row by row); s = tanh(M vech(G) + β)."""

    b: np.ndarray
    v: np.ndarray
    m: np.ndarray
    bias: np.ndarray
    _rows: np.ndarray = field(init=False, repr=False)
    _cols: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        for name, nd in (("b", 2), ("v", 2), ("m", 2), ("bias", 1)):
            object.__setattr__(self, name, _frozen(getattr(self, name), name, nd))
        d = int(self.b.shape[1])
        object.__setattr__(self, "dim", d * (d + 1) // 2)
        object.__setattr__(self, "summed", True)
        rows, cols = np.triu_indices(d)
        object.__setattr__(self, "_rows", rows)
        object.__setattr__(self, "_cols", cols)

    @property
    def exposed_dim(self) -> int:
        return int(self.m.shape[0])

    def increment(self, lab: np.ndarray, c: np.ndarray, pos: np.ndarray) -> np.ndarray:
        p = psi(self.b, self.v, lab, c)
        return p[:, self._rows] * p[:, self._cols]

    def expose(self, g: np.ndarray) -> np.ndarray:
        return np.tanh(linear(g, self.m) + self.bias[None, :])


@dataclass(frozen=True, eq=False)
class BilinearLaw(UpdateLaw):
    """Blind law 3: h ← tanh(A h + ψ + ε ψ ⊙ (B h)), ε = 0.14."""

    b: np.ndarray
    v: np.ndarray
    a: np.ndarray
    bmat: np.ndarray
    eps: float = 0.14

    def __post_init__(self) -> None:
        _freeze_law(self, {"b": 2, "v": 2, "a": 2, "bmat": 2}, summed=False)

    def step(self, g: np.ndarray, lab: np.ndarray, c: np.ndarray, pos: np.ndarray) -> np.ndarray:
        p = psi(self.b, self.v, lab, c)
        return np.tanh(linear(g, self.a) + p + self.eps * (p * linear(g, self.bmat)))


@dataclass(frozen=True, eq=False)
class PositionMixedLaw(UpdateLaw):
    """Blind law 4: h ← h + W_{j mod 5} ψ (a position-dependent linear map; summed exactly)."""

    b: np.ndarray
    v: np.ndarray
    w: np.ndarray

    def __post_init__(self) -> None:
        _freeze_law(self, {"b": 2, "v": 2, "w": 3}, summed=True)

    def increment(self, lab: np.ndarray, c: np.ndarray, pos: np.ndarray) -> np.ndarray:
        p = psi(self.b, self.v, lab, c)
        out = np.zeros_like(p)
        k = pos % self.w.shape[0]
        for i in np.unique(k):
            sel = k == i
            out[sel] = linear(p[sel], self.w[int(i)])
        return out
