"""Bounded-memory migration audit (issue 6): structural artifact checks and the model-level repair selection.

``memory-artifacts`` reproduces the pre-model structural checks exactly: under complete-event
reordering, which memories change their stored summaries and their retrieved text (the Changed column
of tab:memory-development over 16 development streams, and Table M-art over 48 new test streams).

The model-level audit (C1.6–C1.8) serializes every policy call (four block items: family, context,
query descriptors, the action menu with descriptions, the 8 retrieved slot lines) and asks any
:class:`~replaylens.llm.Backend`.  ``memory-development`` / ``memory-test`` use the scripted agent
(:class:`~replaylens.memory.RetrievedMeanBackend`: Mean on the retrieved slots with ε = 0.2 seeded
noise), asked directly; :func:`run_memory_audit` runs any back-end through the journaled run store
(``RUN/development``, ``RUN/dev_selection_freeze.json``, ``RUN/test``), and
``memory-development-embedded`` / ``memory-test-embedded`` recompute the tables from the committed
export of the embedded model's run.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path
from typing import Any

import numpy as np

from ..._durable import atomic_write
from ...errors import ConfigError, JournalError
from ...inference import adjusted_level, cluster_bootstrap
from ...llm import AcquireSettings, Backend, Budget, Request, ValidationReport
from ...memory.bounded import (
    RetrievedMeanBackend,
    acquire_decisions,
    check_migration,
    decide_direct,
    make_memory,
    manifest_core,
)
from ...rng import derive_seed
from ..memory_audit import (
    MemoryBlocks,
    MemoryDecisions,
    MemoryDesign,
    build_memory_blocks,
    decision_rows,
    development_conditions,
    test_conditions,
)
from ..reproduce import Comparison, Kind, Kinds, compare, register_reproduction
from ._run_export import read_export, run_section, section_rows, write_export

__all__ = [
    "EMBEDDED_EXPORT",
    "MemoryAudit",
    "development_design",
    "export_memory_run",
    "load_memory_export",
    "run_memory_audit",
    "select_memories",
    "test_design",
]

DEV_SEED = 20260870
TEST_SEED = 20260871
NOTE = ("exact structural count; blocks built from the verified public data (32 events + 1 query per block, "
        f"balanced forced schedule); dev seed {DEV_SEED}, test seed {TEST_SEED}")


@cache
def _blocks(n: int, seed: int) -> MemoryBlocks:
    return build_memory_blocks(n, seed=seed)
ARTIFACT_KINDS = Kinds(columns=(("tab:memory-development", "Changed (of 64 blocks)", Kind.DESIGN),
                                 ("tab:memory-test-artifacts", "* (of 192)", Kind.DESIGN)))
"""Artifacts changed by a complete event reordering: exact consequences of each memory's rule."""


@register_reproduction("memory-artifacts", "Bounded memories: changed artifacts after complete-event reordering",
                       issue="6", kinds=ARTIFACT_KINDS)
def memory_artifacts() -> list[Comparison]:
    rows: list[Comparison] = []
    dev = _blocks(16, DEV_SEED)
    for name, label, paper in (("fifo", "FIFO", 64), ("event-time", "Event time", 0), ("reservoir", "Reservoir", 0),
                               ("binned-mean", "Binned mean", 0)):
        rep = check_migration(partial(make_memory, name), dev.events, queries=dev.queries, ops=["reorder"],
                              seed=DEV_SEED)[0]
        both = sum(1 for c in rep.changed if c.stored_changed and c.retrieved_changed)
        rows.append(compare("tab:memory-development", label, "Changed (of 64 blocks)", paper, both, 0, NOTE))
    test = _blocks(48, TEST_SEED)
    for name, label, ps, pr in (("fifo", "FIFO", 192, 192), ("binned-mean", "Binned mean (audit)", 0, 0),
                                ("binned-mean", "Binned mean (endpoint)", 0, 0), ("no-memory", "No memory", 192, 0)):
        rep = check_migration(partial(make_memory, name), test.events, queries=test.queries, ops=["reorder"],
                              seed=TEST_SEED)[0]
        rows.append(compare("tab:memory-test-artifacts", label, "stored summaries (of 192)", ps, rep.stored_changed, 0,
                            NOTE))
        rows.append(compare("tab:memory-test-artifacts", label, "retrieved text (of 192)", pr, rep.retrieved_changed,
                            0, NOTE))
    return rows


# ---------------------------------------------------------------- model-level audit (any back-end)

