"""Reading event files for ``check-migration`` (JSONL, CSV or Parquet; errors name file, line and field)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...errors import InputError
from ...records import Field, read_raw
from ._memories import Event

__all__ = ["EVENT_FIELDS", "read_events", "write_events"]

EVENT_FIELDS = ("stream", "block", "event_time", "event_id", "action", "utility", "descriptors")


def _descriptors(f: Field, i: int) -> tuple[float, ...]:
    v = f.get(i, "descriptors", True)
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except json.JSONDecodeError:
            raise f.err(i, "descriptors", "expected a JSON list of numbers") from None
    if not isinstance(v, (list, tuple)) or not v:
        raise f.err(i, "descriptors", "expected a non-empty list of numbers")
    out = []
    for x in v:
        if isinstance(x, bool) or not isinstance(x, (int, float)) or x != x:
            raise f.err(i, "descriptors", f"every descriptor must be a finite number, got {x!r}")
        out.append(float(x))
    return tuple(out)


def read_events(path: str | os.PathLike[str]) -> dict[tuple[str, str], list[Event]]:
    """Events grouped by (stream, block), in file order within a block."""
    t = read_raw(Path(path))
    if not t.rows:
        raise InputError(t.source, None, None, "the event file is empty")
    allowed = set(EVENT_FIELDS)
    f = Field(t)
    out: dict[tuple[str, str], list[Event]] = {}
    seen: dict[tuple[str, str], int] = {}
    width: int | None = None
    for i, row in enumerate(t.rows):
        for k in row:
            if k not in allowed:
                raise f.err(i, k, f"unknown field; allowed fields: {', '.join(EVENT_FIELDS)}")
        stream, block = f.string(i, "stream"), f.string(i, "block")
        eid = f.string(i, "event_id")
        assert stream is not None and block is not None and eid is not None
        if (stream, eid) in seen:
            raise f.err(i, "event_id", f"duplicate event_id {eid!r} in stream {stream!r}")
        seen[(stream, eid)] = i
        d = _descriptors(f, i)
        if width is not None and len(d) != width:
            raise f.err(i, "descriptors", f"expected {width} descriptors like the first event, got {len(d)}")
        width = len(d)
        ev = Event(d, str(f.string(i, "action")), f.number(i, "utility"), f.number(i, "event_time"), eid)
        out.setdefault((stream, block), []).append(ev)
    return out


def write_events(blocks: Mapping[tuple[str, str], list[Event]], path: str | os.PathLike[str]) -> Path:
    """Write events as JSONL (one object per event)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("w", encoding="utf-8") as fh:
        for (stream, block), events in blocks.items():
            for e in events:
                row: dict[str, Any] = {"stream": stream, "block": block, "event_time": e.time, "event_id": e.id,
                                       "action": e.action, "utility": e.utility, "descriptors": list(e.descriptors)}
                fh.write(json.dumps(row) + "\n")
    return p
