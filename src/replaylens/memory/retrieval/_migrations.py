"""Store migrations as interventions, each with the law it preserves checked, read against a same-order rebuild.

A migration takes a stream's records in their aligned (history) order and the reference store configuration,
and produces the ingestion that replaces it.  Each declares the law it preserves; the law is checked on the two
ingestions before any store is built (a violation is a bug, never a finding):

========================  ===================================================  ==================================
migration                 what changes                                          preserves
========================  ===================================================  ==================================
``rebuild`` (control)     nothing: the same records, order and configuration    everything (measures store noise)
``backend:B``             the same records into backend B                       record sequence, embedder
``reindex``               index parameters (``--reindex-params``, e.g. seed)    record sequence, embedder, backend
``reorder``               ingestion order (seeded permutation per stream)       record multiset, configuration
``batch``                 records per ``add`` call (``--batch-size``)           record sequence, index, embedder
``relabel``               every id replaced by a fresh one                      records up to the id bijection
``duplicate``             the whole log ingested a second time (same ids)       record set, configuration
``embedder``              embedder A → B (``--embedder-to``)                    record sequence, backend
``half-embedder``         first half re-embedded with B, rest A; queries B      record sequence, backend
========================  ===================================================  ==================================
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...errors import ConfigError, LawViolation
from ...rng import derive_rng
from ._items import MemoryItem, StoreSpec

__all__ = ["KINDS", "LAWS", "Ingestion", "Migration", "check_preserved", "ingest_plan", "plan_migrations"]

KINDS = ("rebuild", "backend", "reindex", "reorder", "batch", "relabel", "duplicate", "embedder", "half-embedder")
DEFAULT_OPS = ("backend", "reindex", "reorder", "batch", "relabel", "duplicate", "embedder", "half-embedder")

LAWS = {
    "record_sequence": "the (id, text, action, outcome) sequence ingested is unchanged",
    "record_multiset": "the multiset of ingested records is unchanged",
    "record_set": "the set of ingested records is unchanged",
    "records_up_to_ids": "the record sequence is unchanged after mapping ids back (a bijection)",
    "embedder": "the embedder (its fingerprint) is unchanged",
    "backend": "the backend is unchanged",
    "index": "the backend and its index parameters are unchanged",
    "batching": "the records per add call are unchanged",
}


@dataclass(frozen=True)
class Migration:
    """One store migration: its name (``backend:qdrant``, ``reorder``, ...), kind, target configuration and the
    laws it preserves."""

    name: str
    kind: str
    target: StoreSpec
    preserves: tuple[str, ...]
    description: str
    params: Mapping[str, Any] = field(default_factory=dict)
    skip: str | None = None
    """Why the migration cannot run as configured (reported n/a, never silently dropped)."""


@dataclass(frozen=True)
class Ingestion:
    """What one store build ingests: the configuration, the records in order (a second pass for ``duplicate``),
    the id map back to the reference ids, and (half-embedder) how many leading records use the new embedder."""

    spec: StoreSpec
    items: tuple[MemoryItem, ...]
    id_back: Mapping[str, str] = field(default_factory=dict)
    second_pass: bool = False
    mixed_prefix: int | None = None
    old_embedder: str | None = None


def plan_migrations(base: StoreSpec, ops: Sequence[str], *, migrate_to: Sequence[str] = (),
                    reindex_params: Mapping[str, Any] | None = None, batch_size: int = 1,
                    embedder_to: str | None = None) -> list[Migration]:
    """The migrations named by ``ops`` (kinds; ``backend`` expands to one per ``migrate_to`` backend), the
    same-order rebuild control first.  A kind that lacks its target is skipped only when it is a default."""
    out = [Migration("rebuild", "rebuild", base, ("record_sequence", "embedder", "index", "batching"),
                     "same records, same order, same configuration (control: the store's own nondeterminism)")]
    for op in ops:
        kind, _, arg = op.partition(":")
        if kind not in KINDS:
            raise ConfigError(f"unknown store migration {op!r}; use {', '.join(KINDS)} (backend:NAME for a swap)")
        if kind == "rebuild":
            continue
        if kind == "backend":
            targets = [arg] if arg else list(migrate_to)
            if not targets:
                out.append(Migration("backend", kind, base, (), "backend swap", skip="give --migrate-to BACKEND"))
            for b in targets:
                if b == base.backend:
                    raise ConfigError(f"backend swap to {b!r}: that is the reference backend (use --migrate-to "
                                      "another backend)")
                out.append(Migration(f"backend:{b}", kind, base.with_(backend=b, params={}),
                                     ("record_sequence", "embedder", "batching"),
                                     f"the same records into {b} (default index parameters)"))
        elif kind == "reindex":
            p = dict(reindex_params) if reindex_params is not None else _default_reindex(base)
            if not p:
                out.append(Migration("reindex", kind, base, (), "rebuild with other index parameters",
                                     skip=f"no default for {base.backend}: give --reindex-params JSON"))
                continue
            out.append(Migration("reindex", kind, base.with_(params={**base.params, **p}),
                                 ("record_sequence", "embedder", "backend", "batching"),
                                 "rebuilt with index parameters " + ", ".join(f"{k}={v}" for k, v in p.items()),
                                 p))
        elif kind == "reorder":
            out.append(Migration("reorder", kind, base, ("record_multiset", "embedder", "index", "batching"),
                                 "re-ingested in a seeded random order"))
        elif kind == "batch":
            out.append(Migration("batch", kind, base.with_(batch_size=batch_size),
                                 ("record_sequence", "embedder", "index"),
                                 f"ingested {batch_size} record(s) per add call", {"batch_size": batch_size}))
        elif kind == "relabel":
            out.append(Migration("relabel", kind, base, ("records_up_to_ids", "embedder", "index", "batching"),
                                 "every id replaced by a fresh one (compared after mapping back)"))
        elif kind == "duplicate":
            out.append(Migration("duplicate", kind, base, ("record_set", "embedder", "index"),
                                 "the whole log ingested a second time with the same ids (dedup behaviour)"))
        elif kind in ("embedder", "half-embedder"):
            to = arg or embedder_to
            if not to or to == base.embedder:
                out.append(Migration(kind, kind, base, (), "embedder change",
                                     skip="give --embedder-to SPEC (another embedder)"))
                continue
            if kind == "embedder":
                out.append(Migration(f"embedder:{to}", kind, base.with_(embedder=to),
                                     ("record_sequence", "index", "batching"), f"embedder {base.embedder} → {to}"))
            else:
                out.append(Migration(f"half-embedder:{to}", kind, base.with_(embedder=to),
                                     ("record_sequence", "index"),
                                     f"first half of the records re-embedded with {to}, the rest left at "
                                     f"{base.embedder}; queries embedded with {to}"))
    return out


def _default_reindex(base: StoreSpec) -> dict[str, Any]:
    """The reindex a backend has a seed for: hnswlib's graph seed + 1; none for the others."""
    if base.backend == "hnswlib":
        return {"seed": int(base.params.get("seed", 100)) + 1}
    return {}