EPSILON = 0.2
MEMS = ("fifo", "event-time", "reservoir", "binned-mean")
LABELS = {"fifo": "FIFO", "event-time": "Event time", "reservoir": "Reservoir", "binned-mean": "Binned mean",
          "no-memory": "No memory"}
SCRIPTED_NOTE = ("scripted agent: Mean rule on the 8 retrieved slots with ε = 0.2 seeded random actions (so fresh "
                 "repeats differ); the paper's values come from a hosted model and are shown for reference only")
TEST_ARMS = ("FIFO", "audit", "endpoint", "No memory")
PAPER_DEV = {"fifo": (0.674, 0.675, 0.516, 0.672), "event-time": (0.675, 0.675, 0.000, 0.672),
             "reservoir": (0.676, 0.676, -0.008, 0.719), "binned-mean": (0.677, 0.677, 0.000, 0.727)}
PAPER_TEST = {"FIFO": (0.673, 0.668, 0.670, 0.570), "audit": (0.673, 0.673, 0.673, 0.003),
              "endpoint": (0.674, 0.673, 0.674, 0.001), "No memory": (0.669, 0.669, 0.669, -0.029)}
PAPER_CONTRASTS = (("FIFO", (3.042, 0.092, 6.153)), ("endpoint", (-0.292, -1.079, 0.209)),
                   ("No memory", (4.580, 0.970, 8.219)))
PAPER_SELECTION = {"audit": "binned-mean", "endpoint": "binned-mean"}
FREEZE_FILE = "dev_selection_freeze.json"
FREEZE_FORMAT = "replaylens-memory-freeze/1"
EXPORT_FORMAT = "replaylens-memory-export/1"
EXPORT_COLUMNS = ("condition", "memory", "history", "stream", "repeat", "block", "token", "action", "attempt_kind")
EMBEDDED_EXPORT = Path(__file__).parent / "data" / "memory-embedded.json.gz"
EMBEDDED_COMMAND = ("replaylens paper memory-audit --model local/embedded --run-dir runs/memory-embedded "
                    "--export src/replaylens/paper/experiments/data/memory-embedded.json.gz")


def development_design() -> MemoryDesign:
    """C1.7: 16 development streams, 704 requests (four block items each)."""
    return MemoryDesign("development", _blocks(16, DEV_SEED), development_conditions(DEV_SEED), DEV_SEED)


def test_design(selection: Mapping[str, str]) -> MemoryDesign:
    """C1.8: 48 new streams, 768 requests.  Call it only after the selection is frozen: building the design
    executes the test histories."""
    return MemoryDesign("test", _blocks(48, TEST_SEED), test_conditions(selection, TEST_SEED), TEST_SEED)


def _query_utility(design: MemoryDesign) -> np.ndarray:
    """[stream, block, arm] counterfactual query utilities."""
    qu = design.blocks.query_utility
    return np.stack([[qu[(s, b)] for b in design.block_names] for s in design.streams])


def _utility(u: np.ndarray, acts: np.ndarray) -> np.ndarray:
    """[stream] mean utility over blocks and repeats (NaN where a decision is missing)."""
    chosen = np.take_along_axis(u, np.maximum(acts, 0), axis=2).astype(np.float64)
    chosen[acts < 0] = np.nan
    return chosen.mean(axis=(1, 2))


