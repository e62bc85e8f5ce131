"""Signatures, the predeclared decoders and the blinding harness (paper L1326–1340, L1507–1585).

* :class:`Signature` — s(W) = (Ā_rekey, D̄_{A,value}, D̄_{A,pair}) (plus the pair-state diagnostic);
* :func:`decode_family` — the four-class decoder with threshold τ = 10⁻⁶;
* :class:`PairDecoder` — pair-displacing iff D̄_{A,pair} ≥ threshold (0.050, frozen before generation);
* :class:`BlindSet` — writers under opaque ids; the hidden labels open only after every prediction is
  recorded, and the decoder sees nothing but signatures;
* :func:`threshold_sensitivity` — re-evaluation of stored signatures over a fixed threshold grid.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ...agents import Agent
from ...errors import ConfigError
from ...rng import derive_rng
from ._families import OPERATOR_SEED, Operator, blind_operators

__all__ = [
    "FAMILY_TAU",
    "PAIR_THRESHOLD",
    "THRESHOLD_GRID",
    "BlindChallenge",
    "BlindSet",
    "PairDecoder",
    "Signature",
    "ThresholdRow",
    "blind_challenge",
    "decode_family",
    "threshold_sensitivity",
]

FAMILY_TAU = 1e-6
"""The canonical decoder's threshold (predeclared)."""

PAIR_THRESHOLD = 0.050
"""The family-blind decoder's threshold, fixed before coefficients, readouts and assignments are generated."""

THRESHOLD_GRID = (0.025, 0.050, 0.075, 0.100, 0.125, 0.150)
"""The fixed descriptive grid of the threshold-sensitivity table."""

PRESERVING = "pair-preserving"
DISPLACING = "pair-displacing"


@dataclass(frozen=True)
class Signature:
    """The direct action signature s(W) of one writer, pooled over streams, strata and the non-identity maps.

    ``pair_state`` (mean terminal-state distance between the aligned and pair cells) is a diagnostic:
    no decoder reads it.
    """

    a_rekey: float
    d_value: float
    d_pair: float
    pair_state: float | None = None

    def as_tuple(self) -> tuple[float, float, float]:
        return (self.a_rekey, self.d_value, self.d_pair)


def decode_family(sig: Signature, tau: float = FAMILY_TAU) -> str:
    """The predeclared four-class decoder: pair > τ → order-sensitive; else value > τ → commutative;
    else rekey > τ → key-only; else invariant."""
    if sig.d_pair > tau:
        return "order-sensitive"
    if sig.d_value > tau:
        return "commutative"
    if sig.a_rekey > tau:
        return "key-only"
    return "invariant"


@dataclass(frozen=True)
class PairDecoder:
    """Pair-displacing iff the mean direct pair-action signature is ≥ ``threshold``."""

    threshold: float = PAIR_THRESHOLD

    def __post_init__(self) -> None:
        if not (0.0 < self.threshold < 1.0):
            raise ConfigError(f"the pair threshold must lie in (0, 1); got {self.threshold}")

    def __call__(self, sig: Signature) -> str:
        return DISPLACING if sig.d_pair >= self.threshold else PRESERVING


class BlindSet:
    """Writers under opaque ids, in an order shuffled by a recorded seed.

    ``agent(id)`` is the writer with its name, spec and declarations replaced by the id (what the
    replay and the decoder see).  The hidden labels are returned by :meth:`open` only after
    :meth:`record` has stored a prediction for every id.
    """

    def __init__(self, items: Sequence[tuple[str, Agent]], *, seed: int, prefix: str = "W") -> None:
        if not items:
            raise ConfigError("a blind set needs at least one writer")
        order = derive_rng(seed, "blind-ids", prefix, len(items)).permutation(len(items))
        width = len(str(len(items) - 1))
        self._ids = tuple(f"{prefix}{k:0{width}d}" for k in range(len(items)))
        self._agents: dict[str, Agent] = {}
        self._hidden: dict[str, str] = {}
        for k, i in enumerate(order):
            label, ag = items[int(i)]
            oid = self._ids[k]
            self._agents[oid] = Agent(oid, ag.writer, ag.policy, array=ag.array, stochastic=ag.stochastic,
                                      task_invariant=ag.task_invariant, namespace=ag.namespace, spec={"name": oid})
            self._hidden[oid] = label
        self._predictions: dict[str, str] | None = None
        self.seed = seed

    @property
    def ids(self) -> tuple[str, ...]:
        return self._ids

    def agent(self, oid: str) -> Agent:
        return self._agents[oid]

    def record(self, predictions: Mapping[str, str]) -> None:
        """Store the decoder's prediction for every id (once)."""
        if self._predictions is not None:
            raise ConfigError("predictions were already recorded for this blind set")
        missing = [i for i in self._ids if i not in predictions]
        if missing:
            raise ConfigError(f"no prediction for opaque ids {missing[:5]}")
        self._predictions = {i: str(predictions[i]) for i in self._ids}

    @property
    def predictions(self) -> dict[str, str]:
        if self._predictions is None:
            raise ConfigError("no predictions recorded yet")
        return dict(self._predictions)

    def open(self) -> dict[str, str]:
        """The hidden labels by opaque id (only after every prediction was recorded)."""
        if self._predictions is None:
            raise ConfigError("the hidden labels open only after the predictions are recorded")
        return dict(self._hidden)


