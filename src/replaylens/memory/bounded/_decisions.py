"""Decision-level migration audit for users' memory pipelines, through any model back-end.

For every block, the policy (a :class:`~replaylens.llm.Backend`: ``scripted/mean``, the embedded model,
an OpenAI-compatible endpoint) reads the block's retrieved text once after aligned ingestion and once
after each migration operation, ``repeats`` fresh calls each, one block item per request.  Under
``relabel`` the history *and* the menu show the renamed actions (menu rows keep their order) and
the answer is decoded back, so a name-blind policy is unaffected.  Per operation the readout is the
block-mean decision disagreement between aligned and migrated calls; with ``repeats >= 2`` it is
repeat-corrected (mean cross-condition disagreement minus mean within-condition disagreement, which
is about 0 for a policy that ignores the migration even when its answers vary from call to call).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np

from ...errors import ConfigError
from ...llm import AcquireSettings, Backend, Request, ValidationReport, canonical_json, make_request, sha256_text
from ._check import MIGRATIONS, MemoryFactory, _relabel_map, aligned_order, apply_migration, snapshot
from ._memories import Event
from ._prompt import (
    MemoryItem,
    MemoryTemplate,
    RetrievedMeanBackend,
    acquire_decisions,
    decide_direct,
    item_decoder,
    manifest_core,
    render_memory_prompt,
)

__all__ = ["DecisionReport", "audit_migration_decisions", "repeat_corrected"]


@dataclass(frozen=True)
class DecisionReport:
    """Decision-level readout of one migration operation."""

    op: str
    n_blocks: int
    repeats: int
    disagreement: float | None
    blocks_changed: int
    missing: int
    model: str

    @property
    def corrected(self) -> bool:
        return self.repeats >= 2

    def summary(self) -> str:
        if self.disagreement is None:
            return f"decisions ({self.model}): no complete block ({self.missing} missing decisions)"
        what = "repeat-corrected disagreement T_gr" if self.corrected else "decision disagreement"
        miss = f", {self.missing} blocks missing" if self.missing else ""
        return (f"decisions ({self.model}, {self.repeats} repeat{'s' if self.repeats != 1 else ''}): {what} "
                f"{self.disagreement:.3f}; first-repeat decision changes in {self.blocks_changed}/{self.n_blocks} "
                f"blocks{miss}")

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "model": self.model, "repeats": self.repeats, "blocks": self.n_blocks,
                "disagreement": self.disagreement, "repeat_corrected": self.corrected,
                "blocks_changed": self.blocks_changed, "missing_blocks": self.missing}


def repeat_corrected(a: Sequence[str], b: Sequence[str]) -> float:
    """Cross-condition minus within-condition disagreement of two lists of repeated decisions (raw
    disagreement of the first decisions when either side has a single repeat)."""
    if len(a) < 2 or len(b) < 2:
        return float(a[0] != b[0])
    cross = float(np.mean([x != y for x in a for y in b]))
    within = 0.5 * (float(np.mean([x != y for x, y in combinations(a, 2)]))
                    + float(np.mean([x != y for x, y in combinations(b, 2)])))
    return cross - within


def _menu_and_decode(actions: Sequence[str], mp: Mapping[str, str]) -> tuple[tuple[tuple[str, None], ...],
                                                                              dict[str, str]]:
    shown = [mp.get(a, a) for a in actions]
    return tuple((t, None) for t in shown), {mp.get(a, a): a for a in actions}


def audit_migration_decisions(
    factory: MemoryFactory,
    blocks: Mapping[tuple[str, str], Sequence[Event]],
    backend: Backend,
    *,
    queries: Mapping[tuple[str, str], Sequence[float]] | None = None,
    ops: Sequence[str] = MIGRATIONS,
    seed: int = 0,
    k: int = 8,
    repeats: int = 2,
    run_dir: str | os.PathLike[str] | None = None,
    acquire: AcquireSettings | None = None,
    template: MemoryTemplate | None = None,
) -> tuple[list[DecisionReport], ValidationReport | None]:
    """Ask ``backend`` for every block's decision after aligned ingestion and after each operation.

    Model calls are journaled in ``run_dir`` (rerunning resumes without re-asking); without one, a
    scripted back-end is asked directly and any other back-end uses a temporary run directory.
    """
    if repeats < 1:
        raise ConfigError(f"repeats must be >= 1; got {repeats}")
    tpl = template or MemoryTemplate()
    acq = acquire or AcquireSettings(concurrency=1 if backend.settings.provider == "local" else 8)
    for op in ops:
        if op not in MIGRATIONS:
            raise ConfigError(f"unknown migration {op!r}; use one of {', '.join(MIGRATIONS)}")
    digest = backend.settings.digest()
    reqs: list[Request] = []
    index: dict[tuple[str, str, str, int], str] = {}
    live = [(key, evs) for key, evs in blocks.items() if evs]
    for (stream, block), events in live:
        q = tuple(float(x) for x in (queries[(stream, block)] if queries and (stream, block) in queries
                                     else np.mean([e.descriptors for e in events], axis=0)))
        acts = list(dict.fromkeys(e.action for e in aligned_order(events)))
        for op in ("aligned", *ops):
            moved = apply_migration(op, events, seed=seed, stream=stream, block=block)
            _, lines = snapshot(factory, moved, q, k)
            mp = _relabel_map(events) if op == "relabel" else {}
            menu, decode = _menu_and_decode(acts, mp)
            item = MemoryItem(task=(("Block", block),), query=q, menu=menu, retrieved=tuple(lines))
            prompt = render_memory_prompt([item], tpl)
            for r in range(repeats):
                req = make_request(prompt, [item_decoder(menu, decode)], settings_digest=digest,
                                   repeat=f"{stream}/{block}/{op}/{r}",
                                   meta={"stream": stream, "block": block, "op": op, "repeat": r},
                                   system=tpl.system)
                reqs.append(req)
                index[(stream, block, op, r)] = req.request_id
    report: ValidationReport | None = None
    if run_dir is None and isinstance(backend, RetrievedMeanBackend):
        decided = decide_direct(reqs, backend)
    else:
        manifest = {"experiment": "memory-migration-decisions", "protocol_version": 1, "seed": seed,
                    **manifest_core(backend, acq, tpl),
                    "design": {"ops": list(ops), "k": k, "repeats": repeats, "blocks": len(live),
                               "requests_sha256": sha256_text(canonical_json([[r.repeat, r.prompt_sha256]
                                                                               for r in reqs]))},
                    "expected_requests": len(reqs), "items_per_request": 1}
        if run_dir is None:
            with tempfile.TemporaryDirectory(prefix="replaylens-migration-") as tmp:
                got = acquire_decisions(reqs, backend, tmp, manifest, acquire=acq, order_key="migration")
        else:
            got = acquire_decisions(reqs, backend, run_dir, manifest, acquire=acq, order_key="migration")
        decided, report = got.decisions, got.report
    out = []
    for op in ops:
        vals: list[float] = []
        changed = missing = 0
        for (stream, block), _ in live:
            a = [decided.get(index[(stream, block, "aligned", r)]) for r in range(repeats)]
            b = [decided.get(index[(stream, block, op, r)]) for r in range(repeats)]
            if any(x is None for x in a) or any(x is None for x in b):
                missing += 1
                continue
            aa = [x.actions[0] for x in a if x is not None]
            bb = [x.actions[0] for x in b if x is not None]
            vals.append(repeat_corrected(aa, bb))
            changed += aa[0] != bb[0]
        out.append(DecisionReport(op, len(live), repeats, float(np.mean(vals)) if vals else None, changed, missing,
                                  backend.settings.model))
    return out, report
