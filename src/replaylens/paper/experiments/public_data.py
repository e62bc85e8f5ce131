"""Agents on measured outcomes (public data): controller matrix, replay branches and a small example (issue 4).

Everything runs on the measured-outcome substrate (:func:`replaylens.paper.substrates.public.build_public`, 48
streams, seed 20260901; breast cancer and red wine, iid and shifted contexts, 24 adaptation and 24 future
tasks per stratum).  Reproductions (paper tables in shared/spec/partB.md §§1, 3.5–3.8, 4, 12–14, 17):

* ``public-data-strata``, ``public-data-pooled``, ``public-data-conditions`` — the seven-condition endpoint
  check (tab:public-data-strata, tab:public-data-pooled, tab:public-data-conditions) plus the secondary
  conditions (Selected static, Contextual UCB, Permutation replay) for reference;
* ``public-persistent-agent-folds`` — the cross-fitted persistent recurrent agent
  (tab:public-persistent-agent-folds and tab:content-measured);
* ``public-ucb1-replay`` — UCB1 within family–context strata (tab:public-ucb1-pooled);
* ``public-structural-replay`` — the count–sum ledger on the OCRR trace (tab:public-structural-replay-strata
  and -intervals);
* ``map-family-sensitivity`` — five fixed value-derangement draws × nine maps on the primary synthetic
  substrate (tab:primary-operator-robustness);
* ``utility-resolution`` — net / absolute / switch-conditional utility changes and harm / tie / gain
  (tab:utility-resolution-compact, measured rows) and the best-versus-second-best gaps;
* ``changed-substrate-endpoint``, ``changed-substrate-selected-only``, ``changed-substrate-placebo`` — the
  changed-substrate reconstruction (hypothesis screening and model validation; partB §2): OCRR − No update and
  the fixed-label replay (tab:cross-substrate-replay), the fitted order-invariant selected-outcome writer
  (tab:cross-substrate-selected-only) and the time-preserving placebo (tab:changed-substrate-map-summary, whose
  lower block is also part of ``map-family-sensitivity``).

The world, the closed-loop matrix and every replay are built once per process (cached).  A missing data copy
raises :class:`replaylens.paper.data.DataError` naming ``replaylens paper data fetch NAME``.

:func:`write_example` writes a small audit-ready example (history, future tasks and utilities as JSONL) from the
same measured outcomes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from ...inference import cluster_bootstrap, sign_flip_test
from ...maps import DERANGEMENTS_4, SlotLaw, SlotSpec, stream_perm
from ...readouts import a_rekey, delta, delta_o_direct, delta_u_direct, direct_action_contrast, gamma, pool_tasks
from ...records import write_evaluator, write_futures, write_history
from ...replay import Decisions, replay
from ...rng import derive_seed
from ..controllers import (
    AgentController,
    ClosedLoopResult,
    Controller,
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
from ..persistent import (
    ChangedWorld,
    PersistentAgent,
    PersistentFold,
    PersistentSettings,
    SelectedOnlyFit,
    build_changed,
    changed_ocrr_agent,
    count_sum_agent,
    cross_fit,
    fit_selected_only,
)
from ..reproduce import Comparison, Interval, Kind, Kinds, compare, register_reproduction
from ..substrates.public import BUDGET, PublicWorld, build_public, effective_cost

__all__ = [
    "N_STREAMS",
    "PERSISTENT_SIGMA",
    "SEED",
    "STRUCTURAL_SIGMA",
    "UCB1_SIGMA",
    "ClosedLoopWorld",
    "PersistentReplay",
    "public_matrix",
    "public_slot_spec",
    "public_world",
    "resolution_rows",
    "run_persistent",
    "write_example",
]

SEED = 20260901
"""Substrate seed (docs/paper/decisions-public.md) and the closed-loop seed of every controller."""
N_STREAMS = 48
B = 20_000
"""Cluster-bootstrap draws (controller and structural results)."""


def public_slot_spec(base: int) -> SlotSpec:
    """The public measured-outcome slot laws: value and pair share one 24-slot derangement per block, and the
    key-slot (time) cell uses a separately seeded 24-slot derangement (paper l.586)."""
    return SlotSpec(value_seed=base, time_seed=base + 1, reorder_seed=base + 2, time_law=SlotLaw.DERANGEMENT)


UCB1_SIGMA = public_slot_spec(20260921)
STRUCTURAL_SIGMA = public_slot_spec(20260931)
PERSISTENT_SIGMA = public_slot_spec(20260941)
"""Each branch draws its own assignments (the paper's seeds are not published)."""

NOTE = ("measured-outcome substrate rebuilt from the paper's text (seed 20260901; task draws differ from the "
        "paper's); levels within 0.03, structural values exact")
CONTRAST_NOTE = ("descriptive contrast on the rebuilt substrate; tolerance 0.005 normalized (5 in 10^-3 units) on "
                 "estimates and limits, and the sign is compared separately")
OCRR_NOTE = ("primary OCRR (partB §3.6 CHOICE), blocks visited breast cancer first: the empty state ties all arms "
             "at 0.78 and picks `replicate` (lexicographically largest), and breast-cancer utilities keep it ahead, "
             "so the breast-cancer trace is `replicate` only (future 0.801 vs `mixed` 0.833 iid, 0.769 vs 0.756 "
             "shifted); root cause = the unstated block order (docs/paper/reproduction-notes.md, issue 14 (d)): "
             "with red "
             "wine visited first (the appendix's order) the wine global prior picks the breast-cancer arm and the "
             "breast-cancer ΔU_O−N become −0.59/−0.10, pooled O−N −2.09, O−Shuffled +2.83 (10^-3)")
LEVEL_TOL = 0.03
CONTRAST_TOL = 5.0  # 10^-3 units
A_TOL, O_TOL = 0.10, 0.05


# ---------------------------------------------------------------- world and closed-loop matrix


@dataclass(frozen=True, eq=False)
class ClosedLoopWorld:
    """A :class:`PublicWorld` seen by :func:`replaylens.paper.controllers.run_closed_loop` (every stratum learns)."""

    world: PublicWorld

    @property
    def n_streams(self) -> int:
        return self.world.n_streams

    @property
    def strata(self) -> tuple[tuple[str, str], ...]:
        return self.world.strata

    @property
    def arms(self) -> tuple[str, ...]:
        return self.world.arms

    @property
    def dev_utility(self) -> np.ndarray:
        return self.world.dev_utility

    @property
    def adapt_utility(self) -> np.ndarray:
        return self.world.adapt_utility

    @property
    def future_utility(self) -> np.ndarray:
        return self.world.future_utility

    @property
    def learning_blocks(self) -> tuple[tuple[str, str], ...]:
        return self.world.strata


@cache
def public_world() -> PublicWorld:
    """The 48-stream measured-outcome world (seed 20260901; raises DataError without the verified copies)."""
    return build_public(N_STREAMS, seed=SEED)


CLOSED_LOOP_DATASETS = ("wine-red", "breast-cancer")
"""The order in which the closed-loop controllers visit the data families: red wine first (issue 14 (d), see
docs/decisions.md; the paper's printed breast-cancer OCRR = No update is unreachable when breast cancer opens on an
empty state, which selects `replicate`)."""


@cache
def closed_loop_world() -> PublicWorld:
    """:func:`public_world`'s tables with the strata in the closed loop's visiting order (:data:`CLOSED_LOOP_DATASETS`).

    Each task's tables come from its own generator, so only the strata order (and hence every controller's state
    prefix) differs from :func:`public_world`; the tables are reordered, not rebuilt.
    """
    return public_world().reorder(CLOSED_LOOP_DATASETS)


CONDITIONS = ("OCRR", "No update", "Generic memory", "Generic skill", "Shuffled outcome", "Static predictor",
              "Extra sampling")
SECONDARY = ("Selected static", "Contextual UCB")


def _controllers(arms: tuple[str, ...]) -> dict[str, Controller]:
    c1, c3 = float(effective_cost("OCRR")), float(effective_cost("Extra sampling"))
    return {
        "OCRR": AgentController(ocrr_agent("ocrr"), arms, cost=c1),
        "No update": NoUpdate(arms, cost=c1),
        "Generic memory": GenericMemory(arms, cost=c1),
        "Generic skill": GenericSkill(arms, cost=c1),
        "Shuffled outcome": ShuffledOutcome(arms, cost=c1),
        "Static predictor": StaticPredictor(arms, cost=c1),
        "Extra sampling": ExtraSampling(arms, cost=c3),
        "Selected static": SelectedStatic(arms, cost=c1),
        "Contextual UCB": AgentController(ocrr_agent("ucb1"), arms, cost=c1),
    }


def run_matrix(world: PublicWorld, *, seed: int = SEED) -> dict[str, ClosedLoopResult]:
    """Closed-loop runs of the seven conditions and the secondary Selected static / Contextual UCB."""
    cw = ClosedLoopWorld(world)
    return {name: run_closed_loop(cw, ctl, seed=seed) for name, ctl in _controllers(world.arms).items()}


@cache
def public_matrix() -> dict[str, ClosedLoopResult]:
    """The controller matrix on :func:`closed_loop_world` (cached)."""
    return run_matrix(closed_loop_world())


def _ci(values: np.ndarray, tag: str) -> tuple[float, float, float]:
    bs = cluster_bootstrap(values, n_resamples=B, rng=derive_seed(SEED, "public-ci", tag))
    return float(np.mean(values)), float(np.asarray(bs.low)), float(np.asarray(bs.high))


def _interval_rows(table: str, row: str, paper: Sequence[float | None] | None, ours: tuple[float, float, float],
                   tol: float | None, note: str, prefix: str = "") -> list[Comparison]:
    out = []
    for j, col in enumerate(("estimate", "lower", "upper")):
        p = None if paper is None else paper[j]
        out.append(compare(table, row, f"{prefix}{col}", p, ours[j], tol, note))
    return out


_CI = (Interval("*", "estimate", "lower", "upper"), Interval("*", "{} estimate", "{} lower", "{} upper"))
"""``_interval_rows``' columns: ``[prefix ]estimate`` / ``lower`` / ``upper`` of one row."""
_SIGN_ROW = ("*", "sign of estimate", Kind.INDICATOR)
"""Declared before the ``* estimate`` patterns it would otherwise fall under (the first matching entry wins)."""


def _sign(x: float) -> float:
    return float(np.sign(round(x, 12)))


def _sign_row(table: str, row: str, paper: float | None, ours: float, note: str = "") -> Comparison:
    return compare(table, row, "sign of estimate", None if paper is None else _sign(paper), _sign(ours), 0.0,
                   note or "sign agreement (+1 / 0 / −1)")


PAPER_STRATA = {  # (family, context): OCRR, No update, ΔU est, lower, upper (10^-3)
    ("breast-cancer", "iid"): (0.834, 0.834, -0.240, -0.660, 0.084),
    ("breast-cancer", "shifted"): (0.755, 0.755, -0.007, -0.021, 0.000),
    ("wine-red", "iid"): (0.541, 0.544, -2.780, -5.243, -0.487),
    ("wine-red", "shifted"): (0.552, 0.557, -4.705, -7.793, -1.927),
}


STRATA_KINDS = Kinds(
    columns=(_SIGN_ROW, ("tab:public-data-strata", "OCRR", Kind.ESTIMATE),
             ("tab:public-data-strata", "No update", Kind.ESTIMATE),
             ("tab:public-data-strata", "* estimate", Kind.ESTIMATE),
             ("consistency", "pooled − mean of the 4 strata", Kind.DESIGN)),
    intervals=_CI)
"""Utility levels and the OCRR − No update contrast (×10⁻³) per stratum with its interval; the pooled
consistency is arithmetic."""


@register_reproduction("public-data-strata", "Public-data endpoint check by stratum (OCRR vs No update)",
                       issue="4", kinds=STRATA_KINDS)
def public_data_strata() -> list[Comparison]:
    w = closed_loop_world()
    m = public_matrix()
    ocrr, nou = m["OCRR"].future_utility, m["No update"].future_utility
    rows: list[Comparison] = []
    for s, st in enumerate(w.strata):
        p = PAPER_STRATA[st]
        name = "/".join(st)
        rows.append(compare("tab:public-data-strata", name, "OCRR", p[0], float(ocrr[:, s].mean()), LEVEL_TOL,
                            NOTE))
        rows.append(compare("tab:public-data-strata", name, "No update", p[1], float(nou[:, s].mean()), LEVEL_TOL,
                            NOTE))
        d = (ocrr[:, s] - nou[:, s]).mean(axis=1) * 1e3
        est = _ci(d, f"strata-{name}")
        rows += _interval_rows("tab:public-data-strata", name, p[2:], est, CONTRAST_TOL,
                               f"ΔU_O−N in 10^-3; {CONTRAST_NOTE}; {OCRR_NOTE}", "ΔU_O−N ")
        rows.append(_sign_row("tab:public-data-strata", name, p[2], est[0]))
        fa = m["OCRR"].future_actions[:, s]
        rows.append(compare("OCRR future actions", name, "share `mixed`", None,
                            float(np.mean(fa == w.arms.index("mixed"))), None, "diagnostic (No update = `mixed`)"))
        rows.append(compare("OCRR future actions", name, "share `replicate`", None,
                            float(np.mean(fa == w.arms.index("replicate"))), None, OCRR_NOTE))
    pooled = float(ocrr.mean())
    rows.append(compare("consistency", "OCRR pooled", "pooled − mean of the 4 strata", 0.0,
                        pooled - float(np.mean([ocrr[:, s].mean() for s in range(len(w.strata))])), 1e-12,
                        "equal-weight strata (equal task counts)"))
    return rows


PAPER_POOLED = {
    "OCRR − No update": (-1.933, -2.774, -1.165),
    "OCRR − Shuffled outcome": (5.666, 3.416, 8.063),
    "OCRR − Extra sampling": (18.702, 18.660, 18.743),
}


POOLED_KINDS = Kinds(
    columns=(_SIGN_ROW, ("tab:public-data-pooled", "* estimate", Kind.ESTIMATE),
             ("tab:public-data-pooled", "n_streams", Kind.DESIGN),
             ("tab:public-data-pooled", "future tasks per condition", Kind.DESIGN)),
    intervals=_CI)


@register_reproduction("public-data-pooled", "Public-data pooled contrasts (U and utility per effective cost)",
                       issue="4", kinds=POOLED_KINDS)
def public_data_pooled() -> list[Comparison]:
    m = public_matrix()
    fut = {k: v.future_utility.mean(axis=(1, 2)) for k, v in m.items()}
    cost = {k: v.cost for k, v in m.items()}
    rows: list[Comparison] = []
    for name, (a, b, metric) in {"OCRR − No update": ("OCRR", "No update", "U"),
                                 "OCRR − Shuffled outcome": ("OCRR", "Shuffled outcome", "U"),
                                 "OCRR − Extra sampling": ("OCRR", "Extra sampling", "U/c")}.items():
        if metric == "U":
            vals = (fut[a] - fut[b]) * 1e3
            tol, note = CONTRAST_TOL, f"10^-3 units; {CONTRAST_NOTE}"
        else:
            vals = (fut[a] / cost[a] - fut[b] / cost[b]) * 1e3
            tol = LEVEL_TOL / BUDGET * 1e3
            note = (f"10^-3 units; costs {cost[a]:g} and {cost[b]:g} (budget 24, Extra sampling ×3); tolerance = "
                    "the 0.03 level tolerance divided by the cost 24")
        est = _ci(vals, f"pooled-{name}")
        rows += _interval_rows("tab:public-data-pooled", name, PAPER_POOLED[name], est, tol,
                               f"{note}; {OCRR_NOTE}", f"{metric} ")
        rows.append(_sign_row("tab:public-data-pooled", name, PAPER_POOLED[name][0], est[0]))
        rows.append(compare("tab:public-data-pooled", name, "n_streams", 48, float(vals.size), 0.0, ""))
    n_tasks = int(m["OCRR"].future_utility[0].size * m["OCRR"].future_utility.shape[0])
    rows.append(compare("tab:public-data-pooled", "all conditions", "future tasks per condition", 4608, n_tasks, 0.0,
                        "48 streams × 4 strata × 24"))
    return rows


PAPER_CONDITIONS = {  # utility, regret, utility/cost
    "Extra sampling": (0.666, 0.024, 0.009), "Generic memory": (0.667, 0.023, 0.028),
    "Generic skill": (0.655, 0.035, 0.027), "No update": (0.673, 0.017, 0.028), "OCRR": (0.671, 0.019, 0.028),
    "Shuffled outcome": (0.665, 0.025, 0.028), "Static predictor": (0.673, 0.016, 0.028),
}


CONDITIONS_KINDS = Kinds(
    columns=(("tab:public-data-conditions", "utility", Kind.ESTIMATE),
             ("tab:public-data-conditions", "regret", Kind.MAGNITUDE),
             ("tab:public-data-conditions", "utility/cost", Kind.ESTIMATE),
             ("consistency", "max |utility + regret − oracle|", Kind.DESIGN)),
    derived=(("consistency", "every condition", "utility + regret (pooled oracle)",
              "the sum of the paper's printed utility and regret cells of a condition (tab:public-data-conditions)"),))
"""Utility levels (signed), regret (non-negative); utility + regret is a sum of printed cells, not a printed number."""


@register_reproduction("public-data-conditions", "Public-data condition means (utility, regret, utility per cost)",
                       issue="4", kinds=CONDITIONS_KINDS)
def public_data_conditions() -> list[Comparison]:
    w = closed_loop_world()
    m = public_matrix()
    names = list(PAPER_CONDITIONS) + list(SECONDARY)
    summ = {r["condition"]: r for r in condition_summary(ClosedLoopWorld(w), [m[n] for n in names])
            if r["split"] == "future"}
    by_ctl = {m[n].controller: n for n in names}
    rows: list[Comparison] = []
    upc_tol = 0.002
    for ctl, r in summ.items():
        name = by_ctl[ctl]
        p = PAPER_CONDITIONS.get(name)
        note = NOTE if p is not None else "secondary condition (not in the paper's public table); " + NOTE
        rows.append(compare("tab:public-data-conditions", name, "utility", p and p[0], r["utility"], LEVEL_TOL, note))
        rows.append(compare("tab:public-data-conditions", name, "regret", p and p[1], r["oracle_gap"], LEVEL_TOL,
                            note))
        rows.append(compare("tab:public-data-conditions", name, "utility/cost", p and p[2], r["utility_per_cost"],
                            upc_tol, note + f"; cost {r['cost']:g}; tolerance 0.002 (the paper rounds to 0.001)"))
    ora = float(w.oracle_utility().mean())
    rows.append(compare("consistency", "every condition", "utility + regret (pooled oracle)", 0.690, ora, LEVEL_TOL,
                        NOTE))
    spread = max(abs(r["utility"] + r["oracle_gap"] - ora) for r in summ.values())
    rows.append(compare("consistency", "every condition", "max |utility + regret − oracle|", 0.0, spread, 1e-12, ""))
    # Permutation replay (fixed-label replay): OCRR's trace written into its ledger under each derangement
    dec = _permutation_replay()
    u = dec.chosen_utility()[0, :, 0, 0]
    for k in range(1, u.shape[0]):
        diff = pool_tasks(u[0] - u[k], dec)
        rows.append(compare("Permutation replay (secondary)", f"map {_map_initials(dec.plan.maps[k].images, w.arms)}",
                            "OCRR − replay (U)", None, float(diff.mean()), None,
                            "not reported for public data in the paper; " + OCRR_NOTE))
    return rows


@cache
def _permutation_replay() -> Decisions:
    w = closed_loop_world()
    ocrr = public_matrix()["OCRR"]
    return replay(w.history(ocrr.adapt_actions), w.futures(), w.evaluator(), ocrr_agent("ocrr"), cells="",
                  maps="derangements", seed=SEED)


# ---------------------------------------------------------------- replay readouts shared by the branches

CELL_ROWS = (("Rekey", "rekey"), ("Key-slot", "key_slot"), ("Value", "value"), ("Pair", "pair"))


def _cell_values(dec: Decisions, cell: str, scale_u: float = 1.0) -> dict[str, np.ndarray]:
    """Per-stream A, ΔU_{C−A} (× scale_u) and ΔO_{C−A}: rekey = aligned under the nine maps vs identity,
    other cells at ρ = id against aligned."""
    if cell == "rekey":
        a = a_rekey(dec).values
        du = -delta(dec, "U", "aligned").values * scale_u
        do = delta(dec, "O", "aligned").values
    else:
        a = direct_action_contrast(dec, cell).values
        du = delta_u_direct(dec, cell).values * scale_u
        do = delta_o_direct(dec, cell).values
    return {"A": a, "ΔU": du, "ΔO": do}


def _changed(dec: Decisions, cell: str) -> int:
    """Decisions changed by ``cell`` against aligned under the same map (all maps)."""
    c = dec.cell_index(cell)
    return int((dec.actions[c] != dec.actions[0]).sum())


def _max_abs_du(dec: Decisions, cell: str) -> float:
    u = dec.chosen_utility()
    return float(np.abs(u[dec.cell_index(cell)] - u[0]).max())


# ---------------------------------------------------------------- UCB1 replay


@cache
def _ucb1_decisions() -> Decisions:
    w = closed_loop_world()
    ucb = public_matrix()["Contextual UCB"]
    return replay(w.history(ucb.adapt_actions), w.futures(), w.evaluator(), ocrr_agent("ucb1"),
                  cells="value,pair,key_slot", maps="derangements", draws=[UCB1_SIGMA], seed=SEED)


PAPER_UCB1 = {  # cell: (A est, L, U), (ΔU est, L, U in 10^-3), (ΔO est, L, U)
    "Rekey": ((1.000, 1.000, 1.000), (-7.540, -8.790, -6.260), (-0.074, -0.110, -0.040)),
    "Key-slot": ((0.734, 0.677, 0.792), (-7.420, -9.650, -5.190), (-0.081, -0.117, -0.045)),
    "Value": ((0.771, 0.703, 0.833), (-6.020, -7.990, -4.120), (-0.060, -0.101, -0.018)),
    "Pair": ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)),
}
UCB1_NOTE = ("UCB1 = the library's `ucb1` ledger (per-stratum count and micro-unit sum, S/N + sqrt(2 log N_c / "
             "N_a), unseen arms first with the lexicographically-largest tie rule), its own aligned trace, future "
             "read at the terminal state; value/pair share one 24-slot derangement, key-slot its own")


