"""Opaque operator families and signature patterns on the synthetic OCRR trace (issue 3, item 3; partA §1).

Every writer is replayed on the replay engine's array path on the fixed OCRR adaptation trace of the
synthetic suite, the held-fixed future and evaluator, the identity plus the nine outer derangements and
the primary slot draw σ* (``SIGMA``: value/pair seed 20260824, time seed 20260822).  Each (cells, draws)
plan goes through :func:`replaylens.replay` once; the writers of a sweep then reuse its prepared
streams and scored utilities (:func:`replay_operator`; identical decisions, checked in the tests).
Signatures are computed under opaque ids and decoded before the hidden families are opened.

Reproductions:

* ``content-calibration`` — the 12 canonical writers, blinded and decoded with τ = 10⁻⁶
  (tab:content-calibration = tab:hidden-operator-signatures);
* ``content-composite`` — the 8 held-out composites (tab:hidden-operator-holdout);
* ``random-operators`` — 24 coefficient-randomized writers (tab:random-operator-stress);
* ``readout-invariance`` — 24 writers × 3 readout bases (tab:readout-invariance);
* ``content-nonlinear`` — 24 nonlinear writers under draws A and B (tab:content-nonlinear);
* ``family-blind`` — the family-blind pair-law challenge, draws A and B, with the threshold 0.050 frozen
  before any coefficient is generated (tab:content-blind, tab:blind-relation-challenge, the per-writer
  table and tab:blind-threshold-sensitivity).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np

from ...agents import Agent
from ...maps import DERANGEMENTS_4, SlotSpec
from ...readouts import pool_tasks
from ...records import Evaluator, FutureTasks, History
from ...replay import Decisions, plan_replay, prepare_replay
from ..operators import (
    PAIR_THRESHOLD,
    THRESHOLD_GRID,
    BlindSet,
    Operator,
    PairDecoder,
    Readout,
    Signature,
    StateOperator,
    ThresholdRow,
    UpdateLaw,
    blind_challenge,
    canonical_operators,
    cell_states,
    composite_operators,
    decode_family,
    nonlinear_operators,
    random_operators,
    readout_operators,
    threshold_sensitivity,
)
from ..reproduce import Comparison, Kind, Kinds, compare, register_reproduction
from .synthetic_suite import SEED, SIGMA, suite

__all__ = [
    "OperatorSweep",
    "PAIR_DECODER",
    "SIGMA_B",
    "StreamSignature",
    "operator_signature",
    "replay_operator",
    "stream_signature",
]

PAIR_DECODER = PairDecoder(PAIR_THRESHOLD)
"""The family-blind decoder, frozen at import — before any challenge coefficient is generated."""

SIGMA_B = SlotSpec(value_seed=20260901, time_seed=20260901, reorder_seed=20260901)
"""Draw B of the nonlinear check: an independent within-block draw (new σ_v = σ_p); seeds are the paper's
second predeclared draw pair (20260901, 20260901)."""

NOTE = ("synthetic OCRR trace reconstructed from the spec's RECs (σ* cannot be rebuilt, core §2.6): structural "
        "zeros exact, substrate-dependent values compared at the stated tolerance")
COEF_NOTE = ("coefficient laws unspecified by the paper (partA §7 item 4 REC; recorded seed 20260830): "
             "qualitative agreement expected (partA §6); exact zeros for commutative laws")
AFFINE_NOTE = ("affine laws: a common scale k of (b_ℓ, v_ℓ) leaves every action unchanged and multiplies the state "
               "distance by k, and the paper's coefficient scale is unspecified (ours/paper = {ratio:.2f}); ")
FAMILIES = ("invariant", "key-only", "commutative", "order-sensitive")
FAMILY_ROWS = {"invariant": "Replay-invariant", "key-only": "Key-only", "commutative": "Commutative-pairing",
               "order-sensitive": "Order-sensitive"}


# ---------------------------------------------------------------- replay and signatures


@cache
def _inputs() -> tuple[History, FutureTasks, Evaluator]:
    s = suite()
    return s.world.history(s.ocrr.adapt_actions), s.world.futures(), s.world.evaluator()


class OperatorSweep:
    """Replay many writers under one plan: the plan's streams, utilities, oracle and task layout are
    prepared once (:func:`replaylens.replay.prepare_replay`), and each writer then runs on them with all
    streams as one shard.

    ``sweep.replay(agent)`` gives exactly ``replay(history, futures, evaluator, agent, plan=sweep.plan)``
    (checked in the tests) without re-preparing the streams and re-scoring the utilities per writer.
    """

    def __init__(self, history: History, futures: FutureTasks, evaluator: Evaluator, *, cells: str = "value,pair",
                 draws: Sequence[SlotSpec] = (SIGMA,), seed: int = SEED) -> None:
        self.plan = plan_replay(history, futures, cells=cells, maps="derangements", draws=list(draws), seed=seed)
        self.prepared = prepare_replay(history, futures, evaluator, plan=self.plan)

    def replay(self, agent: Agent) -> Decisions:
        return self.prepared.run(agent, shard_size=len(self.plan.streams))


@cache
def _sweep(cells: str, draws: tuple[SlotSpec, ...]) -> OperatorSweep:
    return OperatorSweep(*_inputs(), cells=cells, draws=draws)


def replay_operator(agent: Agent, *, cells: str = "value,pair", draws: Sequence[SlotSpec] = (SIGMA,)) -> Decisions:
    """Replay ``agent`` on the synthetic OCRR trace (identity + 9 derangements, the given slot draws, seed
    ``SEED``) — the decisions of ``replay(..., cells=cells, maps="derangements", draws=draws, seed=SEED)``."""
    return _sweep(cells, tuple(draws)).replay(agent)


@dataclass(frozen=True, eq=False)
class StreamSignature:
    """Per-stream signature components (S,) for one slot draw, each pooled over strata and the 9 maps."""

    a_rekey: np.ndarray
    d_value: np.ndarray | None
    d_pair: np.ndarray | None

    def pooled(self, pair_state: float | None = None) -> Signature:
        return Signature(float(self.a_rekey.mean()),
                         float(self.d_value.mean()) if self.d_value is not None else float("nan"),
                         float(self.d_pair.mean()) if self.d_pair is not None else float("nan"), pair_state)


def _indicators(dec: Decisions, cell: str, draw: int) -> np.ndarray:
    """(9, N) change indicators over the non-identity maps: cell vs aligned at the same map (aligned: vs id)."""
    a = dec.actions[0, :, draw, 0]
    if cell == "aligned":
        return (a[1:] != a[0][None]).astype(np.float64)
    return (dec.actions[dec.cell_index(cell), 1:, draw, 0] != a[1:]).astype(np.float64)


def stream_signature(dec: Decisions, draw: int = 0) -> StreamSignature:
    """A_rekey, D_A^value and D_A^pair per stream (tasks → strata → the nine maps), for slot draw ``draw``."""
    def per_stream(cell: str) -> np.ndarray | None:
        if cell not in dec.plan.cell_names:
            return None
        return pool_tasks(_indicators(dec, cell, draw), dec).mean(axis=0)

    ar = per_stream("aligned")
    assert ar is not None
    return StreamSignature(ar, per_stream("value"), per_stream("pair"))


@cache
def _pair_distances(law: UpdateLaw, spec: SlotSpec) -> np.ndarray:
    """(S, 9, 6) aligned-vs-pair terminal-state distances per stream, derangement and stratum (the readout
    does not touch the state, so one computation serves every readout of a law)."""
    h, f, _e = _inputs()
    op = StateOperator(law, Readout.shared(np.zeros((1, law.exposed_dim))), name="state-probe")
    a = cell_states(op, h, labels=f.labels, cell="aligned", maps=DERANGEMENTS_4, spec=spec, blocks=f.strata)
    p = cell_states(op, h, labels=f.labels, cell="pair", maps=DERANGEMENTS_4, spec=spec, blocks=f.strata)
    return np.sqrt(((a.states - p.states) ** 2).sum(axis=-1))


def pair_state(op: StateOperator, spec: SlotSpec = SIGMA, *, blocks: str = "strata") -> float:
    """Mean aligned-vs-pair terminal-state distance over the contexts (``strata``: the 6 future strata,
    survival contributing 0 — the REC; ``learning``: the 4 learning blocks), the 9 maps and the streams."""
    d = _pair_distances(op.law, spec)
    if blocks == "learning":
        h, f, _e = _inputs()
        learning = set(zip(h.family.tolist(), h.context.tolist(), strict=True))
        d = d[:, :, [i for i, s in enumerate(f.strata) if s in learning]]
    return float(d.mean())


def max_pair_state(op: StateOperator, spec: SlotSpec = SIGMA) -> float:
    """The largest per-replicate (stream) pair-state distance (the pair-zero criterion reads ≤ 1e-9)."""
    return float(_pair_distances(op.law, spec).mean(axis=(1, 2)).max())


def operator_signature(agent: Agent, *, state: StateOperator | None = None, cells: str = "value,pair") -> Signature:
    """s(W) of ``agent`` on the synthetic OCRR trace under σ* (plus the pair-state diagnostic if ``state``)."""
    sig = stream_signature(replay_operator(agent, cells=cells))
    return sig.pooled(pair_state(state) if state is not None else None)


def _profiles(dec: Decisions) -> np.ndarray:
    """(S, ...) the complete per-stream response profile: change indicators of every cell and map, per task."""
    cells = [_indicators(dec, c, 0) for c in dec.plan.cell_names]
    ind = np.stack(cells)  # (C, 9, N)
    return np.stack([ind[:, :, dec.stream_idx == s] for s in range(len(dec.plan.streams))])


def _differing_streams(a: np.ndarray, b: np.ndarray) -> int:
    return int(sum(not np.array_equal(x, y) for x, y in zip(a, b, strict=True)))


def _distinct(profiles: Sequence[np.ndarray]) -> int:
    out: list[np.ndarray] = []
    for p in profiles:
        if not any(np.array_equal(p, q) for q in out):
            out.append(p)
    return len(out)


# ---------------------------------------------------------------- §1.1 canonical calibration


@dataclass(frozen=True, eq=False)
class _Calibration:
    ops: tuple[Operator, ...]
    decisions: tuple[Decisions, ...]
    signatures: tuple[Signature, ...]
    decoded: tuple[str, ...]


@cache
def canonical_calibration() -> _Calibration:
    """The 12 canonical writers under opaque ids: replay, decode (τ = 10⁻⁶), then open the families."""
    ops = canonical_operators()
    blind = BlindSet([(str(i), op.agent) for i, op in enumerate(ops)], seed=SEED, prefix="C")
    decs = {oid: replay_operator(blind.agent(oid), cells="value,pair,key_slot") for oid in blind.ids}
    sigs = {oid: stream_signature(d).pooled() for oid, d in decs.items()}
    blind.record({oid: decode_family(s) for oid, s in sigs.items()})
    hidden = blind.open()
    pred = blind.predictions
    by_op = {int(hidden[oid]): oid for oid in blind.ids}
    order = [by_op[i] for i in range(len(ops))]
    return _Calibration(ops, tuple(decs[o] for o in order), tuple(sigs[o] for o in order),
                        tuple(pred[o] for o in order))


PAPER_CALIBRATION = {  # family: (A_rekey, D_value, D_pair, Correct, Profiles)
    "invariant": (0.000, 0.000, 0.000, 3, 1), "key-only": (0.664, 0.000, 0.000, 3, 1),
    "commutative": (0.666, 0.163, 0.000, 3, 1), "order-sensitive": (0.667, 0.000, 0.090, 3, 2),
}
EXACT_ZERO = {("invariant", "A_rekey"), ("invariant", "D_A^value"), ("invariant", "D_A^pair"),
              ("key-only", "D_A^value"), ("key-only", "D_A^pair"), ("commutative", "D_A^pair")}


CALIBRATION_KINDS = Kinds(columns=(
    *(("tab:content-calibration", FAMILY_ROWS[fam], col, Kind.DESIGN) for fam, col in sorted(EXACT_ZERO)),
    ("tab:content-calibration", "A_rekey", Kind.PROPORTION), ("tab:content-calibration", "D_A^*", Kind.PROPORTION),
    ("tab:content-calibration", "n_op", Kind.DESIGN), ("tab:content-calibration", "Correct", Kind.COUNT),
    ("tab:content-calibration", "Profiles", Kind.COUNT),
    ("canonical exact checks", "streams where d=0.60 differs", Kind.COUNT),
    ("canonical exact checks", "correctly decoded", Kind.COUNT), ("canonical exact checks", "*", Kind.DESIGN)))
"""Structural zeros (``EXACT_ZERO``) are design, measured responses shares; family sizes are design; decoded and
profile counts are measured (the order-sensitive d = 0.60 profile count among them)."""


@register_reproduction("content-calibration", "Canonical operator calibration: blinded signatures and decoder",
                       issue="3", kinds=CALIBRATION_KINDS)
def content_calibration() -> list[Comparison]:
    cal = canonical_calibration()
    rows: list[Comparison] = []
    for fam in FAMILIES:
        idx = [i for i, op in enumerate(cal.ops) if op.family == fam]
        sig = np.array([cal.signatures[i].as_tuple() for i in idx]).mean(axis=0)
        correct = sum(cal.decoded[i] == fam for i in idx)
        profiles = _distinct([_profiles(cal.decisions[i]) for i in idx])
        pa = PAPER_CALIBRATION[fam]
        for col, p, o in zip(("A_rekey", "D_A^value", "D_A^pair"), pa[:3], sig, strict=True):
            exact = (fam, col) in EXACT_ZERO
            tol = 0.0 if exact else (0.01 if col == "A_rekey" else 0.03)
            note = "structural zero (exact for any trace and draw)" if exact else NOTE
            if fam == "commutative" and col == "D_A^value":
                note = ("substrate-dependent: how often a value reassignment flips a block's best micro-sum; "
                        + NOTE)
            if fam == "order-sensitive" and col == "D_A^pair":
                note = ("substrate-dependent: for d ≤ 0.2 the action is the block's last label, so D_A^pair is "
                        "(4/6 ×) the rate at which σ* moves a different label into a block's last slot — a property "
                        "of the trace's label mix at σ*(48), which we cannot rebuild; " + NOTE)
            if fam == "order-sensitive" and col == "D_A^value":
                note = "≈0 by construction (utilities enter only through 0.01·c(u)); " + NOTE
            rows.append(compare("tab:content-calibration", FAMILY_ROWS[fam], col, p, float(o), tol, note))
        rows.append(compare("tab:content-calibration", FAMILY_ROWS[fam], "n_op", 3, len(idx), 0))
        rows.append(compare("tab:content-calibration", FAMILY_ROWS[fam], "Correct", pa[3], correct, 0,
                            "decoded blind (opaque ids) with τ = 1e-6"))
        rows.append(compare("tab:content-calibration", FAMILY_ROWS[fam], "Profiles", pa[4], profiles, 0,
                            "distinct complete per-stream response profiles (every cell, map and task)"))
    # α-scaling invariance: identical action tables
    for fam in ("invariant", "key-only", "commutative"):
        idx = [i for i, op in enumerate(cal.ops) if op.family == fam]
        mism = sum(int((cal.decisions[i].actions != cal.decisions[idx[0]].actions).sum()) for i in idx[1:])
        rows.append(compare("canonical exact checks", FAMILY_ROWS[fam], "α ∈ {0.5, 1, 2} action-table mismatches",
                            0, mism, 0, "positive scaling preserves the argmax (exact micro-unit sums)"))
    od = [i for i, op in enumerate(cal.ops) if op.family == "order-sensitive"]
    p05, p20, p60 = (_profiles(cal.decisions[i]) for i in od)
    rows.append(compare("canonical exact checks", "Order-sensitive", "streams where d=0.05 and d=0.20 differ", 0,
                        _differing_streams(p05, p20), 0, "for d ≤ 0.2 the argmax is the block's last label"))
    rows.append(compare("canonical exact checks", "Order-sensitive", "streams where d=0.60 differs", 14,
                        _differing_streams(p20, p60), 7,
                        "trace-dependent (near-ties of the decayed counts); tolerance 0.15 of 48 streams"))
    rows.append(compare("canonical exact checks", "Order-sensitive d=0.20", "actions ≠ last label of the block", 0,
                        _last_label_mismatches(cal.decisions[od[1]]), 0, "d/(1−d)·1.005 < 0.995"))
    rows.append(compare("canonical exact checks", "all 12 writers", "correctly decoded", 12,
                        sum(cal.decoded[i] == op.family for i, op in enumerate(cal.ops)), 0,
                        "predeclared decoder on s(W), applied before the opaque ids were opened"))
    return rows


def _last_label_mismatches(dec: Decisions) -> int:
    """Aligned-identity actions of learning strata that differ from the last label of the stratum's block."""
    h, _f, _e = _inputs()
    code = {lab: i for i, lab in enumerate(dec.plan.labels)}
    last: dict[tuple[str, tuple[str, str]], int] = {}
    for r in h.records():
        last[(r.stream, r.block)] = code[r.key]
    acts = dec.actions[0, 0, 0, 0]
    bad = 0
    for i in range(dec.n_tasks):
        key = (dec.plan.streams[int(dec.stream_idx[i])], dec.plan.strata[int(dec.stratum_idx[i])])
        if key in last and int(acts[i]) != last[key]:
            bad += 1
    return bad


