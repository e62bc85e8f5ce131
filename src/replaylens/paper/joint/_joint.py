"""Joint history–menu designs (partC C2 / C6.3; paper app. global-renaming and joint-blackbox).

Per stream, every block's history is shown in one of five forms (full, value, pair, key_slot,
masked) and under one of four cells ``λ_H λ_A`` (0 = identity, 1 = the stream's involution ω):
a record of semantic action a shows ``tok[λ_H(a)]``; menu rows stay in semantic order with fixed
descriptions and show ``tok[λ_A(a)]``; the output enum lists the row tokens in that order (never
re-sorted); a returned token τ decodes to λ_A⁻¹(tok⁻¹(τ)).  A request holds the four block items
of one (stream, namespace, form, cell, repeat); two fresh repeats per cell.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import ConfigError
from ...llm import (
    Acquirer,
    AcquireSettings,
    Backend,
    Budget,
    BudgetExhausted,
    ItemDecoder,
    MenuRow,
    PromptItem,
    PromptTemplate,
    Redactor,
    Request,
    ShownRecord,
    ValidationReport,
    canonical_json,
    make_request,
    open_store,
    prepare_backend,
    render_prompt,
    resolve_namespace,
    sha256_text,
)
from ...maps import INVOLUTIONS_4, LabelMap, identity, uniform_derangement
from ...rng import derive_rng

__all__ = [
    "CELLS",
    "FORMS",
    "PAPER_ACTIONS",
    "PAPER_CONTEXTS",
    "PAPER_DOMAINS",
    "JointBlock",
    "JointDesign",
    "JointResults",
    "JointRun",
    "blocks_from_arrays",
    "run_joint",
]

FORMS = ("full", "value", "pair", "key_slot", "masked")
CELLS = ("00", "01", "10", "11")

PAPER_ACTIONS: dict[str, str] = {
    "coverage": "take candidates in increasing order of the first standardized feature",
    "adaptive": "four coverage examples, then candidates nearest the boundary between class centroids",
    "replicate": "repeatedly take the unvisited candidate nearest the latest selected point",
    "mixed": "coverage for the first half, adaptive for the second half",
}
"""The four sampling actions in canonical order with the spec's descriptions (partB §5.3 [CHOICE])."""
PAPER_DOMAINS = {"breast_cancer": "breast cancer diagnosis (Wisconsin diagnostic)", "wine": "red wine quality"}
PAPER_CONTEXTS = {"iid": "random candidate/evaluation pools", "shift": "shifted candidate/evaluation pools"}


@dataclass(frozen=True)
class JointBlock:
    """One block's forced history: semantic action index and utility of each record, and the query index."""

    stream: str
    family: str
    context: str
    actions: tuple[int, ...]
    utilities: tuple[float, ...]
    query_index: int = 11

    def __post_init__(self) -> None:
        if len(self.actions) != len(self.utilities):
            raise ConfigError(f"block {self.stream}/{self.family}/{self.context}: actions and utilities differ in "
                              "length")

    def to_dict(self) -> dict[str, Any]:
        return {"stream": self.stream, "family": self.family, "context": self.context,
                "actions": list(self.actions), "utilities": [repr(float(u)) for u in self.utilities],
                "query_index": self.query_index}