UCB1_KINDS = Kinds(
    columns=(("tab:public-ucb1-pooled", "Rekey", "A *", Kind.DESIGN),
             ("tab:public-ucb1-pooled", "Pair", "*", Kind.DESIGN),
             ("tab:public-ucb1-pooled", "A estimate", Kind.PROPORTION),
             ("tab:public-ucb1-pooled", "ΔU estimate", Kind.ESTIMATE),
             ("tab:public-ucb1-pooled", "ΔO estimate", Kind.ESTIMATE), ("zero law", "*", Kind.DESIGN)),
    intervals=_CI)
"""Structural rows (as the code marks them): a derangement rekey moves every UCB1 action (A = 1 with its limits) and
pair transport changes nothing; the other cells' A (a share), ΔU and ΔO with their intervals are measured."""


@register_reproduction("public-ucb1-replay", "UCB1 replay within family–context strata on measured outcomes",
                       issue="4", kinds=UCB1_KINDS)
def public_ucb1_replay() -> list[Comparison]:
    dec = _ucb1_decisions()
    rows: list[Comparison] = []
    for label, cell in CELL_ROWS:
        vals = _cell_values(dec, cell, 1e3)
        paper = PAPER_UCB1[label]
        for j, metric in enumerate(("A", "ΔU", "ΔO")):
            est = _ci(vals[metric], f"ucb1-{cell}-{metric}")
            if label == "Pair":
                tol, note = 0.0, "structural: pair transport preserves every (N, S) exactly; " + UCB1_NOTE
            elif label == "Rekey" and metric == "A":
                tol, note = 0.0, "structural: an argmax over arms with a unique winner moves under every derangement"
            else:
                tol = {"A": A_TOL, "ΔU": CONTRAST_TOL, "ΔO": O_TOL}[metric]
                note = f"{'10^-3 units; ' if metric == 'ΔU' else ''}{UCB1_NOTE}; {NOTE}"
            rows += _interval_rows("tab:public-ucb1-pooled", label, paper[j], est, tol, note, f"{metric} ")
    rows.append(compare("zero law", "UCB1 pair", "changed decisions (48 streams × 96 tasks × 10 maps)", 0,
                        _changed(dec, "pair"), 0.0, "exact"))
    rows.append(compare("zero law", "UCB1 pair", "max |ΔU| over all decisions", 0.0, _max_abs_du(dec, "pair"), 0.0,
                        "exact"))
    return rows


