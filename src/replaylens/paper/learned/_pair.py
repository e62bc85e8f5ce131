"""The independent learned endpoint pair: fits, endpoint gate, pair-transport replay and decoder.

Paper L756–848 (core spec §10): per fit, an additive and a recurrent writer are trained on their own
independent 512-sequence streams (the four recurrent restarts share the fit's recurrent stream),
frozen, and evaluated on 96 unseen sequences with 48 future evaluator rows each, shared by both
writers.  Order of operations, enforced by :func:`evaluate_fit`:

1. **Endpoint gate**, before writer labels are opened: it sees only two anonymous action tables
   (aligned actions on all 96 sequences and the empty-state actions) and checks A_0 = 0 and equal
   empty-state actions.  A failed gate is recorded as a failed condition; nothing is refit, reselected
   or rerun.
2. **Endpoint contrasts** per writer: A_∅, U_∅, O_∅ (written minus empty).
3. **Replay**: complete key–utility pairs are transported under nine fixed permutations; calibration =
   episodes 1–48 × permutations 1–4 (192 decisions), holdout = episodes 49–96 × permutations 5–9
   (240 decisions); response = d(a_pair, a_aligned).  ``protocol="slot-permutations"`` (spec REC):
   nine uniform permutations of the 32 slots drawn once per fit, at the identity key map;
   ``protocol="derangement-maps"`` (the learned control's reading): the nine derangements 𝒟₄ as outer
   maps with one uniform slot permutation per (episode, map), response d(a_pair^ρ, a_aligned^ρ).
4. **Threshold decoder**: a writer is replay-sensitive iff its calibration pair response > 0.

Episode bootstrap intervals are added by the reproduction (``replaylens.paper.experiments.learned_pair``)
from :attr:`WriterEvaluation.calibration_episodes` / :attr:`WriterEvaluation.holdout_episodes`.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from ...errors import ConfigError
from ...maps import DERANGEMENTS_4
from ...rng import check_rng, derive_seed
from ._data import EndpointSequences, make_future_rows, make_sequences
from ._train import PAPER_SETTINGS, TrainedModel, TrainSettings, train_additive_models, train_recurrent_models
from ._writers import AdditiveWriter, RecurrentWriter, writer_from_model

__all__ = [
    "DEFAULT_SEED",
    "PROTOCOLS",
    "SEED_PURPOSES",
    "EndpointGate",
    "FitResult",
    "FitSeeds",
    "LearnedPairConfig",
    "LearnedPairResult",
    "WriterEvaluation",
    "endpoint_gate",
    "evaluate_fit",
    "run_learned_pair",
]

DEFAULT_SEED = 20260756
"""Root seed of the reproduction (fixed before any result was seen; the paper's seeds are not published)."""

PROTOCOLS = ("slot-permutations", "derangement-maps")
SEED_PURPOSES = ("additive_data", "additive_init", "recurrent_data", "recurrent_init", "evaluation_data",
                 "evaluation_rows", "permutations")


@dataclass(frozen=True)
class LearnedPairConfig:
    """The design; the defaults are the paper's (5 fits, 512 training sequences per writer, 96
    evaluation sequences with 48 rows, nine permutations split 48×4 / 48×5) and its training settings."""

    seed: int = DEFAULT_SEED
    n_fits: int = 5
    n_train: int = 512
    n_eval: int = 96
    n_rows: int = 48
    n_permutations: int = 9
    n_calibration_episodes: int = 48
    n_calibration_permutations: int = 4
    protocol: str = "slot-permutations"
    settings: TrainSettings = PAPER_SETTINGS

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ConfigError(f"protocol must be one of {PROTOCOLS}; got {self.protocol!r}")
        if self.n_fits < 1:
            raise ConfigError("n_fits must be at least 1")
        if not 0 < self.n_calibration_episodes < self.n_eval:
            raise ConfigError("n_calibration_episodes must leave holdout episodes (0 < cal < n_eval)")
        if not 0 < self.n_calibration_permutations < self.n_permutations:
            raise ConfigError("n_calibration_permutations must leave holdout permutations")
        if self.protocol == "derangement-maps" and self.n_permutations != len(DERANGEMENTS_4):
            raise ConfigError("the derangement-maps protocol uses the nine derangements of four keys")

    @property
    def is_paper(self) -> bool:
        """True when design and training settings are the paper's (any seed, protocol or precision)."""
        paper = dataclasses.replace(PAPER_SETTINGS, dtype=self.settings.dtype)
        return self == LearnedPairConfig(seed=self.seed, protocol=self.protocol, settings=paper)


@dataclass(frozen=True)
class FitSeeds:
    """Recorded per-fit, per-purpose seeds (spec REC): ``derive_seed(root, "learned-pair", purpose, fit)``."""

    fit: int
    additive_data: int
    additive_init: int
    recurrent_data: int
    recurrent_init: int
    """Base seed; restart j initializes from ``recurrent_init + restart_offsets[j]``."""
    evaluation_data: int
    evaluation_rows: int
    permutations: int

    @classmethod
    def derive(cls, seed: int, fit: int) -> FitSeeds:
        vals = {p: int(derive_seed(seed, "learned-pair", p, fit).generate_state(1)[0]) for p in SEED_PURPOSES}
        return cls(fit=fit, **vals)


@dataclass(frozen=True)
class EndpointGate:
    """The endpoint gate (run before writer labels are opened) and its outcome."""

    passed: bool
    aligned_mismatch: float
    """A_0: share of the evaluation sequences whose aligned actions differ between the two writers."""
    empty_match: bool
    """Whether the two writers' empty-state actions agree."""
    n_sequences: int

    @property
    def condition(self) -> str:
        return "passed" if self.passed else "failed (recorded; no refit, reselection or rerun)"


def endpoint_gate(aligned_first: np.ndarray, aligned_second: np.ndarray, empty_first: int,
                  empty_second: int) -> EndpointGate:
    """Compare two anonymous writers' aligned action tables and empty-state actions.

    The gate sees action codes only (no writer identity, no replay readout).
    """
    a, b = np.asarray(aligned_first), np.asarray(aligned_second)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ConfigError("the gate needs two aligned action tables of one non-empty shape")
    a0 = float(np.mean(a != b))
    same_empty = int(empty_first) == int(empty_second)
    return EndpointGate(a0 == 0.0 and same_empty, a0, same_empty, int(a.size))


@dataclass(frozen=True, eq=False)
class WriterEvaluation:
    """Endpoint contrasts, replay decisions and decoder outcome of one frozen writer in one fit."""

    writer: str
    aligned: np.ndarray
    """(n_eval,) aligned actions."""
    empty_action: int
    target_accuracy: float
    """Share of evaluation sequences whose aligned action is the target a†(D) (diagnostic only)."""
    a_empty: float
    u_empty: float
    o_empty: float
    reference_actions: np.ndarray
    """(n_eval, n_permutations): a_aligned (slot-permutations) or a_aligned^ρ (derangement-maps)."""
    pair_actions: np.ndarray
    """(n_eval, n_permutations): the actions after pair transport."""
    calibration_episodes: np.ndarray
    """Per-episode calibration pair response (mean over the calibration permutations)."""
    holdout_episodes: np.ndarray
    a_cal: float
    a_ho: float
    calibration_changed: int
    calibration_decisions: int
    holdout_changed: int
    holdout_decisions: int
    decoded_sensitive: bool
    """Threshold decoder: calibration pair response > 0."""
    true_sensitive: bool
    """The architecture's class (recurrent: order-dependent; additive: zero response by its state law)."""
    b_cal: float
    b_ho: float


@dataclass(frozen=True, eq=False)
class FitResult:
    """One retained pair: training records, frozen writers, gate, evaluations and timing."""

    fit: int
    seeds: FitSeeds
    additive_model: TrainedModel
    recurrent_restarts: tuple[TrainedModel, ...]
    selected_restart: int
    additive: AdditiveWriter
    recurrent: RecurrentWriter
    gate: EndpointGate
    evaluations: dict[str, WriterEvaluation]
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def recurrent_model(self) -> TrainedModel:
        return self.recurrent_restarts[self.selected_restart]


@dataclass(frozen=True, eq=False)
class LearnedPairResult:
    """All fits of one run."""

    config: LearnedPairConfig
    fits: tuple[FitResult, ...]
    wall_seconds: float
    n_jobs: int

    @property
    def gate_failures(self) -> tuple[int, ...]:
        return tuple(f.fit for f in self.fits if not f.gate.passed)

    def mean(self, writer: str, attr: str) -> float:
        """Mean over fits of a :class:`WriterEvaluation` float attribute."""
        return float(np.mean([getattr(f.evaluations[writer], attr) for f in self.fits]))


# ---------------------------------------------------------------------------------------------- evaluation


def _first_argmax(x: np.ndarray) -> np.ndarray:
    return np.argmax(x == x.max(axis=-1, keepdims=True), axis=-1)


def _pair_replay(writer: AdditiveWriter | RecurrentWriter, ev: EndpointSequences, cfg: LearnedPairConfig,
                 perm_seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(reference, pair) action tables (n_eval, n_permutations) under the configured protocol."""
    n, t, m = ev.n, ev.n_slots, cfg.n_permutations
    gen = check_rng(perm_seed)
    if cfg.protocol == "slot-permutations":
        perms = np.stack([gen.permutation(t) for _ in range(m)])  # (m, T), shared across episodes
        rep = EndpointSequences(np.repeat(ev.keys, m, axis=0), np.repeat(ev.utilities, m, axis=0),
                                np.repeat(ev.winners, m), ev.n_keys)
        pair = writer.actions(rep.transport(np.tile(perms, (n, 1)))).reshape(n, m)
        ref = np.repeat(writer.actions(ev)[:, None], m, axis=1)
        return ref, pair
    perms = np.stack([gen.permutation(t) for _ in range(n * m)]).reshape(n, m, t)  # per (episode, map)
    ref = np.empty((n, m), dtype=np.int64)
    pair = np.empty((n, m), dtype=np.int64)
    for j, rho in enumerate(DERANGEMENTS_4):
        mapped = ev.relabel(rho.array)
        ref[:, j] = writer.actions(mapped)
        pair[:, j] = writer.actions(mapped.transport(perms[:, j]))
    return ref, pair


def _evaluate_writer(name: str, writer: AdditiveWriter | RecurrentWriter, aligned: np.ndarray, empty: int,
                     ev: EndpointSequences, rows: np.ndarray, cfg: LearnedPairConfig, perm_seed: int,
                     true_sensitive: bool) -> WriterEvaluation:
    n = ev.n
    utility = rows.mean(axis=1)  # (n, K): U of each arm per sequence (mean over its rows)
    oracle = _first_argmax(rows)  # (n, rows): first argmax per row
    idx = np.arange(n)
    u_written = utility[idx, aligned]
    u_none = utility[:, empty]
    o_written = (oracle == aligned[:, None]).mean(axis=1)
    o_none = (oracle == empty).mean(axis=1)
    ref, pair = _pair_replay(writer, ev, cfg, perm_seed)
    changed = (pair != ref).astype(np.float64)
    ce, cp = cfg.n_calibration_episodes, cfg.n_calibration_permutations
    cal, ho = changed[:ce, :cp], changed[ce:, cp:]
    a_cal, a_ho = float(cal.mean()), float(ho.mean())
    decoded = a_cal > 0.0
    return WriterEvaluation(
        writer=name, aligned=aligned, empty_action=empty,
        target_accuracy=float(np.mean(aligned == ev.targets())),
        a_empty=float(np.mean(aligned != empty)), u_empty=float(np.mean(u_written - u_none)),
        o_empty=float(np.mean(o_written - o_none)), reference_actions=ref, pair_actions=pair,
        calibration_episodes=cal.mean(axis=1), holdout_episodes=ho.mean(axis=1), a_cal=a_cal, a_ho=a_ho,
        calibration_changed=int(cal.sum()), calibration_decisions=int(cal.size),
        holdout_changed=int(ho.sum()), holdout_decisions=int(ho.size),
        decoded_sensitive=decoded, true_sensitive=true_sensitive,
        b_cal=float(decoded == true_sensitive), b_ho=float((a_ho > 0.0) == decoded))


def evaluate_fit(fit: int, seeds: FitSeeds, additive_model: TrainedModel,
                 recurrent_restarts: Sequence[TrainedModel], cfg: LearnedPairConfig) -> FitResult:
    """Freeze the writers, run the endpoint gate, then the endpoint contrasts, replay and decoder."""
    start = time.perf_counter()
    losses = [m.final_loss for m in recurrent_restarts]
    selected = int(np.argmin(losses))  # lowest final training loss; first on a tie
    add = writer_from_model(additive_model)
    rec = writer_from_model(recurrent_restarts[selected])
    assert isinstance(add, AdditiveWriter) and isinstance(rec, RecurrentWriter)
    ev = make_sequences(cfg.n_eval, seeds.evaluation_data)
    rows = make_future_rows(cfg.n_eval, cfg.n_rows, seeds.evaluation_rows)
    # 1. the gate: two anonymous action tables, before any writer label or replay readout is used
    aligned = (add.actions(ev), rec.actions(ev))
    empty = (add.empty_action(), rec.empty_action())
    gate = endpoint_gate(aligned[0], aligned[1], empty[0], empty[1])
    # 2.-4. labels opened: endpoint contrasts, replay, decoder (whatever the gate said)
    evals = {
        "additive": _evaluate_writer("additive", add, aligned[0], empty[0], ev, rows, cfg, seeds.permutations,
                                     true_sensitive=False),
        "recurrent": _evaluate_writer("recurrent", rec, aligned[1], empty[1], ev, rows, cfg, seeds.permutations,
                                      true_sensitive=True),
    }
    rec_train = sum(m.seconds for m in recurrent_restarts)
    seconds = {"train_additive": additive_model.seconds, "train_recurrent": rec_train,
               "evaluate": time.perf_counter() - start}
    seconds["total"] = seconds["train_additive"] + rec_train + seconds["evaluate"]
    return FitResult(fit, seeds, additive_model, tuple(recurrent_restarts), selected, add, rec, gate, evals, seconds)


# ---------------------------------------------------------------------------------------------- running


def _train_chunk(datasets: list[EndpointSequences], seeds: list[int], settings: TrainSettings) -> list[TrainedModel]:
    return train_recurrent_models(datasets, seeds, settings)


def run_learned_pair(config: LearnedPairConfig | None = None, *, n_jobs: int = 1) -> LearnedPairResult:
    """Train and evaluate every fit of ``config`` (default: the paper's design and settings).

    The n_fits × restarts recurrent models are trained as batched array computations: per fit with
    ``n_jobs=1``, or split evenly over ``n_jobs`` worker processes.  Results do not depend on
    ``n_jobs`` (each model's arithmetic is independent of its batch).  Workers are started with
    ``spawn``: a script calling this with ``n_jobs > 1`` needs the ``if __name__ == "__main__":`` guard.
    """
    cfg = config or LearnedPairConfig()
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs < 1:
        raise ConfigError(f"n_jobs must be a positive int; got {n_jobs!r}")
    start = time.perf_counter()
    s = cfg.settings
    fits = range(1, cfg.n_fits + 1)
    seeds = {f: FitSeeds.derive(cfg.seed, f) for f in fits}
    add_data = {f: make_sequences(cfg.n_train, seeds[f].additive_data) for f in fits}
    rec_data = {f: make_sequences(cfg.n_train, seeds[f].recurrent_data) for f in fits}
    units = [(f, j) for f in fits for j in range(len(s.restart_offsets))]
    unit_data = [rec_data[f] for f, _ in units]
    unit_seeds = [seeds[f].recurrent_init + s.restart_offsets[j] for f, j in units]
    if n_jobs == 1:
        chunks = [[i for i, (f, _) in enumerate(units) if f == fit] for fit in fits]
    else:
        chunks = [c.tolist() for c in np.array_split(np.arange(len(units)), min(n_jobs, len(units)))]
    trained: list[TrainedModel | None] = [None] * len(units)
    if n_jobs == 1:
        for c in chunks:
            for i, m in zip(c, _train_chunk([unit_data[i] for i in c], [unit_seeds[i] for i in c], s), strict=True):
                trained[i] = m
        additive = train_additive_models([add_data[f] for f in fits], [seeds[f].additive_init for f in fits], s)
    else:
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=len(chunks), mp_context=ctx) as pool:
            futures = [pool.submit(_train_chunk, [unit_data[i] for i in c], [unit_seeds[i] for i in c], s)
                       for c in chunks]
            additive = train_additive_models([add_data[f] for f in fits], [seeds[f].additive_init for f in fits], s)
            for c, fut in zip(chunks, futures, strict=True):
                for i, m in zip(c, fut.result(), strict=True):
                    trained[i] = m
    results = []
    for k, f in enumerate(fits):
        restarts = tuple(m for (ff, _), m in zip(units, trained, strict=True) if ff == f and m is not None)
        results.append(evaluate_fit(f, seeds[f], additive[k], restarts, cfg))
    return LearnedPairResult(cfg, tuple(results), time.perf_counter() - start, n_jobs)
