"""Synthetic hidden-world substrate: controller matrix and the structural-control suite (issue 3).

Reproductions (paper tables in shared/spec/core.md §7.15, §8.5 and partA §4):

* ``condition-summary`` — closed-loop controller matrix (tab:condition-summary) and the
  confirmatory / secondary contrasts (partA §4.2, tab:secondary-comparison);
* ``content-contrasts`` — replay interactions (Panel A) and written − empty (Panel B);
* ``representation-controls`` — matched state variants (OCRR, UCB1, Local-only, Global-only, TP);
* ``representation-interaction`` — the paired OCRR − TP placebo interaction with intervals and p;
* ``semantic-null`` — OCRR − value null / − time placebo / value null − time placebo with intervals,
  and the pair-preserving placebo; per-writer aligned − time interactions (shared TP placebo);
* ``action-divergence`` — Permutation replay (cyclic ARMC) vs OCRR per stratum;
* ``label-controls`` — label-equivariance calibration (24 permutations) and the label-invariant control;
* ``time-cell`` — labels changed by σ_t on the OCRR trace.

All of them share one world (48 streams) and one OCRR trace, built once per process.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

import numpy as np

from ...agents import Agent, FutureInput, TaskInput, from_callables
from ...inference import cluster_bootstrap, sign_flip_test
from ...maps import DERANGEMENTS_4, SlotSpec, all_permutations, stream_perm
from ...readouts import StreamValues, delta, gamma, pool_tasks
from ...replay import Decisions, replay
from ...rng import derive_seed
from ..controllers import (
    AgentController,
    ClosedLoopResult,
    ExtraSampling,
    GenericMemory,
    GenericSkill,
    NoUpdate,
    SelectedStatic,
    ShuffledOutcome,
    StaticPredictor,
    condition_summary,
    ocrr_agent,
    run_closed_loop,
)
from ..reproduce import Comparison, Interval, Kind, Kinds, compare, register_reproduction
from ..substrates.synthetic import SyntheticWorld, build_synthetic

SEED = 20260822
SIGMA = SlotSpec(value_seed=20260824, time_seed=20260822, reorder_seed=20260825)
B = 20_000
NOTE = ("substrate reconstructed from the spec's RECs (draws differ from the paper's); substrate means "
        "within 0.03, structural values exact")


@dataclass(frozen=True, eq=False)
class Suite:
    world: SyntheticWorld
    ocrr: ClosedLoopResult
    decisions: dict[str, Decisions]


@cache
def suite() -> Suite:
    """The world, the OCRR closed-loop trace and the replays of every state variant (cached)."""
    world = build_synthetic(48, seed=SEED)
    arms = tuple(world.arms)
    ocrr = run_closed_loop(world, AgentController(ocrr_agent("ocrr"), arms), seed=SEED)
    h, f, e = world.history(ocrr.adapt_actions), world.futures(), world.evaluator()
    decs = {}
    for v in ("ocrr", "ucb1", "local-only", "global-only"):
        cells = "value,pair,key_slot" if v == "ocrr" else "key_slot"
        decs[v] = replay(h, f, e, ocrr_agent(v), cells=cells, maps="derangements", draws=[SIGMA], seed=SEED)
    return Suite(world, ocrr, decs)


def _ci(values: np.ndarray, tag: str) -> tuple[float, float, float, float]:
    bs = cluster_bootstrap(values, n_resamples=B, rng=derive_seed(SEED, "ci", tag))
    p = sign_flip_test(values, n_resamples=B, rng=derive_seed(SEED, "sf", tag)).pvalue
    return float(values.mean()), float(np.asarray(bs.low)), float(np.asarray(bs.high)), float(p)


def _rows(table: str, row: str, paper: Mapping[str, float | None], ours: dict[str, float], tol: float,
          note: str = NOTE) -> list[Comparison]:
    return [compare(table, row, col, paper.get(col), ours[col], tol, note) for col in ours]


# ---------------------------------------------------------------- condition summary and contrasts


@cache
def _matrix() -> dict[str, ClosedLoopResult]:
    s = suite()
    w = s.world
    arms = tuple(w.arms)
    out = {"OCRR": s.ocrr}
    for name, ctl in (("No update", NoUpdate(arms)), ("Static predictor", StaticPredictor(arms)),
                      ("Generic memory", GenericMemory(arms)), ("Generic skill", GenericSkill(arms)),
                      ("Extra sampling", ExtraSampling(arms)), ("Shuffled outcome", ShuffledOutcome(arms)),
                      ("Selected static", SelectedStatic(arms)),
                      ("Contextual UCB", AgentController(ocrr_agent("ucb1"), arms))):
        out[name] = run_closed_loop(w, ctl, seed=SEED)
    return out


PAPER_SUMMARY = {  # condition: (adapt utility, adapt gap, future utility, future gap)
    "No update": (0.544, 0.222, 0.461, 0.158), "Static predictor": (0.437, 0.329, 0.467, 0.153),
    "Generic memory": (0.555, 0.211, 0.421, 0.199), "Generic skill": (0.613, 0.153, 0.365, 0.255),
    "Extra sampling": (0.347, 0.419, 0.333, 0.287), "Shuffled outcome": (0.363, 0.403, 0.326, 0.294),
    "OCRR": (0.627, 0.139, 0.469, 0.151),
}


_PRIMARY = ("the paper's primary OCRR − No update contrast on the primary matrix, +0.008 [−0.001, +0.016], p = 0.0795 "
            "(L2020); the pooled +0.015 [+0.008, +0.021] of L2026 is the disjoint-stream reconstruction (48 other "
            "streams), not reproduced here")
_ZERO_WORDS = ("the paper prints no per-stratum value; its text says only that the stratified table keeps 'the "
               "zero-utility primary rows' (L2020)")
CONDITION_SUMMARY_KINDS = Kinds(
    columns=(("tab:condition-summary", "utility", Kind.ESTIMATE),
             ("tab:condition-summary", "oracle gap", Kind.MAGNITUDE),
             ("partA §4.2 contrasts", "estimate", Kind.ESTIMATE),
             ("partA §4.2 contrasts", "utility per effective cost", Kind.ESTIMATE),
             ("OCRR − No update by stratum", "future utility", Kind.ESTIMATE),
             ("OCRR − No update by stratum", "opposite signs, low positive*", Kind.INDICATOR)),
    intervals=(Interval("partA §4.2 contrasts", "estimate", "lower", "upper"),),
    derived=(("OCRR − No update by stratum", "source/*", "future utility", _ZERO_WORDS),
             ("OCRR − No update by stratum", "survival/*", "future utility", _ZERO_WORDS)))
"""Utility levels are signed estimates, oracle gaps non-negative; the per-stratum zeros rest on words (L2020)."""


@register_reproduction("condition-summary", "Closed-loop controller matrix and controller contrasts", issue="3",
                       kinds=CONDITION_SUMMARY_KINDS)
def condition_summary_repro() -> list[Comparison]:
    s = suite()
    mats = _matrix()
    rows: list[Comparison] = []
    names = list(PAPER_SUMMARY)
    res = [mats[n] for n in names]
    summ = condition_summary(s.world, res)
    for r in summ:
        name = names[[x.controller for x in res].index(r["condition"])]
        pa = PAPER_SUMMARY[name]
        i = 0 if r["split"] == "adaptation" else 2
        rows.append(compare("tab:condition-summary", f"{name} ({r['split']})", "utility", pa[i], r["utility"], 0.03,
                            NOTE))
        rows.append(compare("tab:condition-summary", f"{name} ({r['split']})", "oracle gap", pa[i + 1],
                            r["oracle_gap"], 0.03, NOTE))
    fut = {n: m.future_utility for n, m in mats.items()}

    def contrast(a: str, b: str, tag: str) -> np.ndarray:
        return (fut[a] - fut[b]).mean(axis=(1, 2))

    for (a, b), pci in ((("OCRR", "No update"), (0.008, -0.001, 0.016)),
                          (("OCRR", "Shuffled outcome"), (0.143, 0.116, 0.171)),
                          (("OCRR", "Selected static"), (0.006, -0.006, 0.017)),
                          (("OCRR", "Contextual UCB"), (0.136, 0.122, 0.150)),
                          (("Selected static", "Static predictor"), (-0.004, -0.011, 0.003))):
        est, lo, hi, _p = _ci(contrast(a, b, a + b), f"{a}-{b}")
        row = f"{a} − {b}"
        note = f"{_PRIMARY}; {NOTE}" if (a, b) == ("OCRR", "No update") else NOTE  # on the estimate's row
        rows += [compare("partA §4.2 contrasts", row, "estimate", pci[0], est, 0.03, note),
                 compare("partA §4.2 contrasts", row, "lower", pci[1], lo, 0.03, NOTE),
                 compare("partA §4.2 contrasts", row, "upper", pci[2], hi, 0.03, NOTE)]
    # OCRR − No update exactly 0 in source and survival strata (if mixed dominates there)
    strata = list(s.world.strata)
    d = (fut["OCRR"] - fut["No update"]).mean(axis=(0, 2))
    derived = ("spec partA §4.2 target (from the pooled +0.008 and the low − high interaction +0.161); the paper "
               "prints no per-stratum value, only that the stratified table 'retains the opposite temporal-regime "
               "signs and the zero-utility primary rows' (L2020)")
    for i, st in enumerate(strata):
        if st[0] in ("source", "survival"):
            rows.append(compare("OCRR − No update by stratum", "/".join(st), "future utility", 0.0, float(d[i]), 0.0,
                                "exact zero requires OCRR's frozen action to be `mixed` there; " + NOTE))
        else:
            pz = 0.105 if st == ("temporal", "low") else -0.057
            rows.append(compare("OCRR − No update by stratum", "/".join(st), "future utility", pz, float(d[i]), 0.06,
                                NOTE, derived=derived))
    t_lo, t_hi = (float(d[strata.index(("temporal", r))]) for r in ("low", "high"))
    rows.append(compare("OCRR − No update by stratum", "temporal low vs high",
                        "opposite signs, low positive (1 = yes; paper L2020 with the +0.161 interaction)", 1.0,
                        float(t_lo > 0 > t_hi), 0.0, NOTE))
    lo_hi = (fut["OCRR"] - fut["No update"])[:, strata.index(("temporal", "low"))].mean(1) - \
        (fut["OCRR"] - fut["No update"])[:, strata.index(("temporal", "high"))].mean(1)
    est, _lo, _hi, _p = _ci(lo_hi, "temporal-interaction")
    rows.append(compare("partA §4.2 contrasts", "temporal low − high of (OCRR − No update)", "estimate", 0.161, est,
                        0.06, NOTE))
    upc = fut["OCRR"].mean() / 10 - fut["Extra sampling"].mean() / 30
    rows.append(compare("partA §4.2 contrasts", "OCRR − Extra sampling", "utility per effective cost", 0.036,
                        float(upc), 0.01, NOTE))
    return rows


# ---------------------------------------------------------------- structural suite


def _variant_row(dec: Decisions, cell: str) -> dict[str, float]:
    du = delta(dec, "U", cell)
    da = delta(dec, "A", cell)
    do = delta(dec, "O", cell)
    per_map = du.by_map.mean(axis=1)
    return {"Mean utility": du.estimate, "Minimum": float(per_map.min()), "Maximum": float(per_map.max()),
            "Action": da.estimate, "Oracle": do.estimate}


PAPER_CONTROLS = {
    "OCRR": (0.196, 0.024, 0.330, 0.938, -0.293), "UCB1": (0.002, -0.138, 0.090, 0.519, 0.022),
    "Local-only": (0.114, 0.016, 0.179, 0.645, -0.176), "Global-only": (0.171, -0.024, 0.373, 1.000, -0.139),
    "TP placebo": (-0.127, -0.207, 0.022, 0.986, 0.134),
}


REPRESENTATION_CONTROLS_KINDS = Kinds(columns=(
    ("tab:representation-controls", "Mean utility", Kind.ESTIMATE),
    ("tab:representation-controls", "Minimum", Kind.ESTIMATE),
    ("tab:representation-controls", "Maximum", Kind.ESTIMATE),
    ("tab:representation-controls", "Action", Kind.PROPORTION),
    ("tab:representation-controls", "Oracle", Kind.ESTIMATE)))
"""ΔU (mean, per-map minimum and maximum) and ΔO are signed; the action response is a share of decisions."""


@register_reproduction("representation-controls", "Matched state variants on the primary fixed trace", issue="3",
                       kinds=REPRESENTATION_CONTROLS_KINDS)
def representation_controls() -> list[Comparison]:
    s = suite()
    rows: list[Comparison] = []
    cols = ("Mean utility", "Minimum", "Maximum", "Action", "Oracle")
    for name, dec, cell in (("OCRR", s.decisions["ocrr"], "aligned"), ("UCB1", s.decisions["ucb1"], "aligned"),
                            ("Local-only", s.decisions["local-only"], "aligned"),
                            ("Global-only", s.decisions["global-only"], "aligned"),
                            ("TP placebo", s.decisions["ocrr"], "key_slot")):
        ours = _variant_row(dec, cell)
        paper = dict(zip(cols, PAPER_CONTROLS[name], strict=True))
        rows += _rows("tab:representation-controls", name, paper, ours, 0.03 if name != "TP placebo" else 0.05)
    return rows


PAPER_TP_INTERACTION = {  # y: (metric, estimate, lower, upper); p < 0.001 for all three
    "U": ("Future utility", 0.323, 0.286, 0.359),
    "A": ("Future actions changed", -0.049, -0.069, -0.028),
    "O": ("Oracle-match change", -0.427, -0.467, -0.389),
}


REPRESENTATION_INTERACTION_KINDS = Kinds(
    columns=(("tab:representation-interaction", "estimate", Kind.ESTIMATE),
             ("tab:representation-interaction", "p < 0.001", Kind.INDICATOR)),
    intervals=(Interval("tab:representation-interaction", "estimate", "lower", "upper"),))


@register_reproduction("representation-interaction", "Paired OCRR − time-preserving-placebo interaction "
                       "(tab:representation-interaction)", issue="14", kinds=REPRESENTATION_INTERACTION_KINDS)
def representation_interaction() -> list[Comparison]:
    """OCRR minus the TP placebo on the same derangement and stream (the two rows of
    tab:representation-controls), averaged over the nine maps per stream; 20,000-draw stream-cluster
    percentile interval and sign-flip p.  The seeds are those of semantic-null's "OCRR − time placebo"
    rows (tab:semantic-null-detail prints the same estimand), so the two reproductions agree exactly."""
    dec = suite().decisions["ocrr"]
    rows: list[Comparison] = []
    for y, (metric, *pe) in PAPER_TP_INTERACTION.items():
        est, lo, hi, p = _ci(gamma(dec, y, "key_slot").values, f"OCRR − time placebo-{y}")
        tol = 0.05 if y != "A" else 0.03
        rows += [compare("tab:representation-interaction", metric, col, pv, ov, tol, NOTE)
                 for col, pv, ov in zip(("estimate", "lower", "upper"), pe, (est, lo, hi), strict=True)]
        rows.append(compare("tab:representation-interaction", metric, "p < 0.001", 1.0, float(p < 0.001), 0.0,
                            f"cluster sign-flip p = {p:.5f} ({B} draws); " + NOTE))
    return rows


def _shared_tp(dec: Decisions, tp: Decisions, y: str) -> StreamValues:
    a = delta(dec, y, "aligned")
    t = delta(tp, y, "key_slot")
    return StreamValues(f"Γ_{y}^TP", "aligned", a.values - t.values, a.by_map - t.by_map, a.maps)


NULL_DETAIL_TABLE = {"Pair placebo − value null": "tab:pair-preserving-detail"}
"""Contrasts of the semantic-null reproduction printed in another table than tab:semantic-null-detail."""


SEMANTIC_NULL_KINDS = Kinds(
    columns=(("tab:semantic-null-detail", "estimate", Kind.ESTIMATE),
             ("tab:pair-preserving-detail", "estimate", Kind.ESTIMATE),
             ("tab:representation-writer-interactions", "Γ_* (aligned − shared TP)", Kind.ESTIMATE)),
    intervals=(Interval("tab:semantic-null-detail", "estimate", "lower", "upper"),
               Interval("tab:pair-preserving-detail", "estimate", "lower", "upper"),
               Interval("tab:representation-writer-interactions", "Γ_U (aligned − shared TP)", "Γ_U lower",
                        "Γ_U upper")))


@register_reproduction("semantic-null", "Value null, time placebo and pair-preserving placebo interactions",
                       issue="3", kinds=SEMANTIC_NULL_KINDS)
def semantic_null() -> list[Comparison]:
    s = suite()
    dec = s.decisions["ocrr"]
    rows: list[Comparison] = []
    paper_ci = {
        ("OCRR − value null", "U"): (0.304, 0.266, 0.341), ("OCRR − value null", "A"): (-0.038, -0.063, -0.017),
        ("OCRR − value null", "O"): (-0.412, -0.454, -0.369),
        ("OCRR − time placebo", "U"): (0.323, 0.286, 0.359), ("OCRR − time placebo", "A"): (-0.049, -0.069, -0.028),
        ("OCRR − time placebo", "O"): (-0.427, -0.467, -0.389),
        ("Value null − time placebo", "U"): (0.019, -0.027, 0.062),
        ("Value null − time placebo", "A"): (-0.010, -0.028, 0.007),
        ("Value null − time placebo", "O"): (-0.016, -0.059, 0.029),
        ("Pair placebo − value null", "U"): (0.302, 0.263, 0.340),
        ("Pair placebo − value null", "A"): (-0.003, -0.028, 0.021),
        ("Pair placebo − value null", "O"): (-0.405, -0.449, -0.362),
    }
    for y in ("U", "A", "O"):
        dv, dt, dp, da = (delta(dec, y, c).values for c in ("value", "key_slot", "pair", "aligned"))
        for name, vals in (("OCRR − value null", da - dv), ("OCRR − time placebo", da - dt),
                           ("Value null − time placebo", dv - dt), ("Pair placebo − value null", dp - dv)):
            est, lo, hi, _p = _ci(vals, f"{name}-{y}")
            pe = paper_ci[(name, y)]
            tol = 0.05 if y != "A" else 0.03
            table = NULL_DETAIL_TABLE.get(name, "tab:semantic-null-detail")
            rows += [compare(table, f"{name} ({y})", "estimate", pe[0], est, tol, NOTE),
                     compare(table, f"{name} ({y})", "lower", pe[1], lo, tol, NOTE),
                     compare(table, f"{name} ({y})", "upper", pe[2], hi, tol, NOTE)]
    per_writer = {"OCRR": (0.323, -0.049, -0.427), "UCB1": (0.129, -0.468, -0.113),
                  "Local-only": (0.241, -0.341, -0.310), "Global-only": (0.298, 0.014, -0.273)}
    for name, key in (("OCRR", "ocrr"), ("UCB1", "ucb1"), ("Local-only", "local-only"),
                      ("Global-only", "global-only")):
        for y, pw in zip("UAO", per_writer[name], strict=True):
            g = _shared_tp(s.decisions[key], dec, y)
            rows.append(compare("tab:representation-writer-interactions", name, f"Γ_{y} (aligned − shared TP)", pw,
                                g.estimate, 0.05, NOTE))
            if y == "U":  # the paper prints Γ_U's interval (issue 50: side-checked)
                _e, lo, hi, _p = _ci(g.values, f"writer-{key}-U")
                rows += [compare("tab:representation-writer-interactions", name, f"Γ_U {side}", pv, ov, 0.05, NOTE)
                         for side, pv, ov in zip(("lower", "upper"), WRITER_U_LIMITS[name], (lo, hi), strict=True)]
    return rows


WRITER_U_LIMITS = {"OCRR": (0.286, 0.359), "UCB1": (0.093, 0.164), "Local-only": (0.206, 0.274),
                   "Global-only": (0.262, 0.333)}
"""tab:representation-writer-interactions: the paper's 95% limits of Γ_U per writer."""