# ---------------------------------------------------------------- structural replay (count–sum ledger)


@cache
def _structural_decisions() -> Decisions:
    w = closed_loop_world()
    ocrr = public_matrix()["OCRR"]
    return replay(w.history(ocrr.adapt_actions), w.futures(), w.evaluator(), count_sum_agent(),
                  cells="value,pair,key_slot", maps="derangements", draws=[STRUCTURAL_SIGMA], seed=SEED)


PAPER_STRUCT_STRATA = {  # (family, cell): IID (A, ΔU, ΔO), Shift (A, ΔU, ΔO)
    ("breast-cancer", "Rekey"): ((1.000, -0.015, -0.057), (1.000, 0.002, 0.090)),
    ("breast-cancer", "Time"): ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0)),
    ("breast-cancer", "Value"): ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0)),
    ("breast-cancer", "Pair"): ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0)),
    ("wine-red", "Rekey"): ((1.000, -0.006, -0.049), (1.000, -0.006, -0.044)),
    ("wine-red", "Time"): ((0.854, -0.006, -0.036), (0.875, -0.011, -0.071)),
    ("wine-red", "Value"): ((0.917, -0.009, -0.069), (0.896, -0.011, -0.063)),
    ("wine-red", "Pair"): ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0)),
}
PAPER_STRUCT_POOLED = {
    "Rekey": ((1.000, 1.000, 1.000), (-0.006, -0.008, -0.005), (-0.015, -0.061, 0.030)),
    "Key-slot": ((0.432, 0.391, 0.469), (-0.004, -0.006, -0.003), (-0.027, -0.044, -0.010)),
    "Value": ((0.453, 0.417, 0.479), (-0.005, -0.007, -0.004), (-0.033, -0.050, -0.016)),
    "Pair": ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)),
}
STRUCT_NOTE = ("count–sum ledger per stratum and arm (integer micro-unit sums), argmax of S/N over observed arms, "
               "lexicographically-largest ties, on the OCRR adaptation trace; value/pair share one 24-slot "
               "derangement, key-slot its own")


def _stratum_mean(dec: Decisions, per_task: np.ndarray, s: int) -> float:
    """Mean over the tasks of stratum s (equal stream weights: every stream has 24 tasks there)."""
    return float(per_task[..., dec.stratum_idx == s].mean())


def _single_label_rows(w: PublicWorld, s: int, paper: tuple[float, float, float]) -> list[Comparison]:
    """Diagnostic: the count–sum rekey contrasts a block holding only label L would give (for every L).

    With one observed label L the ledger picks L (aligned) and ρ(L) under rekey, so ΔU = mean over the nine
    derangements of U(ρ(L)) − U(L) and ΔO likewise, read from the measured future tables."""
    u = w.future_utility[:, s]  # [r, t, a]
    ora = w.oracle()[:, s]
    out = []
    for a, lab in enumerate(w.arms):
        du = np.mean([u[..., m.images[a]] - u[..., a] for m in DERANGEMENTS_4])
        do = np.mean([(ora == m.images[a]).astype(float) - (ora == a) for m in DERANGEMENTS_4])
        name = f"{'/'.join(w.strata[s])} if every block held only `{lab}`"
        out.append(compare("diagnostic: single-label trace", name, "Rekey ΔU", paper[1], float(du), None,
                           "what-if on the measured future tables (not a run): the paper's breast-cancer rekey ΔU "
                           "(−0.015 iid, +0.002 shifted) has the signs of an `adaptive`- or `mixed`-only trace, "
                           "not of our `replicate`-only one"))
        out.append(compare("diagnostic: single-label trace", name, "Rekey ΔO", paper[2], float(do), None,
                           "what-if (not a run): ΔO hinges on exact oracle ties (first-canonical rule; `adaptive` "
                           "and `mixed` often tie exactly here) and matches no single label"))
    return out