# ---------------------------------------------------------------- §1.2 composites


@cache
def composite_signatures() -> tuple[tuple[Operator, Signature], ...]:
    ops = composite_operators()
    blind = BlindSet([(str(i), op.agent) for i, op in enumerate(ops)], seed=SEED, prefix="H")
    sigs = {oid: operator_signature(blind.agent(oid)) for oid in blind.ids}
    blind.record({oid: decode_family(s) for oid, s in sigs.items()})
    hidden = blind.open()
    return tuple((ops[int(hidden[oid])], sigs[oid]) for oid in sorted(blind.ids, key=lambda o: int(hidden[o])))


PAPER_COMPOSITE = {"value-order": ("Value–order", 4, 0.000, 0.162, 0.162),
                   "key-value": ("Key–value", 2, 0.667, 0.021, 0.000),
                   "key-order": ("Key–order", 2, 0.665, 0.160, 0.142)}


COMPOSITE_KINDS = Kinds(columns=(("tab:hidden-operator-holdout", "n", Kind.DESIGN),
                                  ("tab:hidden-operator-holdout", "Value–order", "A_rekey", Kind.DESIGN),
                                  ("tab:hidden-operator-holdout", "Key–value", "D_A^pair", Kind.DESIGN),
                                  ("tab:hidden-operator-holdout", "*", Kind.PROPORTION),
                                  ("composite exact checks", "*", Kind.DESIGN)))


