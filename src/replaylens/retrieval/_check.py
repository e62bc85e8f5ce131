"""``check-migration`` on real stores: every migration read at retrieval and decision level against the same-order
rebuild control, with an example changed retrieval and, when ties drive it, the tie explanation."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..inference import cluster_bootstrap
from ..rng import derive_seed
from ._items import MemoryItem, Retrieved, StoreSpec, build_store, embedder_for, query_store_many, similarities
from ._migrations import Ingestion, Migration, check_preserved, ingest_plan
from ._policy import decide
from ._readouts import Comparison, TwoLevel, two_level

__all__ = ["StoreMigrationResult", "StreamInput", "check_store_migrations"]

_TIE_DECIMALS = 6
NOISY_EXTRA = 2
"""Extra same-order rebuilds of a stream whose first control rebuilds already changed a retrieval."""


@dataclass(frozen=True)
class StreamInput:
    """One stream's records (aligned order), its queries and its decision menu."""

    name: str
    items: tuple[MemoryItem, ...]
    queries: tuple[str, ...]
    menu: tuple[str, ...]


class _Mixed:
    """Half-re-embedded index: ``new`` embeds while ``use_new`` is set (first half, then queries), else ``old``."""

    name = "mixed"

    def __init__(self, old: Any, new: Any) -> None:
        self.old, self.new, self.use_new = old, new, True

    @property
    def dim(self) -> int:
        return int(self.new.dim)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray((self.new if self.use_new else self.old).embed(texts))

    def fingerprint(self) -> str:
        return f"mixed({self.old.fingerprint()}|{self.new.fingerprint()})"


@contextlib.contextmanager
def _build(ing: Ingestion, base_embedder: str) -> Iterator[Any]:
    from ..stores import StoreItem

    if ing.mixed_prefix is None:
        with build_store(ing.spec, ing.items) as store:
            if ing.second_pass:
                step = ing.spec.batch_size or max(len(ing.items), 1)
                for lo in range(0, len(ing.items), step):
                    store.add([StoreItem(it.id, it.text, it.metadata()) for it in ing.items[lo:lo + step]])
            yield store
        return
    mixed = _Mixed(embedder_for(base_embedder), embedder_for(ing.spec.embedder))
    with build_store(ing.spec, ing.items[:ing.mixed_prefix], embedder=mixed) as store:
        mixed.use_new = False
        rest = ing.items[ing.mixed_prefix:]
        if rest:
            store.add([StoreItem(it.id, it.text, it.metadata()) for it in rest])
        mixed.use_new = True
        yield store


def _read(ing: Ingestion, base_embedder: str, queries: Sequence[str], k: int) -> list[Retrieved]:
    with _build(ing, base_embedder) as store:
        out = query_store_many(store, queries, k)
    if ing.id_back:
        out = [Retrieved(tuple(ing.id_back.get(i, i) for i in r.ids), r.scores) for r in out]
    return out


@dataclass
class StoreMigrationResult:
    """One migration's verdict: two-level readout, counts beyond the control, an example and the tie reading."""

    migration: Migration
    readout: TwoLevel | None
    changed_beyond_control: int = 0
    decisions_beyond_control: int = 0
    changed_on_noisy: int = 0
    noisy_queries: int = 0
    n_queries: int = 0
    tie_driven: int = 0
    excess: dict[str, Any] = field(default_factory=dict)
    example: dict[str, Any] | None = None
    skipped: str | None = None

    @property
    def name(self) -> str:
        return self.migration.name

    @property
    def safe(self) -> bool:
        return self.skipped is None and self.changed_beyond_control == 0 and self.decisions_beyond_control == 0

    def verdict(self) -> str:
        m = self.migration
        if self.skipped is not None:
            return f"{m.name}: n/a — {self.skipped}"
        assert self.readout is not None
        c, n = self.readout.counts, self.n_queries
        noise = (f"the control changes {self.noisy_queries}/{n} queries (store noise), not counted"
                 if self.noisy_queries else "the same-order rebuild control changes nothing")
        if m.kind == "rebuild":
            if self.noisy_queries == 0:
                return (f"rebuild (control): SAFE — a same-order rebuild returns identical top-k and decisions for "
                        f"all {n} queries (the store is deterministic here)")
            return (f"rebuild (control): UNSAFE — a same-order rebuild changes the top-k of {self.noisy_queries}/{n} "
                    f"queries (the store's own nondeterminism); migrations are read against it")
        head = "SAFE" if self.safe else "UNSAFE"
        ties = f", {self.tie_driven} of them tie-driven" if self.tie_driven else ""
        return (f"{m.name}: {head} — beyond the control, retrieval changed for {self.changed_beyond_control}/{n} "
                f"queries{ties} and decisions for {self.decisions_beyond_control}/{n} (all queries: "
                f"{c['retrieval_changed']} retrievals changed, {c['set_changed']} in their set, {c['order_changed']} "
                f"only in order); {noise}")

    def to_dict(self) -> dict[str, Any]:
        m = self.migration
        return {"migration": m.name, "kind": m.kind, "description": m.description, "target": m.target.to_dict(),
                "preserves": list(m.preserves), "laws_checked": self.skipped is None, "safe": self.safe,
                "verdict": self.verdict(), "skipped": self.skipped, "n_queries": self.n_queries,
                "retrieval_changed_beyond_control": self.changed_beyond_control,
                "decisions_changed_beyond_control": self.decisions_beyond_control,
                "changed_on_noisy_queries": self.changed_on_noisy, "control_noisy_queries": self.noisy_queries,
                "tie_driven": self.tie_driven, "excess_over_control": self.excess,
                "readout": self.readout.to_dict() if self.readout is not None else None, "example": self.example}