def ingest_plan(m: Migration, items: Sequence[MemoryItem], *, seed: int, stream: str) -> Ingestion:
    """The ingestion of migration ``m`` for one stream's records (aligned order)."""
    base = tuple(items)
    if m.kind == "reorder":
        perm = derive_rng(seed, "store-reorder", stream).permutation(len(base))
        return Ingestion(m.target, tuple(base[int(i)] for i in perm))
    if m.kind == "relabel":
        fresh = tuple(MemoryItem(f"relabelled-{i:06d}", it.text, it.action, it.outcome, it.time)
                      for i, it in enumerate(base))
        return Ingestion(m.target, fresh, {f.id: it.id for f, it in zip(fresh, base, strict=True)})
    if m.kind == "duplicate":
        return Ingestion(m.target, base, second_pass=True)
    if m.kind == "half-embedder":
        return Ingestion(m.target, base, mixed_prefix=(len(base) + 1) // 2, old_embedder=None)
    return Ingestion(m.target, base)


def _fingerprint(spec: str) -> str:
    from ._items import embedder_for

    return str(embedder_for(spec).fingerprint())


def check_preserved(m: Migration, ref: Ingestion, new: Ingestion, *, stream: str) -> None:
    """Check every law ``m`` declares on the reference and migrated ingestions; raise :class:`LawViolation`."""
    def seq(ing: Ingestion, back: bool = False) -> list[tuple[Any, ...]]:
        rows = [it.key() for it in ing.items] * (2 if ing.second_pass else 1)
        if back:
            rows = [(ing.id_back.get(r[0], r[0]), *r[1:]) for r in rows]
        return rows

    for law in m.preserves:
        if law == "record_sequence":
            ok = seq(ref) == seq(new)
        elif law == "record_multiset":
            ok = Counter(seq(ref)) == Counter(seq(new))
        elif law == "record_set":
            ok = set(seq(ref)) == set(seq(new))
        elif law == "records_up_to_ids":
            ok = seq(ref) == seq(new, back=True) and len(set(new.id_back.values())) == len(new.id_back)
        elif law == "embedder":
            ok = _fingerprint(ref.spec.embedder) == _fingerprint(new.spec.embedder) and new.mixed_prefix is None
        elif law == "backend":
            ok = ref.spec.backend == new.spec.backend
        elif law == "index":
            ok = ref.spec.backend == new.spec.backend and dict(ref.spec.params) == dict(new.spec.params)
        elif law == "batching":
            ok = ref.spec.batch_size == new.spec.batch_size
        else:  # pragma: no cover - LAWS and the migrations are declared together
            raise ConfigError(f"unknown law {law!r}")
        if not ok:
            raise LawViolation(m.name, law, f"stream {stream!r}: {LAWS[law]} does not hold")