@dataclass(frozen=True, eq=False)
class BlindChallenge:
    """One draw of the family-blind challenge: the frozen decoder, then the writers under opaque ids.

    ``protocol`` lists the steps in the order they happened (the decoder is frozen first).  Which
    operator hides behind an id is known only to :meth:`open`, after the predictions are recorded.
    """

    decoder: PairDecoder
    draw: str
    blind: BlindSet
    _operators: Mapping[str, Operator]
    protocol: list[str] = field(default_factory=list)

    def run(self, signature_of: Callable[[Agent], Signature]) -> dict[str, Signature]:
        """Compute every opaque writer's signature, decode it and record the predictions (blind)."""
        sigs = {oid: signature_of(self.blind.agent(oid)) for oid in self.blind.ids}
        self.protocol.append(f"signatures computed for {len(sigs)} opaque writers")
        self.blind.record({oid: self.decoder(s) for oid, s in sigs.items()})
        self.protocol.append("predictions recorded")
        return sigs

    def open(self) -> dict[str, Operator]:
        """The operator (family, parameters, construction-defined target) behind each opaque id."""
        keys = self.blind.open()
        self.protocol.append("hidden assignments opened")
        return {oid: self._operators[k] for oid, k in keys.items()}


def blind_challenge(decoder: PairDecoder, draw: str, *, seed: int = OPERATOR_SEED, **kw: object) -> BlindChallenge:
    """Draw A/B of the family-blind challenge: the decoder (its threshold) is fixed first, then the
    coefficients, readouts and hidden assignment are generated from ``seed`` and ``draw``."""
    protocol = [f"decoder frozen: pair-displacing iff D_A^pair >= {decoder.threshold:.3f}"]
    ops = blind_operators(draw, seed=seed, **kw)  # type: ignore[arg-type]
    protocol.append(f"draw {draw}: coefficients and readouts generated for {len(ops)} writers")
    by_key = {f"{op.family}|{op.label}": op for op in ops}
    bs = BlindSet([(k, op.agent) for k, op in by_key.items()], seed=seed, prefix=f"{draw}-")
    protocol.append("hidden assignment drawn (opaque ids)")
    return BlindChallenge(decoder, draw, bs, by_key, protocol)


@dataclass(frozen=True)
class ThresholdRow:
    threshold: float
    accuracy: float
    specificity: float
    sensitivity: float
    true_positives: int
    true_negatives: int
    positives: int
    negatives: int


def threshold_sensitivity(pair_action: Sequence[float] | np.ndarray, displacing: Sequence[bool] | np.ndarray,
                          grid: Sequence[float] = THRESHOLD_GRID) -> list[ThresholdRow]:
    """Re-threshold stored pair-action signatures (no refit): accuracy, specificity (preserving writers
    called preserving) and sensitivity (displacing writers called displacing) at each threshold."""
    x = np.asarray(pair_action, dtype=np.float64)
    y = np.asarray(displacing, dtype=bool)
    if x.shape != y.shape or x.ndim != 1:
        raise ConfigError("pair_action and displacing must be 1-d and of equal length")
    rows = []
    for t in grid:
        pred = x >= t
        tp, tn = int((pred & y).sum()), int((~pred & ~y).sum())
        pos, neg = int(y.sum()), int((~y).sum())
        rows.append(ThresholdRow(float(t), (tp + tn) / len(y), tn / neg if neg else float("nan"),
                                 tp / pos if pos else float("nan"), tp, tn, pos, neg))
    return rows
