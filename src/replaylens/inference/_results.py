"""Frozen result records for cluster-level inference (bootstrap intervals, sign-flip tests)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from replaylens.errors import ConfigError

__all__ = ["BootstrapResult", "SignFlipResult"]

JsonNumber = float | None


def _json_number(x: Any) -> JsonNumber:
    """A plain float, or ``None`` for a non-finite number (JSON has no NaN/inf)."""
    value = float(x)
    return value if math.isfinite(value) else None


def _json_value(x: float | np.ndarray) -> JsonNumber | list[JsonNumber]:
    if isinstance(x, np.ndarray):
        return [_json_number(v) for v in x.ravel().tolist()]
    return _json_number(x)


def _read_only(x: Any) -> None:
    if isinstance(x, np.ndarray):
        x.flags.writeable = False


@dataclass(frozen=True, eq=False)
class BootstrapResult:
    """A cluster-bootstrap percentile interval for one statistic (floats) or ``k`` paired ones (arrays).

    ``distribution`` has shape ``(B,)`` for one statistic and ``(B, k)`` for ``k`` paired statistics
    (row ``b`` of every column comes from the same resampled clusters).  Arrays are read-only.
    """

    estimate: float | np.ndarray
    low: float | np.ndarray
    high: float | np.ndarray
    level: float
    n_clusters: int
    n_resamples: int
    method: str
    seed: int | None
    distribution: np.ndarray = field(repr=False)
    standard_error: float | np.ndarray

    def __post_init__(self) -> None:
        for value in (self.estimate, self.low, self.high, self.distribution, self.standard_error):
            _read_only(value)

    @property
    def interval(self) -> tuple[float | np.ndarray, float | np.ndarray]:
        """``(low, high)``."""
        return (self.low, self.high)

    @property
    def n_statistics(self) -> int | None:
        """``k`` for a result from ``(n, k)`` values, ``None`` for a single statistic."""
        return int(self.distribution.shape[1]) if self.distribution.ndim == 2 else None

    def column(self, j: int) -> BootstrapResult:
        """The single-statistic result for column ``j`` of a ``k``-column result."""
        k = self.n_statistics
        if k is None:
            raise ConfigError(
                "BootstrapResult.column needs a result computed from (n, k) values; "
                "this result holds a single statistic."
            )
        if isinstance(j, bool) or not isinstance(j, (int, np.integer)) or not 0 <= int(j) < k:
            raise ConfigError(
                f"The 'j' parameter of BootstrapResult.column must be an int in the range [0, {k}). "
                f"Got {j!r} instead."
            )
        j = int(j)
        estimate, low, high, se = (
            np.asarray(a, dtype=np.float64) for a in (self.estimate, self.low, self.high, self.standard_error)
        )
        return BootstrapResult(
            estimate=float(estimate[j]),
            low=float(low[j]),
            high=float(high[j]),
            level=self.level,
            n_clusters=self.n_clusters,
            n_resamples=self.n_resamples,
            method=self.method,
            seed=self.seed,
            distribution=np.ascontiguousarray(self.distribution[:, j]),
            standard_error=float(se[j]),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly summary (plain floats or lists of floats; the distribution is left out)."""
        return {
            "estimate": _json_value(self.estimate),
            "low": _json_value(self.low),
            "high": _json_value(self.high),
            "level": float(self.level),
            "n_clusters": int(self.n_clusters),
            "n_resamples": int(self.n_resamples),
            "method": self.method,
            "seed": self.seed,
            "standard_error": _json_value(self.standard_error),
        }


@dataclass(frozen=True, eq=False)
class SignFlipResult:
    """A two-sided cluster sign-flip test of symmetry about 0.

    ``n_resamples`` is the number of sign vectors used (``2**n_clusters`` when ``exact``);
    ``null_distribution`` holds the mean under each of them (read-only).
    """

    statistic: float
    pvalue: float
    n_clusters: int
    n_resamples: int
    exact: bool
    seed: int | None
    null_distribution: np.ndarray = field(repr=False)

    def __post_init__(self) -> None:
        _read_only(self.null_distribution)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly summary (the null distribution is left out)."""
        return {
            "statistic": _json_number(self.statistic),
            "pvalue": _json_number(self.pvalue),
            "n_clusters": int(self.n_clusters),
            "n_resamples": int(self.n_resamples),
            "exact": bool(self.exact),
            "seed": self.seed,
        }