CONTENT_CONTRASTS_KINDS = Kinds(
    columns=(("tab:content-contrasts A", "*", Kind.ESTIMATE),
             ("tab:content-contrasts B", "Utility gap", Kind.ESTIMATE),
             ("tab:content-contrasts B", "Action disagreement", Kind.PROPORTION),
             ("tab:content-contrasts B", "Oracle gap", Kind.ESTIMATE)),
    intervals=(Interval("tab:content-contrasts B", "{}", "{} lower", "{} upper"),))
"""Panel A: interactions U, A, O (signed contrasts); panel B: written − empty with its three intervals."""


@register_reproduction("content-contrasts", "Replay interactions and the written − empty state-use contrast",
                       issue="3", kinds=CONTENT_CONTRASTS_KINDS)
def content_contrasts() -> list[Comparison]:
    s = suite()
    rows: list[Comparison] = []
    dec = s.decisions["ocrr"]
    for name, cell, pe in (("Aligned − value", "value", (0.304, -0.038, -0.412)),
                           ("Aligned − time", "key_slot", (0.323, -0.049, -0.427))):
        for y, pv in zip("UAO", pe, strict=True):
            vals = delta(dec, y, "aligned").values - delta(dec, y, cell).values
            rows.append(compare("tab:content-contrasts A", f"OCRR {name}", y, pv, float(vals.mean()), 0.05, NOTE))
    for y, pv in zip("UAO", (0.302, -0.003, -0.405), strict=True):
        vals = delta(dec, y, "pair").values - delta(dec, y, "value").values
        rows.append(compare("tab:content-contrasts A", "OCRR Pair − value", y, pv, float(vals.mean()), 0.05, NOTE))
    # Panel B: written − empty (W_0 = OCRR rule with an empty state: replicate everywhere)
    w0 = _empty_state_agent()
    h = s.world.history(s.ocrr.adapt_actions)
    f, e = s.world.futures(), s.world.evaluator()
    d0 = replay(h, f, e, w0, cells="", maps="")
    a1, a0 = dec.actions[0, 0, 0, 0], d0.actions[0, 0, 0, 0]
    theta_a = pool_tasks((a1 != a0).astype(float), dec)
    theta_u = pool_tasks(dec.chosen_utility()[0, 0, 0, 0] - d0.chosen_utility()[0, 0, 0, 0], dec)
    theta_o = pool_tasks(dec.correct()[0, 0, 0, 0].astype(float) - d0.correct()[0, 0, 0, 0], dec)
    for col, vals, pt in (("Utility gap", theta_u, (0.380, 0.371, 0.389)), ("Action disagreement", theta_a,
                          (0.934, 0.910, 0.958)), ("Oracle gap", theta_o, (0.377, 0.366, 0.388))):
        est, lo, hi, _p = _ci(vals, f"theta-{col}")
        rows += [compare("tab:content-contrasts B", "Written − empty", col, pt[0], est, 0.05, NOTE),
                 compare("tab:content-contrasts B", "Written − empty", f"{col} lower", pt[1], lo, 0.05, NOTE),
                 compare("tab:content-contrasts B", "Written − empty", f"{col} upper", pt[2], hi, 0.05, NOTE)]
    return rows


