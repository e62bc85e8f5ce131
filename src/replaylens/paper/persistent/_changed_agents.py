"""Agents of the changed substrate: its OCRR ledger and the fitted selected-outcome-only writer.

**Changed-substrate OCRR** (paper eq. changed-ledger-score; partB §1.2): a ledger of counts and utility sums per
(family, context, arm), sums in integer micro-units.  Score of a non-quarantined arm::

    ū = local mean if n > 0 else 0.5            (no global fallback on this substrate)
    L = ū − 1.55·sqrt(max(0.02, ū(1 − ū)) / n)  if n ≥ 4 else 0
    s = ū + 0.30 / sqrt(1 + n) + 0.08·max(0, L)

argmax with the lexicographically-largest tie rule (empty state → ``replicate``).  After an update the key is
quarantined (score −∞) for the next six decisions of the same family–context key when it has ≥ 6 observations,
the current utility is < 0.35 and its running mean (including it) is < 0.47.  The future is frozen (the block
clock does not advance).  A masked outcome advances only the block clock.

**Selected-only writer** (paper l.1681–1700; partB §2.7): per block h = Σ_t (u_t − ½)·p_{ℓ_t} with p_a ∈ ℝ⁸,
score_a = sigmoid(q_aᵀ h), argmax (lexicographically-largest ties).  h is computed from the exact per-key sums of
u − ½ in integer micro-units, then Σ_a sum_a·p_a in canonical key order, so it is bit-for-bit invariant to the
order of the records (pair transport gives exactly zero change).  :func:`fit_selected_only` fits P and Q by the
leave-one-out selected-outcome loss (full-batch Adam).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ...agents import (
    Agent,
    FutureInput,
    QueryBatch,
    RecordBatch,
    TaskInput,
    TieRule,
    block_key_sums,
    choose,
    choose_batch,
    to_micro,
)
from ...errors import AgentError, ConfigError
from ...rng import check_rng
from .. import numerics as nx

__all__ = [
    "ChangedLedgerState",
    "ChangedOCRR",
    "SelectedOnlyFit",
    "SelectedOnlyWriter",
    "changed_ocrr_agent",
    "fit_selected_only",
]


@dataclass(frozen=True)
class ChangedLedgerState:
    """Immutable ledger: (count, micro-sum) and quarantine expiry per (family, context, arm); clocks per block."""

    local: Mapping[tuple[str, str, str], tuple[int, int]]
    expiry: Mapping[tuple[str, str, str], int]
    clock: Mapping[tuple[str, str], int]

    @property
    def glob(self) -> Mapping[str, tuple[int, int]]:
        """No global arm ledger on this substrate (unvisited arms score from 0.5)."""
        return {}


def _score(n: np.ndarray, s: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        ubar = np.where(n > 0, (s / np.maximum(n, 1)) * 1e-6, 0.5)
        lcb = np.where(n >= 4, ubar - 1.55 * np.sqrt(np.maximum(0.02, ubar * (1.0 - ubar)) / np.maximum(n, 1)), 0.0)
        return ubar + 0.30 / np.sqrt(1.0 + n) + 0.08 * np.maximum(0.0, lcb)


@dataclass(frozen=True)
class ChangedOCRR:
    """The changed-substrate OCRR ledger as a replayable writer/policy (per-record and array paths)."""

    name: str = "changed-ocrr"

    def init_state(self) -> ChangedLedgerState:
        return ChangedLedgerState({}, {}, {})

    def update(self, state: ChangedLedgerState, task: TaskInput, key: str, outcome: float) -> ChangedLedgerState:
        blk = task.block
        clock = dict(state.clock)
        clock[blk] = state.clock.get(blk, 0) + 1
        if outcome != outcome:  # masked: only the clock advances
            return replace(state, clock=clock)
        u = int(to_micro(outcome))
        lk = (task.family, task.context, key)
        n, s = state.local.get(lk, (0, 0))
        n, s = n + 1, s + u
        local = dict(state.local)
        local[lk] = (n, s)
        expiry = state.expiry
        if n >= 6 and u < 350_000 and s < 470_000 * n:
            expiry = dict(expiry)
            expiry[lk] = clock[blk] + 6
        return ChangedLedgerState(local, expiry, clock)

    def scores(self, state: ChangedLedgerState, family: str, context: str, menu: Sequence[str]) -> np.ndarray:
        n = np.array([state.local.get((family, context, a), (0, 0))[0] for a in menu], dtype=np.float64)
        s = np.array([state.local.get((family, context, a), (0, 0))[1] for a in menu], dtype=np.float64)
        clock = state.clock.get((family, context), 0)
        q = np.array([state.expiry.get((family, context, a), 0) > clock for a in menu])
        return np.where(q, -np.inf, _score(n, s))

    def act(self, state: ChangedLedgerState, task: FutureInput, menu: tuple[str, ...],
            rng: np.random.Generator) -> str:
        return choose(self.scores(state, task.family, task.context, menu).tolist(), menu, TieRule.LEX_LARGEST)

    def act_batch(self, records: RecordBatch, queries: QueryBatch) -> np.ndarray:
        h, kc, b, n = records.n_histories, records.n_cuts, records.n_blocks, records.n_labels
        ln, ls, ex = np.zeros((h, b, n)), np.zeros((h, b, n)), np.zeros((h, b, n))
        clock = np.zeros((h, b))
        snaps = {k: np.zeros((h, kc, b, n)) for k in ("ln", "ls", "ex")}
        snap_clock = np.zeros((h, kc, b))

        def snap(rows: np.ndarray, ks: np.ndarray) -> None:
            for k, arr in (("ln", ln), ("ls", ls), ("ex", ex)):
                snaps[k][rows, ks] = arr[rows]
            snap_clock[rows, ks] = clock[rows]

        hit = np.nonzero(records.cuts == 0)
        snap(hit[0], hit[1])
        micro = to_micro(records.outcomes)
        for t in range(records.keys.shape[1]):
            rows = np.flatnonzero(records.valid[:, t])
            if rows.size:
                blk_all = records.blocks[rows, t]
                clock[rows, blk_all] += 1
                vis = rows[~np.isnan(micro[rows, t])]
                if vis.size:
                    blk, key, u = records.blocks[vis, t], records.keys[vis, t], micro[vis, t]
                    ln[vis, blk, key] += 1
                    ls[vis, blk, key] += u
                    nn, ss = ln[vis, blk, key], ls[vis, blk, key]
                    q = (nn >= 6) & (u < 350_000) & (ss < 470_000 * nn)
                    ex[vis[q], blk[q], key[q]] = clock[vis[q], blk[q]] + 6
            hh, kk = np.nonzero(records.cuts == t + 1)
            if hh.size:
                snap(hh, kk)
        r, c, bq = queries.row, queries.cut, queries.block
        menu = np.where(queries.menu >= 0, queries.menu, 0)

        def at(k: str) -> np.ndarray:
            return np.take_along_axis(snaps[k][r, c, bq], menu, axis=1)

        sc = np.where(at("ex") > snap_clock[r, c, bq][:, None], -np.inf, _score(at("ln"), at("ls")))
        return choose_batch(sc, queries.menu, TieRule.LEX_LARGEST, records.labels)

    def agent(self) -> Agent:
        return Agent(self.name, self, self, array=self, task_invariant=True, spec={"name": self.name})


def changed_ocrr_agent() -> Agent:
    """The changed-substrate OCRR ledger as an agent."""
    return ChangedOCRR().agent()


# ------------------------------------------------------------------ selected-only writer

BlockSums = Mapping[tuple[str, str], tuple[int, ...]]


def _linear(x: np.ndarray, m: np.ndarray) -> np.ndarray:
    """x @ m for (N, J) x and (J, D) m as J elementwise multiply-adds in a fixed order (no BLAS)."""
    out = np.zeros((x.shape[0], m.shape[1]))
    for j in range(m.shape[0]):
        out += x[:, j : j + 1] * m[None, j, :]
    return out


@dataclass(frozen=True, eq=False)
class SelectedOnlyWriter:
    """h = Σ_t (u_t − ½) p_{ℓ_t} per block (exact per-key micro sums), score_a = sigmoid(q_aᵀ h)."""

    p: np.ndarray
    q: np.ndarray
    arms: tuple[str, ...]
    name: str = "selected-only"

    def __post_init__(self) -> None:
        for nm in ("p", "q"):
            arr = np.array(getattr(self, nm), dtype=np.float64)
            if arr.ndim != 2 or arr.shape[0] != len(self.arms) or not np.all(np.isfinite(arr)):
                raise ConfigError(f"{nm} must be a finite [{len(self.arms)}, d] array; got shape {arr.shape}")
            arr.setflags(write=False)
            object.__setattr__(self, nm, arr)
        if self.p.shape != self.q.shape:
            raise ConfigError(f"p and q must have the same shape; got {self.p.shape} and {self.q.shape}")

    def scores_from_micro(self, micro: np.ndarray) -> np.ndarray:
        """(N, A) scores from (N, A) per-arm sums of u − ½ in micro-units."""
        h = _linear(np.asarray(micro, dtype=np.float64) * 1e-6, self.p)
        z = np.zeros((h.shape[0], len(self.arms)))
        for j in range(h.shape[1]):
            z += h[:, j : j + 1] * self.q[None, :, j]
        return 1.0 / (1.0 + nx.exp(-z))

    def _arm(self, key: str) -> int:
        try:
            return self.arms.index(key)
        except ValueError:
            raise AgentError(f"{self.name}: key {key!r} is not an arm {self.arms}") from None

    def init_state(self) -> BlockSums:
        return {}

    def update(self, state: BlockSums, task: TaskInput, key: str, outcome: float) -> BlockSums:
        m = list(state.get(task.block, (0,) * len(self.arms)))
        if outcome == outcome:
            m[self._arm(key)] += int(to_micro(outcome)) - 500_000
        new = dict(state)
        new[task.block] = tuple(m)
        return new

    def act(self, state: BlockSums, task: FutureInput, menu: tuple[str, ...], rng: np.random.Generator) -> str:
        m = np.asarray(state.get(task.stratum, (0,) * len(self.arms)), dtype=np.float64)[None]
        s = self.scores_from_micro(m)[0]
        return choose([float(s[self._arm(a)]) for a in menu], menu, TieRule.LEX_LARGEST)

    def act_batch(self, records: RecordBatch, queries: QueryBatch) -> np.ndarray:
        vis = ~np.isnan(records.outcomes)
        c = np.where(vis, to_micro(np.where(vis, records.outcomes, 0.5)) - 500_000.0, 0.0)
        sums = block_key_sums(records, c)[queries.row, queries.cut, queries.block]  # (Q, labels)
        code = np.array([self.arms.index(lab) if lab in self.arms else -1 for lab in records.labels])
        if np.any(records.valid & (code[np.where(records.keys >= 0, records.keys, 0)] < 0)):
            raise AgentError(f"{self.name}: a record key is not an arm {self.arms}")
        micro = np.zeros((sums.shape[0], len(self.arms)))
        for lab, a in enumerate(code):
            if a >= 0:
                micro[:, a] = sums[:, lab]
        scores = self.scores_from_micro(micro)
        menu = np.where(queries.menu >= 0, queries.menu, 0)
        ms = np.take_along_axis(scores, np.where(code[menu] >= 0, code[menu], 0), axis=1)
        return choose_batch(ms, queries.menu, TieRule.LEX_LARGEST, records.labels)

    def agent(self) -> Agent:
        return Agent(self.name, self, self, array=self, task_invariant=True, invariant_to=("pair", "reorder"),
                     spec={"name": self.name})


@dataclass(frozen=True, eq=False)
class SelectedOnlyFit:
    """A fitted selected-only writer with its seed and final training loss."""

    seed: int
    writer: SelectedOnlyWriter
    final_loss: float


def _so_loss_grad(p: np.ndarray, q: np.ndarray, cse: np.ndarray, onehot: np.ndarray, a: np.ndarray,
                  c: np.ndarray, y: np.ndarray, n_blocks: int, lam: float) -> tuple[float, np.ndarray, np.ndarray]:
    """Loss and gradients; ``cse`` [M, A] the record's block key sums, ``onehot`` [M, A] its key (training only)."""
    hm = nx.matmul(cse, p) - c[:, None] * p[a]
    logit = np.sum(q[a] * hm, axis=1)
    yhat = 1.0 / (1.0 + nx.exp(-logit))
    loss = float(0.5 * np.sum((yhat - y) ** 2) / n_blocks + 0.5 * lam * (np.sum(p**2) + np.sum(q**2)))
    g = (yhat - y) * yhat * (1.0 - yhat) / n_blocks
    gq = nx.matmul(onehot.T, g[:, None] * hm)
    dh = g[:, None] * q[a]
    gp = nx.matmul(cse.T, dh) - nx.matmul(onehot.T, c[:, None] * dh)
    return loss, gp + lam * p, gq + lam * q


