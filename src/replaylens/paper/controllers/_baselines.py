"""Baseline controllers of the primary matrix (paper §"Controller and replay specification", with RECs).

Arm indices refer to the world's canonical arm order (coverage, adaptive, replicate, mixed); the
lexicographically-largest tie rule compares the label strings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ._ledger import OCRR, LedgerController, LedgerState

__all__ = [
    "ExtraSampling",
    "GenericMemory",
    "GenericSkill",
    "NoUpdate",
    "SelectedStatic",
    "ShuffledOutcome",
    "StaticPredictor",
]


def _lexmax(arms: tuple[str, ...], values: np.ndarray) -> int:
    best = np.flatnonzero(values == values.max())
    return max(best.tolist(), key=lambda i: arms[i])


@dataclass(frozen=True)
class NoUpdate:
    """Always ``mixed``; no state."""

    arms: tuple[str, ...]
    name: str = "no-update"
    cost: float = 10.0

    def start(self, stream: int, rng: np.random.Generator) -> Any:
        return None

    def develop(self, state: Any, stratum: tuple[str, str], utilities: np.ndarray, rng: np.random.Generator) -> Any:
        return state

    def choose(self, state: Any, stratum: tuple[str, str], clock: int, rng: np.random.Generator) -> int:
        return self.arms.index("mixed")

    def observe(self, state: Any, stratum: tuple[str, str], arm: int, u: float, clock: int,
                rng: np.random.Generator) -> Any:
        return state

    def predict(self, state: Any, stratum: tuple[str, str], arm: int) -> float:
        return 0.5


@dataclass(frozen=True)
class GenericMemory(NoUpdate):
    """Per (family, context): repeat the last arm if its utility was ≥ 0.56, else move round-robin to
    the next arm; first decision ``coverage``; future: the last successful arm, or ``coverage``."""

    name: str = "generic-memory"
    threshold: float = 0.56

    def start(self, stream: int, rng: np.random.Generator) -> Any:
        return {}

    def choose(self, state: Any, stratum: tuple[str, str], clock: int, rng: np.random.Generator) -> int:
        last = state.get(stratum)
        if last is None:
            return 0
        arm, u, _ = last
        return arm if u >= self.threshold else (arm + 1) % len(self.arms)

    def observe(self, state: Any, stratum: tuple[str, str], arm: int, u: float, clock: int,
                rng: np.random.Generator) -> Any:
        prev = state.get(stratum)
        success = arm if u >= self.threshold else (prev[2] if prev else None)
        new = dict(state)
        new[stratum] = (arm, u, success)
        return new

    def choose_future(self, state: Any, stratum: tuple[str, str], clock: int, rng: np.random.Generator) -> int:
        last = state.get(stratum)
        return last[2] if last is not None and last[2] is not None else 0

    def predict(self, state: Any, stratum: tuple[str, str], arm: int) -> float:
        last = state.get(stratum)
        return float(last[1]) if last is not None and last[0] == arm else 0.5


@dataclass(frozen=True)
class GenericSkill(NoUpdate):
    """Family-level mean per (family, arm) pooled over contexts; greedy, lex-largest ties; unvisited 0.5."""

    name: str = "generic-skill"

    def start(self, stream: int, rng: np.random.Generator) -> Any:
        return {}

    def _means(self, state: Any, family: str) -> np.ndarray:
        out = np.full(len(self.arms), 0.5)
        for a in range(len(self.arms)):
            n, s = state.get((family, a), (0, 0.0))
            if n:
                out[a] = s / n
        return out

    def choose(self, state: Any, stratum: tuple[str, str], clock: int, rng: np.random.Generator) -> int:
        return _lexmax(self.arms, self._means(state, stratum[0]))

    def observe(self, state: Any, stratum: tuple[str, str], arm: int, u: float, clock: int,
                rng: np.random.Generator) -> Any:
        n, s = state.get((stratum[0], arm), (0, 0.0))
        new = dict(state)
        new[(stratum[0], arm)] = (n + 1, s + u)
        return new

    def predict(self, state: Any, stratum: tuple[str, str], arm: int) -> float:
        return float(self._means(state, stratum[0])[arm])


@dataclass(frozen=True)
class StaticPredictor(NoUpdate):
    """Privileged: argmax of the mean development utility of all four arms per stratum (lex ties), fixed."""

    name: str = "static-predictor"

    def start(self, stream: int, rng: np.random.Generator) -> Any:
        return {}

    def develop(self, state: Any, stratum: tuple[str, str], utilities: np.ndarray, rng: np.random.Generator) -> Any:
        new = dict(state)
        new[stratum] = utilities.mean(axis=0)
        return new

    def choose(self, state: Any, stratum: tuple[str, str], clock: int, rng: np.random.Generator) -> int:
        return _lexmax(self.arms, state[stratum])

    def predict(self, state: Any, stratum: tuple[str, str], arm: int) -> float:
        return float(state[stratum][arm])


@dataclass(frozen=True)
class SelectedStatic(StaticPredictor):
    """Development task j uses arm j mod 4 (only that arm revealed); frozen argmax of per-arm means."""

    name: str = "selected-static"

    def develop(self, state: Any, stratum: tuple[str, str], utilities: np.ndarray, rng: np.random.Generator) -> Any:
        j = np.arange(utilities.shape[0])
        arm = j % len(self.arms)
        seen = utilities[j, arm]
        means = np.array([seen[arm == a].mean() if (arm == a).any() else 0.5 for a in range(len(self.arms))])
        new = dict(state)
        new[stratum] = means
        return new


@dataclass(frozen=True)
class ExtraSampling(NoUpdate):
    """A uniform random arm per task from the per-stream generator; effective cost 3× (30)."""

    name: str = "extra-sampling"
    cost: float = 30.0

    def choose(self, state: Any, stratum: tuple[str, str], clock: int, rng: np.random.Generator) -> int:
        return int(rng.integers(len(self.arms)))


@dataclass(frozen=True)
class ShuffledOutcome(NoUpdate):
    """OCRR selector and ledger, but the written utility is 0.5 (empty buffer) or a uniform draw from the
    key's past-only utility buffer; the current outcome is appended to the buffer afterwards."""

    name: str = "shuffled-outcome"

    def start(self, stream: int, rng: np.random.Generator) -> Any:
        return (LedgerState(), {})

    def _ocrr(self) -> LedgerController:
        return LedgerController(OCRR)

    def choose(self, state: Any, stratum: tuple[str, str], clock: int, rng: np.random.Generator) -> int:
        sc = self._ocrr().scores(state[0], stratum[0], stratum[1], self.arms)
        return _lexmax(self.arms, sc)

    def observe(self, state: Any, stratum: tuple[str, str], arm: int, u: float, clock: int,
                rng: np.random.Generator) -> Any:
        ledger, buffers = state
        buf = buffers.get(stratum, ())
        written = 0.5 if not buf else float(buf[int(rng.integers(len(buf)))])
        from ...agents import TaskInput

        task = TaskInput(f"r{0:02d}", stratum[0], stratum[1], clock, "shuffled")
        ledger = self._ocrr().update(ledger, task, self.arms[arm], written)
        new_buf = dict(buffers)
        new_buf[stratum] = (*buf, u)
        return (ledger, new_buf)

    def predict(self, state: Any, stratum: tuple[str, str], arm: int) -> float:
        n, s = state[0].local.get((stratum[0], stratum[1], self.arms[arm]), (0, 0))
        return float(s) / n * 1e-6 if n else 0.5