STRUCTURAL_KINDS = Kinds(
    columns=(("tab:public-structural-replay-strata", "* Pair", "*", Kind.DESIGN),
             ("tab:public-structural-replay-strata", "* Rekey", "* A", Kind.DESIGN),
             ("tab:public-structural-replay-strata", "breast-cancer Time", "*", Kind.DESIGN),
             ("tab:public-structural-replay-strata", "breast-cancer Value", "*", Kind.DESIGN),
             ("tab:public-structural-replay-intervals", "Pair", "*", Kind.DESIGN),
             ("tab:public-structural-replay-intervals", "Rekey", "A *", Kind.DESIGN),
             ("tab:public-structural-replay-strata", "* A", Kind.PROPORTION),
             ("tab:public-structural-replay-intervals", "A estimate", Kind.PROPORTION),
             ("tab:public-structural-replay-strata", "* ΔU", Kind.ESTIMATE),
             ("tab:public-structural-replay-strata", "* ΔO", Kind.ESTIMATE),
             ("tab:public-structural-replay-intervals", "* estimate", Kind.ESTIMATE),
             ("OCRR trace", "blocks with a single label (of 48)", Kind.COUNT), ("zero law", "*", Kind.DESIGN)),
    intervals=_CI)
"""Structural rows as the code marks them (pair zero law; rekey moves every winner; breast-cancer time and value
leave single-label blocks unchanged) are design; the rest are measured."""


@register_reproduction("public-structural-replay", "Structural replay on measured outcomes: count–sum ledger",
                       issue="4", kinds=STRUCTURAL_KINDS)
def public_structural_replay() -> list[Comparison]:
    w = closed_loop_world()
    dec = _structural_decisions()
    ocrr = public_matrix()["OCRR"]
    rows: list[Comparison] = []
    u, o = dec.chosen_utility(), dec.correct().astype(np.float64)
    a = dec.actions
    single = np.array([[len(np.unique(ocrr.adapt_actions[r, s])) == 1 for s in range(len(w.strata))]
                       for r in range(w.n_streams)])
    for s, (fam, ctx) in enumerate(w.strata):
        col = "IID" if ctx == "iid" else "Shift"
        for label, cell in (("Rekey", "rekey"), ("Time", "key_slot"), ("Value", "value"), ("Pair", "pair")):
            if cell == "rekey":
                per = {"A": (a[0, 1:] != a[0, :1]).astype(np.float64), "ΔU": u[0, 1:] - u[0, :1],
                       "ΔO": o[0, 1:] - o[0, :1]}
            else:
                c = dec.cell_index(cell)
                per = {"A": (a[c, :1] != a[0, :1]).astype(np.float64), "ΔU": u[c, :1] - u[0, :1],
                       "ΔO": o[c, :1] - o[0, :1]}
            paper = PAPER_STRUCT_STRATA[(fam, label)][0 if ctx == "iid" else 1]
            for j, metric in enumerate(("A", "ΔU", "ΔO")):
                ours = _stratum_mean(dec, per[metric], s)
                structural = label == "Pair" or (label == "Rekey" and metric == "A") or \
                    (fam == "breast-cancer" and label in ("Time", "Value"))
                if structural:
                    tol = 0.0
                    note = ("structural: exact zero law" if label == "Pair" else
                            "structural: unique observed-mean winner moves under every derangement"
                            if label == "Rekey" else
                            "structural given the trace: every breast-cancer block of the OCRR trace holds one "
                            "label, so time and value leave the ledger's winner unchanged")
                else:
                    tol = {"A": A_TOL, "ΔU": 0.005, "ΔO": O_TOL}[metric]
                    note = f"{STRUCT_NOTE}; {NOTE}"
                    if fam == "breast-cancer":
                        note = f"{OCRR_NOTE}; {note}"
                rows.append(compare("tab:public-structural-replay-strata", f"{fam} {label}", f"{col} {metric}",
                                    paper[j], ours, tol, note))
        rows.append(compare("OCRR trace", "/".join((fam, ctx)), "blocks with a single label (of 48)",
                            48.0 if fam == "breast-cancer" else None, float(single[:, s].sum()),
                            0.0 if fam == "breast-cancer" else None,
                            "paper: breast-cancer time/value exactly 0 implies single-label blocks"))
        if fam == "breast-cancer":
            rows += _single_label_rows(w, s, PAPER_STRUCT_STRATA[(fam, "Rekey")][0 if ctx == "iid" else 1])
    for label, cell in CELL_ROWS:
        vals = _cell_values(dec, cell)
        ppool = PAPER_STRUCT_POOLED[label]
        for j, metric in enumerate(("A", "ΔU", "ΔO")):
            est = _ci(vals[metric], f"struct-{cell}-{metric}")
            if label == "Pair" or (label == "Rekey" and metric == "A"):
                tol, note = 0.0, "structural"
            else:
                tol, note = {"A": A_TOL, "ΔU": 0.005, "ΔO": O_TOL}[metric], f"{STRUCT_NOTE}; {NOTE}"
            rows += _interval_rows("tab:public-structural-replay-intervals", label, ppool[j], est, tol, note,
                                   f"{metric} ")
    rows.append(compare("zero law", "count–sum pair", "changed decisions (48 streams × 96 tasks × 10 maps)", 0,
                        _changed(dec, "pair"), 0.0, "exact"))
    rows.append(compare("zero law", "count–sum pair", "max |ΔU| over all decisions", 0.0, _max_abs_du(dec, "pair"),
                        0.0, "exact"))
    return rows


# ---------------------------------------------------------------- cross-fitted persistent agent


@dataclass(frozen=True, eq=False)
class PersistentReplay:
    """The folds and, per fold and fit, the replay of that fit's aligned trace on the evaluation streams."""

    folds: tuple[PersistentFold, ...]
    decisions: tuple[tuple[Decisions, ...], ...]
    worlds: tuple[PublicWorld, ...]


def run_persistent(world: PublicWorld, *, settings: PersistentSettings | None = None,
                   sigma: SlotSpec = PERSISTENT_SIGMA) -> PersistentReplay:
    """Cross-fit the persistent agent (two folds × the parameter seeds), then replay each fit's own aligned
    trace on its evaluation streams (rekey over the nine derangements, key-slot, value, pair)."""
    folds = cross_fit(world.adapt_utility, world.future_utility, arms=world.arms, strata=world.strata,
                      settings=settings or PersistentSettings())
    decs, worlds = [], []
    for f in folds:
        sub = world.select(f.eval_rows)
        fut, ev = sub.futures(), sub.evaluator()
        decs.append(tuple(replay(sub.history(f.adapt_actions[k]), fut, ev,
                                 PersistentAgent(fit.params, extra={"fold": f.name, "seed": fit.seed}).agent(),
                                 cells="value,pair,key_slot", maps="derangements", draws=[sigma], seed=SEED)
                          for k, fit in enumerate(f.fits)))
        worlds.append(sub)
    return PersistentReplay(folds, tuple(decs), tuple(worlds))


@cache
def _persistent() -> PersistentReplay:
    return run_persistent(public_world())


@cache
def _persistent_previous_l2() -> PersistentReplay:
    """The sensitivity run: the reading before issue 28 (mean squared error + 1e-4·Σθ²)."""
    return run_persistent(public_world(), settings=PersistentSettings(objective="mean"))


PAPER_FOLDS = {  # (cell, metric): fold I (est, L, U), fold II (est, L, U); ΔU in 10^-3
    ("Rekey", "A"): ((0.753, 0.750, 0.757), (0.620, 0.607, 0.631)),
    ("Rekey", "ΔU"): ((-0.602, -1.194, -0.023), (0.870, -0.016, 1.714)),
    ("Rekey", "ΔO"): ((-0.082, -0.099, -0.066), (0.027, 0.005, 0.048)),
    ("Key-slot", "A"): ((0.243, 0.191, 0.295), (0.240, 0.188, 0.292)),
    ("Key-slot", "ΔU"): ((-0.476, -0.854, -0.123), (0.285, -0.303, 0.819)),
    ("Key-slot", "ΔO"): ((-0.009, -0.027, 0.007), (0.003, -0.016, 0.021)),
    ("Value", "A"): ((0.000, 0.000, 0.000), (0.003, 0.000, 0.010)),
    ("Value", "ΔU"): ((0.000, 0.000, 0.000), (0.012, 0.000, 0.036)),
    ("Value", "ΔO"): ((0.000, 0.000, 0.000), (0.000, 0.000, 0.000)),
    ("Pair", "A"): ((0.306, 0.253, 0.358), (0.257, 0.215, 0.299)),
    ("Pair", "ΔU"): ((-0.786, -1.219, -0.397), (0.105, -0.321, 0.555)),
    ("Pair", "ΔO"): ((-0.027, -0.046, -0.010), (0.008, -0.007, 0.024)),
}
PERSIST_NOTE = ("16-dim recurrent agent fit on round-robin training traces (partB §4.3 CHOICE), the paper's written "
                "objective form (per-block Σ_arms ½(û − y)² averaged over blocks + (1e-4/2)·Σθ²), Adam "
                "lr 0.012, 500 epochs, clip 8, seeds 20260861–3, N(0, 0.1²) init; three fits averaged within a "
                "stream, 24 evaluation streams per fold; reproducible in distribution only")


