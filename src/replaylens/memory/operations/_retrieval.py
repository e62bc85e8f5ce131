"""The retrieval-level response to an operation: what a real vector store returns before and after it.

Per stream, one store is built from the stream's records and one from the operated records (id: the event id,
else ``stream:slot``; text: ``metadata.text``, else the task; key and outcome as metadata), and every future task
of the stream is asked (its ``metadata.text``, else its id) for the top ``k``.  A query's retrieval *changed*
when the ranked list of retrieved (text, key, outcome) differs; it changed *as a set* when the multiset does.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...records import FutureTasks, Record
from ..stores import Embedder, StoreItem, make_embedder, make_store, query_many
from ._ops import record_text

__all__ = ["RetrievalResponse", "retrieval_response"]

Streams = dict[str, list[Record]]
Content = tuple[str, str, object]


@dataclass(frozen=True)
class RetrievalResponse:
    """How many of the future queries retrieve something else after the operation."""

    backend: str
    embedder: str
    k: int
    n_queries: int
    n_changed: int
    n_changed_set: int
    example: str = ""

    def line(self) -> str:
        ex = f"; e.g. {self.example}" if self.example else ""
        return (f"retrieval ({self.backend}, {self.embedder}, k = {self.k}): top-k changed for {self.n_changed} of "
                f"{self.n_queries} queries, as a set for {self.n_changed_set}{ex}")

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "embedder": self.embedder, "k": self.k, "queries": self.n_queries,
                "changed": self.n_changed, "changed_as_set": self.n_changed_set, "example": self.example,
                "line": self.line()}


def _content(r: Record) -> Content:
    return (record_text(r), r.key, "masked" if math.isnan(r.outcome) else round(r.outcome, 6))


def _retrieve(backend: str, emb: Embedder, params: Mapping[str, object], records: Sequence[Record],
              queries: Sequence[str], k: int) -> list[list[Content]]:
    if not records:
        return [[] for _ in queries]
    by_id = {(r.event_id or f"{r.stream}:{r.slot}"): r for r in records}
    store = make_store(backend, emb, params=params)
    try:
        store.add([StoreItem(i, record_text(r), {"action": r.key}) for i, r in by_id.items()])
        hits = query_many(store, list(queries), k)
    finally:
        store.close()
    return [[_content(by_id[h.id]) for h in hs] for hs in hits]


def _show(c: Sequence[Content]) -> str:
    return "[" + ", ".join(f"{k}={u}" for _, k, u in c) + "]"


def retrieval_response(before: Streams, after: Streams, futures: FutureTasks, *, backend: str = "exact",
                       embedder: str = "hashing:256", k: int = 5,
                       params: Mapping[str, object] | None = None) -> RetrievalResponse:
    """Compare every future query's top ``k`` on a ``backend`` store of each stream's records before and after."""
    emb = make_embedder(embedder)
    pars = dict(params or {})
    by_stream: dict[str, list[tuple[str, str]]] = {}
    for t in futures.tasks:
        md = t.metadata
        text = str(md["text"]) if md is not None and isinstance(md.get("text"), str) else t.task
        by_stream.setdefault(t.stream, []).append((t.task, text))
    n = changed = changed_set = 0
    example = ""
    for s, tasks in by_stream.items():
        texts = [x for _, x in tasks]
        a = _retrieve(backend, emb, pars, before.get(s, []), texts, k)
        b = _retrieve(backend, emb, pars, after.get(s, []), texts, k)
        for (tid, _), x, y in zip(tasks, a, b, strict=True):
            n += 1
            if x != y:
                changed += 1
                changed_set += Counter(x) != Counter(y)
                if not example:
                    example = f"stream {s}, task {tid}: {_show(x)} -> {_show(y)}"
    return RetrievalResponse(backend, emb.fingerprint(), k, n, changed, changed_set, example)