def _records(ids: Sequence[str], scores: Sequence[float], by_id: Mapping[str, MemoryItem],
             exact: Mapping[str, float], order: Mapping[str, int]) -> list[dict[str, Any]]:
    out = []
    for rank, (i, s) in enumerate(zip(ids, scores, strict=True)):
        it = by_id.get(i)
        out.append({"rank": rank + 1, "id": i, "score": round(float(s), 6),
                    "exact_similarity": round(float(exact[i]), 6) if i in exact else None,
                    "inserted": order.get(i), "text": it.text if it else None, "action": it.action if it else None,
                    "outcome": None if it is None or it.outcome != it.outcome else it.outcome})
    return out


def _tie_reading(comp: Comparison, exact: Mapping[str, float], order_before: Mapping[str, int],
                 order_after: Mapping[str, int], before: str, after: str) -> str | None:
    """A tie explanation when every changed position holds a record exactly as similar as the one it replaced."""
    b, a = comp.before.ids, comp.after.ids
    if len(a) != len(b) or any(i not in exact for i in (*a, *b)):
        return None
    r = _TIE_DECIMALS
    if any(round(exact[x], r) != round(exact[y], r) for x, y in zip(b, a, strict=True)):
        return None
    pos = next(p for p, (x, y) in enumerate(zip(b, a, strict=True)) if x != y)
    x, y = b[pos], a[pos]

    def which(order: Mapping[str, int], got: str, other: str) -> str:
        if got not in order or other not in order:
            return "one"
        return "the first-inserted" if order[got] < order[other] else "the last-inserted"

    return (f"ties: {x} and {y} have the same similarity {exact[x]:.6f} to the query; at rank {pos + 1} {before} "
            f"returns {x} ({which(order_before, x, y)} of the two), {after} returns {y} "
            f"({which(order_after, y, x)})")


