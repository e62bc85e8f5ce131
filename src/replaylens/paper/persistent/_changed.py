"""The changed-substrate reconstruction: hypothesis screening and model validation (paper l.2111–2216).

Two decision families with low- and high-noise contexts (4 strata); per stratum and stream 24 development, 48
adaptation and 48 future tasks.  The four arms are probe allocators with a budget of 12:

* ``coverage`` probes candidate t mod n; ``replicate`` repeats the preceding candidate from i₀ = 0 (so it probes
  candidate 0 twelve times); ``adaptive`` takes the lowest-index candidate without history, otherwise the argmax
  of b̄_i + 0.30/√n_i over visited and 0.50 + 0.08·U_i over unvisited candidates (U_i a fixed uniform draw; lowest
  index on ties); ``mixed`` uses coverage for the first ⌊n/2⌋ probes, then the adaptive rule on all history.
* **Hypothesis screening** (n = 12): z_i ~ N(0, τ_φ²), τ = 0.90 / 1.10 / 0.78 (dev / adapt / future);
  future task ℓ gets the offset linspace(−0.18, 0.18, 48)[ℓ] on every candidate (``hs_offset="task"``, the
  default, partB §2.2 FLAG; ``"candidate"``: z_i += linspace(−0.18, 0.18, 12)[i], the §2.2 CHOICE);
  probe b = z_i + ε, ε ~ N(0, η²), η = 0.16 (low) or 0.62 (high).  The selected three are the three probed
  candidates with the largest probe mean (ties to the lower index), filled with the lowest-index unprobed candidates;
  utility clip₀¹(0.50 + 0.22·(z̄_sel − z̄)/(sd(z) + 1e-6)) with the population sd.  The oracle utility replaces z̄_sel by
  the mean of the three largest z.
* **Model validation** (n = 10): ℓ_i ~ N(0, 0.85²) + linspace(−0.75, 0.75, 10)[i] + κ_φ, κ = −0.20 / 0.15 / 0.38;
  p_i = sigmoid(ℓ_i); probe b = clip₀¹(p_i + ε), ε sd 0.035 (low) or 0.18 (high); p̂_i = the probe mean (0.5 if
  unprobed); utility exp(−Σ_i (p̂_i − p_i)² / (0.045·10)).  The oracle utility is 1.

Randomness: every task has its own generator ``derive_rng(seed, "changed", family, context, r, split, ℓ)``; it
draws the world (z, or ℓ), then the adaptive rule's uniforms U, then each arm's probe noise ε[i, k] (the k-th probe
of candidate i) for the arms in canonical order.  Every arm's observations are therefore fixed before any policy
acts, and a stream's tables do not depend on how many streams are built.  Utilities are rounded to 6 decimals.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ...errors import ConfigError
from ...records import Evaluator, FutureTask, FutureTasks, History
from ...rng import derive_rng, derive_seed
from .. import numerics as nx

__all__ = [
    "CHANGED_ARMS",
    "CHANGED_STRATA",
    "ChangedWorld",
    "build_changed",
    "hs_utility",
    "mv_utility",
    "probe_allocation",
]

CHANGED_ARMS: tuple[str, ...] = ("coverage", "adaptive", "replicate", "mixed")
CHANGED_STRATA: tuple[tuple[str, str], ...] = (("hypothesis", "low"), ("hypothesis", "high"),
                                               ("validation", "low"), ("validation", "high"))
SPLITS = ("development", "adaptation", "future")
TASKS = {"development": 24, "adaptation": 48, "future": 48}
BUDGET = 12
HS_N, MV_N = 12, 10
HS_TAU = {"development": 0.90, "adaptation": 1.10, "future": 0.78}
HS_ETA = {"low": 0.16, "high": 0.62}
MV_KAPPA = {"development": -0.20, "adaptation": 0.15, "future": 0.38}
MV_SD = {"low": 0.035, "high": 0.18}
HS_OFFSETS = ("candidate", "task")


def probe_allocation(arm: str, signal: np.ndarray, noise: np.ndarray, uniforms: np.ndarray, *,
                     clip: bool = False, budget: int = BUDGET) -> tuple[np.ndarray, np.ndarray]:
    """Probe counts and sums [N, n] of ``arm`` on N tasks.

    ``signal`` [N, n] is z (HS) or p (MV); ``noise`` [N, n, budget] the arm's ε (probe k of candidate i uses
    ε[i, k]); ``uniforms`` [N, n] the adaptive rule's fixed draws; ``clip`` clips each probe to [0, 1] (MV).
    """
    n_t, n = signal.shape
    rows = np.arange(n_t)
    counts = np.zeros((n_t, n), dtype=np.int64)
    sums = np.zeros((n_t, n))
    for t in range(budget):
        if arm == "coverage" or (arm == "mixed" and t < n // 2):
            pick = np.full(n_t, t % n)
        elif arm == "replicate":
            pick = np.zeros(n_t, dtype=np.int64)
        elif arm in ("adaptive", "mixed"):
            with np.errstate(divide="ignore", invalid="ignore"):
                visited = sums / np.maximum(counts, 1) + 0.30 / np.sqrt(np.maximum(counts, 1))
            score = np.where(counts > 0, visited, 0.50 + 0.08 * uniforms)
            pick = np.argmax(score, axis=1)
            if t == 0:  # no history: the lowest-index unvisited candidate
                pick = np.zeros(n_t, dtype=np.int64)
        else:
            raise ConfigError(f"unknown arm {arm!r}; arms are {', '.join(CHANGED_ARMS)}")
        k = counts[rows, pick]
        b = signal[rows, pick] + noise[rows, pick, k]
        if clip:
            b = np.clip(b, 0.0, 1.0)
        counts[rows, pick] += 1
        sums[rows, pick] += b
    return counts, sums


def hs_utility(z: np.ndarray, counts: np.ndarray, sums: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(utility, oracle utility) [N] of hypothesis screening from latent z [N, 12] and probe counts/sums."""
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.where(counts > 0, sums / np.maximum(counts, 1), 0.0)
    key = np.where(counts > 0, -mean, np.inf)  # probed by descending mean, then unprobed; ties to lower index
    top = np.argsort(key, axis=1, kind="stable")[:, :3]
    zbar, sd = z.mean(axis=1), z.std(axis=1)
    sel = np.take_along_axis(z, top, axis=1).mean(axis=1)
    best = np.sort(z, axis=1)[:, -3:].mean(axis=1)

    def u(x: np.ndarray) -> np.ndarray:
        return np.clip(0.50 + 0.22 * (x - zbar) / (sd + 1e-6), 0.0, 1.0)

    return u(sel), u(best)