@register_reproduction("content-composite", "Held-out composite operators: blinded direct signatures", issue="3",
                       kinds=COMPOSITE_KINDS)
def content_composite() -> list[Comparison]:
    res = composite_signatures()
    rows: list[Comparison] = []
    for fam, (name, n, *pa) in PAPER_COMPOSITE.items():
        sel = [s for op, s in res if op.family == fam]
        sig = np.array([s.as_tuple() for s in sel]).mean(axis=0)
        rows.append(compare("tab:hidden-operator-holdout", name, "n", n, len(sel), 0))
        for col, p, o in zip(("A_rekey", "D_A^value", "D_A^pair"), pa, sig, strict=True):
            exact = (fam == "value-order" and col == "A_rekey") or (fam == "key-value" and col == "D_A^pair")
            tol = 0.0 if exact else (0.01 if col == "A_rekey" else 0.03)
            note = "structural zero (label-free / commutative law)" if exact else NOTE
            rows.append(compare("tab:hidden-operator-holdout", name, col, p, float(o), tol, note))
    vo = [(op, s) for op, s in res if op.family == "value-order"]
    rows.append(compare("composite exact checks", "Value–order (each writer)", "max |D_A^value − D_A^pair|", 0.0,
                        max(abs(s.d_value - s.d_pair) for _op, s in vo), 0.0, "label-free state and σ_p = σ_v"))
    for d in (0.10, 0.65):
        pair = [s for op, s in vo if op.agent.spec.get("d") == d]
        rows.append(compare("composite exact checks", f"Value–order d={d:.2f}", "scalar − vector D_A^value", 0.0,
                            pair[0].d_value - pair[1].d_value, 0.0, "sign readouts: D depends only on d"))
    return rows