def check_store_migrations(streams: Sequence[StreamInput], base: StoreSpec, migrations: Sequence[Migration], *,
                           k: int = 5, seed: int = 0, control_rebuilds: int = 1, n_resamples: int = 2000,
                           level: float = 0.95, decider: Any = None) -> list[StoreMigrationResult]:
    """Read every migration against the reference build and the same-order rebuild control.

    Each stream's store is built once as the reference and ``control_rebuilds`` more times the same way (more,
    :data:`NOISY_EXTRA`, when one already differs); a query whose top-k any rebuild changes is *noisy*: its
    changes under a migration are counted apart (``changed_on_noisy``), never as the migration's effect.  A
    migration is SAFE when no other query changes its retrieval or its decision.

    Decisions follow the documented rule (:func:`~replaylens.retrieval.decide`), or, with ``decider`` (a
    :class:`~replaylens.retrieval._model.ModelDecider`), a model reading the retrieved records in its prompt: each
    distinct (stream, query, retrieved ids) is asked once, the reference's and the control's in one batch, each
    migration's in one more (journaled under the decider's run directory; a rerun resumes without calls).
    """
    ref_of: dict[str, list[Retrieved]] = {}
    noisy: dict[str, list[bool]] = {}
    control_comps: list[Comparison] = []
    by_id = {s.name: {it.id: it for it in s.items} for s in streams}

    memo: dict[tuple[str, str, tuple[str, ...]], str] = {}

    def records(s: StreamInput, r: Retrieved) -> list[MemoryItem]:
        return [by_id[s.name][i] for i in r.ids if i in by_id[s.name]]

    def prefetch(asks: Sequence[tuple[StreamInput, Sequence[str], Sequence[Retrieved]]]) -> None:
        """Ask the decider, in one batch, for every (stream, query, retrieval) not yet decided."""
        if decider is None:
            return
        todo: dict[tuple[str, str, tuple[str, ...]], tuple[str, list[MemoryItem], tuple[str, ...]]] = {}
        for s, qs, rs in asks:
            for q, r in zip(qs, rs, strict=True):
                key = (s.name, q, r.ids)
                if key not in memo and key not in todo:
                    todo[key] = (q, records(s, r), s.menu)
        if todo:
            memo.update(zip(todo, decider.decide(list(todo.values())), strict=True))

    def dec(s: StreamInput, q: str, r: Retrieved) -> str:
        return decide(records(s, r), s.menu) if decider is None else memo[(s.name, q, r.ids)]

    ref_ings = {s.name: Ingestion(base, s.items) for s in streams}
    first_again: dict[str, list[Retrieved]] = {}
    for s in streams:
        ref_of[s.name] = _read(ref_ings[s.name], base.embedder, s.queries, k)
        flags = [False] * len(s.queries)
        done, todo = 0, control_rebuilds
        while done < todo:  # a stream whose rebuild is noisy gets NOISY_EXTRA more, to find its noisy queries
            done += 1
            again = _read(ref_ings[s.name], base.embedder, s.queries, k)
            for j, (r0, r1) in enumerate(zip(ref_of[s.name], again, strict=True)):
                flags[j] = flags[j] or r0.ids != r1.ids
            if done == 1:  # the control's readout: the first rebuild (the extra ones only find noisy queries)
                first_again[s.name] = again
            if any(flags):
                todo = control_rebuilds + NOISY_EXTRA
        noisy[s.name] = flags
    prefetch([(s, s.queries, ref_of[s.name]) for s in streams]
             + [(s, s.queries, first_again[s.name]) for s in streams])
    for s in streams:
        control_comps.extend(Comparison(s.name, q, r0, r1, dec(s, q, r0), dec(s, q, r1))
                             for q, r0, r1 in zip(s.queries, ref_of[s.name], first_again[s.name], strict=True))
    n_q = sum(len(s.queries) for s in streams)
    n_noisy = sum(sum(f) for f in noisy.values())
    results: list[StoreMigrationResult] = []
    control_tl = two_level(control_comps, seed=seed, name="rebuild", n_resamples=n_resamples, level=level)
    for m in migrations:
        if m.kind == "rebuild":
            results.append(StoreMigrationResult(m, control_tl, n_queries=n_q, noisy_queries=n_noisy))
            continue
        if m.skip is not None:
            results.append(StoreMigrationResult(m, None, n_queries=n_q, skipped=m.skip))
            continue
        if m.kind == "half-embedder":
            d0, d1 = embedder_for(base.embedder).dim, embedder_for(m.target.embedder).dim
            if d0 != d1:
                results.append(StoreMigrationResult(m, None, n_queries=n_q, skipped=f"the embedders' dimensions "
                                                    f"differ ({d0} vs {d1}): no index can hold both"))
                continue
        comps: list[Comparison] = []
        res = StoreMigrationResult(m, None, n_queries=n_q, noisy_queries=n_noisy)
        plans: dict[str, tuple[Ingestion, list[Retrieved]]] = {}
        for s in streams:
            ing = ingest_plan(m, s.items, seed=seed, stream=s.name)
            check_preserved(m, ref_ings[s.name], ing, stream=s.name)
            plans[s.name] = (ing, _read(ing, base.embedder, s.queries, k))
        prefetch([(s, s.queries, plans[s.name][1]) for s in streams])
        for s in streams:
            ing, after = plans[s.name]
            order_b = {it.id: i for i, it in enumerate(s.items)}
            order_a = {ing.id_back.get(it.id, it.id): i for i, it in enumerate(ing.items)}
            same_emb = m.kind not in ("embedder", "half-embedder")
            for j, (q, r0, r1) in enumerate(zip(s.queries, ref_of[s.name], after, strict=True)):
                c = Comparison(s.name, q, r0, r1, dec(s, q, r0), dec(s, q, r1))
                comps.append(c)
                if noisy[s.name][j]:
                    res.changed_on_noisy += c.retrieval_changed or c.decision_changed
                    continue
                res.changed_beyond_control += c.retrieval_changed
                res.decisions_beyond_control += c.decision_changed
                if not c.retrieval_changed:
                    if c.decision_changed and res.example is None:
                        res.example = {"stream": s.name, "query": q, "before": [], "after": [],
                                       "decision_before": c.decision_before, "decision_after": c.decision_after,
                                       "tie_explanation": None, "recall": None, "explanation": None}
                    continue
                texts = [it.text for it in s.items]
                exact = dict(zip([it.id for it in s.items],
                                 similarities(embedder_for(base.embedder), q, texts).tolist(), strict=True)) \
                    if same_emb else {}
                tie = _tie_reading(c, exact, order_b, order_a, f"the reference ({base.backend})",
                                   m.target.backend if m.kind == "backend" else f"after {m.name}") \
                    if same_emb else None
                res.tie_driven += tie is not None
                if _better_example(res.example, tie is not None, c.decision_changed):
                    recall = _recall(c, exact, k) if exact else None
                    res.example = {"stream": s.name, "query": q,
                                   "before": _records(r0.ids, r0.scores, by_id[s.name], exact, order_b),
                                   "after": _records(r1.ids, r1.scores, by_id[s.name], exact, order_a),
                                   "decision_before": c.decision_before, "decision_after": c.decision_after,
                                   "tie_explanation": tie, "recall": recall,
                                   "explanation": tie or _explain(m, recall, k)}
        res.readout = two_level(comps, seed=seed, name=m.name, n_resamples=n_resamples, level=level)
        res.excess = _excess(comps, control_comps, seed=seed, name=m.name, n_resamples=n_resamples, level=level)
        results.append(res)
    return results


