"""One randomness convention (SPEC 7): every draw comes from a ``numpy.random.Generator``.

Seeds are recorded integers.  Sub-streams are derived with :class:`numpy.random.SeedSequence`
from the recorded seed plus an integer path, so each purpose gets an independent, reproducible
stream and the same seed always gives the same bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from .errors import ConfigError

__all__ = ["RngLike", "check_rng", "derive_rng", "derive_seed", "mix64", "stable_int", "stable_ints"]

RngLike = int | np.random.Generator | np.random.SeedSequence | None


def check_rng(rng: RngLike) -> np.random.Generator:
    """Normalize an ``rng=`` argument (SPEC 7) to a Generator.

    ``None`` is refused: ReplayLens never draws from unrecorded entropy.
    """
    if rng is None:
        raise ConfigError("rng must be a recorded seed (int), a SeedSequence or a Generator; got None")
    if isinstance(rng, bool):
        raise ConfigError(f"rng must be an int seed, SeedSequence or Generator; got {rng!r}")
    if isinstance(rng, (int, np.integer)):
        if int(rng) < 0:
            raise ConfigError(f"rng seed must be a non-negative int; got {rng}")
        return np.random.default_rng(int(rng))
    if isinstance(rng, (np.random.SeedSequence, np.random.Generator)):
        return np.random.default_rng(rng)
    raise ConfigError(f"rng must be an int seed, SeedSequence or Generator; got {type(rng).__name__}")


def stable_int(text: str) -> int:
    """A 63-bit integer fingerprint of ``text`` (stable across runs and platforms)."""
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little") >> 1


def derive_seed(seed: int, *path: int | str) -> np.random.SeedSequence:
    """SeedSequence for ``seed`` and an integer/string path, e.g. ``derive_seed(s, "value", r, b)``."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or int(seed) < 0:
        raise ConfigError(f"seed must be a non-negative int; got {seed!r}")
    entropy = [int(seed)] + [stable_int(p) if isinstance(p, str) else int(p) for p in path]
    return np.random.SeedSequence(entropy)


def derive_rng(seed: int, *path: int | str) -> np.random.Generator:
    """Generator for ``seed`` and a path (see :func:`derive_seed`)."""
    return np.random.default_rng(derive_seed(seed, *path))


def stable_ints(texts: Sequence[str]) -> np.ndarray:
    """:func:`stable_int` of every text, as a uint64 array (the digests' first 8 bytes read at once)."""
    sha = hashlib.sha256
    head = b"".join([sha(t.encode("utf-8")).digest()[:8] for t in texts])
    return np.frombuffer(head, dtype="<u8").astype(np.uint64) >> np.uint64(1)


def mix64(x: np.ndarray | np.integer | int) -> np.ndarray:
    """SplitMix64 finaliser, elementwise on uint64 (a bijection of 64-bit words; vectorized).

    Used to derive many per-decision seeds at once from ``stable_int`` fingerprints of names.
    """
    x = np.asarray(x, dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return np.asarray(x ^ (x >> np.uint64(31)), dtype=np.uint64)