# ---------------------------------------------------------------- §1.3 / §1.4 coefficient-randomized


def _state_signature(op: Operator, cells: str = "value,pair") -> Signature:
    assert op.state is not None
    return operator_signature(op.agent, state=op.state, cells=cells)


RANDOM_OPERATOR_KINDS = Kinds(columns=(
    ("tab:random-operator-stress", "n", Kind.DESIGN),
    ("tab:random-operator-stress", "Commutative sum", "D_A^pair", Kind.DESIGN),
    ("tab:random-operator-stress", "Commutative sum", "Pair-state", Kind.DESIGN),
    ("tab:random-operator-stress", "Pair-state", Kind.MAGNITUDE),
    ("tab:random-operator-stress", "A_rekey", Kind.PROPORTION),
    ("tab:random-operator-stress", "D_A^*", Kind.PROPORTION),
    ("tab:random-operator-stress", "operators with nonzero pair action or state", Kind.DESIGN)))


@register_reproduction("random-operators", "Coefficient-randomized online operators (24 writers)", issue="3",
                       kinds=RANDOM_OPERATOR_KINDS)
def random_operator_stress() -> list[Comparison]:
    ops = random_operators()
    sigs = [_state_signature(op) for op in ops]
    rows: list[Comparison] = []
    paper = {"random-commutative": ("Commutative sum", 0.487, 0.034, 0.000, 0.000),
             "random-recurrent": ("Affine recurrent", 0.498, 0.187, 0.226, 0.450)}
    for fam, (name, *pa) in paper.items():
        sel = [s for op, s in zip(ops, sigs, strict=True) if op.family == fam]
        comm = fam == "random-commutative"
        vals = (np.mean([s.a_rekey for s in sel]), np.mean([s.d_value for s in sel]),
                np.mean([s.d_pair for s in sel]), np.mean([s.pair_state or 0.0 for s in sel]))
        rows.append(compare("tab:random-operator-stress", name, "n", 12, len(sel), 0))
        for col, p, o in zip(("A_rekey", "D_A^value", "D_A^pair", "Pair-state"), pa, vals, strict=True):
            exact = comm and col in ("D_A^pair", "Pair-state")
            tol = 0.0 if exact else (0.10 if col == "Pair-state" else 0.05)
            note = "exact zero for every commutative operator" if exact else COEF_NOTE
            if col == "Pair-state" and not exact:
                four = np.mean([pair_state(op.state, blocks="learning") for op in ops  # type: ignore[arg-type]
                                if op.family == fam])
                note = (f"averaged over the 6 strata (REC; survival 0); over the 4 learning blocks: {four:.3f}; "
                        + AFFINE_NOTE.format(ratio=float(o) / p) + note)
            rows.append(compare("tab:random-operator-stress", name, col, p, float(o), tol, note))
        if comm:
            rows.append(compare("tab:random-operator-stress", name, "operators with nonzero pair action or state", 0,
                                sum((s.d_pair > 0) or ((s.pair_state or 0.0) > 1e-9) for s in sel), 0,
                                "the commutative zeros hold for all 12 operators individually"))
    return rows