def _better_example(cur: dict[str, Any] | None, tie: bool, decision: bool) -> bool:
    """Prefer, in order: a tie-driven change that moves the decision, any change that moves it, a tie-driven one."""
    if cur is None or not cur["before"]:
        return True
    old = (cur["decision_before"] != cur["decision_after"], cur["tie_explanation"] is not None)
    return (decision, tie) > old and (decision or not old[0])


def _explain(m: Migration, recall: Mapping[str, float] | None, k: int) -> str | None:
    if m.kind in ("embedder", "half-embedder"):
        return "the embedder changed: every similarity score changed with it"
    if recall is not None and (recall["before"] < 1 or recall["after"] < 1):
        return (f"approximate search: the reference top-{k} holds {recall['before']:.0%} of the exact top-{k}, "
                f"after {m.name} {recall['after']:.0%} (an index that misses records, not ties)")
    return None


def _recall(c: Comparison, exact: Mapping[str, float], k: int) -> dict[str, float]:
    """Share of each top-k that lies in the exact top-k (all ids at least as similar as the k-th, ties kept)."""
    vals = sorted(exact.values(), reverse=True)
    if not vals:
        return {"before": 1.0, "after": 1.0}
    kth = round(vals[min(k, len(vals)) - 1], _TIE_DECIMALS)
    top = {i for i, v in exact.items() if round(v, _TIE_DECIMALS) >= kth}

    def share(ids: Sequence[str]) -> float:
        return sum(i in top for i in ids) / max(len(ids), 1)

    return {"before": share(c.before.ids), "after": share(c.after.ids)}


def _excess(comps: Sequence[Comparison], control: Sequence[Comparison], *, seed: int, name: str, n_resamples: int,
            level: float) -> dict[str, Any]:
    """Per-stream (migration − control) shares of retrieval and decision changes, with stream-cluster intervals."""
    streams = list(dict.fromkeys(c.stream for c in comps))
    rows = []
    for s in streams:
        mig = [c for c in comps if c.stream == s]
        ctl = [c for c in control if c.stream == s] or mig[:0]
        m_r = np.mean([c.retrieval_changed for c in mig])
        m_d = np.mean([c.decision_changed for c in mig])
        c_r = np.mean([c.retrieval_changed for c in ctl]) if ctl else 0.0
        c_d = np.mean([c.decision_changed for c in ctl]) if ctl else 0.0
        rows.append([m_r - c_r, m_d - c_d])
    arr = np.asarray(rows, dtype=float)
    est = arr.mean(axis=0) if len(rows) else np.array([np.nan, np.nan])
    if len(rows) >= 2:
        b = cluster_bootstrap(arr, n_resamples=n_resamples, level=level, rng=derive_seed(seed, "excess", name))
        lo, hi = np.asarray(b.low), np.asarray(b.high)
        ci: dict[str, list[float | None]] = {"retrieval": [float(lo[0]), float(hi[0])],
                                             "decision": [float(lo[1]), float(hi[1])]}
    else:
        ci = {"retrieval": [None, None], "decision": [None, None]}
    return {"retrieval": float(est[0]), "decision": float(est[1]), "ci": ci, "level": level}
