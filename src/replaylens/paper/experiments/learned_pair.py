"""Independent learned endpoint pair (paper L756–848, main-text Table 1; core spec §10).

Two reproductions share one run of the paper's design (5 fits; additive and 16-dimensional
recurrent writers trained with the paper's settings; 4 recurrent restarts per fit):

* ``endpoint-separation`` — tab:content-fit-pairs (per-fit calibration / holdout pair response with
  95% episode-bootstrap limits), Table 1 (tab:endpoint-separation), the means over fits and the blind
  classification table;
* ``learned-endpoint-fits`` — tab:independent-endpoint-pair-endpoint (A_0, A_∅, U_∅, O_∅ per fit and
  writer), the endpoint gate, final training BCE and timing.

Structural values are compared exactly (A_0 = 0, A_∅ = 0.750, additive pair response 0, equal
columns of the two writers, the decoder accuracies); stochastic ones in distribution with the
tolerances below, fixed before any result was seen.  The run is cached in-process, so
``replaylens paper reproduce --all`` trains once.
"""

from __future__ import annotations

import functools
import os

from ...inference import BootstrapResult, cluster_bootstrap
from ...rng import derive_seed
from ..learned import LearnedPairConfig, LearnedPairResult, numerical_path, run_learned_pair
from ..reproduce import Comparison, Interval, Kind, Kinds, compare, register_reproduction

__all__ = [
    "BOOTSTRAP_DRAWS",
    "PAPER_ENDPOINT",
    "PAPER_REPLAY",
    "endpoint_fit_rows",
    "endpoint_separation_rows",
    "episode_intervals",
    "paper_result",
]

BOOTSTRAP_DRAWS = 4096
"""Episode-bootstrap draws per fit, writer and split (spec REC, as the learned control)."""

NOTE = "reproducible in distribution only; seeds and framework differ"
PER_FIT_TOL = 0.25
"""Recurrent per-fit pair response: the paper's fits span 0.538–0.796, the spec's reference run 0.50–0.88."""
MEAN_TOL = 0.10
"""Recurrent pair response averaged over the five fits."""
U_TOL, O_TOL = 0.015, 0.025
"""Per-fit U_∅ / O_∅ (≈3 sd of a mean over 96 sequences of 48 i.i.d. Uniform(0, 1) rows)."""
U_MEAN_TOL, O_MEAN_TOL = 0.01, 0.015
BCE_TOL = 0.0005
"""The paper: final training BCE "rounds to 0.199" for each retained writer."""

PAPER_REPLAY: dict[int, tuple[float, float, float, float, float, float]] = {
    1: (0.703, 0.635, 0.776, 0.738, 0.671, 0.804),
    2: (0.646, 0.531, 0.750, 0.538, 0.431, 0.642),
    3: (0.682, 0.594, 0.766, 0.654, 0.571, 0.733),
    4: (0.609, 0.536, 0.677, 0.683, 0.617, 0.750),
    5: (0.734, 0.661, 0.807, 0.796, 0.738, 0.854),
}
"""Recurrent A_cal (estimate, lower, upper) and A_ho (estimate, lower, upper) per fit (tab:content-fit-pairs)."""

PAPER_ENDPOINT: dict[int, tuple[float, float, float, float]] = {
    1: (0.000, 0.750, 0.000, 0.001),
    2: (0.000, 0.750, -0.002, -0.008),
    3: (0.000, 0.750, -0.003, -0.006),
    4: (0.000, 0.750, -0.002, -0.005),
    5: (0.000, 0.750, 0.002, 0.000),
}
"""A_0, A_∅, U_∅, O_∅ per fit, identical for both writers (tab:independent-endpoint-pair-endpoint)."""

WRITERS = (("additive", "Additive"), ("recurrent", "Recurrent"))
SPLITS = (("calibration", "A_cal"), ("holdout", "A_ho"))


def _n_jobs() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, 10))


@functools.lru_cache(maxsize=2)
def paper_result(config: LearnedPairConfig | None = None) -> LearnedPairResult:
    """The run behind both reproductions (the paper's design and settings; cached in-process)."""
    return run_learned_pair(config or LearnedPairConfig(), n_jobs=_n_jobs())