def fit_selected_only(actions: np.ndarray, outcomes: np.ndarray, *, arms: Sequence[str], seed: int, dim: int = 8,
                      steps: int = 2000, learning_rate: float = 0.01, lam: float = 1e-4,
                      init_scale: float = 0.1) -> SelectedOnlyFit:
    """Leave-one-out fit on training blocks: ``actions`` / ``outcomes`` [blocks, records] (arm indices, utilities).

    ŷ_{e,i} = sigmoid(q_{a_{e,i}}ᵀ (h_e − (y_{e,i} − ½) p_{a_{e,i}})); loss = (1/|E|) Σ_e Σ_i ½(ŷ − y)² +
    (λ/2)(‖P‖² + ‖Q‖²); full-batch Adam (β 0.9/0.999, ε 1e-8), P and Q i.i.d. N(0, init_scale²).
    """
    acts = np.asarray(actions, dtype=np.int64)
    y = np.asarray(outcomes, dtype=np.float64)
    arms = tuple(arms)
    if acts.shape != y.shape or acts.ndim != 2:
        raise ConfigError(f"actions and outcomes must be [blocks, records]; got {acts.shape} and {y.shape}")
    e_n, _ = acts.shape
    c = y - 0.5
    csum = np.zeros((e_n, len(arms)))
    np.add.at(csum, (np.repeat(np.arange(e_n), acts.shape[1]), acts.reshape(-1)), c.reshape(-1))
    e = np.repeat(np.arange(e_n), acts.shape[1])
    a, cf, yf = acts.reshape(-1), c.reshape(-1), y.reshape(-1)
    cse, onehot = csum[e], np.eye(len(arms))[a]
    g = check_rng(int(seed))
    p = g.normal(0.0, init_scale, (len(arms), dim))
    q = g.normal(0.0, init_scale, (len(arms), dim))
    mp, vp, mq, vq = (np.zeros_like(p) for _ in range(4))
    for step in range(1, steps + 1):
        _, gp, gq = _so_loss_grad(p, q, cse, onehot, a, cf, yf, e_n, lam)
        mp, vp = 0.9 * mp + 0.1 * gp, 0.999 * vp + 0.001 * gp**2
        mq, vq = 0.9 * mq + 0.1 * gq, 0.999 * vq + 0.001 * gq**2
        bc1, bc2 = 1.0 - 0.9**step, 1.0 - 0.999**step
        p = p - learning_rate * (mp / bc1) / (np.sqrt(vp / bc2) + 1e-8)
        q = q - learning_rate * (mq / bc1) / (np.sqrt(vq / bc2) + 1e-8)
    loss = _so_loss_grad(p, q, cse, onehot, a, cf, yf, e_n, lam)[0]
    return SelectedOnlyFit(int(seed), SelectedOnlyWriter(p, q, arms), loss)
