"""``check-migration`` on real stores: every migration read at retrieval and decision level against both sides'
same-order rebuilds (a census for a deterministic store, a permutation test for a noisy one: ``_control``), with
an example changed retrieval and, when ties drive it, the tie explanation."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import ConfigError
from ...inference import cluster_bootstrap
from ...rng import derive_seed
from ._control import CONTROL_REBUILDS, INCONCLUSIVE, NA, SAFE, UNSAFE, NoiseTest, disagreements, noise_test
from ._items import MemoryItem, Retrieved, StoreSpec, build_store, embedder_for, query_store_many, similarities
from ._migrations import Ingestion, Migration, check_preserved, ingest_plan
from ._policy import decide
from ._readouts import Comparison, TwoLevel, two_level

__all__ = ["CONTROL_REBUILDS", "StoreMigrationResult", "StreamInput", "check_store_migrations"]

_TIE_DECIMALS = 6


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
    """One migration's verdict (SAFE / UNSAFE / INCONCLUSIVE, or N/A when it cannot run): the two-level readout of
    reference against migrated build, both sides' store noise, the census counts or the permutation test, an
    example and the tie reading."""

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
    reference_noisy: int = 0
    target_noisy: int = 0
    reference_builds: int = 1
    target_builds: int = 1
    test: NoiseTest | None = None
    """The permutation test (None: a census, every build of both sides repeated itself)."""

    @property
    def name(self) -> str:
        return self.migration.name

    @property
    def status(self) -> str:
        """SAFE, UNSAFE, INCONCLUSIVE or N/A (see :mod:`replaylens.memory.retrieval._control`)."""
        if self.skipped is not None:
            return NA
        if self.migration.kind == "rebuild":
            return SAFE if self.reference_noisy == 0 else UNSAFE
        if self.test is None:
            assert self.readout is not None
            c = self.readout.counts
            return SAFE if c["retrieval_changed"] == 0 and c["decision_changed"] == 0 else UNSAFE
        return UNSAFE if self.test.rejects else INCONCLUSIVE

    @property
    def safe(self) -> bool:
        return self.status == SAFE

    def verdict(self) -> str:
        m, st, n = self.migration, self.status, self.n_queries
        if st == NA:
            return f"{m.name}: N/A — {self.skipped}"
        assert self.readout is not None
        c = self.readout.counts
        if m.kind == "rebuild":
            if st == SAFE:
                return (f"rebuild (control): SAFE — {self.reference_builds - 1} same-order rebuild(s) return identical "
                        f"top-k and decisions for all {n} queries (the store is deterministic here)")
            return (f"rebuild (control): UNSAFE — same-order rebuilds change the top-k or decision of "
                    f"{self.reference_noisy}/{n} queries ({self.reference_builds - 1} rebuilds; the store's own "
                    f"nondeterminism); migrations are judged against it by a permutation test")
        ties = f", {self.tie_driven} of them tie-driven" if self.tie_driven else ""
        changed = (f"retrieval changed for {c['retrieval_changed']}/{n} queries{ties} and decisions for "
                   f"{c['decision_changed']}/{n} ({c['set_changed']} in their set, {c['order_changed']} only in "
                   f"order)")
        if self.test is None:
            if st == SAFE:
                return (f"{m.name}: SAFE — retrieval and decisions identical for all {n} queries (census: every "
                        f"rebuild of both sides repeats itself)")
            return (f"{m.name}: UNSAFE — {changed} (census: every rebuild of both sides repeats itself, so every "
                    f"change is the migration's)")
        t = self.test
        alpha = 1 - t.level
        noise = (f"same-order rebuilds change {self.reference_noisy}/{n} queries of the reference and "
                 f"{self.target_noisy}/{n} of the migrated store ({t.builds_per_side} builds per side)")
        if st == UNSAFE:
            return (f"{m.name}: UNSAFE — {changed}, beyond the store's own noise (permutation test p = "
                    f"{t.p_value:.4f} <= {alpha:g}; {self.changed_beyond_control} on queries no rebuild changes); "
                    f"{noise}")
        more = ""
        if t.min_p > alpha:
            more = (f"; with {self.readout.n_streams} stream(s) no p-value below {t.min_p:.3g} is possible: "
                    f"raise --control-rebuilds")
        return (f"{m.name}: INCONCLUSIVE — the store's own noise is too large to judge: {noise}; under the migration "
                f"{changed}, p = {t.p_value:.3f} > {alpha:g}{more}")

    def to_dict(self) -> dict[str, Any]:
        m = self.migration
        return {"migration": m.name, "kind": m.kind, "description": m.description, "target": m.target.to_dict(),
                "preserves": list(m.preserves), "laws_checked": self.skipped is None, "status": self.status,
                "safe": self.safe, "verdict": self.verdict(), "skipped": self.skipped, "n_queries": self.n_queries,
                "judged_by": None if self.skipped is not None else "census" if self.test is None else "permutation",
                "test": self.test.to_dict() if self.test is not None else None,
                "reference_builds": self.reference_builds, "target_builds": self.target_builds,
                "reference_noisy_queries": self.reference_noisy, "target_noisy_queries": self.target_noisy,
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
                           k: int = 5, seed: int = 0, control_rebuilds: int = CONTROL_REBUILDS,
                           n_resamples: int = 2000, level: float = 0.95, decider: Any = None
                           ) -> list[StoreMigrationResult]:
    """Judge every migration against both sides' same-order rebuilds (:mod:`replaylens.memory.retrieval._control`).

    Each stream's reference store is built twice (the reference and one rebuild: the control), and so is each
    migration's store.  When no rebuild changes any answer the verdict is a census (0 changed queries: SAFE).
    When one does — on either side — both sides of that migration are built ``1 + control_rebuilds`` times
    and the migration is UNSAFE only when a permutation test of its change rate against the rebuilds' rejects at
    ``1 - level``, else INCONCLUSIVE.  A query whose answer any rebuild of either side changes is *noisy*; changes
    on the other queries are counted as ``changed_beyond_control``.

    Decisions follow the documented rule (:func:`~replaylens.memory.retrieval.decide`), or, with ``decider``
    (a :class:`~replaylens.memory.retrieval._model.ModelDecider`), a model reading the retrieved records in its
    prompt: each
    distinct (stream, query, retrieved ids) is asked once, in one batch per round of builds (journaled under the
    decider's run directory; a rerun resumes without calls).
    """
    if control_rebuilds < 1:
        raise ConfigError(f"control_rebuilds must be at least 1; got {control_rebuilds}")
    by_id = {s.name: {it.id: it for it in s.items} for s in streams}
    memo: dict[tuple[str, str, tuple[str, ...]], str] = {}

    def records(s: StreamInput, r: Retrieved) -> list[MemoryItem]:
        return [by_id[s.name][i] for i in r.ids if i in by_id[s.name]]

    def prefetch(asks: Sequence[tuple[StreamInput, Sequence[Retrieved]]]) -> None:
        """Ask the decider, in one batch, for every (stream, query, retrieval) not yet decided."""
        if decider is None:
            return
        todo: dict[tuple[str, str, tuple[str, ...]], tuple[str, list[MemoryItem], tuple[str, ...]]] = {}
        for s, rs in asks:
            for q, r in zip(s.queries, rs, strict=True):
                key = (s.name, q, r.ids)
                if key not in memo and key not in todo:
                    todo[key] = (q, records(s, r), s.menu)
        if todo:
            memo.update(zip(todo, decider.decide(list(todo.values())), strict=True))

    def dec(s: StreamInput, q: str, r: Retrieved) -> str:
        return decide(records(s, r), s.menu) if decider is None else memo[(s.name, q, r.ids)]

    def answers(s: StreamInput, rs: Sequence[Retrieved]) -> list[tuple[tuple[str, ...], str]]:
        return [(r.ids, dec(s, q, r)) for q, r in zip(s.queries, rs, strict=True)]

    def grow(builds: dict[str, list[list[Retrieved]]], ings: dict[str, Ingestion], n: int) -> None:
        """Build every stream's side until it has ``n`` builds (decisions fetched in one batch)."""
        new: list[tuple[StreamInput, Sequence[Retrieved]]] = []
        for s in streams:
            while len(builds[s.name]) < n:
                builds[s.name].append(_read(ings[s.name], base.embedder, s.queries, k))
                new.append((s, builds[s.name][-1]))
        prefetch(new)

    def noisy_flags(s: StreamInput, builds: Sequence[Sequence[Retrieved]]) -> list[bool]:
        first = answers(s, builds[0])
        flags = [False] * len(s.queries)
        for b in builds[1:]:
            flags = [f or x != y for f, x, y in zip(flags, first, answers(s, b), strict=True)]
        return flags

    full = 1 + control_rebuilds
    ref_ings = {s.name: Ingestion(base, s.items) for s in streams}
    ref: dict[str, list[list[Retrieved]]] = {s.name: [] for s in streams}
    grow(ref, ref_ings, 2)
    if any(any(noisy_flags(s, ref[s.name])) for s in streams):
        grow(ref, ref_ings, full)
    ref_noisy = {s.name: noisy_flags(s, ref[s.name]) for s in streams}
    control_comps = [Comparison(s.name, q, r0, r1, dec(s, q, r0), dec(s, q, r1))
                     for s in streams for q, r0, r1 in zip(s.queries, ref[s.name][0], ref[s.name][1], strict=True)]
    n_q = sum(len(s.queries) for s in streams)
    n_ref_noisy = sum(sum(f) for f in ref_noisy.values())
    results: list[StoreMigrationResult] = []
    control_tl = two_level(control_comps, seed=seed, name="rebuild", n_resamples=n_resamples, level=level)
    for m in migrations:
        if m.kind == "rebuild":
            n_b = len(ref[streams[0].name]) if streams else 1
            results.append(StoreMigrationResult(m, control_tl, n_queries=n_q, noisy_queries=n_ref_noisy,
                                                reference_noisy=n_ref_noisy, reference_builds=n_b))
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
        ings: dict[str, Ingestion] = {}
        for s in streams:
            ings[s.name] = ingest_plan(m, s.items, seed=seed, stream=s.name)
            check_preserved(m, ref_ings[s.name], ings[s.name], stream=s.name)
        tgt: dict[str, list[list[Retrieved]]] = {s.name: [] for s in streams}
        grow(tgt, ings, 2)
        noisy_t = {s.name: noisy_flags(s, tgt[s.name]) for s in streams}
        test = None
        if any(any(f) for f in noisy_t.values()) or n_ref_noisy:
            grow(ref, ref_ings, full)
            grow(tgt, ings, full)
            noisy_t = {s.name: noisy_flags(s, tgt[s.name]) for s in streams}
            ref_noisy = {s.name: noisy_flags(s, ref[s.name]) for s in streams}
            n_ref_noisy = sum(sum(f) for f in ref_noisy.values())
            mats = [disagreements([answers(s, b) for b in (*ref[s.name][:full], *tgt[s.name][:full])])
                    for s in streams]
            test = noise_test(mats, full, seed=seed, name=m.name, level=level)
        noisy = {s.name: [a or b for a, b in zip(ref_noisy[s.name], noisy_t[s.name], strict=True)] for s in streams}
        res = StoreMigrationResult(m, None, n_queries=n_q, noisy_queries=sum(sum(f) for f in noisy.values()),
                                   reference_noisy=n_ref_noisy, target_noisy=sum(sum(f) for f in noisy_t.values()),
                                   reference_builds=len(ref[streams[0].name]) if streams else 1,
                                   target_builds=len(tgt[streams[0].name]) if streams else 1, test=test)
        comps: list[Comparison] = []
        for s in streams:
            ing, after = ings[s.name], tgt[s.name][0]
            r_first = ref[s.name][0]
            order_b = {it.id: i for i, it in enumerate(s.items)}
            order_a = {ing.id_back.get(it.id, it.id): i for i, it in enumerate(ing.items)}
            same_emb = m.kind not in ("embedder", "half-embedder")
            for j, (q, r0, r1) in enumerate(zip(s.queries, r_first, after, strict=True)):
                c = Comparison(s.name, q, r0, r1, dec(s, q, r0), dec(s, q, r1))
                comps.append(c)
                if noisy[s.name][j]:
                    res.changed_on_noisy += c.retrieval_changed or c.decision_changed
                else:
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
    for r in results:  # the control counts every reference rebuild made (more when a migration's test asked)
        if r.migration.kind == "rebuild":
            r.reference_noisy = r.noisy_queries = n_ref_noisy
            r.reference_builds = len(ref[streams[0].name]) if streams else 1
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