def episode_intervals(result: LearnedPairResult, n_resamples: int = BOOTSTRAP_DRAWS,
                      level: float = 0.95) -> dict[tuple[int, str, str], BootstrapResult]:
    """Per-fit episode bootstrap of the pair response, keyed (fit, writer, split).

    Episodes are the resampled units; permutations stay paired within an episode.  Seeded
    ``derive_seed(config.seed, "learned-pair", "bootstrap", fit, writer, split)``.
    """
    out: dict[tuple[int, str, str], BootstrapResult] = {}
    for f in result.fits:
        for w, _ in WRITERS:
            ev = f.evaluations[w]
            for split, _ in SPLITS:
                vals = ev.calibration_episodes if split == "calibration" else ev.holdout_episodes
                rng = derive_seed(result.config.seed, "learned-pair", "bootstrap", f.fit, w, split)
                out[(f.fit, w, split)] = cluster_bootstrap(vals, n_resamples=n_resamples, level=level, rng=rng)
    return out


def _design_note(result: LearnedPairResult) -> str:
    cfg = result.config
    base = "paper design and settings" if cfg.is_paper else "REDUCED/NON-PAPER design or settings"
    return (f"{base}; protocol {cfg.protocol}; training {cfg.settings.dtype}, ℓ2 {cfg.settings.l2:g} "
            f"({cfg.settings.l2_form} form); {numerical_path()}; seed {cfg.seed}; "
            f"gate failures: {list(result.gate_failures) or 'none'}")


def _gate_rows(result: LearnedPairResult) -> list[Comparison]:
    """The endpoint gate of every fit (a failed gate is a failed condition: the fit's pair is not
    endpoint-matched, so its replay rows do not support the paper's claim)."""
    design = _design_note(result)
    return [compare("endpoint gate", f"fit {f.fit}", "passed (checked before labels were opened)", 1.0,
                    float(f.gate.passed), 0.0,
                    f"gate {f.gate.condition}; A_0 = {f.gate.aligned_mismatch:.3f}; {design}") for f in result.fits]


def endpoint_separation_rows(result: LearnedPairResult,
                             intervals: dict[tuple[int, str, str], BootstrapResult]) -> list[Comparison]:
    """tab:content-fit-pairs, Table 1, the means over fits and tab:independent-endpoint-pair-classification."""
    design = _design_note(result)
    add_note = "structural: the additive terminal state (exact key sums) is invariant to pair transport; " + design
    rec_note = f"{NOTE}; {BOOTSTRAP_DRAWS}-draw episode bootstrap; {design}"
    rows = _gate_rows(result)
    for f in result.fits:
        paper = PAPER_REPLAY.get(f.fit)
        flag = "" if f.gate.passed else "ENDPOINT GATE FAILED for this fit (pair not endpoint-matched); "
        for w, label in WRITERS:
            ev = f.evaluations[w]
            for k, (split, col) in enumerate(SPLITS):
                b = intervals[(f.fit, w, split)]
                est = ev.a_cal if split == "calibration" else ev.a_ho
                ours = (est, float(b.low), float(b.high))
                for j, part in enumerate(("estimate", "lower", "upper")):
                    if w == "additive":
                        rows.append(compare("tab:content-fit-pairs", f"{label} fit {f.fit}", f"{col} {part}",
                                            0.0, ours[j], 0.0, flag + add_note))
                    else:
                        p = None if paper is None else paper[3 * k + j]
                        rows.append(compare("tab:content-fit-pairs", f"{label} fit {f.fit}", f"{col} {part}",
                                            p, ours[j], PER_FIT_TOL, flag + rec_note))
            if w == "recurrent":
                for split, col in SPLITS:
                    low = float(intervals[(f.fit, w, split)].low)
                    rows.append(compare("tab:content-fit-pairs", f"{label} fit {f.fit}", f"{col} lower limit > 0",
                                        1.0, float(low > 0.0), 0.0,
                                        flag + "paper: every per-fit recurrent interval lies strictly above 0; "
                                        + design))
    for f in result.fits:
        paper = PAPER_REPLAY.get(f.fit)
        flag = "" if f.gate.passed else "ENDPOINT GATE FAILED for this fit (pair not endpoint-matched); "
        rows.append(compare("tab:endpoint-separation", f"fit {f.fit}", "Additive holdout pair response", 0.0,
                            f.evaluations["additive"].a_ho, 0.0, flag + add_note))
        rows.append(compare("tab:endpoint-separation", f"fit {f.fit}", "Recurrent holdout pair response",
                            None if paper is None else paper[3], f.evaluations["recurrent"].a_ho, PER_FIT_TOL,
                            flag + rec_note))
    rows.append(compare("tab:content-endpoint", "Recurrent (mean over fits)", "A_cal", 0.675,
                        result.mean("recurrent", "a_cal"), MEAN_TOL, f"{NOTE}; {design}"))
    rows.append(compare("tab:content-endpoint", "Recurrent (mean over fits)", "A_ho", 0.682,
                        result.mean("recurrent", "a_ho"), MEAN_TOL, f"{NOTE}; {design}"))
    for col in ("a_cal", "a_ho"):
        rows.append(compare("tab:content-endpoint", "Additive (mean over fits)", "A_cal" if col == "a_cal" else "A_ho",
                            0.0, result.mean("additive", col), 0.0, add_note))
    dec_note = "decoder: replay-sensitive iff calibration pair response > 0 (threshold fixed at 0); " + design
    for f in result.fits:
        for w, label in WRITERS:
            ev = f.evaluations[w]
            rows.append(compare("tab:independent-endpoint-pair-classification", f"fit {f.fit}", f"{label} B_cal",
                                1.0, ev.b_cal, 0.0, dec_note))
            rows.append(compare("tab:independent-endpoint-pair-classification", f"fit {f.fit}", f"{label} B_ho",
                                1.0, ev.b_ho, 0.0, dec_note))
    for w, label in WRITERS:
        b_dec = sum(f.evaluations[w].b_cal + f.evaluations[w].b_ho for f in result.fits) / (2 * len(result.fits))
        rows.append(compare("tab:content-endpoint", f"{label} (mean over fits)", "B_dec", 1.0, b_dec, 0.0, dec_note))
    return rows


