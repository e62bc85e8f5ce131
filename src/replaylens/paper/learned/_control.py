"""Same-architecture shortcut-resistant learned control (paper app:method-learned-control, spec partC C3).

The recurrence of the learned endpoint pair, h_t = tanh(W h_{t−1} + p_{ℓ_t} + (u_t − ½) v_{ℓ_t}),
h_0 = 0, s_a = q_aᵀ h_T (no biases), trained on a different substrate:

* an episode holds 5–10 complete blocks; each block is a uniform permutation of the four producers,
  each record's utility ~ Uniform(0.43, 0.57) (six decimals);
* target: argmax_a Σ_t (u_t − ½)·1[ℓ_t = a] (soft target 0.95 / 0.05), classes balanced by fixed
  rejection sampling; train / dev / held-out 512 / 128 / 96 episodes;
* two regimens per parameter seed: ``ordinary`` (the sampled order) and ``augmented`` (a new
  arbitrary permutation of the occupied slots, moving complete records, for every training episode
  at every full-batch update); same initialization, same Adam schedule (4,800 updates);
* objective (``CONTROL_SETTINGS``): mean BCE with no ℓ2 term.  The paper names no penalty for this control
  (only "the same full-batch Adam schedule"); docs/decisions.md (issue 28) gives the reading and why.  The
  reading before issue 28 (mean BCE + 1e-4·Σθ², float32) is ``PREVIOUS_CONTROL_SETTINGS``;
* held-out evaluation under the nine four-key derangements ρ: mapped-aligned (ρ(ℓ_t), u_t),
  value (ρ(ℓ_t), u_{σ(t)}), pair_slot (ρ(ℓ_{σ(t)}), u_{σ(t)}) and pair_block (whole blocks moved),
  one seeded σ per (episode, map) shared by every fit.

Episodes of different lengths are left-padded: a padded step has zero input, so the state stays
exactly h = 0 until the first record (the spec's "state passes through unchanged on padding").
Bootstrap intervals are added in ``replaylens.paper.experiments.learned_control`` (inference is a higher layer).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import ConfigError
from ...inference import single_thread_blas
from ...maps import DERANGEMENTS_4
from ...rng import derive_rng
from .. import numerics as nx
from ._data import TARGET_ENTROPY, TARGET_HIGH, TARGET_LOW, micro_centered
from ._train import (
    PAPER_SETTINGS,
    Params,
    TrainSettings,
    _adam,
    _bce_rows,
    _frozen,
    _sigmoid,
    init_recurrent,
)

__all__ = [
    "CONTROL_SEEDS",
    "CONTROL_SETTINGS",
    "CONTROL_UTILITY_RANGE",
    "PREVIOUS_CONTROL_SETTINGS",
    "REGIMENS",
    "ControlConfig",
    "ControlEpisodes",
    "ControlEvaluation",
    "ControlFit",
    "ControlResult",
    "control_scores",
    "evaluate_control",
    "make_control_episodes",
    "make_control_future",
    "run_learned_control",
    "train_control_models",
]

CONTROL_SEEDS: tuple[int, ...] = (20260951, 20260952, 20260953, 20260954, 20260955)
CONTROL_SETTINGS = dataclasses.replace(PAPER_SETTINGS, l2=0.0, l2_form="sum")
"""The pair's Adam schedule (lr 0.015, β 0.9/0.999, ε 1e-8, clip 5, 4,800 updates, init 0.05, float64) on the
mean BCE, with no ℓ2 term: the paper names none for this control (docs/decisions.md, issue 28)."""
PREVIOUS_CONTROL_SETTINGS = dataclasses.replace(PAPER_SETTINGS, l2=1e-4, l2_form="sum", dtype="float32")
"""The reading before issue 28 (mean BCE + 1e-4·Σθ², float32), kept for the sensitivity comparison."""
"""The paper's five parameter seeds (fit i = seed 2026095i)."""
CONTROL_UTILITY_RANGE = (0.43, 0.57)
REGIMENS = ("ordinary", "augmented")
N_KEYS = 4


