"""A decision's generator, seeded on first use (issue 27: the per-record path's cost per decision).

The rng contract (SPEC 7, :mod:`._seeds`) gives every decision its own ``np.random.default_rng(seed)``.
Seeding one costs tens of microseconds, more than a cheap agent's whole decision, and most agents never
draw.  :func:`lazy_generator` returns a real :class:`numpy.random.Generator` (a subclass instance) that
holds only the decision's seed; the first attribute the agent reads seeds it as ``PCG64(seed)``, exactly
what ``default_rng(seed)`` builds, and turns it into a plain built generator.  An agent that draws gets
the same bytes as before; one that never does pays for a small object only.

It passes ``isinstance(x, np.random.Generator)`` and ``np.random.default_rng(x) is x``; copies and
pickles are plain generators.  Only calling a ``Generator`` method unbound on a generator the agent
has not touched yet (``np.random.Generator.random(rng)``) bypasses the seeding: don't.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["is_seeded", "lazy_generator"]

_Generator = np.random.Generator


class _Seeded(_Generator):
    """A per-decision generator once seeded (a plain ``Generator`` from then on)."""

    __slots__ = ("_seed",)


class _Unseeded(_Generator):
    """A per-decision generator not seeded yet: any attribute read seeds it first."""

    __slots__ = ("_seed",)

    def __init__(self, seed: int) -> None:  # no Generator.__init__: that is the cost deferred
        self._seed = seed

    def __getattribute__(self, name: str) -> Any:
        _Generator.__init__(self, np.random.PCG64(object.__getattribute__(self, "_seed")))
        object.__setattr__(self, "__class__", _Seeded)
        return _Generator.__getattribute__(self, name)


for _cls in (_Seeded, _Unseeded):  # repr/str read the class name: the same as a plain generator's
    _cls.__name__ = _cls.__qualname__ = "Generator"


def lazy_generator(seed: int) -> np.random.Generator:
    """``np.random.default_rng(seed)``, seeded when the agent first reads it."""
    return _Unseeded(seed)


def is_seeded(rng: np.random.Generator) -> bool:
    """Whether a generator from :func:`lazy_generator` was read (and so seeded)."""
    return type(rng) is not _Unseeded
