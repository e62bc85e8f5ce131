"""Stochastic agents with known responses, for calibrating verdicts (issue 47; ``bench/verdicts.py``).

* :func:`epsilon_greedy` -- the reference ``mean`` rule's greedy choice, replaced by a uniform menu item with
  probability ``epsilon``: a learning agent whose decision distribution is exactly invariant to ``pair`` and
  ``reorder`` (the mean is taken on exact integer micro-units, so record order changes no bit of it).
* :func:`visibility_shift` -- a history-blind agent that reads only whether any outcome is visible: with
  visible outcomes it picks menu position ``j`` with probability ``BASE[j]``; with none (the ``mask`` cell)
  it moves ``delta`` of probability from position 0 to position 1.  Every other cell is a sharp null, and under
  ``mask`` every decision's distribution moves by exactly ``delta``: ``E[T_gr] = ½ Σ_a (p_c(a) − p_e(a))² =
  delta²`` on every decision unit, a known response.

Both have a per-record path (the oracle) and an array path that gives the same decisions (each decision's
generator is ``default_rng(seed)`` on both paths: the ``rng`` contract).  :func:`rate` and :func:`fmt_rate` are the
calibration benches' rates with their exact intervals.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, ClassVar

import numpy as np

from ..agents import Agent, QueryBatch, RecordBatch, reference_agent
from ..maps import seeded_uniforms as uniforms

__all__ = ["BASE", "epsilon_greedy", "fmt_rate", "rate", "visibility_shift"]

#: visibility_shift's decision distribution over the four menu positions when outcomes are visible
BASE = (0.55, 0.15, 0.15, 0.15)


class _EpsPolicy:
    def __init__(self, greedy: Any, eps: float) -> None:
        self.greedy, self.eps = greedy, eps

    def act(self, state: Any, task: Any, menu: tuple[str, ...], rng: np.random.Generator) -> str:
        u, v = float(rng.random()), float(rng.random())
        return menu[min(int(v * len(menu)), len(menu) - 1)] if u < self.eps else \
            str(self.greedy.act(state, task, menu, rng))


class _EpsArray:
    thread_safe: ClassVar[bool] = True

    def __init__(self, greedy: Any, eps: float) -> None:
        self.greedy, self.eps = greedy, eps

    def act_batch(self, records: RecordBatch, queries: QueryBatch) -> np.ndarray:
        out = np.asarray(self.greedy.act_batch(records, queries)).copy()
        sizes = (queries.menu >= 0).sum(axis=1)
        u, v = uniforms(queries.seed, 2)
        j = np.minimum((v * sizes).astype(np.int64), sizes - 1)
        explore = u < self.eps
        out[explore] = queries.menu[np.flatnonzero(explore), j[explore]]
        return out


def epsilon_greedy(epsilon: float = 0.2) -> Agent:
    """The reference ``mean`` rule exploring uniformly with probability ``epsilon`` (stochastic, order-blind)."""
    mean = reference_agent("mean")
    assert mean.array is not None
    return Agent(f"epsilon-greedy({epsilon:g})", mean.writer, _EpsPolicy(mean.policy, epsilon),
                 _EpsArray(mean.array, epsilon), stochastic=True, invariant_to=("pair", "reorder"))


def _cdf(visible: bool, delta: float, n: int) -> list[float]:
    """The agent's cumulative distribution over ``n`` menu positions (sequential sums)."""
    total = sum(BASE[:n])
    p = [x / total for x in BASE[:n]]
    if not visible and n >= 2:
        p[0] -= delta
        p[1] += delta
    acc, out = 0.0, []
    for x in p:
        acc += x
        out.append(acc)
    return out


def _pick(u: float, visible: bool, delta: float, n: int) -> int:
    """The menu position of uniform ``u``: the first whose cumulative probability exceeds ``u``."""
    for j, c in enumerate(_cdf(visible, delta, n)):
        if u < c:
            return j
    return n - 1


class _Seen:
    """Writer: whether any visible (not masked) outcome was recorded."""

    def init_state(self) -> bool:
        return False

    def update(self, state: bool, task: Any, key: str, outcome: float) -> bool:
        return bool(state or not np.isnan(outcome))


class _ShiftPolicy:
    def __init__(self, delta: float) -> None:
        self.delta = delta

    def act(self, state: bool, task: Any, menu: tuple[str, ...], rng: np.random.Generator) -> str:
        return menu[_pick(float(rng.random()), bool(state), self.delta, len(menu))]


class _ShiftArray:
    thread_safe: ClassVar[bool] = True

    def __init__(self, delta: float) -> None:
        self.delta = delta

    def act_batch(self, records: RecordBatch, queries: QueryBatch) -> np.ndarray:
        seen = records.valid & ~np.isnan(records.outcomes)
        t = np.arange(records.keys.shape[1])
        cut = records.cuts[queries.row, queries.cut]
        visible = (seen[queries.row] & (t[None, :] < cut[:, None])).any(axis=1)
        sizes = (queries.menu >= 0).sum(axis=1)
        u = uniforms(queries.seed, 1)[0]
        pos = np.empty(u.shape[0], dtype=np.int64)
        for n in np.unique(sizes).tolist():
            for vis in (False, True):
                sel = (sizes == n) & (visible == vis)
                cdf = np.array(_cdf(vis, self.delta, n))
                pos[sel] = np.minimum(np.searchsorted(cdf, u[sel], side="right"), n - 1)
        return queries.menu[np.arange(u.shape[0]), pos]


def visibility_shift(delta: float) -> Agent:
    """History-blind but for outcome visibility: a known response ``T_gr = delta²`` to ``mask``, none elsewhere."""
    if not 0.0 <= delta <= BASE[0]:
        raise ValueError(f"delta must be in [0, {BASE[0]}]; got {delta!r}")
    return Agent(f"visibility-shift({delta:g})", _Seen(), _ShiftPolicy(delta), _ShiftArray(delta), stochastic=True,
                 invariant_to=("value", "pair", "reorder", "key_slot"))


def rate(hits: Iterable[bool]) -> tuple[float, int, int, tuple[float, float]]:
    """Share of hits, hits, trials and the exact (Clopper-Pearson) 95 % interval of the share (scipy, which the
    benches' ``dev`` extra installs)."""
    from scipy.stats import binomtest

    h = list(hits)
    k, n = sum(h), len(h)
    if not n:
        return math.nan, 0, 0, (math.nan, math.nan)
    ci = binomtest(k, n).proportion_ci(0.95, method="exact")
    return k / n, k, n, (float(ci.low), float(ci.high))


def fmt_rate(r: tuple[float, int, int, tuple[float, float]]) -> str:
    """``12.5% [ 9.8, 15.8] (63/500)``."""
    p, k, n, (lo, hi) = r
    return f"{100 * p:5.1f}% [{100 * lo:4.1f}, {100 * hi:4.1f}] ({k}/{n})"
