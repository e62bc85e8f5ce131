"""Slot laws: within-block permutations σ used by the value, pair, key-slot and reorder cells.

Convention (the paper's "pull" form): ``sigma[t]`` is the *source* position whose content is
placed at position t of the block.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

from ..errors import ConfigError
from ..rng import RngLike, check_rng, derive_rng

__all__ = [
    "SlotLaw",
    "SlotSpec",
    "draw_block",
    "uniform_derangement",
    "uniform_permutation",
]


class SlotLaw(str, Enum):
    """The law of a within-block slot permutation."""

    DERANGEMENT = "derangement"   # uniform on 𝔇_n (rejection sampling)
    PERMUTATION = "permutation"   # uniform on 𝔖_n
    IDENTITY = "identity"


def uniform_permutation(n: int, *, rng: RngLike) -> np.ndarray:
    """A uniform draw from 𝔖_n."""
    g = check_rng(rng)
    return g.permutation(n).astype(np.int64)


def uniform_derangement(n: int, *, rng: RngLike, max_tries: int = 100_000) -> np.ndarray:
    """A uniform draw from 𝔇_n by rejection: redraw uniform permutations until none has a fixed point.

    (Sattolo's algorithm would give single cycles only, which is not uniform on 𝔇_n.)
    """
    if n == 1:
        raise ConfigError("a single slot has no derangement")
    g = check_rng(rng)
    ar = np.arange(n)
    for _ in range(max_tries):
        p = g.permutation(n)
        if not (p == ar).any():
            return p.astype(np.int64)
    raise RuntimeError("derangement rejection sampler did not accept")  # pragma: no cover (p ≈ e^-1 per try)


def draw_block(law: SlotLaw, n: int, rng: np.random.Generator) -> np.ndarray:
    """One block permutation under ``law``; a one-slot block always gets the identity."""
    if law is SlotLaw.IDENTITY or n <= 1:
        return np.arange(n, dtype=np.int64)
    if law is SlotLaw.DERANGEMENT:
        return uniform_derangement(n, rng=rng)
    return uniform_permutation(n, rng=rng)


@dataclass(frozen=True)
class SlotSpec:
    """How σ is drawn for one draw index: seeds and laws per slot role.

    Roles: ``value`` (value reassignment), ``pair`` (pair transport), ``time`` (key-slot) and
    ``reorder`` (ingestion reorder).  By default pair shares the value draw (σ_p = σ_v) and
    key-slot draws independently, as in the paper's primary protocol.
    """

    value_seed: int
    time_seed: int
    reorder_seed: int
    pair_shares_value: bool = True
    pair_seed: int | None = None
    value_law: SlotLaw = SlotLaw.DERANGEMENT
    time_law: SlotLaw = SlotLaw.PERMUTATION
    reorder_law: SlotLaw = SlotLaw.DERANGEMENT
    pair_law: SlotLaw = SlotLaw.DERANGEMENT

    @classmethod
    def from_seed(cls, seed: int, draw: int = 0, **kw: object) -> SlotSpec:
        """Seeds for draw ``draw`` of an audit with root ``seed`` (independent per role)."""
        base = int(seed) * 1_000 + int(draw)
        return cls(value_seed=base, time_seed=base, reorder_seed=base, **kw)  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, object]:
        return {
            "value_seed": self.value_seed, "time_seed": self.time_seed, "reorder_seed": self.reorder_seed,
            "pair_shares_value": self.pair_shares_value, "pair_seed": self.pair_seed,
            "value_law": self.value_law.value, "time_law": self.time_law.value,
            "reorder_law": self.reorder_law.value, "pair_law": self.pair_law.value,
        }

    def _role(self, role: str) -> tuple[int, SlotLaw]:
        if role == "value":
            return self.value_seed, self.value_law
        if role == "time":
            return self.time_seed, self.time_law
        if role == "reorder":
            return self.reorder_seed, self.reorder_law
        if role == "pair":
            if self.pair_shares_value:
                return self.value_seed, self.value_law
            return (self.pair_seed if self.pair_seed is not None else self.value_seed + 7), self.pair_law
        raise ConfigError(f"unknown slot role {role!r}")

    def generator(self, role: str, stream: str) -> tuple[np.random.Generator, SlotLaw]:
        """The generator and law of ``role`` for ``stream``.

        Each (role, stream) has its own generator derived from the role's seed, the role id and the
        stream id, so a stream's draws do not depend on other streams (shards are pure); blocks are
        drawn in order from it.  Pair shares value's generator (and so its draw) by default.
        """
        seed, law = self._role(role)
        gen_role = "value" if (role == "pair" and self.pair_shares_value) else role
        return derive_rng(seed, gen_role, stream), law


def stream_perm(spec: SlotSpec, role: str, stream: str, block_of: np.ndarray) -> np.ndarray:
    """σ for ``role`` over a whole stream: an array of source positions, permuting each block's
    records among themselves (blocks drawn in order of their index in ``block_of``)."""
    n = block_of.shape[0]
    out = np.arange(n, dtype=np.int64)
    g, law = spec.generator(role, stream)
    for b in np.unique(block_of):
        pos = np.flatnonzero(block_of == b)
        out[pos] = pos[draw_block(law, pos.size, g)]
    return out
