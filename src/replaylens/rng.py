"""One randomness convention (SPEC 7): every draw comes from a ``numpy.random.Generator``.

Seeds are recorded integers.  Sub-streams are derived with :class:`numpy.random.SeedSequence`
from the recorded seed plus an integer path, so each purpose gets an independent, reproducible
stream and the same seed always gives the same bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

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


def stable_ints(texts: Iterable[str], prefix: str = "") -> np.ndarray:
    """:func:`stable_int` of every ``prefix + text``, as a uint64 array (the digests joined, then the first
    8 bytes of each read at once)."""
    sha = hashlib.sha256
    raw = b"".join([sha((prefix + t).encode("utf-8")).digest() for t in texts])
    return np.frombuffer(raw, dtype="<u8")[::4] >> np.uint64(1)


_M0, _M1, _M2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)


def mix64(x: np.ndarray | np.integer | int, *, out: np.ndarray | None = None) -> np.ndarray:
    """SplitMix64 finaliser, elementwise on uint64 (a bijection of 64-bit words; vectorized).

    Used to derive many per-decision seeds at once from ``stable_int`` fingerprints of names.
    ``out``: a uint64 array of ``x``'s shape written in place (``x`` itself allowed), with no temporaries
    beyond one shift buffer; the same values.
    """
    if out is None:
        out = np.array(x, dtype=np.uint64)
    elif out is not x:
        np.copyto(out, np.asarray(x, dtype=np.uint64))
    tmp = np.empty_like(out)
    with np.errstate(over="ignore"):
        out += _M0
        out ^= np.right_shift(out, _S30, out=tmp)
        out *= _M1
        out ^= np.right_shift(out, _S27, out=tmp)
        out *= _M2
        out ^= np.right_shift(out, _S31, out=tmp)
    return out