@dataclass(frozen=True)
class JointDesign:
    """The request matrix streams × namespaces × forms × cells × repeats, four block items per request.

    ``maps``: the fixed-point-free involutions ω; a seeded permutation of the streams assigns them
    in equal shares (16 each for 48 streams).  σ (value and pair, shared across repeats) and σ_k
    (key-slot) are seeded uniform derangements per (stream, block).
    """

    blocks: tuple[JointBlock, ...]
    actions: Mapping[str, str] = field(default_factory=lambda: dict(PAPER_ACTIONS))
    namespaces: tuple[str, ...] = ("semantic", "opaque-joint")
    forms: tuple[str, ...] = FORMS
    cells: tuple[str, ...] = CELLS
    repeats: int = 2
    maps: tuple[LabelMap, ...] = INVOLUTIONS_4
    seed: int = 20260911
    domains: Mapping[str, str] = field(default_factory=lambda: dict(PAPER_DOMAINS))
    contexts: Mapping[str, str] = field(default_factory=lambda: dict(PAPER_CONTEXTS))
    template: PromptTemplate = field(default_factory=PromptTemplate)
    state_off: bool = False
    """Empty-ledger state-off comparator (partB §10): records are removed before serialization and no
    cell map is applied, so every (form, cell) of a stream and namespace sends byte-identical prompts;
    each is still a separate fresh call (its repeat key names the stream, form and cell)."""

    def __post_init__(self) -> None:
        n = len(self.actions)
        for f in self.forms:
            if f not in FORMS:
                raise ConfigError(f"unknown form {f!r}; use {FORMS}")
        for c in self.cells:
            if c not in CELLS:
                raise ConfigError(f"unknown cell {c!r}; use {CELLS}")
        for m in self.maps:
            if m.n != n or not m.is_derangement or not m.compose(m).is_identity:
                raise ConfigError(f"map {m.name} is not a fixed-point-free involution of {n} actions")
        for b in self.blocks:
            if any(not 0 <= a < n for a in b.actions):
                raise ConfigError(f"block {b.stream}/{b.family}/{b.context} has an action index outside 0..{n - 1}")
        for ns in self.namespaces:
            resolve_namespace(ns).tokens(n)
        if self.repeats < 1:
            raise ConfigError("repeats must be >= 1")

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(self.actions)

    @property
    def streams(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(b.stream for b in self.blocks))

    def blocks_of(self, stream: str) -> tuple[JointBlock, ...]:
        return tuple(b for b in self.blocks if b.stream == stream)

    def omega(self) -> dict[str, LabelMap]:
        """Seeded assignment of the involutions to streams in equal shares."""
        streams = self.streams
        perm = derive_rng(self.seed, "omega-assignment").permutation(len(streams))
        return {streams[int(p)]: self.maps[i % len(self.maps)] for i, p in enumerate(perm)}

    def sigmas(self, b: JointBlock) -> tuple[np.ndarray, np.ndarray]:
        """(σ for value and pair, σ_k for key-slot) of one block."""
        n = len(b.actions)
        if n < 2:
            return np.arange(n), np.arange(n)
        s = uniform_derangement(n, rng=derive_rng(self.seed, "value-pair", b.stream, b.family, b.context))
        k = uniform_derangement(n, rng=derive_rng(self.seed, "key-slot", b.stream, b.family, b.context))
        return np.asarray(s), np.asarray(k)

    def form_records(self, b: JointBlock, form: str) -> list[tuple[int, float | None]]:
        """(semantic action, utility or None) at each slot of ``form``."""
        a = np.asarray(b.actions, dtype=np.int64)
        y = np.asarray(b.utilities, dtype=np.float64)
        s, k = self.sigmas(b)
        if form == "full":
            keys, us = a, y
        elif form == "value":
            keys, us = a, y[s]
        elif form == "pair":
            keys, us = a[s], y[s]
        elif form == "key_slot":
            keys, us = a[k], y
        elif form == "masked":
            return [(int(x), None) for x in a]
        else:
            raise ConfigError(f"unknown form {form!r}")
        return [(int(x), float(u)) for x, u in zip(keys, us, strict=True)]

    def item(self, b: JointBlock, namespace: str, form: str, cell: str,
             omega: LabelMap) -> tuple[PromptItem, ItemDecoder]:
        n = len(self.actions)
        toks = resolve_namespace(namespace).tokens(n) or self.labels
        lam_h = omega if cell[0] == "1" and not self.state_off else identity(n)
        lam_a = omega if cell[1] == "1" and not self.state_off else identity(n)
        rows = tuple(MenuRow(toks[lam_a.images[a]], desc) for a, desc in enumerate(self.actions.values()))
        recs = () if self.state_off else tuple(ShownRecord(toks[lam_h.images[a]], u)
                                               for a, u in self.form_records(b, form))
        item = PromptItem(domain=self.domains.get(b.family, b.family), context=self.contexts.get(b.context, b.context),
                          phase="future", index=b.query_index, menu=rows, records=recs)
        decode = {toks[lam_a.images[a]]: self.labels[a] for a in range(n)}
        return item, ItemDecoder(tuple(r.token for r in rows), decode)

    def requests(self, settings_digest: str) -> list[Request]:
        """Every request in design order (stream, namespace, form, cell, repeat)."""
        om = self.omega()
        out: list[Request] = []
        for s in self.streams:
            blocks = self.blocks_of(s)
            for ns in self.namespaces:
                for form in self.forms:
                    for cell in self.cells:
                        pairs = [self.item(b, ns, form, cell, om[s]) for b in blocks]
                        prompt = render_prompt([p[0] for p in pairs], self.template)
                        meta = {"stream": s, "omega": om[s].name, "namespace": ns, "form": form, "cell": cell,
                                "blocks": [[b.family, b.context] for b in blocks]}
                        for r in range(self.repeats):
                            key: int | str = f"{s}/{form}/{cell}/{r}" if self.state_off else r
                            out.append(make_request(prompt, [p[1] for p in pairs], settings_digest=settings_digest,
                                                    repeat=key, meta={**meta, "repeat": r},
                                                    system=self.template.system))
        return out

    @property
    def n_requests(self) -> int:
        return len(self.streams) * len(self.namespaces) * len(self.forms) * len(self.cells) * self.repeats

    def to_dict(self) -> dict[str, Any]:
        extra: dict[str, Any] = {"state_off": True} if self.state_off else {}
        return {**extra, "actions": dict(self.actions), "namespaces": list(self.namespaces), "forms": list(self.forms),
                "cells": list(self.cells), "repeats": self.repeats, "maps": [list(m.images) for m in self.maps],
                "seed": self.seed, "domains": dict(self.domains), "contexts": dict(self.contexts),
                "template_sha256": self.template.sha256(),
                "task_definitions_sha256": sha256_text(canonical_json([b.to_dict() for b in self.blocks]))}