def _fold_values(pr: PersistentReplay, i: int, cell: str) -> dict[str, np.ndarray]:
    per_fit = [_cell_values(d, cell, 1e3) for d in pr.decisions[i]]
    return {m: np.mean([v[m] for v in per_fit], axis=0) for m in ("A", "ΔU", "ΔO")}


PERSISTENT_KINDS = Kinds(
    columns=(("tab:public-persistent-agent-folds", "A estimate", Kind.PROPORTION),
             ("tab:public-persistent-agent-folds", "ΔU estimate", Kind.ESTIMATE),
             ("tab:public-persistent-agent-folds", "ΔO estimate", Kind.ESTIMATE),
             ("tab:content-measured", "Action", Kind.PROPORTION), ("tab:content-measured", "ΔU", Kind.ESTIMATE),
             ("tab:content-measured", "ΔO", Kind.ESTIMATE), ("persistent agent", "aligned replay vs *", Kind.DESIGN)),
    intervals=_CI)
"""Per fold and cell: the action response (a share) and ΔU (×10⁻³), ΔO with their intervals; replaying the
aligned cell reproduces the closed loop exactly."""


@register_reproduction("public-persistent-agent-folds", "Cross-fitted persistent recurrent agent on measured "
                       "outcomes (two folds)", issue="4", kinds=PERSISTENT_KINDS)
def public_persistent_agent_folds() -> list[Comparison]:
    pr = _persistent()
    rows: list[Comparison] = []
    for i, f in enumerate(pr.folds):
        for label, cell in CELL_ROWS:
            vals = _fold_values(pr, i, cell)
            for metric in ("A", "ΔU", "ΔO"):
                est = _ci(vals[metric], f"persistent-{f.name}-{cell}-{metric}")
                paper = PAPER_FOLDS[(label, metric)][i]
                tol = {"A": A_TOL, "ΔU": CONTRAST_TOL, "ΔO": O_TOL}[metric]
                note = f"{'10^-3 units; ' if metric == 'ΔU' else ''}{PERSIST_NOTE}"
                rows += _interval_rows("tab:public-persistent-agent-folds", f"Fold {f.name} {label}", paper, est, tol,
                                       note, f"{metric} ")
                rows.append(compare("tab:content-measured", f"Fold {f.name} {label}",
                                    {"A": "Action", "ΔU": "ΔU", "ΔO": "ΔO"}[metric], paper[0], est[0], tol, note))
        mism = 0
        for k, d in enumerate(pr.decisions[i]):
            fut = np.asarray([d.plan.labels.index(a) for a in pr.worlds[i].arms])[f.future_actions[k]]
            mism += int((d.actions[0, 0, 0, 0].reshape((*fut.shape, -1)) != fut[..., None]).sum())
        rows.append(compare("persistent agent", f"Fold {f.name}", "aligned replay vs closed-loop future actions "
                            "(mismatches)", 0, mism, 0.0, "exact: same parameters, same trace, same arithmetic"))
        for fit in f.fits:
            rows.append(compare("persistent agent", f"Fold {f.name} seed {fit.seed}", "final training loss", None,
                                fit.final_loss, None, f"initial {fit.initial_loss:.4f}; written objective"))
    return rows + _persistent_sensitivity_rows()


def _persistent_sensitivity_rows() -> list[Comparison]:
    """Rekey and pair estimates under the previous ℓ2 reading, shown as labelled sensitivity rows (not counted)."""
    pr = _persistent_previous_l2()
    rows = []
    for i, f in enumerate(pr.folds):
        for label, cell in CELL_ROWS:
            if label not in ("Rekey", "Pair"):
                continue
            vals = _fold_values(pr, i, cell)
            for metric in ("A", "ΔU"):
                est = _ci(vals[metric], f"persistent-{f.name}-{cell}-{metric}")
                rows.append(compare("tab:public-persistent-agent-folds", f"Fold {f.name} {label}",
                                    f"{metric} estimate", PAPER_FOLDS[(label, metric)][i][0], est[0], None,
                                    sensitivity="previous ℓ2 reading (mean squared error + 1e-4·Σθ², before "
                                                "issue 28)"))
    return rows


# ---------------------------------------------------------------- utility resolution


def resolution_rows(du: np.ndarray, switched: np.ndarray, stream: np.ndarray) -> dict[str, float]:
    """The paper's decomposition over paired items (one ΔU, one switch flag and one stream per item).

    ΔU and |ΔU| average within each stream, then over streams; |ΔU| | S and harm / tie / gain average over the
    switched items within each stream, then over the N_S streams with a switch.
    """
    du, switched, stream = np.asarray(du, dtype=np.float64), np.asarray(switched, dtype=bool), np.asarray(stream)
    ids = np.unique(stream)
    net, ab, cond, harm, tie, gain = [], [], [], [], [], []
    for s in ids:
        m = stream == s
        net.append(du[m].mean())
        ab.append(np.abs(du[m]).mean())
        sw = du[m & switched]
        if sw.size:
            cond.append(np.abs(sw).mean())
            harm.append(np.mean(sw < 0))
            tie.append(np.mean(sw == 0))
            gain.append(np.mean(sw > 0))
    n_s = len(cond)
    return {"N_S": float(n_s), "ΔU": float(np.mean(net)), "|ΔU|": float(np.mean(ab)),
            "|ΔU| | S": float(np.mean(cond)) if n_s else 0.0, "Harm": float(np.mean(harm)) if n_s else 0.0,
            "Tie": float(np.mean(tie)) if n_s else 0.0, "Gain": float(np.mean(gain)) if n_s else 0.0}


