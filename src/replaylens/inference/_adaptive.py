"""Adaptive call budget: ask streams in a seeded random order, in rounds, and stop a cell once settled.

The sampling unit is the stream (a cluster): one observation of a cell is a stream's action
response in that cell (the fraction of its decisions that differ from aligned), a number in [0, 1].
After each round the cell's anytime-valid confidence sequence for the mean over streams is checked:

* lower bound > 0                → ``changes decisions``;
* upper bound < margin           → ``no change beyond ±m`` (the response is bounded below by 0);
* otherwise the cell stays open; cells open after the last round are ``unsettled``.

The confidence sequence is the hedged betting ("predictable plug-in, hedged capital") sequence of
Waudby-Smith & Ramdas (2023, JRSS-B) for a bounded mean, evaluated on a grid and intersected over
time; by Ville's inequality it covers the mean at every sample size at once, so checking it after any
round and stopping there does not inflate the error (docs/decisions.md, "Issue 18: adaptive stopping").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError
from ..rng import derive_rng

__all__ = ["CHANGES", "NO_CHANGE", "UNSETTLED", "AdaptiveResult", "BettingCS", "CellVerdict", "adaptive_cells",
           "classify"]

CHANGES = "changes decisions"
NO_CHANGE = "no change beyond ±m"
UNSETTLED = "unsettled"

Ask = Callable[[str, np.ndarray], np.ndarray]
"""``ask(cell, stream_indices) -> per-stream action responses in [0, 1]`` (one value per stream asked)."""
AskRound = Callable[[Sequence[str], np.ndarray], Mapping[str, np.ndarray]]
"""``ask_round(open_cells, stream_indices) -> {cell: per-stream responses}``: one round for all open cells."""


def classify(low: float, high: float, margin: float) -> str:
    """The verdict of an interval: excludes zero first, else inside the margin, else unsettled."""
    if low > 0.0:
        return CHANGES
    if high < margin:
        return NO_CHANGE
    return UNSETTLED


class BettingCS:
    """Anytime-valid confidence sequence for the mean of [0, 1] observations (hedged betting capital).

    ``update(x)`` adds observations in order; ``interval()`` is the running intersection of the
    sequence so far: the grid points whose capital never reached ``1/alpha``.  ``c`` truncates the
    bets (the paper's default 1/2 is conservative; 3/4 bets harder against boundary means).
    """

    def __init__(self, alpha: float = 0.05, *, grid: int = 1001, c: float = 0.75) -> None:
        if not 0.0 < alpha < 1.0:
            raise ConfigError(f"alpha must lie in (0, 1); got {alpha}")
        self.alpha = float(alpha)
        self.m = np.linspace(0.0, 1.0, int(grid))
        with np.errstate(divide="ignore"):
            self.cap_up = np.where(self.m > 0, c / self.m, np.inf)  # bets on "mean > m" (x - m >= -m)
            self.cap_down = np.where(self.m < 1, c / (1.0 - self.m), np.inf)  # bets on "mean < m"
        self.log_up = np.zeros_like(self.m)
        self.log_down = np.zeros_like(self.m)
        self.rejected = np.zeros(self.m.shape, dtype=bool)
        self.n = 0
        self.sum = 0.0
        self.sq = 0.25  # running (1/4 + sum (x_i - mu_hat_i)^2), the plug-in variance numerator
        self.mu_hat = 0.5
        self._thresh = math.log(2.0 / self.alpha)  # hedged: max(K+/2, K-/2) >= 1/alpha

    def update(self, xs: Sequence[float] | np.ndarray) -> None:
        for x in np.asarray(xs, dtype=np.float64).ravel():
            if not 0.0 <= x <= 1.0:
                raise ConfigError(f"observations must lie in [0, 1]; got {x}")
            t = self.n + 1
            var = self.sq / t
            lam = math.sqrt(2.0 * math.log(2.0 / self.alpha) / (var * t * math.log(1.0 + t)))
            self.log_up += np.log1p(np.minimum(lam, self.cap_up) * (x - self.m))
            self.log_down += np.log1p(-np.minimum(lam, self.cap_down) * (x - self.m))
            self.rejected |= np.maximum(self.log_up, self.log_down) >= self._thresh
            self.sq += (x - self.mu_hat) ** 2
            self.n = t
            self.sum += float(x)
            self.mu_hat = (0.5 + self.sum) / (t + 1)

    def interval(self) -> tuple[float, float]:
        keep = self.m[~self.rejected]
        if keep.size == 0:  # cannot happen with probability >= 1 - alpha; report the running mean
            est = self.sum / max(self.n, 1)
            return est, est
        return float(keep[0]), float(keep[-1])


@dataclass(frozen=True)
class CellVerdict:
    """One cell's adaptive result: verdict, the confidence-sequence interval, streams asked, round stopped."""

    cell: str
    verdict: str
    low: float
    high: float
    estimate: float
    n_streams: int
    rounds: int


@dataclass(frozen=True)
class AdaptiveResult:
    """Per-cell verdicts, the stream order used, and how many (cell, stream) pairs were asked."""

    cells: tuple[CellVerdict, ...]
    order: tuple[int, ...]
    margin: float
    level: float
    n_streams: int
    asked: int
    aligned_streams: int

    def fraction_asked(self) -> float:
        """(cell, stream) pairs asked, the aligned baseline included, over the full matrix's."""
        full = (len(self.cells) + 1) * self.n_streams
        return (self.asked + self.aligned_streams) / full


def adaptive_cells(ask: Ask | None, n_streams: int, cells: Sequence[str], *, margin: float = 0.05, rounds: int = 10,
                   level: float = 0.95, seed: int = 0, min_round: int = 1,
                   ask_round: AskRound | None = None) -> AdaptiveResult:
    """Ask ``cells`` stream by stream in a random order (``derive_rng(seed, 'adaptive-order')``), in ``rounds``
    equal rounds, and stop each cell once its confidence sequence settles its verdict (see :func:`classify`).

    ``ask(cell, streams)`` returns the streams' action responses; every open cell is asked the same
    streams in a round (their aligned decisions are shared); ``ask_round`` asks them all at once instead.
    Same seed, same order, same verdicts.
    """
    if (ask is None) == (ask_round is None):
        raise ConfigError("pass exactly one of ask and ask_round")
    if not 0.0 < margin < 1.0:
        raise ConfigError(f"margin must lie in (0, 1); got {margin}")
    if rounds < 1 or n_streams < 1:
        raise ConfigError("rounds and n_streams must be >= 1")
    order = derive_rng(seed, "adaptive-order").permutation(n_streams)
    size = max(min_round, math.ceil(n_streams / rounds))
    cs = {c: BettingCS(1.0 - level) for c in cells}
    done: dict[str, CellVerdict] = {}
    asked = 0
    seen = 0
    for k in range(rounds):
        chunk = order[k * size:(k + 1) * size]
        open_cells = [c for c in cells if c not in done]
        if chunk.size == 0 or not open_cells:
            break
        seen += int(chunk.size)
        got = ask_round(open_cells, chunk) if ask_round is not None else {}
        for c in open_cells:
            vals = np.asarray(got[c] if ask is None else ask(c, chunk), dtype=np.float64)
            if vals.shape != chunk.shape:
                raise ConfigError(f"ask({c!r}) returned {vals.shape[0] if vals.ndim else 0} values for "
                                  f"{chunk.size} streams")
            asked += int(chunk.size)
            cs[c].update(vals)
            lo, hi = cs[c].interval()
            v = classify(lo, hi, margin)
            if v != UNSETTLED:
                done[c] = CellVerdict(c, v, lo, hi, cs[c].sum / cs[c].n, cs[c].n, k + 1)
    out = []
    for c in cells:
        if c in done:
            out.append(done[c])
        else:
            lo, hi = cs[c].interval()
            out.append(CellVerdict(c, UNSETTLED, lo, hi, cs[c].sum / max(cs[c].n, 1), cs[c].n, rounds))
    return AdaptiveResult(tuple(out), tuple(int(i) for i in order), margin, level, n_streams, asked, seen)
