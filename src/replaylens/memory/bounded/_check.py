"""Migration checks for memory pipelines: does a migration change what is stored or retrieved?

A pure state comparison, no model needed.  For every block, the events are ingested in their
aligned (logical-time) order and again after a migration operation; the stored summaries (sorted
multiset of displayed fields at six decimals, slot order ignored) and the retrieved text (exact
comparison of the k fixed-width lines for the block's query) are compared.

Operations (whole events always travel intact):

* ``reorder`` — a seeded permutation of the ingestion order (complete-event order);
* ``merge`` — the block arrives as two sources (alternate events) concatenated, not interleaved;
* ``reindex`` — every identifier is replaced by a fresh one;
* ``relabel`` — actions renamed consistently (cyclic over the block's actions); compared after
  mapping the names back.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ...errors import ConfigError
from ...rng import derive_rng
from ._memories import Event

__all__ = ["MIGRATIONS", "BlockDiff", "MigrationReport", "apply_migration", "check_migration", "snapshot"]

MIGRATIONS = ("reorder", "merge", "reindex", "relabel")

MemoryFactory = Callable[[], Any]


def aligned_order(events: Sequence[Event]) -> list[Event]:
    """Events in logical-time order (stable on ties)."""
    return sorted(events, key=lambda e: e.time)


def _relabel_map(events: Sequence[Event]) -> dict[str, str]:
    acts = list(dict.fromkeys(e.action for e in aligned_order(events)))
    return {a: acts[(i + 1) % len(acts)] for i, a in enumerate(acts)} if len(acts) > 1 else {}


def apply_migration(op: str, events: Sequence[Event], *, seed: int, stream: str, block: str) -> list[Event]:
    """The migrated event sequence (ingestion order) for one block."""
    base = aligned_order(events)
    if op == "aligned":
        return base
    if op == "reorder":
        perm = derive_rng(seed, "ingestion-order", stream, block).permutation(len(base))
        return [base[i] for i in perm]
    if op == "merge":
        return base[0::2] + base[1::2]
    if op == "reindex":
        return [replace(e, id=f"migrated-{i:06d}-{e.id[::-1]}") for i, e in enumerate(base)]
    if op == "relabel":
        mp = _relabel_map(base)
        return [replace(e, action=mp.get(e.action, e.action)) for e in base]
    raise ConfigError(f"unknown migration {op!r}; use one of {', '.join(MIGRATIONS)}")


def snapshot(factory: MemoryFactory, events: Sequence[Event], query: Sequence[float], k: int = 8
             ) -> tuple[list[tuple[Any, ...]], list[str]]:
    """(sorted stored summaries, retrieved lines) after ingesting ``events`` into a fresh memory."""
    mem = factory()
    for e in events:
        mem.ingest(e)
    stored = sorted(tuple((str(k_), _norm(v)) for k_, v in sorted(dict(s).items())) for s in mem.export())
    lines = [str(x) for x in mem.retrieve(list(query), k)]
    return stored, lines


def _norm(v: Any) -> Any:
    if isinstance(v, float):
        return round(v, 6)
    return v


@dataclass(frozen=True)
class BlockDiff:
    """Evidence for one changed block."""

    stream: str
    block: str
    stored_changed: bool
    retrieved_changed: bool
    diff: str


@dataclass(frozen=True)
class MigrationReport:
    """Per-operation verdict over every block."""

    op: str
    n_blocks: int
    stored_changed: int
    retrieved_changed: int
    changed: tuple[BlockDiff, ...]
    decisions_changed: int | None = None

    @property
    def safe(self) -> bool:
        return self.stored_changed == 0 and self.retrieved_changed == 0

    def verdict(self) -> str:
        dec = "" if self.decisions_changed is None else \
            f"; decisions change in {self.decisions_changed}/{self.n_blocks} blocks"
        if self.safe:
            return f"{self.op}: SAFE — stored and retrieved state identical in all {self.n_blocks} blocks{dec}"
        ex = self.changed[0]
        return (f"{self.op}: UNSAFE — stored summaries change in {self.stored_changed}/{self.n_blocks} blocks, "
                f"retrieved text in {self.retrieved_changed}/{self.n_blocks} (first: stream {ex.stream}, "
                f"block {ex.block}){dec}")

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "safe": self.safe, "blocks": self.n_blocks, "stored_changed": self.stored_changed,
                "retrieved_changed": self.retrieved_changed, "decisions_changed": self.decisions_changed,
                "verdict": self.verdict(),
                "examples": [{"stream": c.stream, "block": c.block, "stored_changed": c.stored_changed,
                              "retrieved_changed": c.retrieved_changed, "diff": c.diff} for c in self.changed[:3]]}


def _map_back_lines(lines: list[str], inverse: Mapping[str, str]) -> list[str]:
    if not inverse:
        return lines
    out = []
    for ln in lines:
        back = re.sub(r"action=(\S+)", lambda m: "action=" + inverse.get(m.group(1), m.group(1)), ln.rstrip())
        out.append(back.ljust(len(ln)) if ln != ln.rstrip() else back)
    return out


def check_migration(
    factory: MemoryFactory,
    blocks: Mapping[tuple[str, str], Sequence[Event]],
    *,
    queries: Mapping[tuple[str, str], Sequence[float]] | None = None,
    ops: Sequence[str] = MIGRATIONS,
    seed: int = 0,
    k: int = 8,
    policy: Callable[[Sequence[str], Sequence[str]], str] | None = None,
) -> list[MigrationReport]:
    """Compare every block's stored and retrieved state under each migration with its aligned ingestion.

    With ``policy(retrieved_lines, menu) -> action``, also count the blocks whose decision changes
    (the menu is the block's actions; relabelled decisions are mapped back).
    """
    reports = []
    for op in ops:
        if op not in MIGRATIONS:
            raise ConfigError(f"unknown migration {op!r}; use one of {', '.join(MIGRATIONS)}")
        changed: list[BlockDiff] = []
        n_s = n_r = n_d = 0
        for (stream, block), events in blocks.items():
            if not events:
                continue
            q = queries[(stream, block)] if queries and (stream, block) in queries else \
                list(np.mean([e.descriptors for e in events], axis=0))
            s0, r0 = snapshot(factory, aligned_order(events), q, k)
            migrated = apply_migration(op, events, seed=seed, stream=stream, block=block)
            s1, r1 = snapshot(factory, migrated, q, k)
            if op == "relabel":
                inv = {v: k_ for k_, v in _relabel_map(events).items()}
                s1 = sorted(tuple((f, inv.get(v, v) if f == "action" else v) for f, v in row) for row in s1)
                r1 = _map_back_lines(r1, inv)
            if policy is not None:
                menu = list(dict.fromkeys(e.action for e in aligned_order(events)))
                d0 = policy(r0, menu)
                d1 = policy(r1, menu)
                n_d += d0 != d1
            sc, rc = s0 != s1, r0 != r1
            n_s += sc
            n_r += rc
            if sc or rc:
                diff = "\n".join(difflib.unified_diff([ln.rstrip() for ln in r0], [ln.rstrip() for ln in r1],
                                                      "aligned", op, lineterm="", n=0))
                if not diff:
                    diff = "\n".join(difflib.unified_diff([repr(x) for x in s0], [repr(x) for x in s1],
                                                          "aligned (stored)", f"{op} (stored)", lineterm="", n=0))
                changed.append(BlockDiff(stream, block, sc, rc, diff))
        reports.append(MigrationReport(op, sum(1 for ev in blocks.values() if ev), n_s, n_r, tuple(changed),
                                       n_d if policy is not None else None))
    return reports