def _measured_items(pr: PersistentReplay, cell: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ΔU, switched, stream id) over task × map × fit items of both folds (48 evaluation streams)."""
    dus, sws, sts = [], [], []
    for i, f in enumerate(pr.folds):
        for d in pr.decisions[i]:
            u = d.chosen_utility()
            if cell == "rekey":
                du = u[0, 1:, 0, 0] - u[0, :1, 0, 0]
                sw = d.actions[0, 1:, 0, 0] != d.actions[0, :1, 0, 0]
            else:
                c = d.cell_index(cell)
                du = u[c, :1, 0, 0] - u[0, :1, 0, 0]
                sw = d.actions[c, :1, 0, 0] != d.actions[0, :1, 0, 0]
            ids = np.asarray(f.eval_rows)[d.stream_idx]
            dus.append(du.reshape(-1))
            sws.append(sw.reshape(-1))
            sts.append(np.broadcast_to(ids, du.shape).reshape(-1))
    return np.concatenate(dus), np.concatenate(sws), np.concatenate(sts)


PAPER_RESOLUTION = {  # N_S, ΔU, |ΔU|, |ΔU| | S (10^-3), harm, tie, gain
    "Measured: rekey": (48, 0.134, 15.088, 22.115, 0.376, 0.250, 0.375),
    "Measured: key-slot": (45, -0.096, 6.100, 25.812, 0.433, 0.152, 0.416),
    "Measured: pair": (47, -0.341, 7.227, 25.784, 0.455, 0.127, 0.418),
}


def best_second_gap(future_utility: np.ndarray) -> np.ndarray:
    """Per-stream mean of (best − second-best utility) over its future tasks (0 on a tie for the best)."""
    srt = np.sort(np.asarray(future_utility, dtype=np.float64), axis=-1)
    gap = srt[..., -1] - srt[..., -2]
    return gap.reshape(gap.shape[0], -1).mean(axis=1)


RESOLUTION_KINDS = Kinds(columns=(
    ("tab:utility-resolution-compact", "N_S", Kind.COUNT), ("tab:utility-resolution-compact", "ΔU", Kind.ESTIMATE),
    ("tab:utility-resolution-compact", "|ΔU|*", Kind.MAGNITUDE),
    ("tab:utility-resolution-compact", "Harm", Kind.PROPORTION),
    ("tab:utility-resolution-compact", "Tie", Kind.PROPORTION),
    ("tab:utility-resolution-compact", "Gain", Kind.PROPORTION),
    ("consistency", "harm + tie + gain", Kind.DESIGN), ("best vs second-best gap", "*", Kind.MAGNITUDE)))
"""Switch counts, signed and absolute utility changes (×10⁻³), harm / tie / gain shares, the best − second-best gap."""


@register_reproduction("utility-resolution", "Utility resolution and action switches (harm / tie / gain) on "
                       "measured outcomes", issue="4", kinds=RESOLUTION_KINDS)
def utility_resolution() -> list[Comparison]:
    w = public_world()
    pr = _persistent()
    rows: list[Comparison] = []
    cols = ("N_S", "ΔU", "|ΔU|", "|ΔU| | S", "Harm", "Tie", "Gain")
    for name, cell in (("Measured: rekey", "rekey"), ("Measured: key-slot", "key_slot"), ("Measured: pair", "pair")):
        res = resolution_rows(*_measured_items(pr, cell))
        paper = dict(zip(cols, PAPER_RESOLUTION[name], strict=True))
        for col in cols:
            ours = res[col] * (1e3 if col in ("ΔU", "|ΔU|", "|ΔU| | S") else 1.0)
            tol = {"N_S": 6.0, "ΔU": CONTRAST_TOL, "|ΔU|": 5.0, "|ΔU| | S": 5.0}.get(col, 0.1)
            rows.append(compare("tab:utility-resolution-compact", name, col, paper[col], ours, tol,
                                "utility columns in 10^-3 (tolerance 5), shares 0.1, N_S 6 streams; items = task × "
                                "map × fit pooled within a stream (partB §19.18 CHOICE), both folds (48 streams); "
                                f"{PERSIST_NOTE}"))
        s = res["Harm"] + res["Tie"] + res["Gain"]
        rows.append(compare("consistency", name, "harm + tie + gain", 1.0, s if res["N_S"] else 1.0, 1e-12, ""))
    gaps = best_second_gap(w.future_utility) * 1e3
    rows.append(compare("best vs second-best gap", "measured (48 streams)", "mean of stream means (10^-3)", 15.253,
                        float(gaps.mean()), 3.0, "read from the counterfactual future tables; tolerance 3 × 10^-3; "
                        + NOTE))
    rows.append(compare("best vs second-best gap", "measured (48 streams)", "median of stream means (10^-3)", 14.908,
                        float(np.median(gaps)), 3.0, "tolerance 3 × 10^-3; " + NOTE))
    regret = np.concatenate([(d.utility.max(axis=1) - d.chosen_utility()[0, 0, 0, 0]) for ds in pr.decisions
                             for d in ds])
    for thr in (0.0, 0.001, 0.005, 0.010, 0.020, 0.050):
        rows.append(compare("near-optimal rate", "measured aligned (both folds, 3 fits)", f"regret ≤ {thr:g}", None,
                            float(np.mean(regret <= thr + 1e-12)), None, "paper: values not printed"))
    for col, pv in zip(cols, (48, -4.722, 21.477, 21.477, 0.375, 0.260, 0.365), strict=True):
        rows.append(compare("tab:utility-resolution-compact", "Astra: reassignment", col, pv, None, None,
                            "needs the hosted GPT-6 Astra logs; not reproducible here"))
    return rows


# ---------------------------------------------------------------- map-family sensitivity (primary substrate)

PAPER_ROBUSTNESS = {  # stratum: U min, U max, O min, O max
    "Pooled: primary": (0.275, 0.320, -0.424, -0.391),
    ("source", "low"): (0.556, 0.675, -0.578, -0.466),
    ("source", "high"): (0.623, 0.700, -0.793, -0.705),
    ("temporal", "low"): (0.250, 0.254, -0.664, -0.659),
    ("temporal", "high"): (0.091, 0.144, -0.425, -0.342),
    ("survival", "balanced"): (0.043, 0.081, -0.074, -0.050),
    ("survival", "rare"): (0.051, 0.095, -0.085, -0.039),
}
N_SENSITIVITY_DRAWS = 5


def sensitivity_draws(n: int = N_SENSITIVITY_DRAWS) -> tuple[SlotSpec, ...]:
    """The fixed placebo draws: the synthetic suite's σ* first, then value derangements from seeds 20260824 + k;
    the time and reorder seeds, the trace and the maps stay fixed."""
    from .synthetic_suite import SIGMA

    return tuple(SlotSpec(value_seed=SIGMA.value_seed + 1000 * k, time_seed=SIGMA.time_seed,
                          reorder_seed=SIGMA.reorder_seed) for k in range(n))


@cache
def _sensitivity_decisions() -> Decisions:
    from .synthetic_suite import suite

    s = suite()
    h, f, e = s.world.history(s.ocrr.adapt_actions), s.world.futures(), s.world.evaluator()
    return replay(h, f, e, ocrr_agent("ocrr"), cells="value", maps="derangements", draws=list(sensitivity_draws()),
                  seed=20260822)


def _gamma_by_draw(dec: Decisions, y: str, stratum: int | None) -> np.ndarray:
    """Γ_y^value = ⟨δ_y^aligned − δ_y^value⟩ for each draw (pooled over the nine maps and the streams)."""
    c = dec.cell_index("value")
    r = dec.chosen_utility() if y == "U" else dec.correct().astype(np.float64)
    out = []
    for d in range(dec.actions.shape[2]):
        def dlt(ci: int, _d: int = d) -> np.ndarray:
            x = r[ci, :, _d, 0]
            return x[0][None] - x[1:] if y == "U" else x[1:] - x[0][None]
        per = dlt(0) - dlt(c)  # (9, N)
        if stratum is None:
            out.append(float(pool_tasks(per, dec).mean()))
        else:
            m = dec.stratum_idx == stratum
            out.append(float(per[:, m].mean()))
    return np.asarray(out)


MAP_FAMILY_KINDS = Kinds(columns=(
    ("tab:primary-operator-robustness", "*", Kind.ESTIMATE), ("map-family sensitivity", "strata with *", Kind.COUNT),
    ("tab:changed-substrate-map-summary (ranges)", "*", Kind.ESTIMATE)))
"""Ranges (min, max) of Γ_U and Γ_O over draws and maps are signed estimates; the strata counts are measured."""


@register_reproduction("map-family-sensitivity", "Map-family sensitivity: five fixed placebo draws × nine maps "
                       "(primary and changed substrates)", issue="4", kinds=MAP_FAMILY_KINDS)
def map_family_sensitivity() -> list[Comparison]:
    dec = _sensitivity_decisions()
    rows: list[Comparison] = []
    note = ("Γ^value (aligned − value-permutation null) of OCRR on the rebuilt primary synthetic substrate, nine "
            "derangements, five fixed value-derangement draws (partB §14 CHOICE; draw 0 is the synthetic suite's σ*, "
            "so it equals `semantic-null`'s OCRR − value null, 0.213 vs the paper's 0.304); min / max over the "
            "draws; tolerance 0.05 as the synthetic interactions")
    pos_u, neg_o = 0, 0
    for key, paper in PAPER_ROBUSTNESS.items():
        if isinstance(key, str):
            gu, go, name = _gamma_by_draw(dec, "U", None), _gamma_by_draw(dec, "O", None), key
        else:
            s = dec.plan.strata.index(key)
            gu, go, name = _gamma_by_draw(dec, "U", s), _gamma_by_draw(dec, "O", s), "/".join(key)
            pos_u += int(np.all(gu > 0))
            neg_o += int(np.all(go < 0))
        for col, p, v in zip(("U min", "U max", "O min", "O max"), paper,
                             (gu.min(), gu.max(), go.min(), go.max()), strict=True):
            rows.append(compare("tab:primary-operator-robustness", name, col, p, float(v), 0.05, note))
    rows.append(compare("map-family sensitivity", "six nonpooled strata", "strata with U > 0 in every draw", 6,
                        pos_u, 0.0, "paper: the utility interaction is positive in each nonpooled stratum"))
    rows.append(compare("map-family sensitivity", "six nonpooled strata", "strata with O < 0 in every draw", 6,
                        neg_o, 0.0, "paper: the oracle-match interaction is negative in each nonpooled stratum"))
    return rows + _placebo_range_rows()


# ---------------------------------------------------------------- the public example


def write_example(out_dir: str | os.PathLike[str], *, n_streams: int = 8, seed: int = SEED,
                  agent: str = "ocrr", data_dir: str | os.PathLike[str] | None = None) -> dict[str, Path]:
    """Write a small audit-ready example from real measured outcomes.

    Builds the first ``n_streams`` streams of the measured-outcome substrate (the same tables as the first rows
    of the 48-stream world), runs the ``agent`` ledger (``ocrr`` or ``ucb1``) closed-loop to log its adaptation
    history, and writes ``history.jsonl`` (the logged records: stream, block, slot, task, arm, measured held-out
    utility), ``future.jsonl`` (24 future tasks per stratum, menu = the four sampling arms) and
    ``utilities.jsonl`` (every arm's measured utility on every future task), plus ``example.json`` (provenance).
    Returns the paths by role.  Needs the verified data copies (``replaylens paper data fetch --all``).
    """
    if agent not in ("ocrr", "ucb1"):
        from ...errors import ConfigError

        raise ConfigError(f"example agent must be 'ocrr' or 'ucb1'; got {agent!r}")
    world = build_public(n_streams, seed=seed, data_dir=data_dir)
    arms = world.arms
    res = run_closed_loop(ClosedLoopWorld(world), AgentController(ocrr_agent(agent), arms), seed=seed)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    src = "replaylens public example"
    paths = {
        "history": write_history(world.history(res.adapt_actions, source=src), out / "history.jsonl"),
        "future": write_futures(world.futures(source=src), out / "future.jsonl"),
        "utilities": write_evaluator(world.evaluator(source=src), out / "utilities.jsonl"),
    }
    meta = {
        "description": (f"{agent.upper()} adaptation history on {n_streams} streams of the ReplayLens measured-outcome "
                        "substrate (breast cancer and red wine; iid and shifted contexts). Each record's outcome is "
                        "the held-out utility exp(-log loss) of a ridge-logistic model fitted on the 24 observations "
                        "the chosen sampling arm selected."),
        "agent": agent, "n_streams": n_streams, "seed": seed, "strata": ["/".join(s) for s in world.strata],
        "arms": list(arms), "data_sha256": dict(world.data_sha256), "world_fingerprint": world.fingerprint(),
        "audit": (f"replaylens audit --history {paths['history']} --future {paths['future']} "
                  f"--utilities {paths['utilities']} --agent replaylens.paper.controllers:ocrr_agent "
                  + ("--agent-param variant=ucb1 " if agent == "ucb1" else "") + f"--out {out / 'audit'}"),
    }
    meta_path = out / "example.json"
    meta_path.write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    paths["manifest"] = meta_path
    return paths



# ---------------------------------------------------------------- changed substrate (partB §2)

CHANGED_SEED = 20260951
"""Changed-substrate seed (the paper publishes none); also the closed-loop seed there."""
CHANGED_HS_OFFSET = "task"
"""Reading of the HS future offset: a drift over the 48 future tasks (partB §2.2 FLAG alternative, adopted over the
per-candidate CHOICE by the paper's own per-stratum endpoint; docs/decisions.md, issue 14 (b))."""
SELECTED_SIGMA = SlotSpec(value_seed=20260971, time_seed=20260972, reorder_seed=20260973)
"""Selected-only calibration: value and pair share one 48-slot derangement per block."""
CHANGED_NOTE = ("changed substrate rebuilt from the paper's equations and partB §2 CHOICEs (seed 20260951; draws "
                "differ from the paper's); contrasts in normalized utility, tolerance 0.03 (U) and 0.05 (A, O)")
CHANGED_FIT_ROWS = (tuple(range(24)), tuple(range(24, 48)))


def placebo_draws(n: int = N_SENSITIVITY_DRAWS) -> tuple[SlotSpec, ...]:
    """Five fixed time-preserving placebo draws: an independent uniform 48-slot permutation per block (time law
    ``permutation``), time seeds 20260962 + 1000k."""
    return tuple(SlotSpec(value_seed=20260961, time_seed=20260962 + 1000 * k, reorder_seed=20260963)
                 for k in range(n))


@dataclass(frozen=True, eq=False)
class ChangedSuite:
    world: ChangedWorld
    ocrr: ClosedLoopResult
    no_update: ClosedLoopResult
    fixed_label: Decisions
    placebo: Decisions
    selected: Decisions
    fit: SelectedOnlyFit
    fits: tuple[SelectedOnlyFit, ...]


@cache
def changed_suite() -> ChangedSuite:
    """World, OCRR / No update closed loops and the three replays of the changed substrate (cached)."""
    w = build_changed(N_STREAMS, seed=CHANGED_SEED, hs_offset=CHANGED_HS_OFFSET)
    ocrr = run_closed_loop(w, AgentController(changed_ocrr_agent(), w.arms, cost=12.0), seed=CHANGED_SEED)
    nou = run_closed_loop(w, NoUpdate(w.arms, cost=12.0), seed=CHANGED_SEED)
    h, f, e = w.history(ocrr.adapt_actions), w.futures(), w.evaluator()
    fixed = replay(h, f, e, changed_ocrr_agent(), cells="", maps="derangements", seed=CHANGED_SEED)
    plac = replay(h, f, e, changed_ocrr_agent(), cells="key_slot", maps="derangements", draws=list(placebo_draws()),
                  seed=CHANGED_SEED)
    fit_rows, ev_rows = CHANGED_FIT_ROWS
    tr = list(fit_rows)
    fits = tuple(fit_selected_only(ocrr.adapt_actions[tr].reshape(-1, ocrr.adapt_actions.shape[2]),
                                   ocrr.adapt_utility[tr].reshape(-1, ocrr.adapt_utility.shape[2]), arms=w.arms,
                                   seed=sd) for sd in range(5))
    best = min(fits, key=lambda x: x.final_loss)
    sub = w.select(ev_rows)
    sel = replay(sub.history(ocrr.adapt_actions[list(ev_rows)]), sub.futures(), sub.evaluator(), best.writer.agent(),
                 cells="value,pair", maps="derangements", draws=[SELECTED_SIGMA], seed=CHANGED_SEED)
    return ChangedSuite(w, ocrr, nou, fixed, plac, sel, best, fits)


def _stratum_stream_values(per_task: np.ndarray, dec: Decisions, s: int) -> np.ndarray:
    """[..., N] per-task values → per-stream means over stratum s's tasks (streams in plan order)."""
    m = dec.stratum_idx == s
    n_streams = len(dec.plan.streams)
    idx = dec.stream_idx[m]
    sums = np.zeros((*per_task.shape[:-1], n_streams))
    for r in range(n_streams):
        sums[..., r] = per_task[..., m][..., idx == r].mean(axis=-1)
    return sums


def _p(values: np.ndarray, tag: str) -> float:
    return float(sign_flip_test(values, n_resamples=B, rng=derive_seed(CHANGED_SEED, "sf", tag)).pvalue)


PAPER_CHANGED_STRATA = {("hypothesis", "low"): 0.094, ("hypothesis", "high"): 0.069,
                        ("validation", "low"): 0.436, ("validation", "high"): 0.103}
PAPER_FIXED_LABEL = {"ACMR": 0.223, "ARMC": 0.218, "AMCR": 0.223, "RCMA": 0.268, "RMCA": 0.268, "RMAC": 0.263,
                     "MCAR": 0.177, "MRCA": 0.176, "MRAC": 0.171}


def _map_initials(images: Sequence[int], arms: Sequence[str]) -> str:
    return "".join(arms[i][0].upper() for i in images)


CHANGED_ENDPOINT_KINDS = Kinds(
    columns=(("changed-substrate endpoint", "estimate", Kind.ESTIMATE),
             ("changed-substrate endpoint", "OCRR − No update", Kind.ESTIMATE),
             ("changed-substrate endpoint", "mismatches vs closed-loop future", Kind.DESIGN),
             ("consistency", "pooled − mean of strata", Kind.DESIGN),
             ("tab:cross-substrate-replay", "OCRR − replay", Kind.ESTIMATE),
             ("tab:cross-substrate-replay", "positive strata", Kind.COUNT)),
    intervals=_CI)


@register_reproduction("changed-substrate-endpoint", "Changed substrate: OCRR − No update and the fixed-label "
                       "replay over the nine derangements", issue="4", kinds=CHANGED_ENDPOINT_KINDS)
def changed_substrate_endpoint() -> list[Comparison]:
    cs = changed_suite()
    w = cs.world
    rows: list[Comparison] = []
    diff = cs.ocrr.future_utility - cs.no_update.future_utility
    vals = diff.mean(axis=(1, 2))
    est = _ci(vals, "changed-endpoint")
    rows += _interval_rows("changed-substrate endpoint", "OCRR − No update (pooled)", (0.175, 0.171, 0.180), est,
                           LEVEL_TOL, CHANGED_NOTE)
    rows.append(compare("changed-substrate endpoint", "OCRR − No update (pooled)", "sign-flip p", 0.0001,
                        _p(vals, "endpoint"), None, "paper: p < 0.0001 (20,000 draws: smallest p ≈ 5e-5)"))
    for s, st in enumerate(w.strata):
        rows.append(compare("changed-substrate endpoint", "/".join(st), "OCRR − No update", PAPER_CHANGED_STRATA[st],
                            float(diff[:, s].mean()), LEVEL_TOL, CHANGED_NOTE))
    rows.append(compare("consistency", "OCRR − No update", "pooled − mean of strata", 0.0,
                        float(vals.mean() - diff.mean(axis=(0, 2)).mean()), 1e-12, ""))
    dec = cs.fixed_label
    u = dec.chosen_utility()[0, :, 0, 0]
    for k in range(1, u.shape[0]):
        name = _map_initials(dec.plan.maps[k].images, w.arms)
        per = u[0] - u[k]
        pooled = float(pool_tasks(per, dec).mean())
        pos = sum(float(per[dec.stratum_idx == s].mean()) > 0 for s in range(len(w.strata)))
        rows.append(compare("tab:cross-substrate-replay", f"{k} {name}", "OCRR − replay", PAPER_FIXED_LABEL[name],
                            pooled, LEVEL_TOL, CHANGED_NOTE))
        rows.append(compare("tab:cross-substrate-replay", f"{k} {name}", "positive strata", 4, pos, 0.0,
                            CHANGED_NOTE))
    aligned = dec.actions[0, 0, 0, 0].reshape(cs.ocrr.future_actions.shape)
    rows.append(compare("changed-substrate endpoint", "OCRR aligned replay", "mismatches vs closed-loop future", 0,
                        int((aligned != cs.ocrr.future_actions).sum()), 0.0, "exact (same ledger, same trace)"))
    return rows


PAPER_SELECTED = {"U": (0.012, 0.005, 0.020, 0.0040), "A": (0.054, 0.022, 0.084, 0.0027),
                  "O": (-0.049, -0.077, -0.021, 0.0028)}
PAPER_SELECTED_STRATA = {("hypothesis", "low"): (0.009, 0.028, -0.087), ("hypothesis", "high"): (0.001, 0.009, -0.005),
                         ("validation", "low"): (0.030, 0.069, -0.069),
                         ("validation", "high"): (0.010, 0.111, -0.036)}
SELECTED_NOTE = ("selected-outcome-only writer h = Σ(u − ½)p_ℓ (p ∈ ℝ⁸, exact per-key sums), leave-one-out fit on "
                 "the OCRR trace of streams 0–23 (Adam lr 0.01, 2,000 steps, λ 1e-4, seeds 0–4, lowest training "
                 "loss kept), evaluated on streams 24–47; value and pair share one 48-slot derangement; ")


CHANGED_SELECTED_KINDS = Kinds(
    columns=(("changed-substrate selected-only", "estimate", Kind.ESTIMATE),
             ("tab:cross-substrate-selected-only", "Γ_*", Kind.ESTIMATE),
             ("tab:cross-substrate-selected-only", "pair changes (of 10,368)", Kind.DESIGN),
             ("tab:cross-substrate-selected-only", "compared actions per stratum", Kind.DESIGN)),
    intervals=_CI)


@register_reproduction("changed-substrate-selected-only", "Changed substrate: fitted selected-outcome-only writer "
                       "(aligned − value interactions)", issue="4", kinds=CHANGED_SELECTED_KINDS)
def changed_substrate_selected_only() -> list[Comparison]:
    cs = changed_suite()
    dec = cs.selected
    rows: list[Comparison] = []
    note = SELECTED_NOTE + CHANGED_NOTE
    for y in ("U", "A", "O"):
        g = gamma(dec, y, "value")
        est = _ci(g.values, f"selected-{y}")
        tol = LEVEL_TOL if y == "U" else O_TOL
        rows += _interval_rows("changed-substrate selected-only", f"Γ_{y} (pooled, 24 held-out streams)",
                               PAPER_SELECTED[y][:3], est, tol, note)
        rows.append(compare("changed-substrate selected-only", f"Γ_{y} (pooled, 24 held-out streams)", "sign-flip p",
                            PAPER_SELECTED[y][3], _p(g.values, f"selected-{y}"), None, "descriptive"))
    c = dec.cell_index("pair")
    for s, st in enumerate(dec.plan.strata):
        for j, y in enumerate(("U", "A", "O")):
            per = _gamma_per_task(dec, y)
            rows.append(compare("tab:cross-substrate-selected-only", "/".join(st), f"Γ_{y}",
                                PAPER_SELECTED_STRATA[st][j], float(per[:, dec.stratum_idx == s].mean()),
                                LEVEL_TOL if y == "U" else O_TOL, note))
        m = dec.stratum_idx == s
        changes = int((dec.actions[c][..., m] != dec.actions[0][..., m]).sum())
        rows.append(compare("tab:cross-substrate-selected-only", "/".join(st), "pair changes (of 10,368)", 0, changes,
                            0.0, "structural: the writer reads exact per-key sums"))
        rows.append(compare("tab:cross-substrate-selected-only", "/".join(st), "compared actions per stratum", 10368,
                            int(m.sum()) * (len(dec.plan.maps) - 1), 0.0, "24 streams × 48 tasks × 9 maps"))
    rows.append(compare("changed-substrate selected-only", "fit", "final training loss (kept restart)", None,
                        cs.fit.final_loss, None, f"seed {cs.fit.seed}; all: "
                        + ", ".join(f"{f.final_loss:.5f}" for f in cs.fits)))
    return rows


def _gamma_per_task(dec: Decisions, y: str, cell: str = "value", draw: int = 0) -> np.ndarray:
    """[9, N] per-task δ_y^aligned − δ_y^cell for the non-identity maps (structural orientation)."""
    c = dec.cell_index(cell)
    if y == "A":
        a = dec.actions[:, :, draw, 0]
        return (a[0, 1:] != a[0, :1]).astype(np.float64) - (a[c, 1:] != a[c, :1]).astype(np.float64)
    r = dec.chosen_utility()[:, :, draw, 0] if y == "U" else dec.correct()[:, :, draw, 0].astype(np.float64)
    if y == "U":
        return (r[0, :1] - r[0, 1:]) - (r[c, :1] - r[c, 1:])
    return (r[0, 1:] - r[0, :1]) - (r[c, 1:] - r[c, :1])


PAPER_PLACEBO = {  # stratum: (U est, L, U), (O est, L, U)
    "Pooled": ((0.327, 0.316, 0.338), (-0.980, -1.010, -0.948)),
    ("hypothesis", "low"): ((0.245, 0.227, 0.263), (-1.231, -1.249, -1.211)),
    ("hypothesis", "high"): ((0.178, 0.160, 0.195), (-0.741, -0.794, -0.681)),
    ("validation", "low"): ((0.722, 0.698, 0.744), (-1.333, -1.333, -1.333)),
    ("validation", "high"): ((0.163, 0.132, 0.191), (-0.615, -0.724, -0.491)),
}
PAPER_PLACEBO_RANGES = {
    "Pooled": (0.322, 0.332, -0.992, -0.973),
    ("hypothesis", "low"): (0.245, 0.252, -1.231, -1.205),
    ("hypothesis", "high"): (0.166, 0.187, -0.756, -0.715),
    ("validation", "low"): (0.699, 0.727, -1.333, -1.333),
    ("validation", "high"): (0.159, 0.171, -0.648, -0.606),
}
PLACEBO_NOTE = ("time-preserving placebo: OCRR outcomes stay in their slots, labels permuted within each 48-slot "
                "block by an independent uniform permutation (the key-slot cell, law `permutation`); Γ = δ_aligned "
                "− δ_placebo over the nine maps; ")


CHANGED_PLACEBO_KINDS = Kinds(
    columns=(("time-preserving placebo", "blocks left identical (of 192)", Kind.COUNT),
             ("time-preserving placebo", "U", Kind.ESTIMATE),
             ("time-preserving placebo", "future actions changed", Kind.PROPORTION),
             ("tab:changed-substrate-map-summary", "estimate", Kind.ESTIMATE),
             ("tab:changed-substrate-map-summary (ranges)", "*", Kind.ESTIMATE)),
    intervals=_CI)


@register_reproduction("changed-substrate-placebo", "Changed substrate: time-preserving placebo "
                       "(tab:changed-substrate-map-summary, upper block)", issue="4", kinds=CHANGED_PLACEBO_KINDS)
def changed_substrate_placebo() -> list[Comparison]:
    cs = changed_suite()
    dec = cs.placebo
    w = cs.world
    note = PLACEBO_NOTE + CHANGED_NOTE
    rows: list[Comparison] = []
    acts = cs.ocrr.adapt_actions
    spec = placebo_draws()[0]
    changed = identical = 0
    blocks = np.repeat(np.arange(acts.shape[1]), acts.shape[2])
    for r in range(acts.shape[0]):
        seq = acts[r].reshape(-1)
        moved = seq[stream_perm(spec, "time", w.streams[r], blocks)]
        changed += int((moved != seq).sum())
        identical += int(sum(np.array_equal(moved[blocks == b], seq[blocks == b]) for b in range(acts.shape[1])))
    rows.append(compare("time-preserving placebo", "OCRR trace", "labels changed (of 9,216)", 2802, changed, None,
                        "paper's count equals the primary substrate's (partB §2.8 FLAG): shown, not compared"))
    rows.append(compare("time-preserving placebo", "OCRR trace", "blocks left identical (of 192)", 0, identical, 0.0,
                        "a block stays identical only if its labels are all equal or the permutation fixes them; "
                        + note))
    u = dec.chosen_utility()[:, 0, 0, 0]
    direct = pool_tasks(u[0] - u[1], dec)
    rows.append(compare("time-preserving placebo", "aligned − placebo (ρ = id)", "U", 0.246, float(direct.mean()),
                        LEVEL_TOL, note))
    rows.append(compare("time-preserving placebo", "aligned − placebo (ρ = id)", "future actions changed", 0.974,
                        float(np.mean(dec.actions[1, 0, 0, 0] != dec.actions[0, 0, 0, 0])), O_TOL, note))
    for key, paper in PAPER_PLACEBO.items():
        for y, pv in (("U", paper[0]), ("O", paper[1])):
            per = _gamma_per_task(dec, y, "key_slot")
            if isinstance(key, str):
                vals, name = pool_tasks(per, dec).mean(axis=0), "pooled"
            else:
                vals, name = _stratum_stream_values(per, dec, dec.plan.strata.index(key)).mean(axis=0), "/".join(key)
            est = _ci(vals, f"placebo-{name}-{y}")
            rows += _interval_rows("tab:changed-substrate-map-summary", f"{name} Γ_{y}", pv, est,
                                   LEVEL_TOL if y == "U" else O_TOL, note)
    return rows


def _placebo_range_rows() -> list[Comparison]:
    cs = changed_suite()
    dec = cs.placebo
    note = PLACEBO_NOTE + "min / max over five fixed placebo draws; " + CHANGED_NOTE
    rows = []
    for key, paper in PAPER_PLACEBO_RANGES.items():
        gu = np.array([_gamma_per_task(dec, "U", "key_slot", d) for d in range(dec.actions.shape[2])])
        go = np.array([_gamma_per_task(dec, "O", "key_slot", d) for d in range(dec.actions.shape[2])])
        if isinstance(key, str):
            u = np.array([pool_tasks(x, dec).mean() for x in gu])
            o = np.array([pool_tasks(x, dec).mean() for x in go])
            name = "changed: pooled"
        else:
            m = dec.stratum_idx == dec.plan.strata.index(key)
            u, o, name = gu[:, :, m].mean(axis=(1, 2)), go[:, :, m].mean(axis=(1, 2)), "changed: " + "/".join(key)
        for col, p, v, tol in (("U min", paper[0], u.min(), LEVEL_TOL), ("U max", paper[1], u.max(), LEVEL_TOL),
                               ("O min", paper[2], o.min(), O_TOL), ("O max", paper[3], o.max(), O_TOL)):
            rows.append(compare("tab:changed-substrate-map-summary (ranges)", name, col, p, float(v), tol, note))
    return rows
