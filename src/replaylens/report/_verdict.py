"""Verdicts: each summary row judged against an expectation (invariant, must respond, or free).

An expectation is *declared* (``--expect-invariant``, a project config) or, for a row nobody declared,
the documented *default*: the cells (and ``rekey``) the agent declares invariance to must not change
decisions; otherwise a learning agent is expected to respond to ``value``, ``key_slot``, ``mask`` and
``rekey`` (scores move relative to identifiers, or vanish), while a response to ``pair``, ``reorder``
or ``rename`` (record order, consistent names) is a red flag.  Only declared expectations gate the exit
code; a default one is judged and shown but never fails a run.

Three verdicts (issue 47; docs/guide/verdicts.md, docs/decisions.md "Verdicts with known error rates"):
SAFE -- the response is shown to lie within the expectation's margin; UNSAFE -- shown to exceed it;
INCONCLUSIVE -- neither, with the smallest response the audit could detect and the streams that would decide.
A deterministic agent's replay is a census (integer counts decide, exactly); a stochastic agent's
repeat-corrected T_gr is judged by the one-sample Student t on its per-stream values (``S - 1`` degrees of
freedom), UNSAFE after Holm's step-down over the row family, SAFE when the shown two-sided interval's upper end
lies below the margin (a one-sided ``1 - alpha/2`` bound: measured, the one-sided ``1 - alpha`` bound said SAFE
too often at the margin on skewed per-stream values; docs/decisions.md) and at least :data:`MIN_STREAMS_WITHIN`
streams were replayed (measured: with 4, SAFE at the margin was wrong in 6.7 % [5.2, 8.4] of checks).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any, Literal, cast

from ..inference import MeanInference, holm_adjusted, mean_inference

__all__ = ["DEFINITIONS_MD", "DEFAULT_RESPONDS", "DEFAULT_STOCHASTIC_MARGIN", "INCONCLUSIVE",
           "INCONCLUSIVE_POLICIES", "MIN_STREAMS_WITHIN", "Expectation", "Judgement", "JudgeContext",
           "default_expectation", "expectations_for", "failure_lines", "judge", "judge_rows", "parse_expect_specs",
           "parse_expectations", "verdict_lines", "verdict_markdown", "verdict_summary"]

Kind = Literal["invariant", "responds", "free"]
KINDS: tuple[str, ...] = ("invariant", "responds", "free")

#: cells a learning agent is expected to respond to (scores move relative to identifiers, or vanish)
DEFAULT_RESPONDS = ("value", "key_slot", "mask", "rekey")
#: cells whose response is a red flag for a learning agent (record order, consistent names)
DEFAULT_INVARIANT = ("pair", "reorder", "rename")

#: the verdict words (summary.json ``status``)
SAFE, UNSAFE, EXPECTED, NOT_JUDGED = "SAFE", "UNSAFE", "EXPECTED RESPONSE", "NOT JUDGED"
INCONCLUSIVE = "INCONCLUSIVE"
#: what an INCONCLUSIVE declared row does to the exit code (``--on-inconclusive``): ``pass`` (the default) or ``fail``
INCONCLUSIVE_POLICIES = ("pass", "fail")

#: the margin of an expectation declared without one, for a stochastic agent's T_gr (a census's is 0)
DEFAULT_STOCHASTIC_MARGIN = 0.05
#: the power at which INCONCLUSIVE states the smallest detectable response
DETECT_POWER = 0.8
#: the fewest streams from which a stochastic agent's T_gr is shown *within* a margin (SAFE; a declared response's
#: UNSAFE; compare's NO REGRESSION).  Measured on 1,000 fresh checks each (bench/verdicts_operations.py, seed
#: 20261130), SAFE at the margin itself -- an error -- came out 6.7 % [5.2, 8.4] at 4 streams, the only count whose
#: error was shown above the 5 % level (5.7 % [4.3, 7.3] at 5, 5.2 at 6, 4.7 at 8): per-stream values of a response
#: made of rare switches are right-skewed, and three degrees of freedom do not absorb it.
MIN_STREAMS_WITHIN = 5


@dataclass(frozen=True)
class Expectation:
    """What a row (a cell or ``rekey``) is expected to do; ``declared`` expectations gate the exit code.

    ``tolerance`` is the margin (a share of decisions, or of T_gr); ``None`` means the documented default:
    0 for a deterministic agent (a census), :data:`DEFAULT_STOCHASTIC_MARGIN` for a stochastic one."""

    cell: str
    kind: Kind
    tolerance: float | None = None
    declared: bool = True
    reason: str = ""

    def margin(self, stochastic: bool) -> float:
        """The margin used: the declared tolerance, else the default for this kind of agent."""
        if self.tolerance is not None:
            return float(self.tolerance)
        return DEFAULT_STOCHASTIC_MARGIN if stochastic else 0.0

    def spec(self) -> str:
        """The ``--expect`` form: ``CELL=KIND`` or ``CELL=KIND:TOLERANCE``."""
        return f"{self.cell}={self.kind}" + (f":{self.tolerance!r}" if self.tolerance is not None else "")

    def describe(self, stochastic: bool = False) -> str:
        """E.g. ``invariant, margin 1% (declared)``, ``must respond, margin 5% [stochastic default] (default: ...)``."""
        what = {"invariant": "invariant", "responds": "must respond", "free": "free (no expectation)"}[self.kind]
        if self.kind != "free":
            src = "" if self.tolerance is not None else (
                " [stochastic default]" if stochastic else " [census default]")
            what += f", margin {100 * self.margin(stochastic):g}%{src}"
        return f"{what} ({'declared' if self.declared else f'default: {self.reason}'})"


@dataclass(frozen=True)
class JudgeContext:
    """What a verdict needs besides the row: the level, the INCONCLUSIVE policy, whether a stochastic agent was
    read with one repeat of independent generators (decoding noise not separable), and whether the agent's store
    is nondeterministic (its rebuild control changed answers: store noise not separable from a response)."""

    level: float = 0.95
    on_inconclusive: str = "pass"
    one_repeat_stochastic: bool = False
    noisy_store: bool = False   # a retrieval agent whose store's same-order rebuilds change answers (its control)

    @property
    def alpha(self) -> float:
        return 1.0 - self.level


@dataclass(frozen=True)
class Judgement:
    """One row judged: the expectation, what was measured, the verdict word and the evidence for it."""

    expectation: Expectation
    migration: str
    status: str
    passed: bool
    measure: str              # "changed_share" or the stochastic readout's name (T_gr ...)
    value: float
    interval: tuple[float, float]
    n_changed: int
    n_decisions: int
    margin: float = 0.0
    method: str = "census"    # "census" (integer counts) or "t" (one-sample Student t on the per-stream values)
    p_value: float = math.nan          # Holm-adjusted one-sided p of "exceeds the margin" (t rows)
    # t rows: the one-sided (1 - alpha) lower bound (UNSAFE's) and the upper end of the two-sided (1 - alpha)
    # interval, a one-sided (1 - alpha/2) bound (SAFE's)
    bounds: tuple[float, float] = (math.nan, math.nan)
    detectable: float = math.nan       # smallest response detectable with 80 % power (t rows)
    streams_needed: int | None = None  # streams that would decide at this estimate and spread (INCONCLUSIVE)
    n_streams: int = 0
    note: str = ""
    alpha: float = 0.05                # 1 - level: each SAFE bound's level, the family's level for UNSAFE

    @property
    def stochastic(self) -> bool:
        return self.method == "t" or self.measure != "changed_share"

    def _got(self) -> str:
        if self.measure == "changed_share":
            return f"{self.n_changed} of {self.n_decisions} decisions changed ({_pc(self.value)}, a census)"
        lo, hi = self.interval
        return f"{self.measure} {_pc(self.value, True)} [{_pc(lo, True)}, {_pc(hi, True)}]"

    def evidence(self) -> str:
        """Why this verdict, in words (the bound against the margin; what would decide an INCONCLUSIVE row)."""
        m = f"{100 * self.margin:g}%"
        if self.method == "census":
            return self.note
        lo, hi = self.bounds
        lvl = f"{100 * (1 - self.alpha):g}%"
        if self.status in (UNSAFE, EXPECTED) and self.p_value <= self.alpha:
            return f"{lvl} lower bound {_pc(lo, True)} > margin {m} (Holm-adjusted p = {_p(self.p_value)})"
        if self.status in (SAFE, UNSAFE):
            return f"upper end of the {lvl} interval {_pc(hi, True)} < margin {m}"
        if self.status == INCONCLUSIVE:
            need = (f"about {self.streams_needed} streams would decide at this estimate and spread"
                    if self.streams_needed else "no number of streams would decide at this estimate")
            det = (f"detects a response above {_pc(self.margin + self.detectable, True)} "
                   f"({100 * DETECT_POWER:g}% power) at {self.n_streams} streams"
                   if math.isfinite(self.detectable) else "detects nothing at one stream")
            if self.method == "t" and self.note:   # (a bound below the margin from too few streams)
                return f"upper end of the {lvl} interval {_pc(hi, True)} < margin {m}: {self.note}; {need}"
            head = f"{self.note}; " if self.note else ""
            return (f"{head}neither within nor beyond the margin {m} ({lvl} lower bound {_pc(lo, True)}, "
                    f"upper end of the {lvl} interval {_pc(hi, True)}): this audit {det}; {need}")
        return ""

    def line(self) -> str:
        """One plain line: verdict, migration, the measured value, the evidence and the expectation."""
        e = self.expectation
        ev = self.evidence() if e.kind != "free" else ""
        return (f"{self.status}: {self.migration}: {self._got()}" + (f"; {ev}" if ev else "")
                + f"; expected {e.describe(self.stochastic)}")

    def failure(self) -> str:
        """The one stderr line of a failed expectation (names the cell, the count or bound, the margin)."""
        e = self.expectation
        what = "declared invariant" if e.kind == "invariant" else "declared responsive"
        if self.method == "census":
            cmp = ">" if e.kind == "invariant" else "<="
            got = (f"{self.n_changed} of {self.n_decisions} decisions changed ({_pc(self.value)} {cmp} margin "
                   f"{100 * self.margin:g}%)")
            return f"expectation failed: {e.cell} {what}, but {got}" + (
                f"; {self.status}: {self.note}" if self.note else "")
        return f"expectation failed: {e.cell} {what}, but {self.status}: {self._got()}; {self.evidence()}"

    def to_dict(self) -> dict[str, Any]:
        e = self.expectation
        return {"cell": e.cell, "migration": self.migration, "status": self.status,
                "passed": self.passed, "gate": e.declared, "expectation": asdict(e),
                "margin": self.margin, "margin_source": "declared" if e.tolerance is not None else "default",
                "method": self.method, "measure": self.measure, "value": self.value, "interval": list(self.interval),
                "bounds": list(self.bounds), "p_value": self.p_value, "detectable": self.detectable,
                "streams_needed": self.streams_needed, "n_streams": self.n_streams,
                "n_changed": self.n_changed, "n_decisions": self.n_decisions, "line": self.line(),
                "failure": None if self.passed else self.failure()}


def _pc(x: float | None, signed: bool = False) -> str:
    if x is None or not math.isfinite(x):
        return "n/a"
    v = round(100 * x, 1) + 0.0   # + 0.0: never -0.0
    return f"{v:+.1f}%" if signed and v else f"{v:.1f}%"


def _p(p: float) -> str:
    return "n/a" if not math.isfinite(p) else ("<0.001" if p < 0.001 else f"{p:.3f}")


def default_expectation(cell: str, invariant_to: Iterable[str] = ()) -> Expectation:
    """The documented default expectation of a row for an agent declaring ``invariant_to`` (default margin)."""
    if cell in set(invariant_to):
        return Expectation(cell, "invariant", None, False, "the agent declares invariance to it")
    if cell in DEFAULT_INVARIANT:
        return Expectation(cell, "invariant", None, False, "a response is a red flag for a learning agent")
    if cell in DEFAULT_RESPONDS:
        return Expectation(cell, "responds", None, False, "a learning agent is expected to respond")
    return Expectation(cell, "free", None, False, "no default for this cell")


def parse_expectations(spec: Mapping[str, Any], *, where: str = "expect") -> dict[str, Expectation]:
    """Declared expectations from a mapping ``cell -> "invariant" | "responds" | "free" | {kind, tolerance}``
    (a project config's ``expect`` table; no tolerance: the default margin); one-line
    :class:`~replaylens.errors.ConfigError` otherwise."""
    from ..errors import ConfigError

    out: dict[str, Expectation] = {}
    for cell, val in spec.items():
        if isinstance(val, Expectation):
            out[str(cell)] = val
            continue
        kind, tol = (val, None) if isinstance(val, str) else (None, None)
        if isinstance(val, Mapping):
            unknown = set(val) - {"kind", "tolerance"}
            if unknown:
                raise ConfigError(f"{where}.{cell}: unknown field(s) {', '.join(sorted(unknown))} (allowed: kind, "
                                  "tolerance)")
            kind, tol = val.get("kind"), val.get("tolerance")
        kind = {"must_respond": "responds", "must-respond": "responds", "respond": "responds"}.get(str(kind), kind)
        if kind not in KINDS:
            raise ConfigError(f"{where}.{cell}: expectation must be one of invariant, responds, free (or a table "
                              f"with kind and tolerance); got {val!r}")
        if tol is not None and (isinstance(tol, bool) or not isinstance(tol, (int, float))
                                or not 0.0 <= float(tol) <= 1.0):
            raise ConfigError(f"{where}.{cell}.tolerance must be a number in [0, 1]; got {tol!r}")
        out[str(cell)] = Expectation(str(cell), cast(Kind, kind), None if tol is None else float(tol), True)
    return out


def parse_expect_specs(items: Iterable[str]) -> dict[str, Expectation]:
    """Expectations from ``--expect CELL=KIND[:TOLERANCE]`` values (KIND: invariant, responds, free)."""
    from ..errors import ConfigError

    table: dict[str, Any] = {}
    for item in items:
        cell, sep, rest = item.partition("=")
        kind, _, tol = rest.partition(":")
        if not sep or not cell.strip() or not kind.strip():
            raise ConfigError(f"--expect must look like CELL=KIND[:TOLERANCE] (KIND: invariant, responds, free); "
                              f"got {item!r}")
        try:
            table[cell.strip()] = {"kind": kind.strip()} | ({"tolerance": float(tol)} if tol.strip() else {})
        except ValueError:
            raise ConfigError(f"--expect {item!r}: the tolerance must be a number in [0, 1]") from None
    return parse_expectations(table, where="--expect")


def expectations_for(rows: Sequence[str], declared: Mapping[str, Expectation],
                     invariant_to: Iterable[str] = ()) -> list[Expectation]:
    """One expectation per summary row: the declared one, else the documented default."""
    inv = tuple(invariant_to)
    return [declared[c] if c in declared else default_expectation(c, inv) for c in rows]


def _above(a: float, b: float, scale: float) -> bool:
    """``a > b`` once both are rounded to 12 significant digits of ``scale``: a floating-point leftover
    (a bound of 9e-17 where the exact value is 0) never decides a verdict."""
    return round((a - b) / scale, 12) > 0 if scale > 0 else a > b


def _census(row: Mapping[str, Any], e: Expectation, ctx: JudgeContext) -> Judgement:
    """A deterministic agent's row: the integer count of changed decisions against ``margin · n`` (exact)."""
    n, k = max(int(row["n_decisions"]), 1), int(row["n_changed"])
    margin = e.margin(False)
    changed = Fraction(k) > Fraction(str(margin)) * n
    lo, hi = (math.nan if v is None else float(v) for v in row["action_ci"])
    note = ""
    if e.kind == "invariant":
        status = UNSAFE if changed else SAFE
    elif e.kind == "responds":
        status = EXPECTED if changed else UNSAFE
    else:
        status = NOT_JUDGED
    if changed and ctx.one_repeat_stochastic and e.kind != "free":
        status = INCONCLUSIVE
        note = ("a stochastic agent read with one repeat: decoding noise and a response cannot be told apart "
                "(rerun with --repeats 2)")
    elif changed and ctx.noisy_store and e.kind != "free":
        status = INCONCLUSIVE
        note = ("the agent's store is nondeterministic (same-order rebuilds change its answers): store noise and a "
                "response cannot be told apart at the decision level (see the retrieval lines and the rebuild control)")
    passed = status in (SAFE, EXPECTED, NOT_JUDGED) or (status == INCONCLUSIVE and ctx.on_inconclusive == "pass")
    return Judgement(e, str(row["migration"]), status, passed, "changed_share", k / n, (lo, hi), k,
                     int(row["n_decisions"]), margin=margin, n_streams=int(row.get("n_streams") or 0), note=note,
                     alpha=ctx.alpha)


def _stochastic(row: Mapping[str, Any], e: Expectation, ctx: JudgeContext, inf: MeanInference,
                p_adj: float) -> Judgement:
    """A stochastic agent's row (T_gr): Student t on the per-stream values (``inf``); ``p_adj`` the Holm-adjusted p."""
    margin = e.margin(True)
    a = ctx.alpha
    ci = inf.interval(ctx.level)   # the interval shown
    lo, hi = inf.lower(a), ci[1]   # UNSAFE's one-sided bound; SAFE's: the shown interval's upper end itself
    scale = max(1.0, abs(margin))
    exceeds = math.isfinite(p_adj) and p_adj <= a and _above(lo, margin, scale)
    below = math.isfinite(hi) and _above(margin, hi, scale)
    within = below and inf.n >= MIN_STREAMS_WITHIN
    note = (f"the bound is below the margin, but a stochastic agent is shown within it only from "
            f"{MIN_STREAMS_WITHIN} streams (measured: at 4, 6.7% of such bounds were wrong at the margin)"
            if below and not within and e.kind in ("invariant", "responds") else "")
    if e.kind == "invariant":
        status = UNSAFE if exceeds else SAFE if within else INCONCLUSIVE
    elif e.kind == "responds":
        status = EXPECTED if exceeds else UNSAFE if within else INCONCLUSIVE
    else:
        status = NOT_JUDGED
    # the streams that would decide: SAFE's bound (alpha/2) below the margin, UNSAFE's (alpha) above it
    need = inf.streams_to_decide(margin, a / 2 if inf.estimate < margin else a) if status == INCONCLUSIVE \
        else None
    if need is not None and inf.estimate < margin:
        need = max(need, MIN_STREAMS_WITHIN)
    passed = status in (SAFE, EXPECTED, NOT_JUDGED) or (status == INCONCLUSIVE and ctx.on_inconclusive == "pass")
    return Judgement(e, str(row["migration"]), status, passed, str(row["action_readout"]), inf.estimate, ci,
                     int(row["n_changed"]), int(row["n_decisions"]), margin=margin, method="t", p_value=p_adj,
                     bounds=(lo, hi), detectable=inf.detectable(a, DETECT_POWER), streams_needed=need,
                     n_streams=inf.n, note=note, alpha=a)


def _inference(row: Mapping[str, Any]) -> MeanInference:
    values = [math.nan if v is None else float(v) for v in row["per_stream"]["action"]]
    return mean_inference(values)


def _is_stochastic(row: Mapping[str, Any]) -> bool:
    return str(row["action_readout"]).startswith("T_gr")


def judge(row: Mapping[str, Any], e: Expectation, ctx: JudgeContext | None = None) -> Judgement:
    """Judge one summary.json row against its expectation on its own (a family of one: no Holm adjustment)."""
    return judge_rows([row], [e], ctx)[0]


def judge_rows(rows: Sequence[Mapping[str, Any]], exps: Sequence[Expectation],
               ctx: JudgeContext | None = None) -> list[Judgement]:
    """Judge rows as families: the declared rows form one family, the default rows another; within each, the
    stochastic rows' "exceeds the margin" tests are Holm-adjusted (family-wise level ``1 - level``)."""
    ctx = ctx or JudgeContext()
    infs = {i: _inference(r) for i, r in enumerate(rows) if _is_stochastic(r)}   # each row's t summary, once
    p_adj = [math.nan] * len(rows)
    for declared in (True, False):
        idx = [i for i in infs if exps[i].declared is declared and exps[i].kind != "free"]
        raw = [infs[i].p_exceeds(exps[i].margin(True)) for i in idx]
        for i, p in zip(idx, holm_adjusted(raw), strict=True):
            p_adj[i] = p
    return [_stochastic(r, e, ctx, infs[i], p_adj[i]) if i in infs else _census(r, e, ctx)
            for i, (r, e) in enumerate(zip(rows, exps, strict=True))]


def verdict_summary(rows: Sequence[Mapping[str, Any]], declared: Mapping[str, Expectation],
                    invariant_to: Iterable[str] = (), ctx: JudgeContext | None = None) -> dict[str, Any]:
    """The machine-readable verdict of summary.json: the overall word, whether the declared expectations
    passed (the exit-code gate) and every row judged."""
    ctx = ctx or JudgeContext()
    exps = expectations_for([str(r["cell"]) for r in rows], declared, invariant_to)
    judged = judge_rows(rows, exps, ctx)
    unsafe = [j.expectation.cell for j in judged if j.status == UNSAFE]
    inconclusive = [j.expectation.cell for j in judged if j.status == INCONCLUSIVE]
    gate_failed = [j.expectation.cell for j in judged if j.expectation.declared and not j.passed]
    overall = UNSAFE if unsafe else INCONCLUSIVE if inconclusive else SAFE
    return {"overall": overall, "passed": not gate_failed, "failed": gate_failed, "unsafe": unsafe,
            "inconclusive": inconclusive, "declared": sorted(declared), "level": ctx.level,
            "on_inconclusive": ctx.on_inconclusive, "expectations": [j.to_dict() for j in judged]}


def verdict_lines(verdict: Mapping[str, Any]) -> list[str]:
    """The verdict lines of a summary (one per row)."""
    return [str(e["line"]) for e in verdict.get("expectations", [])]


def failure_lines(verdict: Mapping[str, Any]) -> list[str]:
    """One line per failed *declared* expectation (what makes the exit code 1)."""
    return [str(e["failure"]) for e in verdict.get("expectations", []) if e["gate"] and not e["passed"]]


#: ΔU, ΔO and the action response defined in words (report.md; report.html has the same)
DEFINITIONS_MD = (
    "- **decisions changed** (D_A^q; T_gr with repeats): share of future decisions that differ from the aligned "
    "replay when the history is transformed by intervention q.",
    "- **utility change** (ΔU): mean utility of the decisions after the intervention minus the aligned replay's, "
    "paired per task.",
    "- **oracle agreement change** (ΔO): change, in percentage points, of the share of decisions that pick the "
    "best action (the oracle).",
    "- **rekey** (A_rekey): identifiers renamed in the history only (the menu keeps its names).",
    "- **SAFE / UNSAFE / INCONCLUSIVE**: the response shown within the margin / shown beyond it / neither "
    "(a deterministic agent is a census: counts decide; a stochastic one: Student t on the streams, Holm).",
)


def verdict_markdown(summary: Mapping[str, Any]) -> list[str]:
    """The report.md verdict section: the overall word, then one line per row (verdict first)."""
    v = summary.get("verdict")
    if not v:
        return []
    if v["declared"]:
        failed = ", ".join(v["failed"])
        gate = "declared expectations passed" if v["passed"] else f"declared expectations failed: {failed}"
    else:
        gate = "no expectation declared; judged against the default expectations"
    return ["## Verdict", "", f"**{v['overall']}** ({gate})", "",
            *[f"- **{e['status']}**: {e['line'].split(': ', 1)[1]}" for e in v["expectations"]], ""]
