"""Bounded memories with a 16-slot storage limit and an 8-slot retrieval interface (paper §4.5, C1.2–C1.4).

Every memory ingests complete events one at a time and exposes

* ``export()`` — the stored summaries (displayed fields only, in storage order), and
* ``retrieve(query, k=8)`` — the k nearest slots to the query descriptors as fixed-width text lines,
  padded with ``EMPTY`` lines.

Slot display (C1.2): ``[r] action=<a> n=<count> u=<mean:.6f> d1=<:.6f> d2=… d3=… t=<event_time>``,
padded to 144 characters; a longer line is an error.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ...errors import ConfigError

__all__ = [
    "ACTION_ORDER",
    "LINE_WIDTH",
    "MEMORIES",
    "BinnedMeanMemory",
    "Event",
    "EventTimeMemory",
    "FIFOMemory",
    "Memory",
    "NoMemory",
    "ReservoirMemory",
    "Slot",
    "empty_line",
    "identifier_priority",
    "make_memory",
]

LINE_WIDTH = 144
STORAGE = 16
RETRIEVE = 8
ACTION_ORDER = ("coverage", "adaptive", "replicate", "mixed")
BIN_EDGES = (-0.4, 0.0, 0.4)


@dataclass(frozen=True)
class Event:
    """One complete historical event: public descriptors, selected action, realized utility, logical time, id."""

    descriptors: tuple[float, ...]
    action: str
    utility: float
    time: float
    id: str


def identifier_priority(identifier: str) -> int:
    """Deterministic priority of an identifier: the first 8 bytes of its sha256 (big-endian)."""
    return int.from_bytes(hashlib.sha256(identifier.encode("utf-8")).digest()[:8], "big")


@dataclass(frozen=True)
class Slot:
    """The common slot schema; ``bin`` and ``priority`` are hidden (never displayed)."""

    action: str
    count: int
    mean_utility: float
    means: tuple[float, ...]
    event_time: float
    bin: int = -1
    priority: int = 0

    @classmethod
    def of(cls, e: Event) -> Slot:
        return cls(e.action, 1, float(e.utility), tuple(float(x) for x in e.descriptors), float(e.time),
                   _bin(e.descriptors[0]), identifier_priority(e.id))

    def displayed(self) -> tuple[Any, ...]:
        """The displayed fields at six-decimal precision (for stored-summary comparison)."""
        return (self.action, self.count, round(self.mean_utility, 6), *(round(m, 6) for m in self.means),
                _time(self.event_time))

    def line(self, rank: int) -> str:
        ds = " ".join(f"d{i + 1}={m:.6f}" for i, m in enumerate(self.means))
        text = (f"[{rank}] action={self.action} n={self.count} u={self.mean_utility:.6f} {ds} "
                f"t={_time(self.event_time)}")
        if len(text) > LINE_WIDTH:
            raise ConfigError(f"slot line longer than {LINE_WIDTH} characters: {text!r}")
        return text.ljust(LINE_WIDTH)


def empty_line() -> str:
    return "EMPTY".ljust(LINE_WIDTH)


def _time(t: float) -> str:
    return str(int(t)) if float(t).is_integer() else f"{t:.6f}"


def _bin(d1: float) -> int:
    """Four left-closed bins on d1 with cut points −0.4, 0, 0.4."""
    return int(np.searchsorted(BIN_EDGES, d1, side="right"))


def _action_rank(a: str) -> tuple[int, str]:
    return (ACTION_ORDER.index(a), "") if a in ACTION_ORDER else (len(ACTION_ORDER), a)


def retrieve_slots(slots: Sequence[Slot], query: Sequence[float], k: int = RETRIEVE) -> list[str]:
    """Nearest-k retrieval (C1.4): squared distance of the slot's descriptor means to the query; ties by
    logical time (descending), action order, then priority (ascending).  Padded with EMPTY lines."""
    q = np.asarray(query, dtype=np.float64)

    def key(s: Slot) -> tuple[Any, ...]:
        d = float(np.sum((np.asarray(s.means) - q) ** 2))
        return (d, -s.event_time, _action_rank(s.action), s.priority)

    ranked = sorted(slots, key=key)[:k]
    return [s.line(i + 1) for i, s in enumerate(ranked)] + [empty_line()] * (k - len(ranked))


@runtime_checkable
class Memory(Protocol):
    """What ReplayLens needs from a memory pipeline (yours can be any object with these methods)."""

    def ingest(self, event: Event) -> None: ...

    def export(self) -> list[Mapping[str, Any]]: ...

    def retrieve(self, query: Sequence[float], k: int = RETRIEVE) -> list[str]: ...


class _SlotMemory:
    """Shared export/retrieve over a list of slots."""

    def slots(self) -> list[Slot]:  # pragma: no cover - overridden
        raise NotImplementedError

    def export(self) -> list[dict[str, Any]]:
        out = []
        for s in self.slots():
            d: dict[str, Any] = {"action": s.action, "count": s.count, "mean_utility": round(s.mean_utility, 6),
                                 "event_time": _time(s.event_time)}
            for i, m in enumerate(s.means):
                d[f"d{i + 1}_mean"] = round(m, 6)
            out.append(d)
        return out

    def retrieve(self, query: Sequence[float], k: int = RETRIEVE) -> list[str]:
        return retrieve_slots(self.slots(), query, k)


class FIFOMemory(_SlotMemory):
    """The last 16 arrivals in ingestion order (the oldest is evicted); order-sensitive."""

    name = "fifo"

    def __init__(self, capacity: int = STORAGE) -> None:
        self._q: deque[Slot] = deque(maxlen=capacity)

    def ingest(self, event: Event) -> None:
        self._q.append(Slot.of(event))

    def slots(self) -> list[Slot]:
        return list(self._q)


class EventTimeMemory(_SlotMemory):
    """The 16 events with the largest logical time, whatever the arrival order (ties by identifier)."""

    name = "event-time"

    def __init__(self, capacity: int = STORAGE) -> None:
        self.capacity = capacity
        self._kept: list[tuple[float, str, Slot]] = []

    def ingest(self, event: Event) -> None:
        self._kept.append((float(event.time), event.id, Slot.of(event)))
        self._kept.sort(key=lambda x: (-x[0], x[1]))
        del self._kept[self.capacity:]

    def slots(self) -> list[Slot]:
        return [s for _, _, s in sorted(self._kept, key=lambda x: (x[0], x[1]))]


class ReservoirMemory(_SlotMemory):
    """Identifier-priority reservoir: the 16 events with the smallest sha256-of-identifier priority."""

    name = "reservoir"

    def __init__(self, capacity: int = STORAGE) -> None:
        self.capacity = capacity
        self._kept: list[Slot] = []

    def ingest(self, event: Event) -> None:
        self._kept.append(Slot.of(event))
        self._kept.sort(key=lambda s: s.priority)
        del self._kept[self.capacity:]

    def slots(self) -> list[Slot]:
        return list(self._kept)


class BinnedMeanMemory(_SlotMemory):
    """One slot per (action, d1-bin): count and means; event_time = max absorbed, priority = min absorbed.

    The running sums are kept as exact rationals of the ingested floats, so every mean is the correctly
    rounded mean of the absorbed values whatever the ingestion order (incremental float means can flip the
    sixth displayed decimal when a mean sits on a rounding boundary).
    """

    name = "binned-mean"

    def __init__(self) -> None:
        self._cells: dict[tuple[str, int], tuple[Slot, tuple[Fraction, ...]]] = {}

    def ingest(self, event: Event) -> None:
        new = Slot.of(event)
        key = (new.action, new.bin)
        vals = (Fraction(new.mean_utility), *(Fraction(m) for m in new.means))
        old = self._cells.get(key)
        if old is None:
            self._cells[key] = (new, vals)
            return
        slot, sums = old
        n = slot.count + 1
        sums = tuple(a + b for a, b in zip(sums, vals, strict=True))
        means = tuple(float(x / n) for x in sums)
        self._cells[key] = (replace(slot, count=n, mean_utility=means[0], means=means[1:],
                                    event_time=max(slot.event_time, new.event_time),
                                    priority=min(slot.priority, new.priority)), sums)

    def slots(self) -> list[Slot]:
        return [self._cells[k][0] for k in sorted(self._cells, key=lambda k: (_action_rank(k[0]), k[1]))]


class NoMemory(FIFOMemory):
    """The no-memory condition: still ingests into an unused FIFO sidecar (so its stored summaries change
    under reordering) but exposes no retrieved text (every line EMPTY)."""

    name = "no-memory"

    def retrieve(self, query: Sequence[float], k: int = RETRIEVE) -> list[str]:
        return [empty_line()] * k


MEMORIES: dict[str, Callable[[], Any]] = {
    "fifo": FIFOMemory, "event-time": EventTimeMemory, "reservoir": ReservoirMemory, "binned-mean": BinnedMeanMemory,
    "no-memory": NoMemory,
}


def make_memory(name: str) -> Any:
    """A fresh built-in memory by name (fifo, event-time, reservoir, binned-mean)."""
    try:
        return MEMORIES[name]()
    except KeyError:
        raise ConfigError(f"unknown memory {name!r}; built-in memories: {', '.join(MEMORIES)}") from None
