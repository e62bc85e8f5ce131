"""A deliberately nondeterministic store for the verdict tests: the exact store, but every build swaps ranks 1 and 2
of each answer with probability 1/2 (a numpy Generator derived from a build counter: noisy from build to build,
the same sequence in every test process)."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Mapping
from pathlib import Path

from replaylens.memory.stores import Embedder, Hit
from replaylens.memory.stores._exact import ExactStore
from replaylens.rng import derive_rng

# one counter per process, kept where a re-import of this file (file.py:factory loads it afresh) finds it again
_BUILDS: itertools.count[int] = sys.__dict__.setdefault("_replaylens_noisy_test_builds", itertools.count())


class NoisyStore(ExactStore):
    name = "noisy"

    def __init__(self, embedder: Embedder, *, path: Path | None = None,
                 params: Mapping[str, object] | None = None) -> None:
        super().__init__(embedder, path=path, params=params)
        self._rng = derive_rng(0, "noisy-test-store", next(_BUILDS))
        self._swap: dict[str, bool] = {}

    def query(self, text: str, k: int) -> list[Hit]:
        hits = super().query(text, k)
        if text not in self._swap:
            self._swap[text] = bool(self._rng.integers(2))
        if len(hits) >= 2 and self._swap[text]:
            a, b = hits[0], hits[1]
            hits[0], hits[1] = Hit(b.id, b.score, 1, b.metadata), Hit(a.id, a.score, 2, a.metadata)
        return hits

    def query_many(self, texts: list[str], k: int) -> list[list[Hit]]:
        return [self.query(t, k) for t in texts]


def make(embedder: Embedder, *, path: Path | None, params: Mapping[str, object]) -> NoisyStore:
    return NoisyStore(embedder, path=path, params=params)
