"""Memory operations as transformations of a history's records (records → records), and the built-in ones.

An operation is called once per stream with that stream's records in slot order and returns the records the
memory keeps (dropped, merged or rewritten).  A returned record's ``slot`` is its position in the new ingestion
order (slots unique within the stream); its ``stream`` must be the stream it was given.  Streams are independent
replicates, so an operation never mixes them.

Built-in reference operations (``NAME[:ARG]``):

* ``dedup`` — exact-duplicate removal: of the records equal in (block, text, key, outcome) the first is kept;
* ``keep-latest`` — keep-latest-per-key: per (block, key) only the record of the largest slot;
* ``forget-age:AGE`` — drop every record older than ``AGE`` (event time, else slot) behind its block's newest;
* ``forget-count:N`` — keep the ``N`` newest records of each block;
* ``merge-text`` — merge-by-text with outcome averaging: records of one block whose text (``metadata.text``,
  else the task) is equal after lower-casing and collapsing punctuation and spaces become one record: the
  newest one's key, slot and text, the mean of their outcomes (masked outcomes left out).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, runtime_checkable

from ..._imports import import_target
from ...errors import AgentRaised, ConfigError, InputError
from ...records import History, Record, history_from_records

__all__ = ["OPERATIONS", "Operation", "OperationError", "OperationRaised", "apply_operation", "load_operation",
           "record_text", "run_operation", "stream_records"]


@runtime_checkable
class Operation(Protocol):
    """A memory operation: ``apply(records)`` returns the records kept for one stream.  Optional attributes:
    ``name`` (shown in reports) and ``monotone`` (declared: a subset of the input never gives a record the whole
    input's output lacks; checked)."""

    def apply(self, records: Sequence[Record]) -> Sequence[Record]: ...


class OperationRaised(AgentRaised):
    """The user's operation raised (CLI exit status 3): names the operation, the stream and the user's frame."""


class OperationError(OperationRaised):
    """The operation returned something that is not a valid stream of records (CLI exit status 3)."""

    def __init__(self, op: str, stream: str, message: str) -> None:
        self._msg = f"operation {op} returned invalid records for stream {stream}: {message}"
        super().__init__(op, "apply", {"stream": stream}, ValueError(message),
                         hint=f"operation {op} returned invalid records")

    def one_line(self) -> str:
        return getattr(self, "_msg", "") or super().one_line()


_PUNCT = re.compile(r"[\W_]+", re.UNICODE)


def record_text(r: Record) -> str:
    """The text a store would embed: ``metadata["text"]`` when present, else the task."""
    md = r.metadata
    if md is not None and isinstance(md.get("text"), str):
        return str(md["text"])
    return r.task


def _norm_text(text: str) -> str:
    return " ".join(_PUNCT.sub(" ", text.lower()).split())


def _clock(r: Record) -> float:
    return float(r.event_time) if r.event_time is not None else float(r.slot)


def _micro(u: float) -> object:
    return "nan" if math.isnan(u) else round(u, 6)


@dataclass(frozen=True)
class Dedup:
    """Exact-duplicate removal: the first of the records equal in (block, text, key, outcome) is kept."""

    name: str = "dedup"
    monotone: bool = True

    def apply(self, records: Sequence[Record]) -> list[Record]:
        seen: set[tuple[Any, ...]] = set()
        out = []
        for r in sorted(records, key=lambda x: x.slot):
            k = (r.family, r.context, record_text(r), r.key, _micro(r.outcome))
            if k not in seen:
                seen.add(k)
                out.append(r)
        return out


@dataclass(frozen=True)
class KeepLatest:
    """Keep-latest-per-key: per (block, key) the record of the largest slot."""

    name: str = "keep-latest"
    monotone: bool = False

    def apply(self, records: Sequence[Record]) -> list[Record]:
        last: dict[tuple[str, str, str], Record] = {}
        for r in records:
            k = (r.family, r.context, r.key)
            if k not in last or r.slot > last[k].slot:
                last[k] = r
        return sorted(last.values(), key=lambda x: x.slot)


@dataclass(frozen=True)
class ForgetAge:
    """Forgetting by age: drop records older than ``max_age`` (event time, else slot) behind their block's newest."""

    max_age: float
    name: str = "forget-age"
    monotone: bool = False

    def apply(self, records: Sequence[Record]) -> list[Record]:
        newest: dict[tuple[str, str], float] = {}
        for r in records:
            newest[r.block] = max(newest.get(r.block, -math.inf), _clock(r))
        return sorted((r for r in records if newest[r.block] - _clock(r) <= self.max_age), key=lambda x: x.slot)


@dataclass(frozen=True)
class ForgetCount:
    """Forgetting by count: keep the ``keep`` newest records (by slot) of each block."""

    keep: int
    name: str = "forget-count"
    monotone: bool = False

    def apply(self, records: Sequence[Record]) -> list[Record]:
        by_block: dict[tuple[str, str], list[Record]] = {}
        for r in sorted(records, key=lambda x: x.slot):
            by_block.setdefault(r.block, []).append(r)
        kept = [r for rs in by_block.values() for r in rs[max(0, len(rs) - self.keep):]]
        return sorted(kept, key=lambda x: x.slot)


@dataclass(frozen=True)
class MergeText:
    """Merge-by-text with outcome averaging: records of a block with the same normalised text become one (the
    newest's key, slot and text; the mean of the visible outcomes, rounded to six decimals; NaN if none)."""

    name: str = "merge-text"
    monotone: bool = False

    def apply(self, records: Sequence[Record]) -> list[Record]:
        groups: dict[tuple[str, str, str], list[Record]] = {}
        for r in sorted(records, key=lambda x: x.slot):
            groups.setdefault((r.family, r.context, _norm_text(record_text(r))), []).append(r)
        out = []
        for rs in groups.values():
            newest = rs[-1]
            if len(rs) == 1:
                out.append(newest)
                continue
            vis = [r.outcome for r in rs if not math.isnan(r.outcome)]
            mean = round(math.fsum(vis) / len(vis), 6) if vis else math.nan
            out.append(replace(newest, outcome=mean))
        return sorted(out, key=lambda x: x.slot)


def _number(arg: str | None, name: str, *, integer: bool) -> float:
    if arg is None or not arg.strip():
        raise ConfigError(f"operation {name} needs an argument: {name}:{'N' if integer else 'AGE'}")
    try:
        v = float(arg) if not integer else int(arg)
    except ValueError:
        raise ConfigError(f"operation {name}: expected {'an integer' if integer else 'a number'}; got {arg!r}") \
            from None
    if not math.isfinite(v) or v < (1 if integer else 0):
        raise ConfigError(f"operation {name}: expected {'an integer >= 1' if integer else 'a number >= 0'}; "
                          f"got {arg!r}")
    return v


def _no_arg(name: str, make: Callable[[], Operation]) -> Callable[[str | None], Operation]:
    def build(arg: str | None) -> Operation:
        if arg:
            raise ConfigError(f"operation {name} takes no argument; got {name}:{arg}")
        return make()
    return build


OPERATIONS: dict[str, Callable[[str | None], Operation]] = {
    "dedup": _no_arg("dedup", Dedup),
    "keep-latest": _no_arg("keep-latest", KeepLatest),
    "forget-age": lambda a: ForgetAge(_number(a, "forget-age", integer=False), name=f"forget-age:{a}"),
    "forget-count": lambda a: ForgetCount(int(_number(a, "forget-count", integer=True)), name=f"forget-count:{a}"),
    "merge-text": _no_arg("merge-text", MergeText),
}


@dataclass(frozen=True)
class _Callable:
    fn: Callable[[Sequence[Record]], Sequence[Record]]
    name: str
    monotone: bool = False

    def apply(self, records: Sequence[Record]) -> Sequence[Record]:
        return self.fn(records)


def load_operation(spec: str) -> tuple[str, Operation]:
    """(name, operation) from a built-in ``NAME[:ARG]`` or a user's ``file.py:factory`` / ``module:factory`` (a
    zero-argument callable returning an :class:`Operation` or a plain ``records -> records`` function)."""
    name, sep, arg = spec.partition(":")
    if name in OPERATIONS:
        op = OPERATIONS[name](arg if sep else None)
        return str(getattr(op, "name", name)), op
    if not sep:
        raise ConfigError(f"unknown operation {spec!r}; built-in operations: {', '.join(OPERATIONS)} "
                          "(dedup, keep-latest, forget-age:AGE, forget-count:N, merge-text), or file.py:factory")
    factory = import_target(spec, "operation")
    if not callable(factory):
        raise ConfigError(f"operation factory {spec} is not callable")
    try:
        built = factory()
    except Exception as exc:  # user code: one clear line instead of a traceback
        raise ConfigError(f"calling the operation factory {spec} failed: {type(exc).__name__}: {exc}") from None
    if isinstance(built, Operation):
        return str(getattr(built, "name", spec)), built
    if callable(built):
        return spec, _Callable(built, spec, bool(getattr(built, "monotone", False)))
    raise ConfigError(f"operation factory {spec} returned {type(built).__name__}: expected an object with "
                      "apply(records) or a function records -> records")


def run_operation(op: Operation, name: str, stream: str, records: Sequence[Record]) -> list[Record]:
    """``op.apply(records)`` for one stream, checked: a list of :class:`Record` of that stream, slots unique.
    The operation raising is :class:`OperationRaised`; a bad answer :class:`OperationError` (both exit 3)."""
    try:
        out = op.apply(list(records))
    except Exception as exc:
        raise OperationRaised(name, "apply", {"stream": stream}, exc, hint=f"operation {name} raised") from exc
    try:
        got = list(out)
    except TypeError:
        raise OperationError(name, stream, f"expected a sequence of records, got {type(out).__name__}") from None
    seen: set[int] = set()
    for i, r in enumerate(got):
        if not isinstance(r, Record):
            raise OperationError(name, stream, f"item {i} is {type(r).__name__}, not a replaylens.records.Record")
        if r.stream != stream:
            raise OperationError(name, stream, f"item {i} belongs to stream {r.stream!r}")
        if r.slot in seen:
            raise OperationError(name, stream, f"item {i} repeats slot {r.slot} (slots give the ingestion order)")
        seen.add(r.slot)
    return sorted(got, key=lambda x: x.slot)


def stream_records(history: History) -> dict[str, list[Record]]:
    """Every stream's records in slot order."""
    out: dict[str, list[Record]] = {s: [] for s in history.streams}
    for r in history.records():
        out[r.stream].append(r)
    return out


def apply_operation(history: History, op: Operation, name: str = "operation",
                    records: dict[str, list[Record]] | None = None) -> tuple[History, dict[str, list[Record]]]:
    """The operated history (and its records per stream): ``op`` applied to every stream.  A stream the
    operation empties keeps no record (the replay then sees an empty memory for it)."""
    per = records if records is not None else stream_records(history)
    outs = {s: run_operation(op, name, s, rs) for s, rs in per.items()}
    flat = [r for rs in outs.values() for r in rs]
    if not flat:
        raise OperationError(name, next(iter(per), "?"), "no record is left in any stream")
    try:
        return history_from_records(flat, source=f"<operation {name} output>"), outs
    except InputError as exc:
        r = flat[exc.line - 1] if exc.line is not None and 0 < exc.line <= len(flat) else None
        where = f"record slot {r.slot}: " if r is not None else ""
        raise OperationError(name, r.stream if r is not None else "?",
                             f"{where}field '{exc.field}': {exc.message}") from None