@dataclass(frozen=True, eq=False)
class ControlEpisodes:
    """N left-padded episodes: ``keys`` (N, T) int64 with −1 on padding, ``utilities`` (N, T) (0.5 on padding)."""

    keys: np.ndarray
    utilities: np.ndarray
    lengths: np.ndarray
    """(N,) number of occupied slots (4 × blocks); the occupied slots are the last ``lengths[i]``."""

    def __post_init__(self) -> None:
        if self.keys.shape != self.utilities.shape or self.keys.ndim != 2:
            raise ConfigError("keys and utilities must be (N, T) arrays of one shape")
        if self.lengths.shape != (self.keys.shape[0],):
            raise ConfigError("lengths must hold one length per episode")

    @property
    def n(self) -> int:
        return int(self.keys.shape[0])

    @property
    def occupied(self) -> np.ndarray:
        return self.keys >= 0

    def centered_sums(self) -> np.ndarray:
        """(N, K) exact key sums of u − ½ in micro-units."""
        c = np.where(self.occupied, micro_centered(self.utilities), 0.0)
        out = np.zeros((self.n, N_KEYS))
        for k in range(N_KEYS):
            out[:, k] = np.where(self.keys == k, c, 0.0).sum(axis=1)
        return out

    def targets(self) -> np.ndarray:
        """(N,) the aggregate target (first-canonical argmax of the key sums)."""
        return np.argmax(self.centered_sums(), axis=1).astype(np.int64)

    def soft_targets(self) -> np.ndarray:
        y = np.full((self.n, N_KEYS), TARGET_LOW)
        y[np.arange(self.n), self.targets()] = TARGET_HIGH
        return y

    def permute(self, perms: np.ndarray, key_map: np.ndarray | None = None,
                values_only: bool = False) -> ControlEpisodes:
        """Records moved by per-episode slot permutations ``perms`` (N, T) that fix the padding.

        ``values_only``: move only the utilities (value transport); ``key_map``: relabel every key.
        """
        keys = self.keys if values_only else np.take_along_axis(self.keys, perms, axis=1)
        u = np.take_along_axis(self.utilities, perms, axis=1)
        if key_map is not None:
            keys = np.where(keys >= 0, np.asarray(key_map)[np.maximum(keys, 0)], -1)
        return ControlEpisodes(np.array(keys), np.array(u), self.lengths.copy())