READOUT_KINDS = Kinds(columns=(
    ("readout exact checks", "*", Kind.DESIGN), ("tab:readout-invariance", "* / Commutative", "*", Kind.DESIGN),
    ("tab:readout-invariance", "D_A^pair", Kind.PROPORTION), ("tab:readout-invariance", "State", Kind.MAGNITUDE),
    ("tab:readout-invariance", "n_*", Kind.COUNT)))
"""Commutative writers' pair responses are exact zeros under every readout; the recurrent ones are measured."""


@register_reproduction("readout-invariance", "Pair responses under coordinate, orthogonal and mixed readouts",
                       issue="3", kinds=READOUT_KINDS)
def readout_invariance() -> list[Comparison]:
    ops = readout_operators()
    rows: list[Comparison] = []
    sigs = {id(op): _state_signature(op, cells="pair") for op in ops}
    paper = {"coordinate": (0.189, 0.518), "orthogonal": (0.215, 0.518), "mixed": (0.211, 0.518)}
    for basis, (p_da, p_st) in paper.items():
        for law, name in (("commutative", "Commutative"), ("recurrent", "Recurrent")):
            sel = [sigs[id(op)] for op in ops if op.family == f"readout-{law}" and op.label.endswith(basis)]
            da = float(np.mean([s.d_pair for s in sel]))
            st = float(np.mean([s.pair_state or 0.0 for s in sel]))
            n_a = sum(s.d_pair > 0 for s in sel)
            n_s = sum((s.pair_state or 0.0) > 1e-9 for s in sel)
            comm = law == "commutative"
            tab = "tab:readout-invariance"
            rows += [
                compare(tab, f"{basis} / {name}", "D_A^pair", 0.0 if comm else p_da, da, 0.0 if comm else 0.05,
                        "exact zero (commutative)" if comm else COEF_NOTE),
                compare(tab, f"{basis} / {name}", "State", 0.0 if comm else p_st, st, 0.0 if comm else 0.10,
                        "exact zero (commutative)" if comm else
                        "6-strata average (REC); " + AFFINE_NOTE.format(ratio=st / p_st) + COEF_NOTE),
                compare(tab, f"{basis} / {name}", "n_A", 0 if comm else 12, n_a, 0 if comm else 1, COEF_NOTE),
                compare(tab, f"{basis} / {name}", "n_S", 0 if comm else 12, n_s, 0, "state response is structural"),
            ]
    rec = [sigs[id(op)].pair_state or 0.0 for op in ops if op.family == "readout-recurrent"]
    spread = max(float(np.ptp(rec[i:i + 3])) for i in range(0, len(rec), 3))
    rows.append(compare("readout exact checks", "every writer", "max state-distance spread across its 3 readouts",
                        0.0, spread, 0.0, "the readout does not touch the state"))
    return rows


