"""The finite-memory repair-selection request matrices (C1.6–C1.8) and their decision tables.

A request is one stream × one memory condition × one history × one repeat and holds the stream's
four block items (C1.6).  Histories (C1.5, fixed per stream and block; repeats reuse them):
``aligned`` (logical-time order), ``ingestion`` (a seeded permutation of complete events),
``value`` (a seeded uniform derangement of the utilities among the block's events) and ``rekey``
(cyclic relabel of the history's actions, the query menu fixed).  Every request is a fresh call:
its repeat key names the phase, condition, history, stream and repeat, so identical prompts (FIFO
and event time store the same set under aligned ingestion) are still asked separately.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np

from ...errors import ConfigError
from ...llm import Request, canonical_json, make_request, sha256_text
from ...maps import uniform_derangement
from ...memory.bounded import (
    ACTION_ORDER,
    Decision,
    Event,
    MemoryItem,
    MemoryTemplate,
    apply_migration,
    item_decoder,
    make_memory,
    render_memory_prompt,
)
from ...rng import derive_rng
from ..joint import PAPER_ACTIONS, PAPER_CONTEXTS, PAPER_DOMAINS
from ._public import MemoryBlocks

__all__ = ["HISTORIES", "MemoryCondition", "MemoryDesign", "MemoryDecisions", "development_conditions",
           "test_conditions", "transform_history"]

HISTORIES = ("aligned", "ingestion", "value", "rekey")
MEMS = ("fifo", "event-time", "reservoir", "binned-mean")
DOMAINS = {"breast-cancer": PAPER_DOMAINS["breast_cancer"], "wine-red": PAPER_DOMAINS["wine"],
           **PAPER_DOMAINS}
CONTEXTS = {"shifted": PAPER_CONTEXTS["shift"], **PAPER_CONTEXTS}
QUERY_NOTE = "d1 = mean and d2 = SD of the candidate pool's first standardized feature, d3 = mean of its second"


def transform_history(history: str, events: Sequence[Event], *, seed: int, stream: str, block: str) -> list[Event]:
    """The ingestion sequence of one block under a C1.5 history transformation."""
    if history == "aligned":
        return apply_migration("aligned", events, seed=seed, stream=stream, block=block)
    if history == "ingestion":
        return apply_migration("reorder", events, seed=seed, stream=stream, block=block)
    base = apply_migration("aligned", events, seed=seed, stream=stream, block=block)
    if history == "value":
        sigma = uniform_derangement(len(base), rng=derive_rng(seed, "memory-value", stream, block))
        return [replace(e, utility=base[int(j)].utility) for e, j in zip(base, sigma, strict=True)]
    if history == "rekey":
        nxt = {a: ACTION_ORDER[(i + 1) % len(ACTION_ORDER)] for i, a in enumerate(ACTION_ORDER)}
        return [replace(e, action=nxt.get(e.action, e.action)) for e in base]
    raise ConfigError(f"unknown history {history!r}; use one of {', '.join(HISTORIES)}")


@dataclass(frozen=True)
class MemoryCondition:
    """One arm of the matrix: a name, the built-in memory it runs, the history, the repeats.

    ``policy_seed`` keys the scripted agent's noise draws (the design seed unless the arm must be a
    separate fresh call of the same pipeline, like the test's endpoint arm)."""

    name: str
    memory: str
    history: str
    repeats: int
    policy_seed: int

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "memory": self.memory, "history": self.history, "repeats": self.repeats,
                "policy_seed": self.policy_seed}


def development_conditions(seed: int) -> tuple[MemoryCondition, ...]:
    """C1.7: per candidate 6 aligned + 2 value + 2 ingestion-order; controls no-memory ×2 and FIFO-rekey ×2
    (704 requests over 16 streams)."""
    out = []
    for m in MEMS:
        out += [MemoryCondition(m, m, "aligned", 6, seed), MemoryCondition(m, m, "value", 2, seed),
                MemoryCondition(m, m, "ingestion", 2, seed)]
    out += [MemoryCondition("no-memory", "no-memory", "aligned", 2, seed),
            MemoryCondition("fifo-rekey", "fifo", "rekey", 2, seed)]
    return tuple(out)


def test_conditions(selection: Mapping[str, str], seed: int) -> tuple[MemoryCondition, ...]:
    """C1.8: FIFO, audit-selected, endpoint-selected, no memory × aligned / ingestion-order × 2 repeats
    (768 requests over 48 streams).  The endpoint arm is a separate fresh call even for the same pipeline."""
    arms = (("FIFO", "fifo", seed), ("audit", selection["audit"], seed), ("endpoint", selection["endpoint"], seed + 1),
            ("No memory", "no-memory", seed))
    return tuple(MemoryCondition(n, m, h, 2, s) for n, m, s in arms for h in ("aligned", "ingestion"))