def _empty_state_agent() -> Agent:
    """W_0: the OCRR choice rule with its state writes removed (empty state, same policy clock)."""
    ctl = ocrr_agent("ocrr")

    def update(state: object, task: TaskInput, key: str, u: float) -> object:
        return state

    def act(state: object, task: FutureInput, menu: tuple[str, ...], rng: np.random.Generator) -> str:
        return ctl.policy.act(ctl.writer.init_state(), task, menu, rng)

    return from_callables(ctl.writer.init_state, update, act, name="empty-state-ocrr")


ACTION_DIVERGENCE_KINDS = Kinds(
    columns=(("tab:action-divergence", "estimate", Kind.PROPORTION),
             ("tab:secondary-comparison", "difference", Kind.ESTIMATE)),
    intervals=(Interval("tab:action-divergence", "estimate", "lower", "upper"),
               Interval("tab:secondary-comparison", "difference", "lower", "upper")))
"""Per-stratum action divergence is a share of decisions; the secondary comparison a signed difference."""


@register_reproduction("action-divergence", "Permutation replay (cyclic map ARMC) vs OCRR by stratum", issue="3",
                       kinds=ACTION_DIVERGENCE_KINDS)
def action_divergence() -> list[Comparison]:
    s = suite()
    dec = s.decisions["ocrr"]
    m = dec.plan.map_names.index(DERANGEMENTS_4[1].name)
    a = dec.actions[0]
    changed = (a[m] != a[0]).astype(float)[0, 0]  # (N,)
    rows: list[Comparison] = []
    paper = {("source", "low"): 1.0, ("source", "high"): 1.0, ("temporal", "low"): 0.875,
             ("temporal", "high"): 0.750, ("survival", "balanced"): 1.0, ("survival", "rare"): 1.0}
    for i, st in enumerate(dec.plan.strata):
        sel = dec.stratum_idx == i
        per_stream = np.array([changed[sel & (dec.stream_idx == r)].mean() for r in range(len(dec.plan.streams))])
        rows.append(compare("tab:action-divergence", "/".join(st), "estimate", paper[st], float(per_stream.mean()),
                            0.15, NOTE))
        _e, lo, hi, _p = _ci(per_stream, f"divergence-{'-'.join(st)}")  # issue 50: the paper's limits side-checked
        rows += [compare("tab:action-divergence", "/".join(st), side, pv, ov, 0.15, NOTE)
                 for side, pv, ov in zip(("lower", "upper"), DIVERGENCE_LIMITS[st], (lo, hi), strict=True)]
    du = s.decisions["ocrr"]
    util = du.chosen_utility()[0, :, 0, 0]
    vals = pool_tasks(util[0] - util[m], du)
    est, lo, hi, _p = _ci(vals, "ocrr-minus-replay")
    rows.append(compare("tab:secondary-comparison", "OCRR − Permutation replay", "difference", 0.029, est, 0.03, NOTE))
    rows += [compare("tab:secondary-comparison", "OCRR − Permutation replay", side, pv, ov, 0.03, NOTE)
             for side, pv, ov in (("lower", 0.021, lo), ("upper", 0.037, hi))]
    return rows