# ---------------------------------------------------------------- §1.5 nonlinear


NONLINEAR_KINDS = Kinds(columns=(
    ("nonlinear exact checks", "*", Kind.DESIGN),
    ("tab:content-nonlinear", "Nonlinear commutative *", "State", Kind.DESIGN),
    ("tab:content-nonlinear", "Nonlinear commutative *", "Pair", Kind.DESIGN),
    ("tab:content-nonlinear", "State", Kind.MAGNITUDE), ("tab:content-nonlinear", "*", Kind.PROPORTION)))
"""The commutative writer's pair state and action are exact zeros; distances are non-negative, responses shares."""


@register_reproduction("content-nonlinear", "Independent nonlinear state-coordinate check (draws A and B)", issue="3",
                       kinds=NONLINEAR_KINDS)
def content_nonlinear() -> list[Comparison]:
    ops = nonlinear_operators()
    rows: list[Comparison] = []
    res: dict[str, list[tuple[Signature, Signature]]] = {"nonlinear-commutative": [], "nonlinear-recurrent": []}
    max_state_comm = max_action_comm = 0.0
    for op in ops:
        assert op.state is not None
        dec = replay_operator(op.agent, draws=(SIGMA, SIGMA_B))
        st_a, st_b = pair_state(op.state, SIGMA), pair_state(op.state, SIGMA_B)
        sa, sb = stream_signature(dec, 0), stream_signature(dec, 1)
        if op.family == "nonlinear-commutative":
            max_state_comm = max(max_state_comm, max_pair_state(op.state, SIGMA), max_pair_state(op.state, SIGMA_B))
            max_action_comm = max(max_action_comm, *(float(np.max(x.d_pair)) for x in (sa, sb) if x.d_pair is not None))
        res[op.family].append((sa.pooled(st_a), sb.pooled(st_b)))
    paper = {"nonlinear-commutative": ("Nonlinear commutative", (0.000, 0.000, 0.030, 0.465),
                                       (0.000, 0.000, 0.031, 0.465)),
             "nonlinear-recurrent": ("Nonlinear recurrent", (0.439, 0.218, 0.180, 0.510),
                                     (0.441, 0.221, 0.185, 0.510))}
    for fam, (name, pa, pb) in paper.items():
        comm = fam == "nonlinear-commutative"
        for k, (draw, pp) in enumerate((("A", pa), ("B", pb))):
            sel = [pair[k] for pair in res[fam]]
            vals = (np.mean([s.pair_state or 0.0 for s in sel]), np.mean([s.d_pair for s in sel]),
                    np.mean([s.d_value for s in sel]), np.mean([s.a_rekey for s in sel]))
            for col, p, o in zip(("State", "Pair", "Value", "Rekey"), pp, vals, strict=True):
                exact = comm and col in ("State", "Pair")
                tol = 0.0 if exact else (0.10 if col == "State" else 0.05)
                note = "pair-zero law (≤ 1e-9 for every replicate)" if exact else COEF_NOTE
                rows.append(compare("tab:content-nonlinear", f"{name} (draw {draw})", col, p, float(o), tol, note))
    for fam in res:
        ra = [a.a_rekey for a, _b in res[fam]]
        rb = [b.a_rekey for _a, b in res[fam]]
        rows.append(compare("nonlinear exact checks", fam, "max |rekey(A) − rekey(B)|", 0.0,
                            float(np.max(np.abs(np.subtract(ra, rb)))), 0.0, "rekey uses only the aligned cell"))
    rows.append(compare("nonlinear exact checks", "nonlinear-commutative", "max per-replicate pair-state distance",
                        0.0, float(max_state_comm), 1e-9, "pair-zero criterion (exact fixed-point sums give 0)"))
    rows.append(compare("nonlinear exact checks", "nonlinear-commutative", "max per-replicate pair action", 0.0,
                        max_action_comm, 1e-9, "pair-zero criterion, both draws"))
    return rows


