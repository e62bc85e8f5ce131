"""Sequential experiment planning (C4): the 96-configuration space on the public data, the
``run_experiment`` / ``submit_configuration`` tool protocol, a seeded scripted planner, the final-test
scorer and the analysis of a sealed export (T_gr per stage, utilities, contrasts, references, exploration)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import expit

from ...errors import ConfigError
from ...rng import derive_rng
from ..data import file_sha256, load, verified_path
from ..substrates.public import ARMS, select_designs
from ._protocol import ProtocolViolation, SealError, canonical, read_export, sha256

PLAN_CONDITIONS = ("aligned", "value", "pair", "rename")
FACTORS: tuple[tuple[str, tuple[Any, ...]], ...] = (
    ("sampling", ARMS),
    ("preprocessing", ("standardize", "standardize+clip3")),
    ("classifier", ("ridge-logistic", "shrinkage-lda")),
    ("regularization", (0.02, 0.08, 0.32)),
    ("budget", (12, 24)),
)
CONFIGS: tuple[tuple[Any, ...], ...] = tuple(product(*(lv for _, lv in FACTORS)))
"""The 96 configurations in canonical executable order (last factor fastest)."""
N_CONFIGS = len(CONFIGS)
N_INITIAL = 8
N_EXPERIMENTS = 3
N_STAGES = N_EXPERIMENTS + 1
LABEL_BUDGET = 72
POOL = 96
RATIONALE_MAX = 300
PLAN_STRATA: tuple[tuple[str, str], ...] = (("breast-cancer", "iid"), ("breast-cancer", "shift"),
                                            ("wine-red", "iid"), ("wine-red", "shift"))
REFERENCES = ("random-search", "initial-incumbent")
_ALPHABET = np.array(list("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"))


def config_settings(i: int) -> dict[str, Any]:
    """Human-readable settings of canonical configuration ``i``."""
    return {name: lv for (name, _), lv in zip(FACTORS, CONFIGS[i], strict=True)}


def tool_schemas(enum: Sequence[str]) -> list[dict[str, Any]]:
    """Strict JSON schemas of the two tools (configuration IDs restricted to the displayed menu)."""
    params = {"type": "object", "additionalProperties": False, "required": ["configuration_id", "rationale"],
              "properties": {"configuration_id": {"type": "string", "enum": list(enum)},
                             "rationale": {"type": "string", "maxLength": RATIONALE_MAX}}}
    return [{"name": n, "strict": True, "parameters": params} for n in ("run_experiment", "submit_configuration")]


# ---------------------------------------------------------------- tasks and the executor


@dataclass(frozen=True, eq=False)
class PlanningTask:
    """Public part of one task: IDs, initial history, permutation, reference trials, validation utilities and
    the fitted linear models (trained on candidate labels only). Final-test pools live in ``PlanningSuite.hidden``."""

    task_id: str
    family: str
    context: str
    index: int
    ids: tuple[str, ...]  # canonical config -> displayed ID
    rename_ids: tuple[str, ...]  # canonical config -> ID under consistent renaming
    initial: tuple[int, ...]  # canonical configs at history positions 0..7
    sigma: tuple[int, ...]  # single 8-cycle on positions
    random_trials: tuple[int, ...]  # the random-search reference's 3 canonical trials
    validation: tuple[float, ...]  # validation utility per canonical config (6 decimals)
    card: dict[str, Any]
    coef: np.ndarray = field(repr=False)  # [96, d] on the config's preprocessed features
    intercept: np.ndarray = field(repr=False)  # [96]
    centre: np.ndarray = field(repr=False)  # candidate-pool mean [d]
    scale: np.ndarray = field(repr=False)  # candidate-pool SD [d]

    @property
    def stratum(self) -> str:
        return f"{self.family}/{self.context}"

    def to_dict(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "family": self.family, "context": self.context, "index": self.index,
                "ids": list(self.ids), "rename_ids": list(self.rename_ids), "initial": list(self.initial),
                "sigma": list(self.sigma), "random_trials": list(self.random_trials),
                "validation": list(self.validation), "card": self.card,
                "coef_sha256": sha256(np.ascontiguousarray(self.coef).tobytes()),
                "intercept_sha256": sha256(np.ascontiguousarray(self.intercept).tobytes())}


@dataclass(frozen=True)
class PlanningSuite:
    seed: int
    tasks: tuple[PlanningTask, ...]
    hidden: dict[str, tuple[np.ndarray, np.ndarray]] = field(repr=False)  # task -> final-test (X raw, y)
    data_sha256: dict[str, str] = field(default_factory=dict)

    def task(self, task_id: str) -> PlanningTask:
        for t in self.tasks:
            if t.task_id == task_id:
                return t
        raise ConfigError(f"unknown task {task_id!r}")

    def sealed_doc(self) -> dict[str, dict[str, list[Any]]]:
        """The final-test pools as the run's sealed ``final_test.json`` holds them (task -> {"X", "y"})."""
        return {k: {"X": [[repr(float(v)) for v in row] for row in X], "y": [int(v) for v in y]}
                for k, (X, y) in self.hidden.items()}