DIVERGENCE_LIMITS = {("source", "low"): (1.0, 1.0), ("source", "high"): (1.0, 1.0), ("temporal", "low"): (0.771, 0.958),
                     ("temporal", "high"): (0.625, 0.875), ("survival", "balanced"): (1.0, 1.0),
                     ("survival", "rare"): (1.0, 1.0)}
"""tab:action-divergence: the paper's 95% limits per stratum."""


LABEL_CONTROLS_KINDS = Kinds(columns=(("label-equivariance calibration", "max |* difference|", Kind.DESIGN),
                                       ("label-invariant control", "action response", Kind.DESIGN)))
"""Exact zeros of the equivariant selector and of the label-invariant writer (theorems)."""


@register_reproduction("label-controls", "Label-equivariance calibration and the label-invariant control", issue="3",
                       kinds=LABEL_CONTROLS_KINDS)
def label_controls() -> list[Comparison]:
    s = suite()
    h = s.world.history(s.ocrr.adapt_actions)
    f, e = s.world.futures(), s.world.evaluator()
    arms = tuple(s.world.arms)
    base = s.decisions["ocrr"]
    lex = tuple(sorted(arms, reverse=True))
    diffs = {"action": 0.0, "utility": 0.0, "regret": 0.0, "oracle": 0.0}
    for pi in all_permutations(len(arms)):
        prio = tuple(arms[pi.images[arms.index(a)]] for a in lex)
        d = replay(h, f, e, ocrr_agent("ocrr", priority=prio), cells="rename",
                   maps=[",".join(map(str, pi.images))])
        mi = 0 if pi.is_identity else d.plan.map_names.index(pi.name)
        a, b = d.actions[1, mi], base.actions[0, 0]
        ua, ub = d.utility[np.arange(d.n_tasks), a], base.utility[np.arange(base.n_tasks), b]
        diffs["action"] = max(diffs["action"], float(np.mean(a != b)))
        diffs["utility"] = max(diffs["utility"], float(np.abs(ua - ub).max()))
        diffs["regret"] = diffs["utility"]
        diffs["oracle"] = max(diffs["oracle"], float(np.abs((a == d.oracle).astype(float) - (b == base.oracle)).max()))
    rows = [compare("label-equivariance calibration", "24 permutations", f"max |{k} difference|", 0.0, v, 0.0,
                    "tie priority renamed with the labels (the paper's canonical equivariant selector)")
            for k, v in diffs.items()]
    inv = from_callables(lambda: 0, lambda s_, t, k, u: s_, lambda s_, t, m: "replicate" if "replicate" in m else m[0],
                         name="label-invariant")
    d = replay(h, f, e, inv, cells="value,pair,key_slot", maps="derangements", draws=[SIGMA])
    rows.append(compare("label-invariant control", "all cells, 9 maps", "action response",
                        0.0, float((d.actions != d.actions[0, 0]).mean()), 0.0, "arm-omitting aggregate"))
    return rows