@dataclass(frozen=True)
class JointResults:
    """Decoded decisions: one row per (stream, namespace, form, cell, repeat, block)."""

    rows: tuple[dict[str, Any], ...]

    def frame(self) -> Any:
        import pandas as pd

        return pd.DataFrame(list(self.rows))

    def _y(self) -> dict[tuple[str, str, str, str, int, int], str]:
        return {(r["stream"], r["namespace"], r["form"], r["cell"], r["block"], r["repeat"]): r["action"]
                for r in self.rows}

    def t_gr(self, c: str, e: str, *, form: str = "full", form_e: str | None = None) -> dict[str, float]:
        """Per-stream T_gr(c, e) averaged over namespaces and blocks (repeat-corrected; negatives kept)."""
        y = self._y()
        fe = form_e or form
        per: dict[str, list[float]] = {}
        keys = {(k[0], k[1], k[4]) for k in y}
        for s, ns, b in sorted(keys):
            yc = [y.get((s, ns, form, c, b, r)) for r in range(2)]
            ye = [y.get((s, ns, fe, e, b, r)) for r in range(2)]
            if None in yc or None in ye:
                continue
            cross = np.mean([yc[r] != ye[q] for r in range(2) for q in range(2)])
            within = 0.5 * ((yc[0] != yc[1]) + (ye[0] != ye[1]))
            per.setdefault(s, []).append(float(cross - within))
        return {s: float(np.mean(v)) for s, v in per.items()}

    def primary_contrast(self, form: str = "full") -> dict[str, float]:
        """Per stream: ½[T(00,10) + T(11,01)] − ½[T(00,11) + T(10,01)] (assignment minus renaming)."""
        a1, a2 = self.t_gr("00", "10", form=form), self.t_gr("11", "01", form=form)
        r1, r2 = self.t_gr("00", "11", form=form), self.t_gr("10", "01", form=form)
        return {s: 0.5 * (a1[s] + a2[s]) - 0.5 * (r1[s] + r2[s]) for s in a1 if s in a2 and s in r1 and s in r2}