@dataclass(frozen=True, eq=False)
class MemoryDesign:
    """The request matrix of one phase: streams × conditions × repeats, one item per block of the stream."""

    phase: str
    blocks: MemoryBlocks
    conditions: tuple[MemoryCondition, ...]
    seed: int
    actions: Mapping[str, str] = field(default_factory=lambda: dict(PAPER_ACTIONS))
    template: MemoryTemplate = field(default_factory=MemoryTemplate)
    k: int = 8

    def __post_init__(self) -> None:
        for c in self.conditions:
            if c.history not in HISTORIES:
                raise ConfigError(f"unknown history {c.history!r}")
            if c.repeats < 1:
                raise ConfigError("repeats must be >= 1")
        if tuple(self.actions) != tuple(self.blocks.arms):
            raise ConfigError(f"the menu {list(self.actions)} must list the blocks' actions {list(self.blocks.arms)}")

    @cached_property
    def streams(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s for s, _ in self.blocks.events))

    @cached_property
    def block_names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(b for _, b in self.blocks.events))

    @property
    def n_requests(self) -> int:
        return len(self.streams) * sum(c.repeats for c in self.conditions)

    def retrieved(self, memory: str, history: str, stream: str, block: str) -> tuple[str, ...]:
        return self._retrieved[(memory, history, stream, block)]

    @cached_property
    def _retrieved(self) -> dict[tuple[str, str, str, str], tuple[str, ...]]:
        out: dict[tuple[str, str, str, str], tuple[str, ...]] = {}
        moved: dict[tuple[str, str, str], list[Event]] = {}
        for c in self.conditions:
            for (s, b), evs in self.blocks.events.items():
                key = (c.memory, c.history, s, b)
                if key in out:
                    continue
                if (c.history, s, b) not in moved:
                    moved[(c.history, s, b)] = transform_history(c.history, evs, seed=self.seed, stream=s, block=b)
                mem = make_memory(c.memory)
                for e in moved[(c.history, s, b)]:
                    mem.ingest(e)
                out[key] = tuple(str(x) for x in mem.retrieve(list(self.blocks.queries[(s, b)]), self.k))
        return out

    def item(self, cond: MemoryCondition, stream: str, block: str) -> MemoryItem:
        family, _, context = block.partition("/")
        return MemoryItem(task=(("Domain", DOMAINS.get(family, family)), ("Context", CONTEXTS.get(context, context))),
                          query=tuple(self.blocks.queries[(stream, block)]),
                          menu=tuple(self.actions.items()),
                          retrieved=self.retrieved(cond.memory, cond.history, stream, block))

    def requests(self, settings_digest: str) -> list[Request]:
        """Every request in design order (stream, condition, repeat)."""
        decode = {a: a for a in self.actions}
        menu = tuple(self.actions.items())
        out = []
        for s in self.streams:
            blocks = [b for b in self.block_names if (s, b) in self.blocks.events]
            for c in self.conditions:
                prompt = render_memory_prompt([self.item(c, s, b) for b in blocks], self.template)
                for r in range(c.repeats):
                    meta = {"phase": self.phase, "condition": c.name, "memory": c.memory, "history": c.history,
                            "stream": s, "repeat": r, "blocks": blocks, "seed": c.policy_seed}
                    out.append(make_request(prompt, [item_decoder(menu, decode) for _ in blocks],
                                            settings_digest=settings_digest,
                                            repeat=f"{self.phase}/{c.name}/{c.history}/{s}/{r}", meta=meta,
                                            system=self.template.system))
        return out

    def requests_digest(self) -> str:
        """sha256 over every request's (repeat key, prompt sha256), independent of the model."""
        reqs = self.requests("")
        return sha256_text(canonical_json([[r.repeat, r.prompt_sha256] for r in reqs]))

    def to_dict(self) -> dict[str, Any]:
        return {"phase": self.phase, "seed": self.seed, "conditions": [c.to_dict() for c in self.conditions],
                "streams": len(self.streams), "blocks": list(self.block_names), "actions": dict(self.actions),
                "k": self.k, "template_sha256": self.template.sha256(), "requests_sha256": self.requests_digest()}


@dataclass(frozen=True)
class MemoryDecisions:
    """Decoded decisions of one phase as action indices ``[stream, block, repeat]`` per (condition, history)."""

    design: MemoryDesign
    actions: Mapping[tuple[str, str], np.ndarray]  # -1 where a decision is missing

    @classmethod
    def from_rows(cls, design: MemoryDesign, rows: Sequence[Mapping[str, Any]]) -> MemoryDecisions:
        arms = design.blocks.arms
        si = {s: i for i, s in enumerate(design.streams)}
        bi = {b: i for i, b in enumerate(design.block_names)}
        acts = {(c.name, c.history): np.full((len(si), len(bi), c.repeats), -1, dtype=np.int64)
                for c in design.conditions}
        for row in rows:
            a = acts[(str(row["condition"]), str(row["history"]))]
            a[si[str(row["stream"])], bi[str(row["block"])], int(row["repeat"])] = arms.index(str(row["action"]))
        return cls(design, acts)

    @classmethod
    def from_requests(cls, design: MemoryDesign, requests: Sequence[Request],
                      decisions: Mapping[str, Decision]) -> MemoryDecisions:
        return cls.from_rows(design, decision_rows(requests, decisions))

    @property
    def complete(self) -> bool:
        return all(bool((a >= 0).all()) for a in self.actions.values())

    def get(self, condition: str, history: str) -> np.ndarray:
        return self.actions[(condition, history)]


def decision_rows(requests: Sequence[Request], decisions: Mapping[str, Decision]) -> list[dict[str, Any]]:
    """One row per block decision: phase, condition, memory, history, stream, repeat, block, token, action."""
    rows = []
    for r in requests:
        d = decisions.get(r.request_id)
        if d is None:
            continue
        m = r.meta
        for i, act in enumerate(d.actions):
            rows.append({"phase": m["phase"], "condition": m["condition"], "memory": m["memory"],
                         "history": m["history"], "stream": m["stream"], "repeat": int(m["repeat"]),
                         "block": m["blocks"][i], "token": d.tokens[i] if i < len(d.tokens) else None,
                         "action": act, "attempt_kind": d.attempt_kind, "request_id": r.request_id})
    return rows
