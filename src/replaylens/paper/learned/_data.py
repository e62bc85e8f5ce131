"""Sequences of the independent learned endpoint pair (paper L756–848, core spec §10.1).

A sequence D = ((ℓ_t, u_t))_{t=1..32} holds four producer keys in four contiguous blocks of eight
slots, in the fixed source order (coverage, adaptive, replicate, mixed).  One key per sequence is the
winner: its block's utilities are i.i.d. Uniform(0.78, 0.94), the other blocks' Uniform(0.06, 0.22).
The common endpoint target is a†(D) = argmax_a Σ_t (u_t − ½)·1[ℓ_t = a] (the winner by construction);
the soft target is 0.95 for it and 0.05 for every other key.

Utilities are drawn on the six-decimal grid (as the paper's ledgers display them), so the additive
writer's key sums are exact integer sums of micro-units, equal in any order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...errors import ConfigError
from ...rng import RngLike, check_rng

__all__ = [
    "BLOCK_SLOTS",
    "ENDPOINT_KEYS",
    "LOSER_RANGE",
    "N_SLOTS",
    "TARGET_ENTROPY",
    "TARGET_HIGH",
    "TARGET_LOW",
    "WINNER_RANGE",
    "EndpointSequences",
    "canonical_keys",
    "make_future_rows",
    "make_sequences",
    "micro_centered",
]

ENDPOINT_KEYS: tuple[str, ...] = ("coverage", "adaptive", "replicate", "mixed")
"""The four producer keys in canonical order (block k of a sequence holds key k)."""

BLOCK_SLOTS = 8
N_SLOTS = 32
WINNER_RANGE = (0.78, 0.94)
LOSER_RANGE = (0.06, 0.22)
TARGET_HIGH = 0.95
TARGET_LOW = 0.05
TARGET_ENTROPY = -(TARGET_HIGH * math.log(TARGET_HIGH) + TARGET_LOW * math.log(TARGET_LOW))
"""H = −(0.95 ln 0.95 + 0.05 ln 0.05) = 0.198515: the smallest possible mean BCE against the soft target."""


def canonical_keys(n_keys: int = 4, block_slots: int = BLOCK_SLOTS) -> np.ndarray:
    """The fixed source order: slots 0–7 key 0, 8–15 key 1, … (shape ``(n_keys·block_slots,)``)."""
    return np.repeat(np.arange(n_keys, dtype=np.int64), block_slots)


def micro_centered(u: np.ndarray) -> np.ndarray:
    """c(u) = u − ½ in integer micro-units, round(10⁶u) − 500000 (masked NaN outcomes give 0)."""
    x = np.asarray(u, dtype=np.float64)
    return np.where(np.isnan(x), 0.0, np.rint(np.where(np.isnan(x), 0.5, x) * 1e6) - 500_000.0)


@dataclass(frozen=True, eq=False)
class EndpointSequences:
    """N sequences of T (key, utility) records; ``keys`` are codes into :data:`ENDPOINT_KEYS`."""

    keys: np.ndarray
    """(N, T) int64 key codes."""
    utilities: np.ndarray
    """(N, T) float64 utilities in [0, 1]."""
    winners: np.ndarray
    """(N,) int64: the key whose block was drawn from the winner range."""
    n_keys: int = 4

    def __post_init__(self) -> None:
        if self.keys.ndim != 2 or self.keys.shape != self.utilities.shape:
            raise ConfigError(f"keys and utilities must be (N, T) arrays of one shape; got {self.keys.shape} "
                              f"and {self.utilities.shape}")
        if self.winners.shape != (self.keys.shape[0],):
            raise ConfigError(f"winners must have shape ({self.keys.shape[0]},); got {self.winners.shape}")
        if self.keys.size and (self.keys.min() < 0 or self.keys.max() >= self.n_keys):
            raise ConfigError(f"key codes must lie in 0..{self.n_keys - 1}")

    @property
    def n(self) -> int:
        return int(self.keys.shape[0])

    @property
    def n_slots(self) -> int:
        return int(self.keys.shape[1])

    def micro_sums(self) -> np.ndarray:
        """(N, K) exact per-key sums of c(u) in micro-units (integers stored as float64)."""
        flat = (np.arange(self.n)[:, None] * self.n_keys + self.keys).ravel()
        sums = np.bincount(flat, weights=micro_centered(self.utilities).ravel(), minlength=self.n * self.n_keys)
        return sums.reshape(self.n, self.n_keys)

    def centered_sums(self) -> np.ndarray:
        """(N, K) h^add_a = Σ_t (u_t − ½)·1[ℓ_t = a] (exact micro-unit sums times 10⁻⁶)."""
        return self.micro_sums() * 1e-6

    def targets(self) -> np.ndarray:
        """(N,) the endpoint target a†(D): the first-canonical argmax of the centered key sums."""
        return np.argmax(self.micro_sums(), axis=1).astype(np.int64)

    def soft_targets(self) -> np.ndarray:
        """(N, K): 0.95 for a†(D) and 0.05 for every other key."""
        y = np.full((self.n, self.n_keys), TARGET_LOW)
        y[np.arange(self.n), self.targets()] = TARGET_HIGH
        return y

    def take(self, index: np.ndarray | slice) -> EndpointSequences:
        """The sequences at ``index`` (a copy)."""
        return EndpointSequences(np.array(self.keys[index]), np.array(self.utilities[index]),
                                 np.array(self.winners[index]), self.n_keys)

    def transport(self, perms: np.ndarray) -> EndpointSequences:
        """Pair transport: record t of the result is the intact pair (ℓ_{σ(t)}, u_{σ(t)}).

        ``perms`` is one permutation of the T slots, shape ``(T,)`` (shared) or ``(N, T)`` (per sequence).
        """
        p = np.broadcast_to(np.asarray(perms, dtype=np.int64), self.keys.shape)
        if not np.array_equal(np.sort(p, axis=1), np.broadcast_to(np.arange(self.n_slots), p.shape)):
            raise ConfigError("perms must hold one permutation of the slots per sequence")
        return EndpointSequences(np.take_along_axis(self.keys, p, axis=1),
                                 np.take_along_axis(self.utilities, p, axis=1), self.winners.copy(), self.n_keys)

    def relabel(self, images: np.ndarray) -> EndpointSequences:
        """Key map ρ applied to every record (ℓ ↦ images[ℓ]); winners are mapped too."""
        img = np.asarray(images, dtype=np.int64)
        if sorted(img.tolist()) != list(range(self.n_keys)):
            raise ConfigError(f"images must be a permutation of 0..{self.n_keys - 1}")
        return EndpointSequences(img[self.keys], self.utilities.copy(), img[self.winners], self.n_keys)


def make_sequences(n: int, rng: RngLike, *, n_keys: int = 4, block_slots: int = BLOCK_SLOTS,
                   winner_range: tuple[float, float] = WINNER_RANGE,
                   loser_range: tuple[float, float] = LOSER_RANGE) -> EndpointSequences:
    """``n`` sequences in the fixed source order with winner classes balanced (n/K per class, shuffled).

    Draw order from the generator: the permutation of the balanced winner list, then one
    ``random((n, T))`` array mapped to the winner / loser ranges and rounded to six decimals.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < n_keys or n % n_keys:
        raise ConfigError(f"n must be a positive multiple of {n_keys} (balanced winner classes); got {n!r}")
    gen = check_rng(rng)
    winners = gen.permutation(np.repeat(np.arange(n_keys, dtype=np.int64), int(n) // n_keys))
    keys = np.broadcast_to(canonical_keys(n_keys, block_slots), (int(n), n_keys * block_slots)).copy()
    r = gen.random(keys.shape)
    win = keys == winners[:, None]
    lo = np.where(win, winner_range[0], loser_range[0])
    hi = np.where(win, winner_range[1], loser_range[1])
    u = np.round(lo + (hi - lo) * r, 6)
    return EndpointSequences(keys, u, winners.astype(np.int64), n_keys)


def make_future_rows(n_sequences: int, n_rows: int, rng: RngLike, n_keys: int = 4) -> np.ndarray:
    """Future evaluator rows (REC: i.i.d. Uniform(0, 1) per (sequence, row, arm), six decimals).

    Shape ``(n_sequences, n_rows, n_keys)``; the rows score an action and never enter the policy input.
    """
    gen = check_rng(rng)
    return np.round(gen.random((int(n_sequences), int(n_rows), int(n_keys))), 6)
