"""Build the hidden-world substrate once: every task × arm utility of every split and stream.

Each task's raw randomness is drawn from its own generators (:func:`draw_seed`), then each family's
executor runs vectorized over all tasks of the family at once.  Executors reduce only along
per-task axes, so a batch of one (:func:`task_utilities`) gives bit-identical utilities.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ....errors import ConfigError
from ....records import Evaluator, FutureTask, FutureTasks, History
from ._layout import (
    ARMS,
    BASE_SEED,
    CONTEXTS,
    FAMILIES,
    LEARNING_BLOCKS,
    PHASES,
    SPLIT_SIZES,
    STRATA,
    WORLD_ROLE,
    PublicTask,
    draw_seed,
    phase_code,
    public_task,
    seed_sequence,
    stream_id,
    task_id,
    task_index,
)
from ._source import draw_source, run_source
from ._survival import draw_survival, run_survival
from ._temporal import draw_temporal, run_temporal

__all__ = ["SyntheticWorld", "build_synthetic", "task_utilities"]

DECIMALS = 6
_CHUNK = 2048

Draw = Callable[[np.random.Generator, list[np.random.Generator]], tuple[np.ndarray, ...]]
Run = Callable[..., np.ndarray]
_EXECUTORS: dict[str, tuple[Draw, Run, bool]] = {
    # family: (draw one task, run a batch, whether the arms draw randomness)
    "source": (draw_source, run_source, True),
    "temporal": (draw_temporal, run_temporal, True),
    "survival": (draw_survival, run_survival, False),
}


def _draw_task(r: int, family: str, context: str, phase: int, q: int, seed: int) -> tuple[np.ndarray, ...]:
    """Raw draws of one task from its generators (coordinates already validated)."""
    draw, _, arm_draws = _EXECUTORS[family]
    fam = FAMILIES.index(family)
    ctx = CONTEXTS[family].index(context)
    j = task_index(family, context, phase, q)
    world = np.random.Generator(np.random.PCG64(seed_sequence(seed, r, fam, ctx, phase, j, WORLD_ROLE)))
    arms = [np.random.Generator(np.random.PCG64(seed_sequence(seed, r, fam, ctx, phase, j, a)))
            for a in range(len(ARMS))] if arm_draws else []
    return draw(world, arms)


def _execute(family: str, draws: list[tuple[np.ndarray, ...]], phase: np.ndarray, ctx: np.ndarray) -> np.ndarray:
    _, run, _ = _EXECUTORS[family]
    out = np.empty((len(draws), len(ARMS)))
    for lo in range(0, len(draws), _CHUNK):
        part = draws[lo:lo + _CHUNK]
        cols = [np.stack([d[i] for d in part]) for i in range(len(part[0]))]
        out[lo:lo + len(part)] = run(*cols, phase[lo:lo + len(part)], ctx[lo:lo + len(part)])
    return np.round(out, DECIMALS)


def task_utilities(r: int, family: str, context: str, phase: str | int, q: int, *,
                   seed: int = BASE_SEED) -> np.ndarray:
    """The counterfactual utilities (one per arm, canonical order) of one task, built from scratch.

    Equal bit for bit to the corresponding cell of :func:`build_synthetic`'s arrays.
    """
    p = phase_code(phase)
    j = task_index(family, context, p, q)  # validates the coordinates
    draw_seed(r, family, context, p, j, WORLD_ROLE, seed=seed)  # validates r and seed
    d = _draw_task(r, family, context, p, q, seed)
    c = CONTEXTS[family].index(context)
    return _execute(family, [d], np.array([p]), np.array([c]))[0]


def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class SyntheticWorld:
    """The realized substrate: counterfactual utilities of every task × arm (core §2.4, §6).

    ``dev_utility[r, S, 24, A]``, ``adapt_utility[r, B, 48, A]`` (learning blocks only) and
    ``future_utility[r, S, 48, A]`` with S = the 6 canonical strata, B = the 4 learning blocks and
    A = the 4 arms (canonical order).  Arrays are read-only.  Controllers see only the selected
    arm's utility; the Static predictor may read :meth:`dev_means` (privileged).
    """

    n_streams: int
    seed: int
    dev_utility: np.ndarray
    adapt_utility: np.ndarray
    future_utility: np.ndarray
    strata: tuple[tuple[str, str], ...] = field(default=STRATA)
    arms: tuple[str, ...] = field(default=ARMS)

    def __post_init__(self) -> None:
        r, s_n, b_n, a_n = self.n_streams, len(self.strata), len(LEARNING_BLOCKS), len(self.arms)
        want = {
            "dev_utility": (r, s_n, SPLIT_SIZES["development"], a_n),
            "adapt_utility": (r, b_n, SPLIT_SIZES["adaptation"], a_n),
            "future_utility": (r, s_n, SPLIT_SIZES["future"], a_n),
        }
        for name, shape in want.items():
            got = getattr(self, name).shape
            if got != shape:
                raise ConfigError(f"SyntheticWorld.{name} must have shape {shape}; got {got}")

    @property
    def learning_blocks(self) -> tuple[tuple[str, str], ...]:
        return LEARNING_BLOCKS

    @property
    def streams(self) -> tuple[str, ...]:
        return tuple(stream_id(r) for r in range(self.n_streams))

    # ------------------------------------------------------------------ tables
    def utility(self, split: str) -> np.ndarray:
        """The utility array of ``split`` (development/adaptation/future, or dev/adapt)."""
        return (self.dev_utility, self.adapt_utility, self.future_utility)[phase_code(split)]

    def oracle(self, split: str) -> np.ndarray:
        """a*(x): index of the first maximum over arms (canonical order), shape utility(split)[..., 0]."""
        return np.argmax(self.utility(split), axis=-1)

    def dev_means(self) -> np.ndarray:
        """[r, S, A] mean development utility of every arm (the Static predictor's privileged input)."""
        return self.dev_utility.mean(axis=2)

    def fingerprint(self) -> str:
        """sha256 of the three utility arrays' bytes and shapes."""
        h = hashlib.sha256()
        for a in (self.dev_utility, self.adapt_utility, self.future_utility):
            h.update(str(a.shape).encode())
            h.update(np.ascontiguousarray(a).tobytes())
        return h.hexdigest()

    # ------------------------------------------------------------------ public inputs
    def task_inputs(self, split: str) -> tuple[PublicTask, ...]:
        """The public inputs x of every task of ``split`` in (stream, unit, index) order.

        Units are the strata (development, future) or the learning blocks (adaptation).
        """
        p = phase_code(split)
        units = LEARNING_BLOCKS if p == 1 else self.strata
        n = SPLIT_SIZES[PHASES[p]]
        return tuple(public_task(r, f, c, p, q) for r in range(self.n_streams) for f, c in units for q in range(n))

    # ------------------------------------------------------------------ library inputs
    def _check_actions(self, actions: np.ndarray) -> np.ndarray:
        a = np.asarray(actions)
        shape = self.adapt_utility.shape[:3]
        if a.shape != shape:
            raise ConfigError(f"adaptation actions must have shape {shape} (stream, block, slot); got {a.shape}")
        if a.dtype.kind not in "iu":
            raise ConfigError(f"adaptation actions must be integer arm indices; got dtype {a.dtype}")
        if a.size and (a.min() < 0 or a.max() >= len(self.arms)):
            raise ConfigError(f"adaptation actions must be arm indices in [0, {len(self.arms)})")
        return a.astype(np.int64)

    def selected_outcomes(self, actions: np.ndarray) -> np.ndarray:
        """[r, B, 48] utility of the selected arm at every adaptation slot."""
        a = self._check_actions(actions)
        return np.take_along_axis(self.adapt_utility, a[..., None], axis=-1)[..., 0]

    def history(self, actions: np.ndarray, *, source: str = "<synthetic>") -> History:
        """The adaptation trace of ``actions[r, b, t]`` (arm indices) as a :class:`History`.

        Stream ``r00``…, block b = (family, context) of learning block b, slot b·48 + t (blocks are
        contiguous, in canonical order), task ``r00/source/low/adapt/07``, key ``ARMS[a]``,
        outcome ``adapt_utility[r, b, t, a]``.
        """
        a = self._check_actions(actions)
        y = self.selected_outcomes(a)
        r_n, b_n, t_n = a.shape
        r_i, b_i, t_i = (ix.reshape(-1) for ix in np.indices((r_n, b_n, t_n)))
        fam = np.array([f for f, _ in LEARNING_BLOCKS])[b_i]
        ctx = np.array([c for _, c in LEARNING_BLOCKS])[b_i]
        streams = np.array([stream_id(r) for r in range(r_n)])[r_i]
        tasks = [task_id(r, f, c, 1, t) for r, f, c, t in zip(r_i.tolist(), fam.tolist(), ctx.tolist(), t_i.tolist(),
                                                                strict=True)]
        return History.from_columns(
            stream=streams, family=fam, context=ctx, slot=b_i * t_n + t_i, task=tasks,
            key=np.array(self.arms)[a.reshape(-1)], outcome=y.reshape(-1), source=source,
        )

    def futures(self, *, source: str = "<synthetic>") -> FutureTasks:
        """X⁺: 6 strata × 48 future tasks per stream, menu = the arms, no ``feeds``.

        Without ``feeds`` the prefix rule gives learning strata their own block's prefix and the
        survival strata (no block) the whole stream — the paper's b(R) REC (core §2.4).
        """
        n = SPLIT_SIZES["future"]
        tasks = tuple(FutureTask(stream_id(r), f, c, task_id(r, f, c, 2, q), self.arms, q)
                      for r in range(self.n_streams) for f, c in self.strata for q in range(n))
        return FutureTasks(tasks, source=source)

    def evaluator(self, *, source: str = "<synthetic>") -> Evaluator:
        """g̃(x, a) = ``future_utility`` for every future task and arm."""
        n = SPLIT_SIZES["future"]
        table: dict[tuple[str, str], dict[str, float]] = {}
        u = self.future_utility.tolist()
        for r in range(self.n_streams):
            for s, (f, c) in enumerate(self.strata):
                for q in range(n):
                    table[(stream_id(r), task_id(r, f, c, 2, q))] = dict(zip(self.arms, u[r][s][q], strict=True))
        return Evaluator(table, source)

    def __repr__(self) -> str:
        return f"SyntheticWorld(n_streams={self.n_streams}, seed={self.seed})"


def build_synthetic(n_streams: int = 48, *, seed: int = BASE_SEED) -> SyntheticWorld:
    """Realize the substrate for ``n_streams`` replicate streams from the recorded base ``seed``.

    Every task's draws come from :func:`draw_seed` (role 4: latent world; role a: arm a), so each
    (stream, task, arm) utility is reproducible on its own with :func:`task_utilities`.
    Utilities are rounded to 6 decimals (exact micro-units).
    """
    if isinstance(n_streams, bool) or not isinstance(n_streams, (int, np.integer)) or int(n_streams) < 1:
        raise ConfigError(f"n_streams must be a positive int; got {n_streams!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or int(seed) < 0:
        raise ConfigError(f"seed must be a non-negative int; got {seed!r}")
    r_n, seed = int(n_streams), int(seed)
    s_n, a_n = len(STRATA), len(ARMS)
    dev = np.empty((r_n, s_n, SPLIT_SIZES["development"], a_n))
    adapt = np.empty((r_n, len(LEARNING_BLOCKS), SPLIT_SIZES["adaptation"], a_n))
    fut = np.empty((r_n, s_n, SPLIT_SIZES["future"], a_n))
    targets = (dev, adapt, fut)
    for family in FAMILIES:
        draws: list[tuple[np.ndarray, ...]] = []
        where: list[tuple[int, int, int, int]] = []  # (phase, r, unit, q)
        ctxs: list[int] = []
        for r in range(r_n):
            for c, context in enumerate(CONTEXTS[family]):
                s = STRATA.index((family, context))
                for p, phase in enumerate(PHASES):
                    if p == 1 and (family, context) not in LEARNING_BLOCKS:
                        continue
                    unit = LEARNING_BLOCKS.index((family, context)) if p == 1 else s
                    for q in range(SPLIT_SIZES[phase]):
                        draws.append(_draw_task(r, family, context, p, q, seed))
                        where.append((p, r, unit, q))
                        ctxs.append(c)
        idx = np.asarray(where, dtype=np.int64)
        u = _execute(family, draws, idx[:, 0], np.asarray(ctxs, dtype=np.int64))
        for p, target in enumerate(targets):
            sel = idx[:, 0] == p
            if sel.any():
                target[idx[sel, 1], idx[sel, 2], idx[sel, 3]] = u[sel]
    return SyntheticWorld(r_n, seed, _readonly(dev), _readonly(adapt), _readonly(fut))
