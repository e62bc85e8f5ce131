"""The measured-outcome (public-data) executor: tasks, counterfactual tables and library inputs.

For each data family (breast-cancer, wine-red) the features are z-scored with the mean and population sd of
the whole family (labels unused).  Per stratum (family, context) and stream, each of the three splits
(development, adaptation, future) has 24 tasks; a task draws a 96-row candidate pool and a disjoint 96-row
evaluation pool from its own generator ``derive_rng(seed, "public", family, context, r, split, q)``:

* ``iid``: 192 distinct rows without replacement, the first 96 the candidates, the next 96 the evaluation pool;
* ``shifted``: candidates from rows whose first standardized feature is ≤ the family median, the evaluation
  pool from rows above it, 96 each without replacement.

Every arm selects 24 candidates; the frozen ridge-logistic evaluator turns each design into a utility, so
every (task, arm) cell of the counterfactual table is a measured quantity fixed before any policy acts.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ....errors import ConfigError
from ....records import Evaluator, FutureTask, FutureTasks, History
from ....rng import derive_rng, derive_seed
from ...data import file_sha256 as _sha256
from ...data import load, verified_path
from ._design import ARMS, CoverageMode, select_designs
from ._evaluator import EvaluatorConfig, ridge_logistic_utility

__all__ = [
    "BUDGET",
    "CONTEXTS",
    "DATASETS",
    "SPLITS",
    "PublicConfig",
    "PublicWorld",
    "build_public",
    "draw_pools",
    "effective_cost",
    "standardize",
]

DATASETS: tuple[str, ...] = ("breast-cancer", "wine-red")
CONTEXTS: tuple[str, ...] = ("iid", "shifted")
SPLITS: tuple[str, ...] = ("development", "adaptation", "future")
BUDGET = 24
"""Observations selected per task (the label budget); effective cost = BUDGET × condition multiplier."""

_COST_MULTIPLIER = {"extra-sampling": 3}


def effective_cost(condition: str, budget: int = BUDGET) -> int:
    """Budget × multiplier: 3 for Extra sampling (``extra-sampling``, ``Extra sampling``, ...), else 1."""
    key = condition.strip().lower().replace("_", "-").replace(" ", "-")
    return budget * _COST_MULTIPLIER.get(key, 1)


@dataclass(frozen=True)
class PublicConfig:
    """Executor settings; the defaults are the paper's (``coverage="prefix"`` is Part B's reading)."""

    pool_size: int = 96
    n_select: int = BUDGET
    tasks_per_split: int = 24
    coverage: CoverageMode = "prefix"
    evaluator: EvaluatorConfig = field(default_factory=EvaluatorConfig)
    decimals: int | None = 6
    """Utilities are rounded to this many decimals (exact micro-units, as the synthetic world); None keeps them raw."""

    def __post_init__(self) -> None:
        if self.pool_size < 1 or not 1 <= self.n_select <= self.pool_size or self.tasks_per_split < 1 \
                or (self.decimals is not None and self.decimals < 0):
            raise ConfigError(f"invalid public executor settings: {self}")
        if self.coverage not in ("prefix", "even"):
            raise ConfigError(f"coverage must be 'prefix' or 'even'; got {self.coverage!r}")


def standardize(X: np.ndarray) -> np.ndarray:
    """Label-free z-scores with the whole family's mean and population sd (ddof = 0)."""
    return (X - X.mean(axis=0)) / X.std(axis=0)


