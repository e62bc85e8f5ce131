"""The user's records as store inputs: one memory per stream, its queries and its decision menu."""

from __future__ import annotations

from typing import Any

from ._check import StreamInput
from ._items import MemoryItem, text_of

__all__ = ["streams_from_history"]


def streams_from_history(history: Any, futures: Any = None) -> list[StreamInput]:
    """One :class:`StreamInput` per stream of ``history`` (records in slot order; ids are event ids, else
    ``stream:slot``).  Queries and menus come from ``futures`` when given (each stream's future tasks, the union of
    their menus); otherwise every distinct record text of the stream is a query and the menu is the stream's
    actions in first-appearance order."""
    out = []
    for s in history.streams:
        items = tuple(MemoryItem(str(r.event_id) if r.event_id else f"{r.stream}:{r.slot}",
                                 text_of(r.task, r.metadata), r.key, float(r.outcome), r.event_time)
                      for r in history.records(s))
        if futures is not None:
            tasks = futures.of(s)
            queries = tuple(text_of(t.task, t.metadata) for t in tasks)
            menu = tuple(dict.fromkeys(a for t in tasks for a in t.menu))
        else:
            queries = tuple(dict.fromkeys(it.text for it in items))
            menu = tuple(dict.fromkeys(it.action for it in items))
        if queries:
            out.append(StreamInput(s, items, queries, menu))
    return out