# ---------------------------------------------------------------- §1.6 family-blind calibration


@dataclass(frozen=True, eq=False)
class BlindResult:
    draw: str
    ids: tuple[str, ...]
    signatures: dict[str, Signature]
    predictions: dict[str, str]
    operators: dict[str, Operator]
    protocol: tuple[str, ...]


def _blind_signature(agent: Agent) -> Signature:
    return stream_signature(replay_operator(agent, cells="pair")).pooled()


@cache
def family_blind(draw: str) -> BlindResult:
    """Run one draw of the challenge: decoder frozen (``PAIR_DECODER``), writers generated, signatures
    computed under opaque ids, predictions recorded, then the hidden assignment opened."""
    ch = blind_challenge(PAIR_DECODER, draw)
    sigs = ch.run(_blind_signature)
    preds = ch.blind.predictions
    ops = ch.open()
    full = {oid: Signature(s.a_rekey, s.d_value, s.d_pair, pair_state(ops[oid].state))  # type: ignore[arg-type]
            for oid, s in sigs.items()}
    return BlindResult(draw, ch.blind.ids, full, preds, ops, tuple(ch.protocol))


PAPER_CONTENT_BLIND = {("A", "pair-preserving"): 16, ("A", "pair-displacing"): 15, ("B", "pair-preserving"): 16,
                       ("B", "pair-displacing"): 16}
PAPER_RELATION = {"pair-preserving": (16, 0.000, 0.000, 1.000), "pair-displacing": (16, 0.161, 0.470, 0.938),
                  "all": (32, 0.081, 0.235, 0.969)}
PAPER_THRESHOLDS = {0.025: (1.000, 1.000, 1.000), 0.050: (0.969, 1.000, 0.938), 0.075: (0.906, 1.000, 0.813),
                    0.100: (0.906, 1.000, 0.813), 0.125: (0.844, 1.000, 0.688), 0.150: (0.781, 1.000, 0.563)}
STATE_NOTE = ("pair state is a diagnostic (never decoded); its scale follows the unspecified coefficient laws — the "
              "position-mixed accumulator is unbounded (ours ≈ 4–7), the bilinear one tanh-bounded (ours ≈ 0.5–0.7); ")


def _correct(r: BlindResult, ids: Sequence[str]) -> int:
    return sum(r.predictions[i] == r.operators[i].target for i in ids)


def _content_blind_rows(res: dict[str, BlindResult]) -> list[Comparison]:
    rows: list[Comparison] = []
    total = 0
    for (draw, target), pc in PAPER_CONTENT_BLIND.items():
        r = res[draw]
        ids = [i for i in r.ids if r.operators[i].target == target]
        ok = _correct(r, ids)
        total += ok
        pres = target == "pair-preserving"
        note = ("structural: a pair-preserving law gives exactly zero pair action" if pres else
                "resolution-limited (the paper's miss had pair action 0.047 < 0.050); tolerance one writer")
        row = f"{draw} {target}"
        rows += [compare("tab:content-blind", row, "Total", 16, len(ids), 0),
                 compare("tab:content-blind", row, "Correct", pc, ok, 0 if pres else 1, note),
                 compare("tab:content-blind", row, "Accuracy", pc / 16, ok / len(ids), 0.0 if pres else 1 / 16,
                         note)]
    misses = [f"{i} ({res[d].operators[i].family}, pair action {res[d].signatures[i].d_pair:.3f}, state "
              f"{res[d].signatures[i].pair_state or 0.0:.3f})" for d in res for i in res[d].ids
              if res[d].predictions[i] != res[d].operators[i].target]
    note = f"misses: {', '.join(misses) or 'none'}; the paper's single miss was in draw A; tolerance one writer"
    rows += [compare("tab:content-blind", "A+B all challenge writers", "Correct", 63, total, 1, note),
             compare("tab:content-blind", "A+B all challenge writers", "Accuracy", 63 / 64, total / 64, 1 / 64,
                     note)]
    return rows