@dataclass(frozen=True, eq=False)
class PublicWorld:
    """Counterfactual tables of the public-data executor, with conversions to the library's inputs.

    ``dev_utility``, ``adapt_utility`` and ``future_utility`` are indexed ``[stream r, stratum s, task t, arm a]``
    (24 tasks per split); ``strata[s]`` is (family, context) and ``arms`` the canonical order (coverage,
    adaptive, replicate, mixed).  Every stratum is also a learning block: block b = stratum b.
    ``candidates`` / ``evaluation`` hold each task's pool rows (indices into the data set,
    ``[r, s, split, t, pool]``) and ``designs`` the candidate-pool positions chosen by each arm
    (``[r, s, split, t, a, n]``, selection order).  Arrays are read-only.
    """

    seed: int
    strata: tuple[tuple[str, str], ...]
    arms: tuple[str, ...]
    dev_utility: np.ndarray
    adapt_utility: np.ndarray
    future_utility: np.ndarray
    candidates: np.ndarray
    evaluation: np.ndarray
    designs: np.ndarray
    data_sha256: Mapping[str, str]
    config: PublicConfig = field(default_factory=PublicConfig)
    stream_ids: tuple[str, ...] = ()

    # ------------------------------------------------------------------ tables
    @property
    def n_streams(self) -> int:
        return int(self.future_utility.shape[0])

    @property
    def streams(self) -> tuple[str, ...]:
        """Stream ids ``r00``, ``r01``, ... (stream r is row r of every array)."""
        return self.stream_ids or _stream_ids(self.n_streams)

    def utility(self, split: str) -> np.ndarray:
        """The counterfactual table [r, s, t, a] of ``split`` (development/adaptation/future, or dev/adapt)."""
        return {"development": self.dev_utility, "adaptation": self.adapt_utility,
                "future": self.future_utility}[_split(split)]

    def oracle(self, split: str = "future") -> np.ndarray:
        """a*(x) [r, s, t]: arm index of the first maximum in canonical order."""
        return np.argmax(self.utility(split), axis=-1)

    def oracle_utility(self, split: str = "future") -> np.ndarray:
        """max_a g(x, a) [r, s, t]."""
        return self.utility(split).max(axis=-1)

    def chosen_utility(self, actions: np.ndarray | Sequence[object], split: str = "future") -> np.ndarray:
        """g(x, a(x)) [r, s, t] for arm indices or labels ``actions`` [r, s, t]."""
        idx = self._action_index(actions)
        return np.take_along_axis(self.utility(split), idx[..., None], axis=-1)[..., 0]

    def selected_outcomes(self, actions: np.ndarray | Sequence[object]) -> np.ndarray:
        """[r, s, 24] adaptation utility of the selected arm at every slot."""
        return self.chosen_utility(actions, "adaptation")

    def dev_means(self) -> np.ndarray:
        """[r, s, a] mean development utility of every arm (the Static predictor's privileged input)."""
        return self.dev_utility.mean(axis=2)

    def fingerprint(self) -> str:
        """sha256 of the three utility arrays (shapes and bytes), the strata and the data checksums."""
        h = hashlib.sha256(repr((self.strata, sorted(self.data_sha256.items()))).encode())
        for a in (self.dev_utility, self.adapt_utility, self.future_utility):
            h.update(str(a.shape).encode())
            h.update(np.ascontiguousarray(a).tobytes())
        return h.hexdigest()

    def select(self, streams: Sequence[int]) -> PublicWorld:
        """The world restricted to the given stream rows (ids kept, e.g. a cross-fitting fold)."""
        idx = np.asarray(list(streams), dtype=np.int64)
        ids = self.streams
        return replace(self, dev_utility=_ro(self.dev_utility[idx]), adapt_utility=_ro(self.adapt_utility[idx]),
                       future_utility=_ro(self.future_utility[idx]), candidates=_ro(self.candidates[idx]),
                       evaluation=_ro(self.evaluation[idx]), designs=_ro(self.designs[idx]),
                       stream_ids=tuple(ids[i] for i in idx.tolist()))

    def reorder(self, datasets: Sequence[str]) -> PublicWorld:
        """The same tables with the strata grouped by data family in ``datasets`` order (contexts keep their
        order); equal to building the world with ``datasets=...``, since every task has its own generator."""
        order = [s for ds in datasets for s, st in enumerate(self.strata) if st[0] == ds]
        if sorted(order) != list(range(len(self.strata))):
            families = ", ".join(dict.fromkeys(st[0] for st in self.strata))
            raise ConfigError(f"datasets must name each family of the world once ({families}); got {list(datasets)}")
        idx = np.asarray(order, dtype=np.int64)
        return replace(self, strata=tuple(self.strata[i] for i in order),
                       dev_utility=_ro(self.dev_utility[:, idx]), adapt_utility=_ro(self.adapt_utility[:, idx]),
                       future_utility=_ro(self.future_utility[:, idx]), candidates=_ro(self.candidates[:, idx]),
                       evaluation=_ro(self.evaluation[:, idx]), designs=_ro(self.designs[:, idx]))

    # ------------------------------------------------------------------ library inputs
    def task_id(self, r: int, s: int, split: str, t: int) -> str:
        """``r03/wine-red/iid/adapt/07``: stream, stratum, split (dev/adapt/future) and local index."""
        fam, ctx = self.strata[s]
        return f"{self.streams[r]}/{fam}/{ctx}/{_SPLIT_TAG[_split(split)]}/{t:02d}"

    def history(self, actions: np.ndarray | Sequence[object], *, source: str = "<public>") -> History:
        """The adaptation history of a policy's ``actions`` [r, s, 24] (arm indices or labels).

        Stream ``r00``..; block b = stratum b (family = data set, context); slot = b·24 + t; key = the arm;
        outcome = its measured adaptation utility.
        """
        idx = self._action_index(actions)
        R, S, T = idx.shape
        u = self.chosen_utility(idx, "adaptation")
        streams = np.repeat(np.array(self.streams), S * T)
        fam = np.tile(np.repeat(np.array([f for f, _ in self.strata]), T), R)
        ctx = np.tile(np.repeat(np.array([c for _, c in self.strata]), T), R)
        slot = np.tile(np.arange(S * T, dtype=np.int64), R)
        task = [self.task_id(r, s, "adaptation", t) for r in range(R) for s in range(S) for t in range(T)]
        key = np.array(self.arms)[idx.reshape(-1)]
        return History.from_columns(stream=streams, family=fam, context=ctx, slot=slot, task=task, key=key,
                                    outcome=u.reshape(-1), source=source)

    def futures(self, *, source: str = "<public>") -> FutureTasks:
        """The 24 future tasks of every (stream, stratum), menu = the four arms (own block feeds)."""
        tasks = [FutureTask(self.streams[r], fam, ctx, self.task_id(r, s, "future", t), self.arms, t)
                 for r in range(self.n_streams) for s, (fam, ctx) in enumerate(self.strata)
                 for t in range(self.future_utility.shape[2])]
        return FutureTasks(tuple(tasks), source=source)

    def evaluator(self, *, source: str = "<public>") -> Evaluator:
        """The future counterfactual table g̃(x, a) keyed by (stream, task)."""
        table: dict[tuple[str, str], dict[str, float]] = {}
        u = self.future_utility.tolist()
        for r in range(self.n_streams):
            for s in range(len(self.strata)):
                for t in range(len(u[r][s])):
                    table[(self.streams[r], self.task_id(r, s, "future", t))] = dict(zip(self.arms, u[r][s][t],
                                                                                         strict=True))
        return Evaluator(table, source=source)

    def _action_index(self, actions: np.ndarray | Sequence[object]) -> np.ndarray:
        a = np.asarray(actions)
        want = self.future_utility.shape[:3]
        if a.shape != want:
            raise ConfigError(f"actions must have shape [streams, strata, tasks] = {want}; got {a.shape}")
        if a.dtype.kind in "iu":
            if a.size and (a.min() < 0 or a.max() >= len(self.arms)):
                raise ConfigError(f"arm indices must lie in 0..{len(self.arms) - 1}")
            return a.astype(np.int64)
        lookup = {name: i for i, name in enumerate(self.arms)}
        flat = a.reshape(-1).tolist()
        bad = [x for x in flat if x not in lookup]
        if bad:
            raise ConfigError(f"unknown arm {bad[0]!r}; arms are {', '.join(self.arms)}")
        return np.array([lookup[x] for x in flat], dtype=np.int64).reshape(want)

    def __repr__(self) -> str:
        return (f"PublicWorld(streams={self.n_streams}, strata={['/'.join(s) for s in self.strata]}, "
                f"seed={self.seed})")