@dataclass
class JointRun:
    """A finished (or interrupted) joint acquisition: the gate's report and the decoded decisions."""

    report: ValidationReport
    results: JointResults


def run_joint(design: JointDesign, backend: Backend, run_dir: str | os.PathLike[str], *,
              acquire: AcquireSettings | None = None, offline: bool = False, spend: Budget | None = None) -> JointRun:
    """Freeze the manifest, write the plan in a seeded order, acquire (resuming), run the gate, decode.

    Rerunning on the same directory resumes; a finished run is re-analysed with zero model calls.
    ``spend``: a request / cost budget; reaching it raises :class:`BudgetExhausted` after journaling.
    """
    from ...llm import PROMPT_SOURCES, TRANSPORT_SOURCES, source_digest

    prepare_backend(backend, run_dir, probe=not offline)  # the response format, before any request id
    acq = acquire or AcquireSettings()
    manifest = {"experiment": "joint-challenge", "protocol_version": 1, "seed": design.seed,
                "settings": backend.settings.to_dict(), "acquisition": acq.to_dict(), "design": design.to_dict(),
                "template": {"sha256": design.template.sha256(), "fields": design.template.to_dict()},
                "expected_requests": design.n_requests, "items_per_request": "one per block of the stream",
                "source_sha256": source_digest(PROMPT_SOURCES), "transport_sha256": source_digest(TRANSPORT_SOURCES),
                "seed_registry": {"base": design.seed, "omega": "derive_rng(seed, 'omega-assignment').permutation",
                                  "sigma": "uniform_derangement(derive_rng(seed, 'value-pair', stream, family, "
                                           "context))",
                                  "sigma_k": "uniform_derangement(derive_rng(seed, 'key-slot', stream, family, "
                                             "context))",
                                  "acquisition_order": "derive_rng(seed, 'acquisition-order', 'joint', digest)",
                                  "backoff": "derive_rng(seed, 'backoff', request_id, k)"}}
    with open_store(run_dir, manifest, redactor=Redactor(backend.secrets())) as store:
        reqs = store.add_requests(design.requests(backend.settings.digest()), order_key="joint")
        if not offline:
            summary = Acquirer(store, backend, acq, budget=spend).run(reqs)
            if summary.access_error is not None:
                raise ConfigError(f"model access failed: {summary.access_error}")
            if summary.budget_stop is not None and summary.failed:
                raise BudgetExhausted(f"budget reached: {summary.budget_stop}; {summary.decided} of {len(reqs)} "
                                      f"requests decided (journaled in {run_dir}); rerun with a higher budget to "
                                      "resume")
        report = store.validate(expected=design.n_requests)
        rows: list[dict[str, Any]] = []
        for r in reqs:
            d = store.decisions(r.request_id)
            if d is None:
                continue
            sel = store.selected(r.request_id) or {}
            toks = sel.get("parsed_decisions") or []
            for i, act in enumerate(d):
                fam, ctx = r.meta["blocks"][i]
                rows.append({"stream": r.meta["stream"], "omega": r.meta["omega"], "namespace": r.meta["namespace"],
                             "form": r.meta["form"], "cell": r.meta["cell"], "repeat": int(r.meta["repeat"]),
                             "block": i, "family": fam, "context": ctx, "token": toks[i] if i < len(toks) else None,
                             "action": act, "request_id": r.request_id, "attempt_kind": sel.get("kind")})
    return JointRun(report, JointResults(tuple(rows)))


def blocks_from_arrays(streams: Sequence[str], families: Sequence[str], contexts: Sequence[str],
                       actions: Sequence[Sequence[int]], utilities: Sequence[Sequence[float]],
                       query_index: int = 11) -> tuple[JointBlock, ...]:
    """Convenience constructor: parallel sequences, one entry per block."""
    return tuple(JointBlock(s, f, c, tuple(int(x) for x in a), tuple(float(u) for u in y), query_index)
                 for s, f, c, a, y in zip(streams, families, contexts, actions, utilities, strict=True))