def _t_gr(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per-stream repeat-corrected T_gr between two [stream, block, 2] action arrays."""
    cross = np.mean([(a[..., r] != b[..., s]) for r in range(2) for s in range(2)], axis=0)
    within = 0.5 * ((a[..., 0] != a[..., 1]).astype(float) + (b[..., 0] != b[..., 1]))
    return (cross - within).mean(axis=1)


def development_table(dec: MemoryDecisions) -> dict[str, dict[str, float]]:
    """Per candidate: U₂, U₆ (two / six aligned calls), T_in and T_value (repeat-corrected, against the
    candidate's own first two aligned calls), averaged over streams."""
    u = _query_utility(dec.design)
    out = {}
    for mem in MEMS:
        al, ing, val = dec.get(mem, "aligned"), dec.get(mem, "ingestion"), dec.get(mem, "value")
        out[mem] = {"U2": float(_utility(u, al[..., :2]).mean()), "U6": float(_utility(u, al).mean()),
                    "T_in": float(_t_gr(al[..., :2], ing).mean()), "T_value": float(_t_gr(al[..., :2], val).mean())}
    return out


def development_controls(dec: MemoryDecisions) -> dict[str, float]:
    """The controls excluded from selection: no-memory U₂ and the FIFO baseline-rekey response."""
    u = _query_utility(dec.design)
    return {"no_memory_U2": float(_utility(u, dec.get("no-memory", "aligned")).mean()),
            "fifo_T_rekey": float(_t_gr(dec.get("fifo", "aligned")[..., :2], dec.get("fifo-rekey", "rekey")).mean())}


def select_memories(dev: dict[str, dict[str, float]]) -> dict[str, str]:
    """C1.7: the audit selector (T_in ≤ 0.05, T_value ≥ 0.05, U₂ ≥ U₂(FIFO) − 0.002, largest U₂, frozen tie
    order) and the endpoint selector (highest six-repeat aligned mean U₆)."""
    order = list(MEMS)
    if dev["fifo"]["T_in"] <= 0.05:
        audit = "fifo"
    else:
        ok = [m for m in order if dev[m]["T_in"] <= 0.05 and dev[m]["T_value"] >= 0.05
              and dev[m]["U2"] >= dev["fifo"]["U2"] - 0.002]
        audit = max(ok, key=lambda m: (dev[m]["U2"], -order.index(m))) if ok else "fifo"
    endpoint = max(order, key=lambda m: (dev[m]["U6"], -order.index(m)))
    return {"audit": audit, "endpoint": endpoint}


def selection_digest(dev: dict[str, dict[str, float]], sel: Mapping[str, str]) -> str:
    """sha256 of the frozen development analysis and selection."""
    frozen = json.dumps({"development": dev, "selection": dict(sel)}, sort_keys=True)
    return hashlib.sha256(frozen.encode()).hexdigest()


def test_table(dec: MemoryDecisions) -> dict[str, dict[str, np.ndarray]]:
    """Per arm, per stream: U_A, U_R, U_mix = ½U_A + ½U_R (repeats averaged first) and T_in."""
    u = _query_utility(dec.design)
    res = {}
    for name in TEST_ARMS:
        al, ro = dec.get(name, "aligned"), dec.get(name, "ingestion")
        ua, ur = _utility(u, al), _utility(u, ro)
        res[name] = {"U_A": ua, "U_R": ur, "U_mix": 0.5 * (ua + ur), "T_in": _t_gr(al, ro)}
    return res


def test_contrasts(res: Mapping[str, Mapping[str, np.ndarray]]) -> dict[str, tuple[float, float, float]]:
    """Audit minus comparator U_mix (×10⁻³) with 20,000-draw stream-paired 97.5% percentile intervals."""
    level = adjusted_level(0.95, 2)
    out = {}
    for comp, _ in PAPER_CONTRASTS:
        diff = (res["audit"]["U_mix"] - res[comp]["U_mix"]) * 1e3
        bs = cluster_bootstrap(diff, n_resamples=20_000, level=level, rng=derive_seed(TEST_SEED, "m-con", comp))
        out[comp] = (float(diff.mean()), float(np.asarray(bs.low)), float(np.asarray(bs.high)))
    return out


# ---------------------------------------------------------------- the scripted agent (asked directly)

def _scripted() -> RetrievedMeanBackend:
    return RetrievedMeanBackend(noise=EPSILON)


def _direct(design: MemoryDesign, backend: Backend) -> MemoryDecisions:
    reqs = design.requests(backend.settings.digest())
    return MemoryDecisions.from_requests(design, reqs, decide_direct(reqs, backend))


@cache
def _development() -> dict[str, dict[str, float]]:
    return development_table(_direct(development_design(), _scripted()))


@cache
def _scripted_test() -> dict[str, dict[str, np.ndarray]]:
    sel = select_memories(_development())  # frozen before the test histories are executed
    return test_table(_direct(test_design(sel), _scripted()))


# ---------------------------------------------------------------- journaled model runs

@dataclass
class MemoryAudit:
    """A (possibly partial) model-level memory audit: gates, tables, the frozen selection."""

    model: str
    development: dict[str, dict[str, float]] | None = None
    controls: dict[str, float] | None = None
    selection: dict[str, str] | None = None
    selection_sha256: str | None = None
    test: dict[str, dict[str, np.ndarray]] | None = None
    contrasts: dict[str, tuple[float, float, float]] | None = None
    dev_report: ValidationReport | dict[str, Any] | None = None
    test_report: ValidationReport | dict[str, Any] | None = None

    @property
    def complete(self) -> bool:
        return self.test is not None


def _ok(rep: ValidationReport | dict[str, Any] | None) -> bool:
    if rep is None:
        return False
    return bool(rep.ok if isinstance(rep, ValidationReport) else rep.get("ok"))


def _manifest(design: MemoryDesign, backend: Backend, acq: AcquireSettings) -> dict[str, Any]:
    return {"experiment": f"memory-{design.phase}", "protocol_version": 1, "seed": design.seed,
            **manifest_core(backend, acq, design.template), "design": design.to_dict(),
            "expected_requests": design.n_requests, "items_per_request": "one per block of the stream",
            "seed_registry": {"ingestion_order": "derive_rng(seed, 'ingestion-order', stream, block).permutation",
                              "value": "uniform_derangement(derive_rng(seed, 'memory-value', stream, block))",
                              "acquisition_order": "derive_rng(seed, 'acquisition-order', phase, digest)",
                              "backoff": "derive_rng(seed, 'backoff', request_id, k)"}}


def _freeze(run_dir: Path, dev: dict[str, dict[str, float]], controls: dict[str, float], sel: dict[str, str],
            dev_manifest_sha256: str) -> str:
    """Write (or check) RUN/dev_selection_freeze.json before any test history exists; returns its digest."""
    digest = selection_digest(dev, sel)
    doc = {"format": FREEZE_FORMAT, "development": dev, "controls": controls, "selection": sel,
           "development_analysis_sha256": digest, "development_manifest_sha256": dev_manifest_sha256}
    path = run_dir / FREEZE_FILE
    if path.exists():
        old = json.loads(path.read_text(encoding="utf-8"))
        if old.get("development_analysis_sha256") != digest or old.get("selection") != sel:
            raise JournalError(f"{path}: the frozen selection {old.get('selection')} differs from the one recomputed "
                               f"from the development run {sel}; use a new run directory")
        return digest
    atomic_write(path, (json.dumps(doc, sort_keys=True, indent=1) + "\n").encode("utf-8"))
    return digest


def read_freeze(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The frozen development selection; refuses to go on without it (the test-history generator's check)."""
    path = Path(run_dir) / FREEZE_FILE
    if not path.is_file():
        raise ConfigError(f"{path} does not exist: the development selection must be frozen before test histories "
                          "are executed")
    doc = json.loads(path.read_text(encoding="utf-8"))
    if doc.get("format") != FREEZE_FORMAT:
        raise ConfigError(f"{path}: field 'format' is {doc.get('format')!r}, expected {FREEZE_FORMAT!r}")
    if selection_digest(doc["development"], doc["selection"]) != doc.get("development_analysis_sha256"):
        raise ConfigError(f"{path}: field 'development_analysis_sha256' does not match its content")
    return dict(doc)


def run_memory_audit(backend: Backend, run_dir: str | os.PathLike[str], *, acquire: AcquireSettings | None = None,
                     offline: bool = False, spend: Budget | None = None) -> MemoryAudit:
    """Development (RUN/development) → frozen selection (RUN/dev_selection_freeze.json) → test (RUN/test).

    Rerunning on the same directory resumes without re-asking finished requests; a finished audit is
    re-analysed with zero model calls.  The test design is built only after the freeze file exists.
    ``spend``: a request / cost budget over both phases (``BudgetExhausted`` when reached; rerun to resume).
    """
    from ...llm import RunStore, prepare_backend

    root = Path(run_dir)
    prepare_backend(backend, root / "development", probe=not offline)
    acq = acquire or AcquireSettings(concurrency=1 if backend.settings.provider == "local" else 16)
    out = MemoryAudit(backend.settings.model)
    dd = development_design()
    got = acquire_decisions(dd.requests(backend.settings.digest()), backend, root / "development",
                            _manifest(dd, backend, acq), acquire=acq, order_key="development", offline=offline,
                            spend=spend)
    out.dev_report = got.report
    dec = MemoryDecisions.from_requests(dd, got.requests, got.decisions)
    if not got.report.ok or not dec.complete:
        return out
    out.development, out.controls = development_table(dec), development_controls(dec)
    out.selection = select_memories(out.development)
    out.selection_sha256 = _freeze(root, out.development, out.controls, out.selection,
                                   RunStore.manifest_sha256(root / "development" / "manifest.json"))
    frozen = read_freeze(root)
    if spend is not None:  # the development phase's requests count against the same budget
        with RunStore(root / "development") as dev_store:
            spend = spend.after(*spend.spent(dev_store))
    td = test_design(frozen["selection"])
    got = acquire_decisions(td.requests(backend.settings.digest()), backend, root / "test",
                            {**_manifest(td, backend, acq), "selection_freeze_sha256": frozen[
                                "development_analysis_sha256"]},
                            acquire=acq, order_key="test", offline=offline, spend=spend)
    out.test_report = got.report
    tdec = MemoryDecisions.from_requests(td, got.requests, got.decisions)
    if got.report.ok and tdec.complete:
        out.test = test_table(tdec)
        out.contrasts = test_contrasts(out.test)
    return out


# ---------------------------------------------------------------- compact export

def _row(req: Request, i: int, token: str | None, action: str, kind: str | None) -> list[Any]:
    m = req.meta
    return [m["condition"], m["memory"], m["history"], m["stream"], int(m["repeat"]), m["blocks"][i], token, action,
            kind]


def export_memory_run(run_dir: str | os.PathLike[str], path: str | os.PathLike[str]) -> Path:
    """Compact export of a finished memory audit (gzip JSON): the frozen selection, and per phase the
    manifest and its sha256, the gate's report, usage and one row per block decision."""
    root = Path(run_dir)
    freeze = read_freeze(root)
    runs = {ph: run_section(root / ph, EXPORT_COLUMNS, _row) for ph in ("development", "test")}
    bad = [ph for ph, sec in runs.items() if not sec["validation"]["ok"]]
    if bad:
        raise ConfigError(f"{root}: the validation gate has not passed for {', '.join(bad)} (rerun to resume)")
    return write_export({"format": EXPORT_FORMAT, "freeze": freeze, "runs": runs}, path)


def _check_design(design: MemoryDesign, sec: Mapping[str, Any], where: str) -> None:
    want = sec["manifest"]["design"]["requests_sha256"]
    if design.requests_digest() != want:
        raise ConfigError(f"{where}: field 'requests_sha256' does not match the design rebuilt from the seeds (the "
                          "export belongs to another design or code version)")


def load_memory_export(path: str | os.PathLike[str]) -> MemoryAudit:
    """Recompute every table from a compact export with zero model calls.  The development and test designs
    are rebuilt from the seeds (and the frozen selection) and must match the exported request digests."""
    doc = read_export(path, EXPORT_FORMAT)
    try:
        dev_sec, test_sec, freeze = doc["runs"]["development"], doc["runs"]["test"], doc["freeze"]
    except (KeyError, TypeError):
        raise ConfigError(f"{path}: field 'runs' must hold 'development' and 'test', and 'freeze' must exist") from None
    dd = development_design()
    _check_design(dd, dev_sec, f"{path} (development)")
    dec = MemoryDecisions.from_rows(dd, section_rows(dev_sec, f"{path} (development)"))
    out = MemoryAudit(str(dev_sec["manifest"]["settings"]["model"]), dev_report=dev_sec["validation"],
                      test_report=test_sec["validation"])
    out.development, out.controls = development_table(dec), development_controls(dec)
    out.selection = select_memories(out.development)
    if out.selection != freeze.get("selection"):
        raise ConfigError(f"{path}: field 'freeze.selection' {freeze.get('selection')} differs from the selection "
                          f"recomputed from the development rows {out.selection}")
    out.selection_sha256 = selection_digest(out.development, out.selection)
    td = test_design(out.selection)
    _check_design(td, test_sec, f"{path} (test)")
    tdec = MemoryDecisions.from_rows(td, section_rows(test_sec, f"{path} (test)"))
    out.test = test_table(tdec)
    out.contrasts = test_contrasts(out.test)
    return out


# ---------------------------------------------------------------- reproduction rows

def _dev_rows(dev: dict[str, dict[str, float]] | None, sel: Mapping[str, str] | None, note: str,
              sel_note: str) -> list[Comparison]:
    rows = []
    for mem in MEMS:
        for col, pv in zip(("U2", "U6", "T_in", "T_value"), PAPER_DEV[mem], strict=True):
            rows.append(compare("tab:memory-development", LABELS[mem], col, pv, None if dev is None else dev[mem][col],
                                None, note))
    for who, paper_choice in PAPER_SELECTION.items():
        ours = None if sel is None else float(sel[who] == paper_choice)
        rows.append(compare("memory selection", f"{who} selector",
                            f"selects binned mean (ours: {'n/a' if sel is None else sel[who]})", 1.0, ours, None,
                            sel_note))
    return rows


def _test_rows(res: Mapping[str, Mapping[str, np.ndarray]] | None, sel: Mapping[str, str] | None,
               con: Mapping[str, tuple[float, float, float]] | None, note: str) -> list[Comparison]:
    rows = []
    for name in TEST_ARMS:
        label = f"{name} ({LABELS[sel[name]] if sel else 'n/a'})" if name in ("audit", "endpoint") else name
        for col, pv in zip(("U_A", "U_R", "U_mix", "T_in"), PAPER_TEST[name], strict=True):
            ours = None if res is None else float(res[name][col].mean())
            rows.append(compare("tab:memory-test", label, col, pv, ours, None, note))
    for comp, pci in PAPER_CONTRASTS:
        for j, col in enumerate(("estimate", "lower", "upper")):
            rows.append(compare("tab:memory-test-contrasts (×10⁻³, 97.5%)", f"audit − {comp}", col, pci[j],
                                None if con is None else con[comp][j], None, note))
    return rows


@register_reproduction("memory-development", "Bounded memories: development diagnostics and the frozen selection "
                       "(scripted agent)", issue="6")
def memory_development() -> list[Comparison]:
    dev = _development()
    sel = select_memories(dev)
    digest = selection_digest(dev, sel)[:16]
    return _dev_rows(dev, sel, SCRIPTED_NOTE,
                     f"selection frozen before test histories (sha256 {digest}); " + SCRIPTED_NOTE)


@register_reproduction("memory-test", "Bounded memories: frozen selection on 48 new streams (scripted agent)",
                       issue="6")
def memory_test() -> list[Comparison]:
    sel = select_memories(_development())
    res = _scripted_test()
    return _test_rows(res, sel, test_contrasts(res), SCRIPTED_NOTE)


@cache
def _embedded() -> MemoryAudit | None:
    return load_memory_export(EMBEDDED_EXPORT) if EMBEDDED_EXPORT.is_file() else None


def _embedded_note(a: MemoryAudit | None) -> str:
    if a is None:
        return (f"n/a: no committed export at src/replaylens/paper/experiments/data/{EMBEDDED_EXPORT.name}; "
                f"produce it with "
                f"`{EMBEDDED_COMMAND}` (the paper's values are its hosted model's, shown for reference)")
    gates = "passed" if _ok(a.dev_report) and _ok(a.test_report) else "NOT passed"
    return (f"embedded model {Path(a.model).name} decisions recomputed from the committed export "
            f"{EMBEDDED_EXPORT.name} (zero model calls; validation gates {gates}); the paper's values are its "
            "hosted model's, shown for reference only")


@register_reproduction("memory-development-embedded", "Bounded memories: development diagnostics and the frozen "
                       "selection (embedded model, from the committed export)", issue="6")
def memory_development_embedded() -> list[Comparison]:
    a = _embedded()
    note = _embedded_note(a)
    sel_note = note if a is None or a.selection_sha256 is None else \
        f"selection frozen before test histories (sha256 {a.selection_sha256[:16]}); " + note
    rows = _dev_rows(None if a is None else a.development, None if a is None else a.selection, note, sel_note)
    ctl = None if a is None else a.controls
    rows.append(compare("memory development controls", "No memory", "U2", None,
                        None if ctl is None else ctl["no_memory_U2"], None, note))
    rows.append(compare("memory development controls", "FIFO baseline rekey", "T_rekey", None,
                        None if ctl is None else ctl["fifo_T_rekey"], None, note))
    return rows


@register_reproduction("memory-test-embedded", "Bounded memories: frozen selection on 48 new streams (embedded "
                       "model, from the committed export)", issue="6")
def memory_test_embedded() -> list[Comparison]:
    a = _embedded()
    return _test_rows(None if a is None else a.test, None if a is None else a.selection,
                      None if a is None else a.contrasts, _embedded_note(a))


def decision_table(run_dir: str | os.PathLike[str], phase: str) -> list[dict[str, Any]]:
    """The decoded decision rows of one phase of a run directory (for inspection)."""
    from ...llm import open_store

    with open_store(Path(run_dir) / phase) as store:
        reqs = [store.request(rid) for rid in store.scheduled()]
        decisions = {}
        for r in reqs:
            d = store.decisions(r.request_id)
            if d is not None:
                sel = store.selected(r.request_id) or {}
                from ...memory.bounded import Decision

                decisions[r.request_id] = Decision(tuple(d), tuple(sel.get("parsed_decisions") or ()),
                                                   sel.get("kind"))
    return decision_rows(reqs, decisions)