_SPLIT_TAG = {"development": "dev", "adaptation": "adapt", "future": "future"}
_SPLIT_ALIAS = {"dev": "development", "adapt": "adaptation", **{s: s for s in SPLITS}}


def _ro(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def _split(split: str) -> str:
    try:
        return _SPLIT_ALIAS[split]
    except KeyError:
        raise ConfigError(f"split must be one of {', '.join(SPLITS)}; got {split!r}") from None


def _stream_ids(n: int) -> tuple[str, ...]:
    width = max(2, len(str(n - 1)))
    return tuple(f"r{r:0{width}d}" for r in range(n))


def draw_pools(Z: np.ndarray, family: str, context: str, n_streams: int, *, seed: int,
               config: PublicConfig = PublicConfig()) -> tuple[np.ndarray, np.ndarray]:
    """Candidate and evaluation row indices [r, split, t, pool] for one stratum (one generator per task)."""
    P, n_tasks = config.pool_size, config.tasks_per_split
    n_rows = Z.shape[0]
    if context == "iid":
        if n_rows < 2 * P:
            raise ConfigError(f"{family} has {n_rows} rows, fewer than two pools of {P}")
        lo = hi = None
    elif context == "shifted":
        med = np.median(Z[:, 0])
        lo, hi = np.flatnonzero(Z[:, 0] <= med), np.flatnonzero(Z[:, 0] > med)
        if min(lo.size, hi.size) < P:
            raise ConfigError(f"{family}: a side of the first-feature median has fewer than {P} rows")
    else:
        raise ConfigError(f"context must be one of {', '.join(CONTEXTS)}; got {context!r}")
    cand = np.empty((n_streams, len(SPLITS), n_tasks, P), dtype=np.int64)
    ev = np.empty_like(cand)
    for r in range(n_streams):
        for j, split in enumerate(SPLITS):
            for q in range(n_tasks):
                g = derive_rng(seed, "public", family, context, r, split, q)
                if lo is None or hi is None:
                    rows = g.choice(n_rows, 2 * P, replace=False)
                    cand[r, j, q], ev[r, j, q] = rows[:P], rows[P:]
                else:
                    cand[r, j, q] = g.choice(lo, P, replace=False)
                    ev[r, j, q] = g.choice(hi, P, replace=False)
    return cand, ev


def build_public(
    n_streams: int = 48,
    *,
    seed: int,
    data_dir: str | os.PathLike[str] | None = None,
    datasets: Sequence[str] = DATASETS,
    contexts: Sequence[str] = CONTEXTS,
    config: PublicConfig = PublicConfig(),
) -> PublicWorld:
    """Build the measured-outcome substrate from the verified local data copies.

    Strata are ``datasets`` × ``contexts`` in that order (default: breast-cancer/iid, breast-cancer/shifted,
    wine-red/iid, wine-red/shifted).  Needs the verified copies (:func:`replaylens.paper.data.fetch`); a missing
    copy raises :class:`replaylens.paper.data.DataError` naming ``replaylens paper data fetch NAME``.  Every task's
    pools come from its own generator (``derive_rng(seed, "public", family, context, r, split, q)``), so a stream's
    tables do not depend on how many streams or strata are built.  Utilities are rounded to ``config.decimals`` (6).
    """
    derive_seed(seed)  # validates the recorded seed
    if isinstance(n_streams, bool) or not isinstance(n_streams, int) or n_streams < 1:
        raise ConfigError(f"n_streams must be a positive int; got {n_streams!r}")
    datasets, contexts = tuple(datasets), tuple(contexts)
    if not datasets or not contexts or len(set(datasets)) != len(datasets) or len(set(contexts)) != len(contexts):
        raise ConfigError("datasets and contexts must be non-empty and distinct")
    strata = tuple((d, c) for d in datasets for c in contexts)
    R, n_tasks, A, n = n_streams, config.tasks_per_split, len(ARMS), config.n_select
    util = np.empty((R, len(strata), len(SPLITS), n_tasks, A))
    cands = np.empty((R, len(strata), len(SPLITS), n_tasks, config.pool_size), dtype=np.int64)
    evals = np.empty_like(cands)
    designs = np.empty((R, len(strata), len(SPLITS), n_tasks, A, n), dtype=np.int64)
    shas: dict[str, str] = {}
    for dataset in datasets:
        X, y, _ = load(dataset, data_dir=data_dir)
        shas[dataset] = _sha256(verified_path(dataset, data_dir=data_dir))
        Z = standardize(X)
        for context in contexts:
            s = strata.index((dataset, context))
            cand, ev = draw_pools(Z, dataset, context, R, seed=seed, config=config)
            flat_c, flat_e = cand.reshape(-1, config.pool_size), ev.reshape(-1, config.pool_size)
            Xc, yc = Z[flat_c], y[flat_c]
            sel = select_designs(Xc, yc, n, arms=ARMS, coverage=config.coverage)
            rows = np.arange(flat_c.shape[0])[:, None, None]
            u = ridge_logistic_utility(Xc[rows, sel], yc[rows, sel], Z[flat_e], y[flat_e], config.evaluator)
            util[:, s] = u.reshape(R, len(SPLITS), n_tasks, A)
            cands[:, s], evals[:, s] = cand, ev
            designs[:, s] = sel.reshape(R, len(SPLITS), n_tasks, A, n)
    if config.decimals is not None:
        util = np.round(util, config.decimals)
    return PublicWorld(seed=int(seed), strata=strata, arms=ARMS, dev_utility=_ro(util[:, :, 0].copy()),
                       adapt_utility=_ro(util[:, :, 1].copy()), future_utility=_ro(util[:, :, 2].copy()),
                       candidates=_ro(cands), evaluation=_ro(evals), designs=_ro(designs), data_sha256=shas,
                       config=config, stream_ids=_stream_ids(R))
