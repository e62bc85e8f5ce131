"""Pooling exactly as the paper: tasks within a stratum, strata equally weighted, maps, then streams."""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..replay import Decisions

__all__ = ["StreamValues", "map_selection", "pool_tasks"]


@dataclass(frozen=True)
class _Groups:
    """Where each (stream, stratum) group of tasks starts, its size, and the same for streams over groups."""

    starts: np.ndarray
    counts: np.ndarray
    sstarts: np.ndarray
    scounts: np.ndarray


_GROUPS: weakref.WeakKeyDictionary[Decisions, _Groups] = weakref.WeakKeyDictionary()


def _groups(dec: Decisions) -> _Groups:
    """The task groups of ``dec`` (computed once per decisions object: every readout pools over them)."""
    got = _GROUPS.get(dec)
    if got is None:
        g = dec.stream_idx * (int(dec.stratum_idx.max()) + 1) + dec.stratum_idx
        starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
        counts = np.diff(np.r_[starts, g.shape[0]])
        gstream = dec.stream_idx[starts]
        sstarts = np.flatnonzero(np.r_[True, gstream[1:] != gstream[:-1]])
        scounts = np.diff(np.r_[sstarts, gstream.shape[0]])
        got = _GROUPS[dec] = _Groups(starts, counts, sstarts, scounts)
    return got


def pool_tasks(x: np.ndarray, dec: Decisions) -> np.ndarray:
    """(..., N) per-task values → (..., S) per-stream values.

    d̄_{r,R} = mean over the tasks of stratum R in stream r; then the strata present in the stream
    get equal weight.  Tasks are stream-major and grouped by stratum, so groups are contiguous.
    """
    g = _groups(dec)
    if x.dtype.kind == "b" or (x.dtype.kind in "iu" and x.dtype.itemsize == 1):
        # small integers (0/1 indicators, their differences): summed as integers, exactly the sums a float64
        # pass gives (every partial sum is an integer far below 2**53), in half the time
        sums = np.add.reduceat(x, g.starts, axis=-1, dtype=np.int64)
    else:
        sums = np.add.reduceat(x.astype(np.float64, copy=False), g.starts, axis=-1)
    group_means = sums / g.counts
    return np.add.reduceat(group_means, g.sstarts, axis=-1) / g.scounts


def map_selection(dec: Decisions, maps: str | Sequence[int]) -> np.ndarray:
    """Map indices: ``nonidentity`` (all but id), ``identity`` ([0]), ``all``, or explicit indices."""
    n = len(dec.plan.maps)
    if isinstance(maps, str):
        if maps == "nonidentity":
            sel = np.arange(1, n)
        elif maps == "identity":
            sel = np.array([0])
        elif maps == "all":
            sel = np.arange(n)
        else:
            raise ValueError(f"unknown map selection {maps!r}")
    else:
        sel = np.asarray(list(maps), dtype=np.int64)
    if sel.size == 0:
        raise ValueError("this readout needs at least one non-identity map in the replay plan")
    return sel


@dataclass(frozen=True, eq=False)
class StreamValues:
    """A readout pooled to one value per stream c_r (the cluster summary), plus its per-map detail.

    ``by_map[k, r]`` is the stratum-pooled value under map ``maps[k]`` (draws and repeats averaged);
    ``values[r]`` averages those maps; ``estimate`` averages the streams.
    """

    name: str
    cell: str
    values: np.ndarray
    by_map: np.ndarray
    maps: tuple[str, ...]

    def __post_init__(self) -> None:
        for arr in (self.values, self.by_map):   # a value: its arrays are read-only (shared, e.g. by summary.json)
            if isinstance(arr, np.ndarray):
                arr.flags.writeable = False

    @property
    def estimate(self) -> float:
        return float(self.values.mean())

    @property
    def n_streams(self) -> int:
        return int(self.values.shape[0])

    def map_estimates(self) -> dict[str, float]:
        """Pooled value under each map (mean over streams)."""
        return {m: float(v) for m, v in zip(self.maps, self.by_map.mean(axis=1), strict=True)}
