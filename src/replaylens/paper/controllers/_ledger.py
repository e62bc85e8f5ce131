"""Ledger controllers: OCRR and its structural variants (UCB1, Local-only, Global-only), both paths.

State (paper §"Controller and replay specification"): a local ledger per (family, context, arm) with
count n and mean ū, a global arm ledger, quarantine expiries per local key, and the policy clock
(the number of adaptation updates so far).  OCRR score for a non-quarantined arm::

    ū = local mean if n > 0 else (global mean if global count > 0 else 0.5)
    L = ū − 1.64·sqrt(max(ū(1 − ū), 0.02) / n)  if n ≥ 4 else 0
    s = ū + 0.28 / sqrt(1 + n) + 0.1·max(0, L)              (n = local count)

Selection: argmax with the lexicographically-largest label tie rule (empty state → ``replicate``).
Update: local and global n, sums and the clock advance; the local key is quarantined (score −∞) for
the next 6 policy steps if local n ≥ 6, u < 0.32 and the local running mean (including u) < 0.46.
In the frozen future the clock does not advance.  Sums are kept in integer micro-units (exact in any
order, so the count–sum variants obey the pair zero law exactly).  A masked outcome advances only the
clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ...agents import Agent, FutureInput, QueryBatch, RecordBatch, TaskInput
from ...agents import to_micro as _to_micro

__all__ = [
    "GLOBAL_ONLY",
    "LOCAL_ONLY",
    "OCRR",
    "UCB1",
    "LedgerController",
    "LedgerSpec",
    "LedgerState",
    "ocrr_agent",
]

_LOG = np.log(np.arange(1, 100_001, dtype=np.float64))  # log(N) lookup shared by both paths


def _log(n: int | np.ndarray) -> Any:
    return _LOG[np.asarray(n, dtype=np.int64) - 1]


@dataclass(frozen=True)
class LedgerSpec:
    """Which ledger parts a variant keeps and which score it uses (``ocrr`` or ``ucb1``)."""

    name: str
    local: bool = True
    global_: bool = True
    quarantine: bool = True
    score: str = "ocrr"


OCRR = LedgerSpec("ocrr")
UCB1 = LedgerSpec("ucb1", quarantine=False, score="ucb1")
LOCAL_ONLY = LedgerSpec("local-only", global_=False, quarantine=False)
GLOBAL_ONLY = LedgerSpec("global-only", local=False, quarantine=False)


@dataclass(frozen=True)
class LedgerState:
    """Immutable ledger state (sums in integer micro-units)."""

    local: Mapping[tuple[str, str, str], tuple[int, int]] = field(default_factory=dict)
    glob: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    expiry: Mapping[tuple[str, str, str], int] = field(default_factory=dict)
    clock: int = 0


def _ocrr_score(n: np.ndarray, s: np.ndarray, gn: np.ndarray, gs: np.ndarray, use_global: bool) -> np.ndarray:
    """Vectorized eq. ocrr-score (arrays broadcast); n, s local count/sum, gn, gs global ones."""
    with np.errstate(divide="ignore", invalid="ignore"):
        loc = (s / np.maximum(n, 1)) * 1e-6
        glo = (gs / np.maximum(gn, 1)) * 1e-6
        fallback = np.where(gn > 0, glo, 0.5) if use_global else np.full(np.shape(n), 0.5)
        ubar = np.where(n > 0, loc, fallback)
        lcb = np.where(n >= 4, ubar - 1.64 * np.sqrt(np.maximum(ubar * (1.0 - ubar), 0.02) / np.maximum(n, 1)), 0.0)
        return ubar + 0.28 / np.sqrt(1.0 + n) + 0.1 * np.maximum(0.0, lcb)


def _ucb_score(n: np.ndarray, s: np.ndarray, total: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = (s / np.maximum(n, 1)) * 1e-6
        bonus = np.sqrt(2.0 * _log(np.maximum(2, total)) / np.maximum(n, 1))
        return np.where(n > 0, mean + bonus, np.inf)


@dataclass(frozen=True)
class LedgerController:
    """OCRR-family controller usable closed-loop and as a replay writer/policy.

    ``priority``: tie order of labels, highest first (default: lexicographically largest label
    string wins).  Renaming it together with the labels makes tie-breaking equivariant (the paper's
    label-equivariance calibration).
    """

    spec: LedgerSpec = OCRR
    priority: tuple[str, ...] | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    # ---- per-record path
    def init_state(self) -> LedgerState:
        return LedgerState()

    def update(self, state: LedgerState, task: TaskInput, key: str, outcome: float) -> LedgerState:
        clock = state.clock + 1
        if outcome != outcome:  # masked: only the clock advances
            return replace(state, clock=clock)
        u = int(_to_micro(outcome))
        lk = (task.family, task.context, key)
        n, s = state.local.get(lk, (0, 0))
        n, s = n + 1, s + u
        local = dict(state.local)
        local[lk] = (n, s)
        gn, gs = state.glob.get(key, (0, 0))
        glob = dict(state.glob)
        glob[key] = (gn + 1, gs + u)
        expiry = state.expiry
        if self.spec.quarantine and n >= 6 and u < 320_000 and s < 460_000 * n:
            expiry = dict(expiry)
            expiry[lk] = clock + 6
        return LedgerState(local, glob, expiry, clock)

    def scores(self, state: LedgerState, family: str, context: str, menu: Sequence[str]) -> np.ndarray:
        n = np.array([state.local.get((family, context, a), (0, 0))[0] for a in menu], dtype=np.float64)
        s = np.array([state.local.get((family, context, a), (0, 0))[1] for a in menu], dtype=np.float64)
        gn = np.array([state.glob.get(a, (0, 0))[0] for a in menu], dtype=np.float64)
        gs = np.array([state.glob.get(a, (0, 0))[1] for a in menu], dtype=np.float64)
        if not self.spec.local:
            n, s = gn, gs
        if self.spec.score == "ucb1":
            total = sum(v[0] for k, v in state.local.items() if k[0] == family and k[1] == context)
            sc = _ucb_score(n, s, np.full(len(menu), total, dtype=np.int64))
        else:
            sc = _ocrr_score(n, s, gn, gs, self.spec.global_ and self.spec.local)
        if self.spec.quarantine:
            q = np.array([state.expiry.get((family, context, a), 0) > state.clock for a in menu])
            sc = np.where(q, -np.inf, sc)
        return sc

    def _tie(self, menu: Sequence[str], best: np.ndarray) -> str:
        cands = [menu[int(i)] for i in best]
        if self.priority is None:
            return max(cands)
        rank = {lab: i for i, lab in enumerate(self.priority)}
        return min(cands, key=lambda a: rank.get(a, len(rank)))

    def act(self, state: LedgerState, task: FutureInput, menu: tuple[str, ...], rng: np.random.Generator) -> str:
        sc = self.scores(state, task.family, task.context, menu)
        return self._tie(menu, np.flatnonzero(sc == sc.max()))

    # ---- array path
    def act_batch(self, records: RecordBatch, queries: QueryBatch) -> np.ndarray:
        h, kc, b, n = records.n_histories, records.n_cuts, records.n_blocks, records.n_labels
        ln = np.zeros((h, b, n))
        ls = np.zeros((h, b, n))
        gn = np.zeros((h, n))
        gs = np.zeros((h, n))
        ex = np.zeros((h, b, n))
        clock = np.zeros(h)
        snaps = {name: np.zeros((h, kc, *shape)) for name, shape in
                 (("ln", (b, n)), ("ls", (b, n)), ("gn", (n,)), ("gs", (n,)), ("ex", (b, n)), ("clock", ()))}

        def snap(rows: np.ndarray, ks: np.ndarray) -> None:
            for name, arr in (("ln", ln), ("ls", ls), ("gn", gn), ("gs", gs), ("ex", ex), ("clock", clock)):
                snaps[name][rows, ks] = arr[rows]

        hit = np.nonzero(records.cuts == 0)
        snap(hit[0], hit[1])
        micro = _to_micro(records.outcomes)
        for t in range(records.keys.shape[1]):
            rows = np.flatnonzero(records.valid[:, t])
            if rows.size:
                clock[rows] += 1
                vis = rows[~np.isnan(micro[rows, t])]
                if vis.size:
                    blk, key, u = records.blocks[vis, t], records.keys[vis, t], micro[vis, t]
                    ln[vis, blk, key] += 1
                    ls[vis, blk, key] += u
                    gn[vis, key] += 1
                    gs[vis, key] += u
                    if self.spec.quarantine:
                        nn, ss = ln[vis, blk, key], ls[vis, blk, key]
                        q = (nn >= 6) & (u < 320_000) & (ss < 460_000 * nn)
                        ex[vis[q], blk[q], key[q]] = clock[vis[q]] + 6
            hh, kk = np.nonzero(records.cuts == t + 1)
            if hh.size:
                snap(hh, kk)
        r, c, bq = queries.row, queries.cut, queries.block
        menu = np.where(queries.menu >= 0, queries.menu, 0)

        def at(name: str, per_block: bool) -> np.ndarray:
            a = snaps[name][r, c, bq] if per_block else snaps[name][r, c]
            return np.take_along_axis(a, menu, axis=1)

        qn, qs, qgn, qgs = at("ln", True), at("ls", True), at("gn", False), at("gs", False)
        if not self.spec.local:
            qn, qs = qgn, qgs
        if self.spec.score == "ucb1":
            total = snaps["ln"][r, c, bq].sum(axis=1)[:, None]
            sc = _ucb_score(qn, qs, np.broadcast_to(total, qn.shape).astype(np.int64))
        else:
            sc = _ocrr_score(qn, qs, qgn, qgs, self.spec.global_ and self.spec.local)
        if self.spec.quarantine:
            sc = np.where(at("ex", True) > snaps["clock"][r, c][:, None], -np.inf, sc)
        sc = np.where(queries.menu >= 0, sc, np.nan)
        top = sc == np.nanmax(sc, axis=1, keepdims=True)
        labels = np.asarray(records.labels, dtype=object)
        if self.priority is None:
            rank = np.argsort(np.argsort(labels))  # larger rank = lexicographically larger
        else:
            pr = {lab: i for i, lab in enumerate(self.priority)}
            rank = -np.array([pr.get(lab, len(pr)) for lab in records.labels])
        pos = np.argmax(np.where(top, rank[menu], -10**9), axis=1)
        return np.take_along_axis(queries.menu, pos[:, None], axis=1)[:, 0]

    def agent(self) -> Agent:
        inv = ("pair", "reorder") if not self.spec.quarantine else ()  # count–sum variants: pair zero law
        return Agent(self.spec.name, self, self, array=self, task_invariant=True, invariant_to=inv,
                     spec={"name": self.spec.name, "priority": list(self.priority) if self.priority else None})


def ocrr_agent(variant: str = "ocrr", priority: Sequence[str] | None = None) -> Agent:
    """OCRR (``ocrr``) or a structural variant (``ucb1``, ``local-only``, ``global-only``) as an agent."""
    specs = {s.name: s for s in (OCRR, UCB1, LOCAL_ONLY, GLOBAL_ONLY)}
    if variant not in specs:
        raise ValueError(f"unknown ledger variant {variant!r}; use one of {sorted(specs)}")
    return LedgerController(specs[variant], tuple(priority) if priority is not None else None).agent()