def endpoint_fit_rows(result: LearnedPairResult) -> list[Comparison]:
    """tab:independent-endpoint-pair-endpoint, the gate, final training BCE and timing."""
    design = _design_note(result)
    exact = "structural (exact for any faithful implementation whose writers fit the target); " + design
    rows = _gate_rows(result)
    for f in result.fits:
        paper = PAPER_ENDPOINT.get(f.fit)
        for w, label in WRITERS:
            ev = f.evaluations[w]
            vals = (f.gate.aligned_mismatch, ev.a_empty, ev.u_empty, ev.o_empty)
            for j, (col, tol) in enumerate((("A_0", 0.0), ("A_∅", 0.0), ("U_∅", U_TOL), ("O_∅", O_TOL))):
                p = None if paper is None else paper[j]
                rows.append(compare("tab:independent-endpoint-pair-endpoint", f"fit {f.fit}", f"{label} {col}", p,
                                    vals[j], tol, exact if j < 2 else f"{NOTE}; {design}"))
        add, rec = f.evaluations["additive"], f.evaluations["recurrent"]
        rows.append(compare("tab:independent-endpoint-pair-endpoint", f"fit {f.fit}",
                            "|Additive − Recurrent| U_∅ + O_∅ (columns identical)", 0.0,
                            abs(add.u_empty - rec.u_empty) + abs(add.o_empty - rec.o_empty), 0.0, exact))
        for w, model in (("Additive", f.additive_model), ("Recurrent", f.recurrent_model)):
            rows.append(compare("training", f"fit {f.fit}", f"{w} final training BCE", 0.199, model.final_bce,
                                BCE_TOL, "paper: rounds to 0.199 (minimum 0.198515); " + design))
        rows.append(compare("training", f"fit {f.fit}", "recurrent restarts with final BCE < 0.2", None,
                            float(sum(m.final_bce < 0.2 for m in f.recurrent_restarts)), None,
                            f"of {len(f.recurrent_restarts)}; selected restart {f.selected_restart} "
                            f"(lowest final training loss)"))
        rows.append(compare("timing", f"fit {f.fit}", "seconds (additive + recurrent restarts + evaluation)", None,
                            f.seconds["total"], None,
                            "recurrent restarts trained batched; per-model time = batch wall time / models"))
    n = len(result.fits)
    a0 = sum(f.gate.aligned_mismatch for f in result.fits) / n
    u0 = sum(f.evaluations["additive"].u_empty - f.evaluations["recurrent"].u_empty for f in result.fits) / n
    rows.append(compare("tab:content-endpoint", "Additive vs Recurrent (mean over fits)", "A_0", 0.0, a0, 0.0, exact))
    rows.append(compare("tab:content-endpoint", "Additive vs Recurrent (mean over fits)", "U_0", 0.0, u0, 0.0,
                        exact + " (U_0 = aligned utility difference; equal empty actions make it U_∅ add − U_∅ rec)"))
    for w, label in WRITERS:
        rows.append(compare("tab:content-endpoint", f"{label} (mean over fits)", "A_∅", 0.750,
                            result.mean(w, "a_empty"), 0.0, exact))
        rows.append(compare("tab:content-endpoint", f"{label} (mean over fits)", "U_∅", -0.001,
                            result.mean(w, "u_empty"), U_MEAN_TOL, f"{NOTE}; {design}"))
        rows.append(compare("tab:content-endpoint", f"{label} (mean over fits)", "O_∅", -0.004,
                            result.mean(w, "o_empty"), O_MEAN_TOL, f"{NOTE}; {design}"))
    rows.append(compare("timing", "whole run", f"wall seconds (n_jobs={result.n_jobs})", None, result.wall_seconds,
                        None, "spec reference: ≈85 s per fit on one core (numpy float64)"))
    return rows


