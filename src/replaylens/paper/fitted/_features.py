"""Feature tables of the continuous and fitted writers: fixed (fitted) or drawn per replicate stream.

A feature source gives, for a stream, the producer features ψ(φ(a)) (one row per canonical label,
what the writer adds to its state) and the future-action query features (one row per label, what
the policy scores the state with).  Fitted writers share one table across streams; the dense and
cross-namespace controls draw theirs per replicate from a recorded seed (paper L1590–1650).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ...errors import ConfigError
from ...rng import derive_rng
from .. import numerics as nx

__all__ = ["FeatureSource", "FixedFeatures", "StreamFeatures", "haar_orthogonal", "unit_vectors"]


def unit_vectors(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    """``n`` i.i.d. vectors uniform on the unit sphere of R^dim (normalized Gaussians)."""
    g = rng.standard_normal((n, dim))
    return g / np.linalg.norm(g, axis=1, keepdims=True)


def haar_orthogonal(rng: np.random.Generator, dim: int) -> np.ndarray:
    """A Haar-distributed orthogonal matrix (QR of a Gaussian matrix with the sign fix)."""
    q, r = nx.qr(rng.standard_normal((dim, dim)))
    return q * np.where(np.diag(r) < 0, -1.0, 1.0)[None, :]


class FeatureSource(Protocol):
    """Producer and query features of one stream, rows in the order of ``labels``."""

    @property
    def labels(self) -> tuple[str, ...]: ...

    @property
    def state_dim(self) -> int: ...

    def producer(self, stream: str) -> np.ndarray: ...

    def query(self, stream: str) -> np.ndarray: ...


def _frozen(a: np.ndarray) -> np.ndarray:
    out = np.array(a, dtype=np.float64, copy=True)
    out.setflags(write=False)
    return out


@dataclass(frozen=True, eq=False)
class FixedFeatures:
    """One frozen table for every stream (fitted writers): ``P`` (n, d_p) producer, ``Q`` (n, d) query."""

    labels: tuple[str, ...]
    P: np.ndarray
    Q: np.ndarray

    def __post_init__(self) -> None:
        n = len(self.labels)
        if self.P.ndim != 2 or self.Q.ndim != 2 or self.P.shape[0] != n or self.Q.shape[0] != n:
            raise ConfigError(f"feature tables must have one row per label ({n}); got P {self.P.shape}, "
                              f"Q {self.Q.shape}")
        if not (np.isfinite(self.P).all() and np.isfinite(self.Q).all()):
            raise ConfigError("feature tables must be finite")
        object.__setattr__(self, "P", _frozen(self.P))
        object.__setattr__(self, "Q", _frozen(self.Q))

    @property
    def state_dim(self) -> int:
        return int(self.Q.shape[1])

    def producer(self, stream: str) -> np.ndarray:
        return self.P

    def query(self, stream: str) -> np.ndarray:
        return self.Q


@dataclass(frozen=True, eq=False)
class StreamFeatures:
    """Unit features drawn per replicate stream from ``derive_rng(seed, role, stream)``.

    ``binding=False`` (dense control): e_a i.i.d. uniform on the unit sphere of R^dim, used both to
    write and to read.  ``binding=True`` (cross-namespace control): action features q_a uniform on
    the sphere and a Haar orthogonal binding B; producer features p_a = B q_a, and the policy scores
    action a with the bound query p_a (eq. cross-namespace-interface).
    """

    labels: tuple[str, ...]
    seed: int
    role: str
    dim: int = 32
    binding: bool = False
    _cache: dict[str, np.ndarray] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.dim < 1:
            raise ConfigError(f"feature dimension must be positive; got {self.dim}")

    @property
    def state_dim(self) -> int:
        return self.dim

    def table(self, stream: str) -> np.ndarray:
        """The stream's (n, dim) feature table (drawn once, cached, read-only)."""
        got = self._cache.get(stream)
        if got is None:
            rng = derive_rng(self.seed, self.role, stream)
            q = unit_vectors(rng, len(self.labels), self.dim)
            got = _frozen(nx.matmul(q, haar_orthogonal(rng, self.dim).T) if self.binding else q)
            self._cache[stream] = got
        return got

    def producer(self, stream: str) -> np.ndarray:
        return self.table(stream)

    def query(self, stream: str) -> np.ndarray:
        return self.table(stream)