def make_control_episodes(n: int, rng: np.random.Generator, *, min_blocks: int = 5,
                          max_blocks: int = 10) -> ControlEpisodes:
    """``n`` episodes with balanced target classes by fixed rejection sampling (n/4 per class).

    Each draw: blocks ~ Uniform{min_blocks..max_blocks}, one permutation of the four keys per block,
    then the utilities (six decimals); a draw whose target class is already full is rejected.
    """
    if n < N_KEYS or n % N_KEYS:
        raise ConfigError(f"n must be a positive multiple of {N_KEYS}; got {n}")
    t_max = N_KEYS * max_blocks
    quota = np.full(N_KEYS, n // N_KEYS)
    keys = np.full((n, t_max), -1, dtype=np.int64)
    util = np.full((n, t_max), 0.5)
    lengths = np.zeros(n, dtype=np.int64)
    classes = np.zeros(n, dtype=np.int64)
    filled = 0
    lo, hi = CONTROL_UTILITY_RANGE
    while filled < n:
        blocks = int(rng.integers(min_blocks, max_blocks + 1))
        k = np.concatenate([rng.permutation(N_KEYS) for _ in range(blocks)])
        u = np.round(rng.uniform(lo, hi, k.size), 6)
        sums = np.bincount(k, weights=micro_centered(u), minlength=N_KEYS)
        target = int(np.argmax(sums))
        if quota[target] == 0:
            continue
        quota[target] -= 1
        keys[filled, t_max - k.size:] = k
        util[filled, t_max - k.size:] = u
        lengths[filled] = k.size
        classes[filled] = target
        filled += 1
    order = rng.permutation(n)  # interleave the classes (the quota fills unevenly over time)
    return ControlEpisodes(keys[order], util[order], lengths[order])


def make_control_future(episodes: ControlEpisodes, rng: np.random.Generator, n_rows: int = 48,
                        noise: float = 0.05) -> np.ndarray:
    """Held-out future rows (spec C10-C5): clip(0.5 + m_a + N(0, noise²), 0, 1), shape (N, rows, K).

    m_a is key a's mean centered utility in the episode.  Never used for fitting.
    """
    sums = episodes.centered_sums() * 1e-6
    counts = np.stack([(episodes.keys == k).sum(axis=1) for k in range(N_KEYS)], axis=1)
    m = sums / np.maximum(counts, 1)
    eps = rng.normal(0.0, noise, (episodes.n, n_rows, N_KEYS))
    return np.clip(0.5 + m[:, None, :] + eps, 0.0, 1.0)


def occupied_permutations(lengths: np.ndarray, t_max: int, rng: np.random.Generator) -> np.ndarray:
    """One uniform permutation of the occupied (last ``lengths[i]``) slots per episode; padding fixed."""
    n = lengths.shape[0]
    r = rng.random((n, t_max))
    pad = np.arange(t_max)[None, :] < (t_max - lengths)[:, None]
    r = np.where(pad, -2.0 + np.arange(t_max)[None, :] * 1e-6, r)  # padding sorts first, in place
    return np.argsort(r, axis=1, kind="stable").astype(np.int64)


def block_permutations(lengths: np.ndarray, t_max: int, rng: np.random.Generator) -> np.ndarray:
    """Slot permutations that move whole four-record blocks (a uniform block order per episode)."""
    out = np.tile(np.arange(t_max, dtype=np.int64), (lengths.shape[0], 1))
    for i, length in enumerate(lengths):
        nb = int(length) // N_KEYS
        start = t_max - int(length)
        order = rng.permutation(nb)
        out[i, start:] = (start + (order[:, None] * N_KEYS + np.arange(N_KEYS)[None, :])).ravel()
    return out


# ---------------------------------------------------------------------------------------------- model


def control_scores(params: Params, episodes: ControlEpisodes) -> np.ndarray:
    """Scores s (N, K) of one frozen writer, float64 (padding keeps h = 0)."""
    w, p, v, q = (np.asarray(params[k], dtype=np.float64) for k in ("W", "P", "V", "Q"))
    h = np.zeros((episodes.n, w.shape[0]))
    occ = episodes.occupied
    kk = np.maximum(episodes.keys, 0)
    c = episodes.utilities - 0.5
    for t in range(episodes.keys.shape[1]):
        x = (p[kk[:, t]] + c[:, t, None] * v[kk[:, t]]) * occ[:, t, None]
        h = nx.tanh(nx.matmul(h, w.T) + x)
    return nx.matmul(h, q.T)


class _ControlBatch:
    """R recurrent models, each with its own (possibly re-permuted each update) training episodes."""

    def __init__(self, data: ControlEpisodes, seeds: Sequence[int], augmented: bool, hidden: int,
                 dtype: np.dtype[Any]) -> None:
        self.data, self.seeds, self.augmented = data, [int(s) for s in seeds], augmented
        self.r, self.n, self.t, self.h = len(seeds), data.n, data.keys.shape[1], hidden
        self.dtype = dtype
        self.y = np.broadcast_to(data.soft_targets().astype(dtype), (self.r, self.n, N_KEYS))
        self.epoch = 0
        self.z = self._inputs(np.broadcast_to(data.keys, (self.r, self.n, self.t)),
                              np.broadcast_to(data.utilities, (self.r, self.n, self.t)))
        self.states = np.zeros((self.r, self.t + 1, self.n, hidden), dtype=dtype)

    def _inputs(self, keys: np.ndarray, util: np.ndarray) -> np.ndarray:
        """(R, T, N, 2K) inputs: one-hot key, then centered utility times the one-hot key."""
        onehot = (keys[..., None] == np.arange(N_KEYS)).astype(self.dtype)
        z = np.concatenate([onehot, onehot * (util[..., None] - 0.5).astype(self.dtype)], axis=-1)
        return np.ascontiguousarray(z.transpose(0, 2, 1, 3))

    def _augment(self) -> None:
        keys = np.empty((self.r, self.n, self.t), dtype=np.int64)
        util = np.empty((self.r, self.n, self.t))
        for i, s in enumerate(self.seeds):
            perms = occupied_permutations(self.data.lengths, self.t,
                                          derive_rng(s, "learned-control", "augment", self.epoch))
            keys[i] = np.take_along_axis(self.data.keys, perms, axis=1)
            util[i] = np.take_along_axis(self.data.utilities, perms, axis=1)
        self.z = self._inputs(keys, util)

    def loss_grad(self, p: Params, need_grad: bool = True) -> tuple[np.ndarray, Params]:
        if need_grad:
            self.epoch += 1
            if self.augmented:
                self._augment()
        w_in = np.concatenate([p["P"], p["V"]], axis=1)  # (R, 2K, H)
        x = nx.matmul(self.z.reshape(self.r, self.t * self.n, 2 * N_KEYS), w_in).reshape(
            self.r, self.t, self.n, self.h)
        w_t = p["W"].transpose(0, 2, 1)
        st = self.states
        for t in range(self.t):
            nx.tanh(nx.matmul(st[:, t], w_t) + x[:, t], out=st[:, t + 1])
        s = nx.matmul(st[:, self.t], p["Q"].transpose(0, 2, 1))  # (R, N, K)
        bce = _bce_rows(s, self.y)
        if not need_grad:
            return bce, {}
        ds = (_sigmoid(s) - self.y) / (N_KEYS * self.n)
        d_q = nx.matmul(ds.transpose(0, 2, 1), st[:, self.t])
        dh = nx.matmul(ds, p["Q"])
        da = np.empty((self.r, self.t, self.n, self.h), dtype=self.dtype)
        w = p["W"]
        for t in range(self.t - 1, -1, -1):
            hs = st[:, t + 1]
            da[:, t] = dh * (1.0 - hs * hs)
            if t:
                dh = nx.matmul(da[:, t], w)
        flat_da = da.reshape(self.r, self.t * self.n, self.h)
        d_w = nx.matmul(flat_da.transpose(0, 2, 1), st[:, : self.t].reshape(self.r, self.t * self.n, self.h))
        d_in = nx.matmul(self.z.reshape(self.r, self.t * self.n, 2 * N_KEYS).transpose(0, 2, 1), flat_da)
        return bce, {"W": d_w, "P": np.ascontiguousarray(d_in[:, :N_KEYS]),
                     "V": np.ascontiguousarray(d_in[:, N_KEYS:]), "Q": d_q}


@dataclass(frozen=True, eq=False)
class ControlModel:
    """One frozen fit of one regimen."""

    regimen: str
    seed: int
    params: dict[str, np.ndarray]
    final_bce: float
    dev_bce: float
    seconds: float

    @property
    def dev_excess_bce(self) -> float:
        """Development BCE less the soft-target entropy (the paper's fit-quality audit, threshold 0.080)."""
        return self.dev_bce - TARGET_ENTROPY


def train_control_models(train: ControlEpisodes, dev: ControlEpisodes, seeds: Sequence[int], regimen: str,
                         settings: TrainSettings | None = None) -> list[ControlModel]:
    """Train one writer per seed under ``regimen`` (batched over seeds; no restarts or selection).

    Initialization: :func:`~replaylens.paper.learned.init_recurrent` (scale 0.05) from
    ``derive_rng(seed, "learned-control", "recurrent-init")`` — the same for both regimens.
    Augmentation permutations: ``derive_rng(seed, "learned-control", "augment", update)``, one
    uniform occupied-slot permutation per training episode in episode order.
    """
    if regimen not in REGIMENS:
        raise ConfigError(f"regimen must be one of {REGIMENS}; got {regimen!r}")
    settings = CONTROL_SETTINGS if settings is None else settings
    dt = np.dtype(settings.dtype)
    start = time.perf_counter()
    inits = [init_recurrent(derive_rng(int(s), "learned-control", "recurrent-init"), N_KEYS, settings.hidden,
                            settings.recurrent_init_scale) for s in seeds]
    params: Params = {k: np.stack([i[k] for i in inits]).astype(dt) for k in ("W", "P", "V", "Q")}
    batch = _ControlBatch(train, seeds, regimen == "augmented", settings.hidden, dt)
    with single_thread_blas():
        _adam(params, batch.loss_grad, settings, len(seeds), settings.data_scale(N_KEYS))
    seconds = (time.perf_counter() - start) / len(seeds)
    out = []
    for i, s in enumerate(seeds):
        frozen = {k: _frozen(v[i]) for k, v in params.items()}
        out.append(ControlModel(regimen, int(s), frozen, _mean_bce(frozen, train), _mean_bce(frozen, dev), seconds))
    return out


def _mean_bce(params: Params, episodes: ControlEpisodes) -> float:
    s = control_scores(params, episodes)
    y = episodes.soft_targets()
    return float(np.mean(nx.softplus(s) - y * s))


# ---------------------------------------------------------------------------------------------- evaluation


@dataclass(frozen=True, eq=False)
class ControlEvaluation:
    """Per held-out episode readouts of one fit, each averaged over the nine derangements (shape (N,))."""

    pair_action: np.ndarray
    """1[action(mapped-aligned) ≠ action(pair_slot)]."""
    aligned_acc: np.ndarray
    """1[action(mapped-aligned) = ρ(target)]."""
    pair_acc: np.ndarray
    value_action: np.ndarray
    block_action: np.ndarray
    utility_gap: np.ndarray
    """Aligned − pair_slot future utility (actions decoded through ρ⁻¹)."""
    oracle_gap: np.ndarray
    """Pair_slot − aligned oracle agreement."""

    def means(self) -> dict[str, float]:
        return {f.name: float(np.mean(getattr(self, f.name))) for f in dataclasses.fields(self)}


def evaluation_draws(held: ControlEpisodes, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(σ_slot, σ_block), each (maps, N, T): one draw per (episode, map), in episode-major order."""
    rng = derive_rng(seed, "learned-control", "evaluation-sigma")
    t = held.keys.shape[1]
    slot = np.empty((len(DERANGEMENTS_4), held.n, t), dtype=np.int64)
    block = np.empty_like(slot)
    for i in range(held.n):
        one = held.lengths[i : i + 1]
        for m in range(len(DERANGEMENTS_4)):
            slot[m, i] = occupied_permutations(one, t, rng)[0]
            block[m, i] = block_permutations(one, t, rng)[0]
    return slot, block


def evaluate_control(params: Params, held: ControlEpisodes, future: np.ndarray,
                     draws: tuple[np.ndarray, np.ndarray]) -> ControlEvaluation:
    """The nine-derangement held-out replay of one frozen fit."""
    fut = future.mean(axis=1)  # (N, K) decision utility per original key
    oracle = np.argmax(fut, axis=1)
    target = held.targets()
    rows = np.arange(held.n)
    acc: dict[str, list[np.ndarray]] = {k: [] for k in ("pa", "aa", "ra", "va", "ba", "ug", "og")}
    slot, block = draws
    for m, rho in enumerate(DERANGEMENTS_4):
        img = rho.array
        inv = np.argsort(img)
        aligned = held.permute(np.tile(np.arange(held.keys.shape[1]), (held.n, 1)), img)
        act = {name: np.argmax(control_scores(params, ep), axis=1) for name, ep in (
            ("aligned", aligned), ("pair", held.permute(slot[m], img)),
            ("value", held.permute(slot[m], img, values_only=True)), ("block", held.permute(block[m], img)))}
        dec_al, dec_pa = inv[act["aligned"]], inv[act["pair"]]
        acc["pa"].append(act["pair"] != act["aligned"])
        acc["aa"].append(act["aligned"] == img[target])
        acc["ra"].append(act["pair"] == img[target])
        acc["va"].append(act["value"] != act["aligned"])
        acc["ba"].append(act["block"] != act["aligned"])
        acc["ug"].append(fut[rows, dec_al] - fut[rows, dec_pa])
        acc["og"].append((dec_pa == oracle).astype(float) - (dec_al == oracle))
    m_ = {k: np.mean(np.stack(v).astype(float), axis=0) for k, v in acc.items()}
    return ControlEvaluation(m_["pa"], m_["aa"], m_["ra"], m_["va"], m_["ba"], m_["ug"], m_["og"])


# ---------------------------------------------------------------------------------------------- protocol


@dataclass(frozen=True)
class ControlConfig:
    """The design; the defaults are the paper's (train/dev/held-out 512/128/96, 4,800 updates, 5 seeds)."""

    n_train: int = 512
    n_dev: int = 128
    n_held: int = 96
    seeds: tuple[int, ...] = CONTROL_SEEDS
    data_seed: int = CONTROL_SEEDS[0]
    settings: TrainSettings = field(default_factory=lambda: CONTROL_SETTINGS)

    @property
    def is_paper(self) -> bool:
        return (self.n_train, self.n_dev, self.n_held, self.seeds, self.settings.updates) == (
            512, 128, 96, CONTROL_SEEDS, 4800)


@dataclass(frozen=True, eq=False)
class ControlFit:
    fit: int
    model: ControlModel
    evaluation: ControlEvaluation


@dataclass(frozen=True, eq=False)
class ControlResult:
    config: ControlConfig
    fits: dict[str, tuple[ControlFit, ...]]
    """Per regimen, fits 1..5 in seed order."""
    held: ControlEpisodes
    wall_seconds: float


def control_data(config: ControlConfig) -> tuple[ControlEpisodes, ControlEpisodes, ControlEpisodes, np.ndarray]:
    """(train, dev, held-out, held-out future rows) from ``derive_rng(data_seed, "learned-control", part)``."""
    parts = [make_control_episodes(n, derive_rng(config.data_seed, "learned-control", name))
             for name, n in (("train", config.n_train), ("dev", config.n_dev), ("held-out", config.n_held))]
    future = make_control_future(parts[2], derive_rng(config.data_seed, "learned-control", "future"))
    return parts[0], parts[1], parts[2], future


def run_learned_control(config: ControlConfig | None = None) -> ControlResult:
    """Train both regimens for every seed, freeze, and evaluate on the held-out episodes."""
    cfg = config or ControlConfig()
    start = time.perf_counter()
    train, dev, held, future = control_data(cfg)
    draws = evaluation_draws(held, cfg.data_seed)
    fits: dict[str, tuple[ControlFit, ...]] = {}
    for regimen in REGIMENS:
        models = train_control_models(train, dev, cfg.seeds, regimen, cfg.settings)
        fits[regimen] = tuple(ControlFit(i + 1, m, evaluate_control(m.params, held, future, draws))
                              for i, m in enumerate(models))
    return ControlResult(cfg, fits, held, time.perf_counter() - start)
