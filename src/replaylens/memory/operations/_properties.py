"""Canaries and properties of an operation: marked records that must survive, idempotency, order independence
and (where declared) monotonicity; each a :class:`Finding` with an example."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ...errors import ConfigError
from ...records import Record
from ...rng import derive_rng
from ._ops import Operation, OperationRaised, record_text, run_operation

__all__ = ["PROPERTIES", "Finding", "check_canaries", "check_properties"]

PROPERTIES = ("idempotent", "order_independent", "monotone")

Streams = dict[str, list[Record]]


@dataclass(frozen=True)
class Finding:
    """One check: ``held``, whether it gates the exit code (``declared``), a summary and the first example."""

    check: str
    held: bool
    declared: bool
    summary: str
    example: str = ""

    def line(self) -> str:
        word = "ok" if self.held else "FAILED"
        gate = " (declared)" if self.declared else ""
        ex = f"; e.g. {self.example}" if self.example and not self.held and self.example not in self.summary else ""
        return f"{self.check}{gate}: {word} — {self.summary}{ex}"

    def to_dict(self) -> dict[str, object]:
        return {"check": self.check, "held": self.held, "declared": self.declared, "summary": self.summary,
                "example": self.example}


def _u(x: float) -> object:
    return "nan" if math.isnan(x) else round(x, 9)


def _content(r: Record) -> tuple[object, ...]:
    return (r.family, r.context, record_text(r), r.key, _u(r.outcome))


def _sig(r: Record) -> tuple[object, ...]:
    return (r.slot, *_content(r), r.event_id, r.event_time)


def _show(r: Record) -> str:
    out = "masked" if math.isnan(r.outcome) else f"{r.outcome:g}"
    return f"slot {r.slot} ({r.key}, {out}, {record_text(r)!r})"


def _ident(r: Record) -> str:
    return r.event_id or r.task


def check_canaries(before: Streams, after: Streams, ids: Sequence[str] = (),
                   predicate: Callable[[Record], object] | None = None, *, where: str = "--canary-where") -> Finding:
    """Do the marked records (``ids``: event ids, or task ids of records without one; ``predicate``) survive
    intact (same block, text, key and outcome) in their stream?  An id that marks no record is a ConfigError."""
    wanted = set(ids)
    found: set[str] = set()
    marked: list[Record] = []
    for rs in before.values():
        for r in rs:
            hit = r.event_id in wanted or r.task in wanted
            if hit:
                found.update({x for x in (r.event_id, r.task) if x in wanted})
            if not hit and predicate is not None:
                try:
                    hit = bool(predicate(r))
                except Exception as exc:
                    raise OperationRaised(where, "predicate", {"stream": r.stream, "slot": r.slot}, exc,
                                          hint=f"the canary predicate {where} raised") from exc
            if hit:
                marked.append(r)
    missing = sorted(wanted - found)
    if missing:
        raise ConfigError(f"--canary {missing[0]} marks no record (ids are event ids, or task ids of records "
                          "without one)")
    lost: list[str] = []
    for s in dict.fromkeys(r.stream for r in marked):
        kept = Counter(_content(r) for r in after.get(s, []))
        by_id = {_ident(r): r for r in after.get(s, [])}
        for r in (x for x in marked if x.stream == s):
            if kept[_content(r)] > 0:
                kept[_content(r)] -= 1
                continue
            now = by_id.get(_ident(r))
            why = f"altered to {_show(now)}" if now is not None else "dropped"
            lost.append(f"{_ident(r)} (stream {s}, {_show(r)}) {why}")
    n = len(marked)
    summary = (f"{n - len(lost)} of {n} canaries survive intact" + (f"; lost: {'; '.join(lost[:5])}" +
                                                                    (" ..." if len(lost) > 5 else "") if lost else ""))
    return Finding("canaries", not lost, True, summary, lost[0] if lost else "")


def _first_diff(x: list[Record], y: list[Record]) -> str:
    for a, b in zip(x, y, strict=False):
        if _sig(a) != _sig(b):
            return f"{_show(a)} vs {_show(b)}"
    return f"{len(x)} vs {len(y)} records"


def check_properties(op: Operation, name: str, before: Streams, after: Streams, *, seed: int = 0,
                     declared: Sequence[str] = ()) -> list[Finding]:
    """Idempotency (applying it to its output changes nothing), order independence (its input handed in a seeded
    shuffled order gives the same output) and, when the operation declares ``monotone`` or ``declared`` names it,
    monotonicity (a seeded half of a stream's records gives no record the whole stream's output lacks)."""
    unknown = [p for p in declared if p not in PROPERTIES]
    if unknown:
        raise ConfigError(f"unknown property {unknown[0]!r}; known: {', '.join(PROPERTIES)}")
    out = []
    bad: list[str] = []
    for s, rs in after.items():
        twice = run_operation(op, name, s, rs)
        if [_sig(r) for r in twice] != [_sig(r) for r in rs]:
            bad.append(f"stream {s}: once {_first_diff(rs, twice)} twice")
    out.append(Finding("idempotent", not bad, "idempotent" in declared,
                       f"applying it twice equals once in {len(after) - len(bad)}/{len(after)} streams",
                       bad[0] if bad else ""))
    bad = []
    for s, rs in before.items():
        perm = derive_rng(seed, "operation-order", s).permutation(len(rs))
        shuffled = run_operation(op, name, s, [rs[i] for i in perm])
        ref = after.get(s, [])
        if [_sig(r) for r in shuffled] != [_sig(r) for r in ref]:
            bad.append(f"stream {s}: in order {_first_diff(ref, shuffled)} shuffled")
    out.append(Finding("order_independent", not bad, "order_independent" in declared,
                       f"a shuffled input gives the same output in {len(before) - len(bad)}/{len(before)} streams",
                       bad[0] if bad else ""))
    if bool(getattr(op, "monotone", False)) or "monotone" in declared:
        bad = []
        for s, rs in before.items():
            keep = derive_rng(seed, "operation-subset", s).random(len(rs)) < 0.5
            part = run_operation(op, name, s, [r for r, k in zip(rs, keep, strict=True) if k])
            extra = Counter(_content(r) for r in part) - Counter(_content(r) for r in after.get(s, []))
            if extra:
                r = next(x for x in part if _content(x) in extra)
                bad.append(f"stream {s}: a half of its records keeps {_show(r)}, the whole stream's output does not")
        out.append(Finding("monotone", not bad, True,
                           f"a subset's output lies within the whole's in {len(before) - len(bad)}/{len(before)} "
                           "streams", bad[0] if bad else ""))
    return out
