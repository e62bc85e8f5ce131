"""Per-decision generators, seeded on first use and in batches (issue 27: the per-record path's cost).

The rng contract (SPEC 7, :mod:`._seeds`) gives every decision its own ``np.random.default_rng(seed)``.
Seeding one costs tens of microseconds (most of it ``SeedSequence`` hashing), more than a cheap agent's
whole decision, and most agents never draw.  So the per-record path hands each decision a real
:class:`numpy.random.Generator` (a subclass instance) that holds only its place in a :class:`SeedBlock`;
the first attribute the agent reads seeds it with the bit generator ``default_rng(seed)`` builds,
``PCG64(seed)``, and turns it into a plain built generator.  The block computes the ``SeedSequence``
state words of all its seeds at once (:func:`pcg64_words`, the same hash, vectorized), so a drawing
agent skips the per-decision hashing too.  An agent gets the same bytes as from ``default_rng(seed)``.

The generator passes ``isinstance(x, np.random.Generator)`` and ``np.random.default_rng(x) is x``; its
copies and pickles are plain generators; ``rng.bit_generator.seed_seq`` behaves as ``SeedSequence(seed)``
(spawning included; it pickles as one).  Only calling a ``Generator`` method unbound on a generator the
agent has not touched yet (``np.random.Generator.random(rng)``) bypasses the seeding: don't.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.random.bit_generator import ISpawnableSeedSequence

from ..maps import seed_state_words

__all__ = ["SeedBlock", "is_seeded", "lazy_generator", "pcg64_words"]

_Generator = np.random.Generator
def pcg64_words(seeds: np.ndarray) -> np.ndarray:
    """(..., 4) uint64: ``SeedSequence(s).generate_state(4, np.uint64)`` for every 64-bit seed ``s``
    (the words ``PCG64(s)`` is seeded with), computed for all seeds at once."""
    s = np.asarray(seeds, dtype=np.uint64)
    return np.stack(seed_state_words([], s.reshape(-1)), axis=-1).reshape(*s.shape, 4)


def _words_match_numpy() -> bool:
    """The vectorized hash reproduces this numpy's SeedSequence (else every seeding takes numpy's own path)."""
    probe = [0, 1, 2**32 - 1, 2**32, 2**63 + 12345, 2**64 - 1]
    want = np.stack([np.random.SeedSequence(p).generate_state(4, np.uint64) for p in probe])
    return bool(np.array_equal(pcg64_words(np.array(probe, dtype=np.uint64)), want))


_FAST = _words_match_numpy()


class _Presampled(ISpawnableSeedSequence):
    """``SeedSequence(seed)`` whose PCG64 state words were computed in a batch; anything else it is asked
    (spawning, entropy, pickling) is answered by the real ``SeedSequence(seed)``, built then."""

    __slots__ = ("_real", "_seed", "_words")

    def __init__(self, seed: int, words: np.ndarray) -> None:
        self._seed, self._words = seed, words
        self._real: np.random.SeedSequence | None = None

    def _ss(self) -> np.random.SeedSequence:
        if self._real is None:
            self._real = np.random.SeedSequence(self._seed)
        return self._real

    def generate_state(self, n_words: int, dtype: Any = np.uint32) -> np.ndarray:
        if n_words == 4 and np.dtype(dtype) == np.dtype(np.uint64):
            return self._words.copy()
        return self._ss().generate_state(n_words, dtype)

    def spawn(self, n_children: int) -> list[Any]:
        return list(self._ss().spawn(n_children))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ss(), name)

    def __reduce__(self) -> str | tuple[Any, ...]:
        return self._ss().__reduce__()

    def __repr__(self) -> str:
        return repr(self._ss())


class SeedBlock:
    """The seeds of a batch of decisions (one transformed history's); their state words are computed
    together the first time one of its generators is seeded."""

    __slots__ = ("_words", "seeds")

    def __init__(self, seeds: np.ndarray | Sequence[int]) -> None:
        self.seeds = np.asarray(seeds, dtype=np.uint64).reshape(-1)
        self._words: np.ndarray | None = None

    def bit_generator(self, i: int) -> np.random.PCG64:
        """``PCG64(seeds[i])``, the bit generator of ``np.random.default_rng(seeds[i])``."""
        seed = int(self.seeds[i])
        if not _FAST:
            return np.random.PCG64(seed)
        if self._words is None:
            self._words = pcg64_words(self.seeds)
        return np.random.PCG64(_Presampled(seed, self._words[i]))

    def generator(self, i: int) -> np.random.Generator:
        """Decision ``i``'s generator, seeded when the agent first reads it."""
        return _Unseeded(self, i)


class _Seeded(_Generator):
    """A per-decision generator once seeded (a plain ``Generator`` from then on)."""

    __slots__ = ("_block", "_i")


class _Unseeded(_Generator):
    """A per-decision generator not seeded yet: any attribute read seeds it first."""

    __slots__ = ("_block", "_i")

    def __init__(self, block: SeedBlock, i: int) -> None:  # no Generator.__init__: that is the cost deferred
        self._block, self._i = block, i

    def __getattribute__(self, name: str) -> Any:
        block: SeedBlock = object.__getattribute__(self, "_block")
        _Generator.__init__(self, block.bit_generator(object.__getattribute__(self, "_i")))
        object.__setattr__(self, "__class__", _Seeded)
        return _Generator.__getattribute__(self, name)


for _cls in (_Seeded, _Unseeded):  # repr/str read the class name: the same as a plain generator's
    _cls.__name__ = _cls.__qualname__ = "Generator"


def lazy_generator(seed: int) -> np.random.Generator:
    """``np.random.default_rng(seed)``, seeded when first read (a block of one)."""
    return _Unseeded(SeedBlock([seed]), 0)


def is_seeded(rng: np.random.Generator) -> bool:
    """Whether a per-decision generator was read (and so seeded)."""
    return type(rng) is not _Unseeded
