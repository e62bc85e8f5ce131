"""Store noise and the verdict of a store migration: a census when every build repeats itself, else a permutation
test of the migration's change rate against the same-order rebuilds' (both sides' noise measured).

Each side of a migration — the reference configuration and the migrated ingestion — is built ``1 + r`` times the
same way.  When no rebuild of either side changes any answer (ordered top-k ids and decision) the store is read
as deterministic and the verdict is a **census**: 0 changed queries is SAFE, any changed query UNSAFE (integer
counts).  Otherwise the builds are a sample of each side's answers and the migration is judged by an exact
**permutation test**: per stream, ``M[a, b]`` counts the queries on which builds ``a`` and ``b`` answer
differently; the statistic is the mean cross-side disagreement minus the mean within-side disagreement (the
repeat-corrected disagreement T_gr of the audit, over builds), summed over streams, kept as an integer; the null
(both sides' builds are exchangeable: the migration changes nothing a rebuild does not) permutes the side labels
of the builds within each stream.  UNSAFE when ``p <= 1 - level``; otherwise INCONCLUSIVE (the store's own noise
is too large to judge).  A noisy store never reads SAFE: nothing shows that its answers did not move.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...rng import derive_rng

__all__ = ["CONTROL_REBUILDS", "INCONCLUSIVE", "NA", "PERMUTATIONS", "SAFE", "UNSAFE", "NoiseTest", "disagreements",
           "noise_test"]

SAFE, UNSAFE, INCONCLUSIVE, NA = "SAFE", "UNSAFE", "INCONCLUSIVE", "N/A"
PERMUTATIONS = 9999
CONTROL_REBUILDS = 4
"""Same-order rebuilds of each side of a migration once a rebuild of either side changed an answer (the first
rebuild is always made; a side whose first rebuild repeats it on every query is read as deterministic)."""
"""Monte Carlo relabellings of the permutation test (p = (1 + #{stat >= observed}) / (1 + draws))."""
_CHUNK = 1 << 20
"""Labels (relabelling x stream x build) drawn per block."""


def disagreements(builds: Sequence[Sequence[Hashable]]) -> np.ndarray:
    """``M[a, b]``: the number of queries on which build ``a``'s answer differs from build ``b``'s (answers: one
    hashable per query, e.g. (ids, decision))."""
    n = len(builds)
    out = np.zeros((n, n), dtype=np.int64)
    for a in range(n):
        for b in range(a + 1, n):
            out[a, b] = out[b, a] = sum(x != y for x, y in zip(builds[a], builds[b], strict=True))
    return out


@dataclass(frozen=True)
class NoiseTest:
    """The permutation test of one migration: its integer statistic, p-value, the smallest p-value its design can
    reach, the number of builds per side and stream, and the level."""

    statistic: int
    p_value: float
    min_p: float
    builds_per_side: int
    draws: int
    level: float

    @property
    def rejects(self) -> bool:
        return self.p_value <= 1 - self.level + 1e-12

    def to_dict(self) -> dict[str, Any]:
        return {"method": "permutation of build labels within streams (between - within build disagreement)",
                "statistic": self.statistic, "p_value": self.p_value, "min_p": self.min_p,
                "builds_per_side": self.builds_per_side, "draws": self.draws, "level": self.level}


def _stats(ms: np.ndarray, z: np.ndarray, n_ref: int) -> np.ndarray:
    """Integer statistic per labelling: ``ms`` (S, B, B) disagreement counts, ``z`` (D, S, B) 1 for a reference
    build; between-mean minus within-mean, scaled by (pairs between) * (pairs within) to stay an integer."""
    b = ms.shape[-1]
    n_tgt = b - n_ref
    n_between = n_ref * n_tgt
    n_within = n_ref * (n_ref - 1) // 2 + n_tgt * (n_tgt - 1) // 2
    w = 1 - z
    between = np.einsum("dsa,sab,dsb->d", z, ms, w)
    within = (np.einsum("dsa,sab,dsb->d", z, ms, z) + np.einsum("dsa,sab,dsb->d", w, ms, w)) // 2
    return between * n_within - within * n_between


def noise_test(ms: Sequence[np.ndarray], n_ref: int, *, seed: int, name: str, level: float,
               draws: int = PERMUTATIONS) -> NoiseTest:
    """The permutation test on per-stream disagreement matrices whose first ``n_ref`` builds are the reference's
    and the rest the migrated side's (the same count per stream)."""
    arr = np.stack([np.asarray(m, dtype=np.int64) for m in ms])
    s, b = arr.shape[0], arr.shape[1]
    z0 = np.zeros((1, s, b), dtype=np.int64)
    z0[:, :, :n_ref] = 1
    obs = int(_stats(arr, z0, n_ref)[0])
    rng = derive_rng(seed, "store-noise-test", name)
    at_least = 0
    chunk = max(1, _CHUNK // max(s * b, 1))  # relabellings per block: bounded memory for many streams
    for lo in range(0, draws, chunk):
        keys = rng.random((min(chunk, draws - lo), s, b))
        z = (np.argsort(keys, axis=2, kind="stable") < n_ref).astype(np.int64)
        at_least += int(np.count_nonzero(_stats(arr, z, n_ref) >= obs))
    p = (1 + at_least) / (1 + draws)
    sym = 2 if 2 * n_ref == b else 1  # swapping one stream's sides gives that stream the same statistic
    return NoiseTest(obs, p, min(1.0, (sym / math.comb(b, n_ref)) ** s), n_ref, draws, level)