def _preprocess(X: np.ndarray, centre: np.ndarray, scale: np.ndarray, clip: bool) -> np.ndarray:
    Z = (X - centre[..., None, :]) / scale[..., None, :]
    return np.clip(Z, -3.0, 3.0) if clip else Z


def _utility(logit: np.ndarray, y: np.ndarray) -> np.ndarray:
    p = np.clip(expit(logit), 1e-6, 1.0 - 1e-6)
    return np.exp(np.mean(y * np.log(p) + (1.0 - y) * np.log(1.0 - p), axis=-1))


def _ridge(Xs: np.ndarray, ys: np.ndarray, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """Ridge logistic on [..., n, d]: 80 steps of 0.12, penalty λ (not the intercept), clips ±5 / ±25."""
    n = Xs.shape[-2]
    w = np.zeros(Xs.shape[:-2] + Xs.shape[-1:])
    b = np.zeros(Xs.shape[:-2])
    for _ in range(80):
        r = expit(np.einsum("...nd,...d->...n", Xs, w) + b[..., None]) - ys
        gw = np.clip(np.einsum("...n,...nd->...d", r, Xs) / n + lam * w, -5.0, 5.0)
        gb = np.clip(r.mean(axis=-1), -5.0, 5.0)
        w = np.clip(w - 0.12 * gw, -25.0, 25.0)
        b = np.clip(b - 0.12 * gb, -25.0, 25.0)
    return w, b


def _lda(Xs: np.ndarray, ys: np.ndarray, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """Shrinkage LDA as a linear log-odds x·β + β₀ on [..., n, d]: pooled within-class covariance Σ,
    Σ_λ = (1 − λ)Σ + λ diag Σ + 1e-6 I (pseudoinverse), priors (n_k + 0.5)/(n + 1); one class → smoothed prior."""
    n, d = Xs.shape[-2:]
    n1 = ys.sum(axis=-1)
    n0 = n - n1
    mu1 = np.einsum("...n,...nd->...d", ys, Xs) / np.maximum(n1, 1)[..., None]
    mu0 = np.einsum("...n,...nd->...d", 1 - ys, Xs) / np.maximum(n0, 1)[..., None]
    R = Xs - np.where(ys[..., None] == 1, mu1[..., None, :], mu0[..., None, :])
    S = np.einsum("...ni,...nj->...ij", R, R) / max(n - 2, 1)
    Sl = (1 - lam) * S + lam * (np.eye(d) * np.diagonal(S, axis1=-2, axis2=-1)[..., None, :]) + 1e-6 * np.eye(d)
    P = np.linalg.pinv(Sl)
    beta = np.einsum("...ij,...j->...i", P, mu1 - mu0)
    quad = np.einsum("...i,...ij,...j->...", mu1, P, mu1) - np.einsum("...i,...ij,...j->...", mu0, P, mu0)
    logprior = np.log((n1 + 0.5) / (n + 1)) - np.log((n0 + 0.5) / (n + 1))
    one = (n1 == 0) | (n0 == 0)
    beta = np.where(one[..., None], 0.0, beta)
    b0 = np.where(one, logprior, -0.5 * quad + logprior)
    return beta, b0


def _draw_ids(g: np.random.Generator, k: int) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < k:
        for row in g.integers(0, len(_ALPHABET), size=(k, 5)):
            s = "".join(_ALPHABET[row])
            if s not in seen:
                seen.add(s)
                out.append(s)
                if len(out) == k:
                    break
    return out


def _eight_cycle(g: np.random.Generator) -> tuple[int, ...]:
    order = [int(v) for v in g.permutation(N_INITIAL)]
    sigma = [0] * N_INITIAL
    for i in range(N_INITIAL):
        sigma[order[i]] = order[(i + 1) % N_INITIAL]
    return tuple(sigma)


def build_planning_suite(seed: int, *, tasks_per_stratum: int = 12,
                         data_dir: str | os.PathLike[str] | None = None) -> PlanningSuite:
    """48 tasks (12 per family × context stratum), each with disjoint candidate / validation / final-test pools
    of 96; every configuration is fitted (vectorized per family) and scored on validation."""
    tasks: list[PlanningTask] = []
    hidden: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    shas: dict[str, str] = {}
    for family in dict.fromkeys(f for f, _ in PLAN_STRATA):
        X, y, _ = load(family, data_dir=data_dir)
        shas[family] = file_sha256(verified_path(family, data_dir=data_dir))
        med = np.median(X[:, 0])
        lo, hi = np.flatnonzero(X[:, 0] <= med), np.flatnonzero(X[:, 0] > med)
        meta: list[tuple[str, int, np.random.Generator]] = []
        pools: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        for context in (c for f, c in PLAN_STRATA if f == family):
            for q in range(tasks_per_stratum):
                g = derive_rng(seed, "planning-task", family, context, q)
                if context == "iid":
                    rows = g.choice(X.shape[0], 3 * POOL, replace=False)
                    pools.append((rows[:POOL], rows[POOL:2 * POOL], rows[2 * POOL:]))
                else:
                    vt = g.choice(hi, 2 * POOL, replace=False)
                    pools.append((g.choice(lo, POOL, replace=False), vt[:POOL], vt[POOL:]))
                meta.append((context, q, g))
        cand = np.stack([p[0] for p in pools])
        val = np.stack([p[1] for p in pools])
        Xc, yc, Xv, yv = X[cand], y[cand].astype(np.float64), X[val], y[val].astype(np.float64)
        centre = Xc.mean(axis=1)
        sd = Xc.std(axis=1)
        scale = np.where(sd > 0, sd, 1.0)
        T, d = Xc.shape[0], X.shape[1]
        coef = np.zeros((T, *(len(lv) for _, lv in FACTORS), d))
        icpt = np.zeros(coef.shape[:-1])
        for p_i, clip in enumerate((False, True)):
            Zc = _preprocess(Xc, centre, scale, clip)
            for b_i, n in enumerate(FACTORS[4][1]):
                sel = select_designs(Zc, yc, n)  # [T, 4, n]
                rows = np.arange(T)[:, None, None]
                Xs, ys = Zc[rows, sel], yc[rows, sel]
                for l_i, lam in enumerate(FACTORS[3][1]):
                    for c_i, fit in enumerate((_ridge, _lda)):
                        w, b0 = fit(Xs, ys, float(lam))
                        coef[:, :, p_i, c_i, l_i, b_i] = w
                        icpt[:, :, p_i, c_i, l_i, b_i] = b0
        coef = coef.reshape(T, N_CONFIGS, d)
        icpt = icpt.reshape(T, N_CONFIGS)
        clipped = np.array([CONFIGS[i][1] == "standardize+clip3" for i in range(N_CONFIGS)])
        Zv = np.where(clipped[None, :, None, None], _preprocess(Xv, centre, scale, True)[:, None],
                      _preprocess(Xv, centre, scale, False)[:, None])  # [T, 96, m, d]
        vu = np.round(_utility(np.einsum("tcmd,tcd->tcm", Zv, coef) + icpt[..., None], yv[:, None, :]), 6)
        for j, (context, q, g) in enumerate(meta):
            ids = _draw_ids(g, 2 * N_CONFIGS)
            initial = tuple(int(v) for v in g.choice(N_CONFIGS, N_INITIAL, replace=False))
            untried = [i for i in range(N_CONFIGS) if i not in initial]
            trials = tuple(int(v) for v in g.choice(untried, N_EXPERIMENTS, replace=False))
            tid = f"{family}/{context}/{q:02d}"
            card = {"family": family, "context": context, "candidates": f"{POOL} unlabeled candidates",
                    "n_features": int(d), "first_feature_mean": round(float(centre[j, 0]), 6),
                    "first_feature_sd": round(float(sd[j, 0]), 6)}
            tasks.append(PlanningTask(tid, family, context, q, tuple(ids[:N_CONFIGS]), tuple(ids[N_CONFIGS:]),
                                      initial, _eight_cycle(g), trials, tuple(float(v) for v in vu[j]), card,
                                      coef[j], icpt[j], centre[j], scale[j]))
            test = pools[j][2]
            hidden[tid] = (X[test], y[test].astype(np.float64))
    order = {s: k for k, s in enumerate(PLAN_STRATA)}
    tasks.sort(key=lambda t: (order[(t.family, t.context)], t.index))
    return PlanningSuite(int(seed), tuple(tasks), hidden, shas)


def final_test_utility(task: PlanningTask, configs: Sequence[int], X: np.ndarray, y: np.ndarray) -> list[float]:
    """Final-test utility (6 decimals) of canonical configurations (scorer only)."""
    out = []
    for i in configs:
        Z = _preprocess(X, task.centre, task.scale, CONFIGS[i][1] == "standardize+clip3")
        out.append(round(float(_utility(Z @ task.coef[i] + task.intercept[i], y)), 6))
    return out


# ---------------------------------------------------------------- conditions, tool session, planner


def shown_ids(task: PlanningTask, condition: str) -> tuple[str, ...]:
    if condition not in PLAN_CONDITIONS:
        raise ConfigError(f"unknown condition {condition!r}; use one of {PLAN_CONDITIONS}")
    return task.rename_ids if condition == "rename" else task.ids


def planning_view(task: PlanningTask,
                  condition: str) -> tuple[list[tuple[str, float]], list[tuple[str, dict[str, Any]]]]:
    """(initial history as (ID, validation utility) by position, menu as (ID, settings) in canonical order)."""
    ids = shown_ids(task, condition)
    c, u, s = task.initial, [task.validation[i] for i in task.initial], task.sigma
    if condition == "value":
        recs = [(c[t], u[s[t]]) for t in range(N_INITIAL)]
    elif condition == "pair":
        recs = [(c[s[t]], u[s[t]]) for t in range(N_INITIAL)]
    else:
        recs = [(c[t], u[t]) for t in range(N_INITIAL)]
    return [(ids[ci], ui) for ci, ui in recs], [(ids[i], config_settings(i)) for i in range(N_CONFIGS)]


class PlanningSession:
    """``run_experiment`` (validation utility only) ×3 then ``submit_configuration`` ×1; anything else raises
    :class:`ProtocolViolation` (schema, non-menu or already-tried ID, order, budget, untested submission)."""

    def __init__(self, task: PlanningTask, condition: str) -> None:
        self.task, self.condition = task, condition
        self.ids = shown_ids(task, condition)
        self._decode = {d: i for i, d in enumerate(self.ids)}
        self.tried: set[int] = set(task.initial)
        self.events: list[dict[str, Any]] = []
        self.submitted: int | None = None
        self.label_accesses = 0

    @property
    def schemas(self) -> list[dict[str, Any]]:
        return tool_schemas(self.ids)

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Dispatch a tool call after strict schema validation."""
        if name not in ("run_experiment", "submit_configuration"):
            raise ProtocolViolation(f"unknown tool {name!r}")
        if not isinstance(arguments, dict) or set(arguments) != {"configuration_id", "rationale"}:
            raise ProtocolViolation("arguments must be exactly {configuration_id, rationale}")
        cid, why = arguments["configuration_id"], arguments["rationale"]
        if not isinstance(cid, str) or cid not in self._decode:
            raise ProtocolViolation(f"{cid!r} is not one of the menu IDs")
        if not isinstance(why, str) or len(why) > RATIONALE_MAX:
            raise ProtocolViolation(f"rationale must be a string of at most {RATIONALE_MAX} characters")
        return self.run_experiment(cid, why) if name == "run_experiment" else self.submit_configuration(cid, why)

    def _canon(self, cid: str, why: str) -> int:
        if cid not in self._decode:
            raise ProtocolViolation(f"{cid!r} is not one of the menu IDs")
        if len(why) > RATIONALE_MAX:
            raise ProtocolViolation(f"rationale longer than {RATIONALE_MAX} characters")
        return self._decode[cid]

    def run_experiment(self, configuration_id: str, rationale: str = "") -> dict[str, Any]:
        if self.submitted is not None or len(self.events) >= N_EXPERIMENTS:
            raise ProtocolViolation("run_experiment after the third experiment or after submission")
        c = self._canon(configuration_id, rationale)
        if c in self.tried:
            raise ProtocolViolation(f"{configuration_id} was already tried")
        n = int(CONFIGS[c][4])
        if self.label_accesses + n > LABEL_BUDGET:
            raise ProtocolViolation("training-label budget exceeded")
        self.label_accesses += n
        self.tried.add(c)
        u = self.task.validation[c]
        ok = bool(np.isfinite(u))
        resp: dict[str, Any] = {"configuration_id": configuration_id, "status": "ok" if ok else "failed",
                                "validation_utility": u if ok else None,
                                "experiments_remaining": N_EXPERIMENTS - 1 - len(self.events)}
        self.events.append({"step": len(self.events), "tool": "run_experiment", "arg": configuration_id,
                            "choice": c, "rationale": rationale, "response": resp})
        return resp

    def submit_configuration(self, configuration_id: str, rationale: str = "") -> dict[str, Any]:
        if len(self.events) != N_EXPERIMENTS or self.submitted is not None:
            raise ProtocolViolation("submit_configuration must follow exactly three experiments, once")
        c = self._canon(configuration_id, rationale)
        ok_new = {e["choice"] for e in self.events if e["response"]["status"] == "ok"}
        if c not in set(self.task.initial) | ok_new:
            raise ProtocolViolation("submit an initial configuration or a successfully tested new one")
        self.submitted = c
        resp = {"configuration_id": configuration_id, "status": "recorded"}
        self.events.append({"step": N_EXPERIMENTS, "tool": "submit_configuration", "arg": configuration_id,
                            "choice": c, "rationale": rationale, "response": resp})
        return resp


@dataclass(frozen=True)
class ScriptedPlanner:
    """Seeded scripted planner: each stage takes the best record so far (displayed or observed; ties by menu
    position) and runs its first untried Hamming-1 neighbour over the 5 factors in menu order (exploit), or with
    probability ``epsilon`` a random untried neighbour (a random untried configuration when no neighbour is left);
    submits the best of the 11 records. It reads IDs only through menu positions
    and ignores record order, so it is label-equivariant and invariant to reordering whole records."""

    epsilon: float = 0.25
    name: str = "scripted-planner-v1"

    def run(self, session: PlanningSession, history: list[tuple[str, float]],
            menu: list[tuple[str, dict[str, Any]]], rng: np.random.Generator) -> None:
        pos = {cid: i for i, (cid, _) in enumerate(menu)}
        levels = [tuple(s.values()) for _, s in menu]
        records = [(pos[cid], u) for cid, u in history]
        tried = {i for i, _ in records}
        for _ in range(N_EXPERIMENTS):
            inc = max(records, key=lambda r: (r[1], -r[0]))[0]
            untried = [i for i in range(len(menu)) if i not in tried]
            nbrs = [i for i in untried if sum(a != b for a, b in zip(levels[i], levels[inc], strict=True)) == 1]
            explore = bool(rng.random() < self.epsilon)
            pool = nbrs or untried
            pick = pool[int(rng.integers(len(pool)))] if explore or not nbrs else nbrs[0]
            resp = session.run_experiment(menu[pick][0], "explore" if explore else "neighbour of the incumbent")
            tried.add(pick)
            if resp["status"] == "ok":
                records.append((pick, float(resp["validation_utility"])))
        best = max(records, key=lambda r: (r[1], -r[0]))[0]
        session.submit_configuration(menu[best][0], "best validation utility among the records")


def reference_choices(task: PlanningTask, condition: str) -> dict[str, list[int]]:
    """Random search (3 fixed trials, best displayed of 11) and initial incumbent (best displayed of 8);
    canonical choices, ties to canonical order."""
    hist, _ = planning_view(task, condition)
    ids = shown_ids(task, condition)
    dec = {d: i for i, d in enumerate(ids)}
    recs = [(dec[cid], u) for cid, u in hist]
    inc = max(recs, key=lambda r: (r[1], -r[0]))[0]
    rs = max(recs + [(i, task.validation[i]) for i in task.random_trials], key=lambda r: (r[1], -r[0]))[0]
    return {"random-search": [*task.random_trials, rs], "initial-incumbent": [inc]}


def run_trajectory(task: PlanningTask, condition: str, planner: ScriptedPlanner,
                   rng: np.random.Generator) -> PlanningSession:
    session = PlanningSession(task, condition)
    hist, menu = planning_view(task, condition)
    planner.run(session, hist, menu, rng)
    return session


def crn_equivariance(suite: PlanningSuite, planner: ScriptedPlanner, seed: int) -> dict[str, float]:
    """Fraction of (task, repeat) trajectories whose decoded choices equal aligned's when every condition uses the
    same generator (common random numbers). An equivariant, record-order-invariant planner gives 1 for pair and
    rename exactly; value differs."""
    out: dict[str, float] = {}
    for cond in PLAN_CONDITIONS[1:]:
        same = []
        for t in suite.tasks:
            for r in range(2):
                seqs = [[e["choice"] for e in run_trajectory(t, c, planner,
                                                             derive_rng(seed, "planning-crn", t.task_id, r)).events]
                        for c in ("aligned", cond)]
                same.append(seqs[0] == seqs[1])
        out[cond] = float(np.mean(same))
    return out


# ---------------------------------------------------------------- analysis (C4.6)

STEP_NAMES = ("First", "Second", "Third", "Submit")


@dataclass(frozen=True)
class PlanRow:
    table: str
    row: str
    condition: str
    estimate: float
    lower: float
    upper: float
    level: float
    extra: dict[str, float] = field(default_factory=dict)


def _tgr(a: Sequence[int], b: Sequence[int]) -> tuple[float, float, float, float]:
    cross = float(np.mean([x != y for x in a for y in b]))
    wa, wb = float(a[0] != a[1]), float(b[0] != b[1])
    return cross - (wa + wb) / 2, cross, wa, wb


def analyze_planning(export: dict[str, Any]) -> dict[str, Any]:
    """Tables S-main, S1–S6 from an export: T_gr per stage vs aligned (Cross, Within, Aligned), value − pair gaps,
    final-test utilities, paired contrasts (97.5 % for value/pair − aligned, 95 % otherwise), reference gaps and
    the exploration table; stratified task bootstrap (resample tasks within each stratum)."""
    seal, rel = export["choice_seal"], export["score_release"]
    if rel["seal_sha256"] != seal["choices_sha256"] or sha256(canonical(seal["choices"])) != seal["choices_sha256"]:
        raise SealError("score release does not match the choice seal")
    strata = {t["task_id"]: f"{t['family']}/{t['context']}" for t in export["tasks"]}
    initial = {t["task_id"]: t["initial"] for t in export["tasks"]}
    tasks = sorted(strata)
    ftu = rel["final_test_utility"]
    agent: dict[tuple[str, str, int], list[int]] = {}
    ref: dict[tuple[str, str, str], int] = {}
    for tid, cond, pol, rep, step, ch in seal["choices"]:
        if pol == "agent":
            agent.setdefault((tid, cond, rep), [0] * N_STAGES)[step] = ch
        elif step == N_STAGES - 1:
            ref[(tid, cond, pol)] = ch
    reps = sorted({k[2] for k in agent})
    if len(reps) != 2:
        raise ConfigError("the repeat-corrected contrast needs exactly two repeats per cell")
    spec = export["analysis"]
    g = derive_rng(int(spec["seed"]), "planning-bootstrap")
    n_boot = int(spec["n_boot"])
    cols = []
    for s in sorted(set(strata.values())):
        members = np.array([i for i, t in enumerate(tasks) if strata[t] == s])
        cols.append(members[g.integers(0, len(members), size=(n_boot, len(members)))])
    idx = np.concatenate(cols, axis=1)

    def row(table: str, name: str, cond: str, vals: Sequence[float] | np.ndarray, level: float = 0.95,
            **extra: float) -> PlanRow:
        v = np.asarray(vals, dtype=np.float64)
        boot = v[idx].mean(axis=1)
        a = (1 - level) / 2
        return PlanRow(table, name, cond, float(v.mean()), float(np.quantile(boot, a)),
                       float(np.quantile(boot, 1 - a)), level, dict(extra))

    rows: list[PlanRow] = []
    tgr: dict[tuple[int, str], list[float]] = {}
    for k, step in enumerate(STEP_NAMES):
        for cond in PLAN_CONDITIONS[1:]:
            per = [_tgr([agent[(t, cond, r)][k] for r in reps], [agent[(t, "aligned", r)][k] for r in reps])
                   for t in tasks]
            tgr[(k, cond)] = [p[0] for p in per]
            rows.append(row("S1", step, cond, tgr[(k, cond)], cross=float(np.mean([p[1] for p in per])),
                            within=float(np.mean([p[2] for p in per])), aligned=float(np.mean([p[3] for p in per]))))
        rows.append(row("S2", step, "value-pair", np.subtract(tgr[(k, "value")], tgr[(k, "pair")])))
    u = {c: [float(np.mean([ftu[f"{t}|{agent[(t, c, r)][-1]}"] for r in reps])) for t in tasks]
         for c in PLAN_CONDITIONS}
    uref = {(p, c): [ftu[f"{t}|{ref[(t, c, p)]}"] for t in tasks] for p in REFERENCES for c in PLAN_CONDITIONS}
    for c in PLAN_CONDITIONS:
        rows.append(row("S3", "Agent", c, u[c]))
    for p in REFERENCES:
        for c in PLAN_CONDITIONS:
            rows.append(row("S3", p, c, uref[(p, c)]))
    for c, lvl in (("pair", 0.975), ("value", 0.975), ("rename", 0.95)):
        rows.append(row("S4", f"{c} minus aligned", c, np.subtract(u[c], u["aligned"]), lvl))
    for p in REFERENCES:
        for c in PLAN_CONDITIONS:
            rows.append(row("S5", p, c, np.subtract(uref[(p, c)], u[c])))
    distinct: dict[str, float] = {}
    for c in PLAN_CONDITIONS:
        dis = [len({ch for r in reps for ch in agent[(t, c, r)][:N_EXPERIMENTS]}) for t in tasks]
        gap = [float(np.mean([max(ftu[f"{t}|{x}"] for x in [*initial[t], *agent[(t, c, r)][:N_EXPERIMENTS]])
                              - ftu[f"{t}|{agent[(t, c, r)][-1]}"] for r in reps])) for t in tasks]
        distinct[c] = float(np.mean(dis))
        rows.append(row("S6", "Gap", c, gap, distinct=distinct[c], distinct_min=float(min(dis)),
                        distinct_max=float(max(dis))))
    return {"rows": rows, "n_tasks": len(tasks), "n_strata": len(cols), "n_repeats": len(reps),
            "n_trajectories": len(agent), "n_decisions": sum(len(v) for v in agent.values()),
            "n_configs": N_CONFIGS, "n_initial": min(len(v) for v in initial.values()),
            "distinct": distinct}


def reanalyze_planning(path: str | Path) -> dict[str, Any]:
    """Recompute every table from a compact export (no executor or planner call); an unsealed export
    (``"sealed": false``) is refused with a ConfigError naming the field."""
    return analyze_planning(read_export(path))