_GATE = ("endpoint gate", "passed (checked before labels were opened)", Kind.INDICATOR)
"""The endpoint gate's outcome on each of our fits: a measured outcome, not a constant of the design."""
SEPARATION_KINDS = Kinds(
    columns=(_GATE, ("tab:content-fit-pairs", "Additive fit *", "*", Kind.DESIGN),
             ("tab:content-fit-pairs", "* estimate", Kind.PROPORTION),
             ("tab:content-fit-pairs", "* lower limit > 0", Kind.INDICATOR),
             ("tab:endpoint-separation", "Additive holdout pair response", Kind.DESIGN),
             ("tab:endpoint-separation", "Recurrent holdout pair response", Kind.PROPORTION),
             ("tab:content-endpoint", "Additive (mean over fits)", "*", Kind.DESIGN),
             ("tab:content-endpoint", "Recurrent (mean over fits)", "*", Kind.PROPORTION),
             ("tab:content-endpoint", "B_dec", Kind.DESIGN),
             ("tab:independent-endpoint-pair-classification", "* B_*", Kind.DESIGN)),
    intervals=(Interval("tab:content-fit-pairs", "{} estimate", "{} lower", "{} upper"),))
"""The additive writer's pair responses are exact zeros (theorem) and the decoder's accuracies follow from them;
the recurrent writer's pair responses (shares, with episode intervals) are measured."""


@register_reproduction("endpoint-separation",
                       "Independent learned endpoint pair: per-fit pair response (tab:content-fit-pairs, Table 1)",
                       issue="3", kinds=SEPARATION_KINDS)
def endpoint_separation() -> list[Comparison]:
    result = paper_result()
    return endpoint_separation_rows(result, episode_intervals(result))


ENDPOINT_FIT_KINDS = Kinds(columns=(
    _GATE, ("tab:independent-endpoint-pair-endpoint", "* A_0", Kind.PROPORTION),
    ("tab:independent-endpoint-pair-endpoint", "* A_∅", Kind.DESIGN),
    ("tab:independent-endpoint-pair-endpoint", "* U_∅", Kind.ESTIMATE),
    ("tab:independent-endpoint-pair-endpoint", "* O_∅", Kind.ESTIMATE),
    ("tab:independent-endpoint-pair-endpoint", "|Additive − Recurrent| *", Kind.DESIGN),
    ("training", "* final training BCE", Kind.MAGNITUDE),
    ("tab:content-endpoint", "A_0", Kind.PROPORTION), ("tab:content-endpoint", "U_0", Kind.ESTIMATE),
    ("tab:content-endpoint", "A_∅", Kind.DESIGN), ("tab:content-endpoint", "U_∅", Kind.ESTIMATE),
    ("tab:content-endpoint", "O_∅", Kind.ESTIMATE)))
"""A_0 (aligned mismatch, the gate's measured share) and the empty-state U_∅, O_∅ are measured; A_∅ = 0.750 and the
identical columns follow from the empty state's action rule."""


@register_reproduction("learned-endpoint-fits",
                       "Independent learned endpoint pair: per-fit endpoint contrasts and gate "
                       "(tab:independent-endpoint-pair-endpoint)", issue="3", kinds=ENDPOINT_FIT_KINDS)
def learned_endpoint_fits() -> list[Comparison]:
    return endpoint_fit_rows(paper_result())