def _relation_rows(r: BlindResult) -> list[Comparison]:
    rows: list[Comparison] = []
    tab = "tab:blind-relation-challenge"
    for target, (n, p_act, p_state, p_acc) in PAPER_RELATION.items():
        ids = [i for i in r.ids if target == "all" or r.operators[i].target == target]
        pres = target == "pair-preserving"
        act = float(np.mean([r.signatures[i].d_pair for i in ids]))
        state = float(np.mean([r.signatures[i].pair_state or 0.0 for i in ids]))
        acc_tol = 0.0 if pres else 1 / len(ids)
        rows += [compare(tab, target, "n", n, len(ids), 0),
                 compare(tab, target, "Pair action", p_act, act, 0.0 if pres else 0.05,
                         "exact zero" if pres else COEF_NOTE),
                 compare(tab, target, "Pair state", p_state, state, 0.0 if pres else 0.10,
                         "exact zero (fixed-point sums)" if pres else STATE_NOTE + "6-strata average (REC)"),
                 compare(tab, target, "Calibration accuracy", p_acc, _correct(r, ids) / len(ids), acc_tol,
                         "structural" if pres else "tolerance one writer")]
    return rows


def _writer_rows(res: dict[str, BlindResult]) -> list[Comparison]:
    """The per-writer table, opened after decoding (the paper prints none: paper = n/a)."""
    rows: list[Comparison] = []
    for r in res.values():
        for oid in r.ids:
            op, sig, pred = r.operators[oid], r.signatures[oid], r.predictions[oid]
            note = f"{op.family} {op.label}; target {op.target}; decoded {pred}{'' if pred == op.target else ' (MISS)'}"
            rows += [compare("blind per-writer", oid, "pair action", None, sig.d_pair, None, note),
                     compare("blind per-writer", oid, "pair state", None, sig.pair_state, None, note),
                     compare("blind per-writer", oid, "correct", None, float(pred == op.target), None, note)]
    return rows


def _threshold_rows(res: dict[str, BlindResult]) -> list[Comparison]:
    """tab:blind-threshold-sensitivity: the stored draw-A signatures re-thresholded (and A+B for reference)."""
    def grid(rs: Sequence[BlindResult]) -> list[ThresholdRow]:
        x = [r.signatures[i].d_pair for r in rs for i in r.ids]
        y = [r.operators[i].target == "pair-displacing" for r in rs for i in r.ids]
        return threshold_sensitivity(x, y, THRESHOLD_GRID)

    rows: list[Comparison] = []
    tab = "tab:blind-threshold-sensitivity"
    for row, both in zip(grid([res["A"]]), grid(list(res.values())), strict=True):
        p_acc, p_spec, p_sens = PAPER_THRESHOLDS[round(row.threshold, 3)]
        t = f"{row.threshold:.3f}"
        rows += [compare(tab, t, "Accuracy", p_acc, row.accuracy, 2 / 32, "tolerance two writers; " + COEF_NOTE),
                 compare(tab, t, "Specificity", p_spec, row.specificity, 0.0, "structural: no false positive"),
                 compare(tab, t, "Sensitivity", p_sens, row.sensitivity, 2 / 16,
                         "tolerance two writers; " + COEF_NOTE),
                 compare(tab, t, "Accuracy (A+B, 64 writers)", None, both.accuracy, None,
                         f"sensitivity {both.true_positives}/{both.positives}, specificity "
                         f"{both.true_negatives}/{both.negatives}")]
    return rows


BLIND_KINDS = Kinds(columns=(
    ("tab:content-blind", "* pair-preserving", "Correct", Kind.DESIGN),
    ("tab:content-blind", "* pair-preserving", "Accuracy", Kind.DESIGN),
    ("tab:blind-relation-challenge", "pair-preserving", "*", Kind.DESIGN),
    ("tab:blind-relation-challenge", "Pair action", Kind.PROPORTION),
    ("tab:blind-relation-challenge", "Pair state", Kind.MAGNITUDE),
    ("tab:blind-relation-challenge", "Calibration accuracy", Kind.PROPORTION),
    ("tab:content-blind", "Total", Kind.DESIGN), ("tab:content-blind", "Correct", Kind.COUNT),
    ("tab:content-blind", "Accuracy", Kind.PROPORTION), ("tab:blind-relation-challenge", "n", Kind.DESIGN),
    ("tab:blind-threshold-sensitivity", "Accuracy", Kind.PROPORTION),
    ("tab:blind-threshold-sensitivity", "Specificity", Kind.DESIGN),
    ("tab:blind-threshold-sensitivity", "Sensitivity", Kind.PROPORTION)))
"""Pair-preserving writers have exactly zero pair responses and decode exactly (design); the rest are measured."""


@register_reproduction("family-blind", "Family-blind calibration of the pair law (threshold 0.050 frozen)", issue="3",
                       kinds=BLIND_KINDS)
def family_blind_repro() -> list[Comparison]:
    res = {d: family_blind(d) for d in ("A", "B")}
    rows = _content_blind_rows(res) + _relation_rows(res["A"]) + _threshold_rows(res) + _writer_rows(res)
    rows.append(compare("blind protocol", "draw A", "steps, in order", None, float(len(res["A"].protocol)), None,
                        " → ".join(res["A"].protocol)))
    return rows