TIME_CELL_KINDS = Kinds(columns=(("time placebo", "labels changed (of 9,216)", Kind.COUNT),
                                  ("time placebo", "fraction changed", Kind.PROPORTION)))


@register_reproduction("time-cell", "Labels changed by the key-slot (time) draw on the OCRR trace", issue="3",
                       kinds=TIME_CELL_KINDS)
def time_cell() -> list[Comparison]:
    s = suite()
    acts = s.ocrr.adapt_actions
    changed = 0
    total = 0
    for r in range(acts.shape[0]):
        blocks = np.repeat(np.arange(acts.shape[1]), acts.shape[2])
        perm = stream_perm(SIGMA, "time", f"r{r:02d}", blocks)
        seq = acts[r].reshape(-1)
        changed += int((seq[perm] != seq).sum())
        total += seq.size
    conc = float(np.mean([(np.bincount(acts[r, b], minlength=4) / acts.shape[2]) @
                          (np.bincount(acts[r, b], minlength=4) / acts.shape[2])
                          for r in range(acts.shape[0]) for b in range(acts.shape[1])]))
    return [compare("time placebo", "OCRR trace", "labels changed (of 9,216)", 2802, changed, 300,
                    f"σ*-dependent; expected 1 − Σ p_a² per block; our trace concentration Σp² = {conc:.2f} "
                    f"(paper ≈ 0.70); total {total}"),
            compare("time placebo", "OCRR trace", "fraction changed", 0.304, changed / total, 0.05, NOTE)]