def mv_utility(p: np.ndarray, counts: np.ndarray, sums: np.ndarray) -> np.ndarray:
    """Model-validation utility [N] from true p [N, 10] and probe counts/sums (unprobed estimates 0.5)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        phat = np.where(counts > 0, sums / np.maximum(counts, 1), 0.5)
    return nx.exp(-np.sum((phat - p) ** 2, axis=1) / (0.045 * 10))


def _ro(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class ChangedWorld:
    """Counterfactual tables of the changed substrate (``[stream, stratum, task, arm]``; block b = stratum b).

    ``future_oracle_utility`` [r, s, t] is the executor oracle's utility (HS: the top-3 latent mean; MV: 1), used
    for regret; oracle-match uses the best of the four arms (first maximum in canonical order).
    """

    seed: int
    dev_utility: np.ndarray
    adapt_utility: np.ndarray
    future_utility: np.ndarray
    future_oracle_utility: np.ndarray
    strata: tuple[tuple[str, str], ...] = CHANGED_STRATA
    arms: tuple[str, ...] = CHANGED_ARMS
    stream_ids: tuple[str, ...] = field(default=())

    @property
    def n_streams(self) -> int:
        return int(self.future_utility.shape[0])

    @property
    def learning_blocks(self) -> tuple[tuple[str, str], ...]:
        return self.strata

    @property
    def streams(self) -> tuple[str, ...]:
        return self.stream_ids or tuple(f"r{r:02d}" for r in range(self.n_streams))

    def oracle(self) -> np.ndarray:
        """a*(x) [r, s, t] over the future tasks: first maximum in canonical order."""
        return np.argmax(self.future_utility, axis=-1)

    def select(self, streams: Sequence[int]) -> ChangedWorld:
        idx = np.asarray(list(streams), dtype=np.int64)
        ids = self.streams
        return ChangedWorld(self.seed, _ro(self.dev_utility[idx]), _ro(self.adapt_utility[idx]),
                            _ro(self.future_utility[idx]), _ro(self.future_oracle_utility[idx]), self.strata,
                            self.arms, tuple(ids[i] for i in idx.tolist()))

    def task_id(self, r: int, s: int, split: str, t: int) -> str:
        fam, ctx = self.strata[s]
        tag = {"development": "dev", "adaptation": "adapt", "future": "future"}[split]
        return f"{self.streams[r]}/{fam}/{ctx}/{tag}/{t:02d}"

    def history(self, actions: np.ndarray) -> History:
        """Adaptation history of arm indices ``actions`` [r, s, 48]: slot = s·48 + t, outcome = measured utility."""
        idx = np.asarray(actions, dtype=np.int64)
        if idx.shape != self.adapt_utility.shape[:3]:
            raise ConfigError(f"actions must have shape {self.adapt_utility.shape[:3]}; got {idx.shape}")
        r_n, s_n, t_n = idx.shape
        u = np.take_along_axis(self.adapt_utility, idx[..., None], axis=-1)[..., 0]
        return History.from_columns(
            stream=np.repeat(np.array(self.streams), s_n * t_n),
            family=np.tile(np.repeat(np.array([f for f, _ in self.strata]), t_n), r_n),
            context=np.tile(np.repeat(np.array([c for _, c in self.strata]), t_n), r_n),
            slot=np.tile(np.arange(s_n * t_n, dtype=np.int64), r_n),
            task=[self.task_id(r, s, "adaptation", t) for r in range(r_n) for s in range(s_n) for t in range(t_n)],
            key=np.array(self.arms)[idx.reshape(-1)], outcome=u.reshape(-1), source="<changed>")

    def futures(self) -> FutureTasks:
        return FutureTasks(tuple(FutureTask(self.streams[r], f, c, self.task_id(r, s, "future", t), self.arms, t)
                                 for r in range(self.n_streams) for s, (f, c) in enumerate(self.strata)
                                 for t in range(self.future_utility.shape[2])), source="<changed>")

    def evaluator(self) -> Evaluator:
        u = self.future_utility.tolist()
        return Evaluator({(self.streams[r], self.task_id(r, s, "future", t)): dict(zip(self.arms, u[r][s][t],
                                                                                        strict=True))
                          for r in range(self.n_streams) for s in range(len(self.strata))
                          for t in range(len(u[r][s]))}, source="<changed>")


def _tables(seed: int, r_n: int, family: str, context: str, split: str,
            hs_offset: str) -> tuple[np.ndarray, np.ndarray]:
    """(utility [r, t, 4], oracle utility [r, t]) of one stratum and split."""
    t_n = TASKS[split]
    n = HS_N if family == "hypothesis" else MV_N
    sig = np.empty((r_n * t_n, n))
    uni = np.empty((r_n * t_n, n))
    noise = np.empty((len(CHANGED_ARMS), r_n * t_n, n, BUDGET))
    for r in range(r_n):
        for q in range(t_n):
            g = derive_rng(seed, "changed", family, context, r, split, q)
            j = r * t_n + q
            if family == "hypothesis":
                z = g.normal(0.0, HS_TAU[split], n)
                if split == "future" and hs_offset == "candidate":
                    z = z + np.linspace(-0.18, 0.18, n)
                elif split == "future":  # "task": one level per future task, drifting across the split
                    z = z + np.linspace(-0.18, 0.18, t_n)[q]
                sig[j] = z
            else:
                ell = g.normal(0.0, 0.85, n) + np.linspace(-0.75, 0.75, n) + MV_KAPPA[split]
                sig[j] = 1.0 / (1.0 + nx.exp(-ell))
            uni[j] = g.random(n)
            sd = HS_ETA[context] if family == "hypothesis" else MV_SD[context]
            for a in range(len(CHANGED_ARMS)):
                noise[a, j] = g.normal(0.0, sd, (n, BUDGET))
    util = np.empty((r_n * t_n, len(CHANGED_ARMS)))
    oracle = np.ones(r_n * t_n)
    for a, arm in enumerate(CHANGED_ARMS):
        counts, sums = probe_allocation(arm, sig, noise[a], uni, clip=family == "validation")
        if family == "hypothesis":
            util[:, a], oracle = hs_utility(sig, counts, sums)
        else:
            util[:, a] = mv_utility(sig, counts, sums)
    return util.reshape(r_n, t_n, -1), oracle.reshape(r_n, t_n)


def build_changed(n_streams: int = 48, *, seed: int, decimals: int | None = 6,
                  hs_offset: str = "task") -> ChangedWorld:
    """Build the changed substrate (4 strata × 48 streams by default); utilities rounded to ``decimals``.

    ``hs_offset`` reads the hypothesis-screening future offset "from −0.18 to 0.18": ``"candidate"`` (partB §2.2
    CHOICE, z_i += linspace(−0.18, 0.18, 12)[i]) or ``"task"`` (default; the §2.2 FLAG alternative: future task ℓ of 48
    gets the constant linspace(−0.18, 0.18, 48)[ℓ] on all its candidates; it cancels in U_HS and moves only the
    adaptive rule's comparison with its absolute unvisited score 0.50 + 0.08·U_i).
    """
    derive_seed(seed)
    if hs_offset not in HS_OFFSETS:
        raise ConfigError(f"hs_offset must be one of {', '.join(HS_OFFSETS)}; got {hs_offset!r}")
    if isinstance(n_streams, bool) or not isinstance(n_streams, int) or n_streams < 1:
        raise ConfigError(f"n_streams must be a positive int; got {n_streams!r}")
    out: dict[str, np.ndarray] = {}
    ora = np.empty((n_streams, len(CHANGED_STRATA), TASKS["future"]))
    for split in SPLITS:
        arr = np.empty((n_streams, len(CHANGED_STRATA), TASKS[split], len(CHANGED_ARMS)))
        for s, (fam, ctx) in enumerate(CHANGED_STRATA):
            u, o = _tables(seed, n_streams, fam, ctx, split, hs_offset)
            arr[:, s] = u
            if split == "future":
                ora[:, s] = o
        out[split] = np.round(arr, decimals) if decimals is not None else arr
    if decimals is not None:
        ora = np.round(ora, decimals)
    return ChangedWorld(int(seed), _ro(out["development"]), _ro(out["adaptation"]), _ro(out["future"]), _ro(ora))
