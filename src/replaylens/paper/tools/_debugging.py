"""Code-debugging substrate (C5): tasks and hidden tests, the conditions, the tool session, the scripted
debugger, and the analysis of a sealed export (C5.5)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import ConfigError
from ...rng import derive_rng
from ._families import FAMILIES, make_instance
from ._protocol import ProtocolViolation, SealError, canonical, read_export, sha256
from ._sandbox import RunResult, SandboxLimits, TestCase, run_candidate

CONDITIONS = ("aligned", "value", "pair", "rename")
PI_VALUE = (1, 0, 3, 2)
PI_PAIR = (2, 3, 0, 1)
N_CANDIDATES = 12
N_TEST_CALLS = 3


@dataclass(frozen=True)
class DebugTask:
    """Public part of one task: candidate sources by canonical index, display IDs, public tests, ledger."""

    task_id: str
    family: str
    instance: int
    func: str
    spec: str
    sources: tuple[str, ...]  # canonical candidate index -> source
    display: tuple[str, ...]  # canonical index -> displayed ID "P0".."P11" (seeded permutation)
    correct: tuple[int, ...]  # canonical indices of the correct candidates (never shown to agents)
    public: tuple[TestCase, ...]
    ledger: tuple[tuple[int, float], ...]  # position -> (canonical candidate, public pass fraction)
    public_fraction: tuple[float, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "family": self.family, "instance": self.instance, "func": self.func,
                "spec": self.spec, "sources": list(self.sources), "display": list(self.display),
                "correct": list(self.correct), "public": [[repr(t.args), repr(t.expected)] for t in self.public],
                "ledger": [list(e) for e in self.ledger], "public_fraction": list(self.public_fraction)}


@dataclass(frozen=True)
class Suite:
    seed: int
    tasks: tuple[DebugTask, ...]
    hidden: dict[str, tuple[TestCase, ...]] = field(repr=False)

    def sealed_doc(self) -> dict[str, list[list[str]]]:
        """The hidden tests as the run's sealed ``hidden_tests.json`` holds them (task -> [[args, expected]])."""
        return {k: [[repr(t.args), repr(t.expected)] for t in v] for k, v in self.hidden.items()}


def _run_many(jobs: Sequence[tuple[str, str, Sequence[TestCase]]], limits: SandboxLimits | None) -> list[RunResult]:
    with ThreadPoolExecutor(max_workers=4) as ex:
        return list(ex.map(lambda j: run_candidate(j[0], j[1], j[2], limits, trusted=True), jobs))


def build_suite(seed: int, families: Sequence[str] = FAMILIES, instances: Sequence[int] = (0, 1, 2),
                limits: SandboxLimits | None = None) -> Suite:
    """Build the tasks (public) and hidden tests (kept apart). Candidates are measured in the sandbox."""
    tasks: list[DebugTask] = []
    hidden: dict[str, tuple[TestCase, ...]] = {}
    for fam in families:
        for i in instances:
            inst = make_instance(fam, i)
            g = derive_rng(seed, "code-debugging-task", fam, i)
            public = tuple(TestCase(a, inst.reference(*a)) for a in inst.public)
            hid_args = list(inst.hidden_edge) + [inst.draw(g) for _ in range(8 - len(inst.hidden_edge))]
            all_src = [inst.header + b for b in inst.correct + inst.bugs]
            res = _run_many([(s, inst.func, public) for s in all_src], limits)
            if any(r.failed for r in res[:2]):
                raise ConfigError(f"{fam}/{i}: a correct implementation fails a public test: {res[:2]}")
            valid = [j for j in range(2, len(all_src)) if res[j].passed < res[j].total and res[j].status == "ok"]
            if len(valid) < N_CANDIDATES - 2:
                raise ConfigError(f"{fam}/{i}: only {len(valid)} catalogue bugs fail a public test")
            chosen = sorted(int(v) for v in g.choice(valid, size=N_CANDIDATES - 2, replace=False))
            picks = [0, 1, *chosen]
            sources = tuple(all_src[j] for j in picks)
            frac = tuple(res[j].passed / res[j].total for j in picks)
            perm = g.permutation(N_CANDIDATES)
            display = tuple(f"P{int(perm[c])}" for c in range(N_CANDIDATES))
            by_frac: dict[float, list[int]] = {}
            for c in range(2, N_CANDIDATES):
                by_frac.setdefault(frac[c], []).append(c)
            fr = sorted(by_frac)
            use = sorted(int(v) for v in g.choice(len(fr), size=min(3, len(fr)), replace=False))
            buggy = [int(g.choice(by_frac[fr[u]])) for u in use]
            rest = [c for c in range(2, N_CANDIDATES) if c not in buggy]
            buggy += [int(v) for v in g.choice(rest, size=3 - len(buggy), replace=False)]
            entries = [int(g.integers(2)), *buggy]
            pos = g.permutation(4)
            ledger = [(0, 0.0)] * 4
            for e, p in zip(entries, pos, strict=True):
                ledger[int(p)] = (e, frac[e])
            tid = f"{fam}-{i}"
            tasks.append(DebugTask(tid, fam, i, inst.func, inst.spec, sources, display, (0, 1), public, tuple(ledger),
                                   frac))
            hidden[tid] = tuple(TestCase(a, inst.reference(*a)) for a in hid_args)
    return Suite(seed, tuple(tasks), hidden)


# ---------------------------------------------------------------- conditions and the tool session


def rename_id(display_id: str) -> str:
    """P_i -> R_(i+1) mod 12."""
    return f"R{(int(display_id[1:]) + 1) % N_CANDIDATES}"


def condition_view(task: DebugTask, condition: str) -> tuple[list[tuple[str, float]], list[tuple[str, str]]]:
    """(ledger shown to the agent as (ID, fraction) by position, menu as (ID, source) sorted by ID number)."""
    led = list(task.ledger)
    if condition == "aligned":
        shown = [(task.display[c], f) for c, f in led]
    elif condition == "value":
        shown = [(task.display[led[i][0]], led[PI_VALUE[i]][1]) for i in range(4)]
    elif condition == "pair":
        shown = [(task.display[led[PI_PAIR[i]][0]], led[PI_PAIR[i]][1]) for i in range(4)]
    elif condition == "rename":
        shown = [(rename_id(task.display[c]), f) for c, f in led]
    else:
        raise ConfigError(f"unknown condition {condition!r}; use one of {CONDITIONS}")
    ids = [rename_id(d) if condition == "rename" else d for d in task.display]
    menu = sorted(((ids[c], task.sources[c]) for c in range(N_CANDIDATES)), key=lambda t: int(t[0][1:]))
    return shown, menu


class ToolSession:
    """``run_tests`` (public pass count only) and ``submit_patch``; 3 test calls then 1 submission."""

    def __init__(self, task: DebugTask, condition: str, runner: Callable[[DebugTask, int], RunResult]) -> None:
        self.task, self.condition, self._runner = task, condition, runner
        ids = [rename_id(d) if condition == "rename" else d for d in task.display]
        self._decode = {d: c for c, d in enumerate(ids)}
        self.events: list[dict[str, Any]] = []
        self.submitted: int | None = None

    @property
    def schema_enum(self) -> list[str]:
        return sorted(self._decode, key=lambda s: int(s[1:]))

    def _canon(self, cid: str) -> int:
        if cid not in self._decode:
            raise ProtocolViolation(f"{cid!r} is not one of the menu IDs")
        return self._decode[cid]

    def run_tests(self, candidate_id: str) -> dict[str, int]:
        if self.submitted is not None or len(self.events) >= N_TEST_CALLS:
            raise ProtocolViolation("run_tests after the third test call or after submission")
        c = self._canon(candidate_id)
        r = self._runner(self.task, c)
        resp = {"passed": r.passed, "total": r.total}
        self.events.append({"step": len(self.events), "tool": "run_tests", "arg": candidate_id, "choice": c,
                            "response": resp})
        return resp

    def submit_patch(self, candidate_id: str) -> dict[str, str]:
        if len(self.events) != N_TEST_CALLS or self.submitted is not None:
            raise ProtocolViolation("submit_patch must follow exactly three run_tests calls, once")
        c = self._canon(candidate_id)
        self.submitted = c
        self.events.append({"step": N_TEST_CALLS, "tool": "submit_patch", "arg": candidate_id, "choice": c,
                            "response": {"status": "recorded"}})
        return {"status": "recorded"}


@dataclass(frozen=True)
class ScriptedDebugger:
    """Seeded scripted agent: tests ledger candidates by shown score (best first), with probability
    ``epsilon`` per call tests a random untested menu entry instead; submits the best fresh result
    (ties: earliest tested). Fresh trajectories draw from their own generator, so repeats differ."""

    epsilon: float = 0.25
    name: str = "scripted-debugger-v1"

    def run(self, session: ToolSession, ledger: list[tuple[str, float]], menu: list[tuple[str, str]],
            rng: np.random.Generator) -> None:
        order = [cid for _, _, cid in sorted((-f, i, cid) for i, (cid, f) in enumerate(ledger))]
        tested: list[tuple[str, float]] = []
        for _ in range(N_TEST_CALLS):
            untested = [cid for cid, _ in menu if cid not in {t for t, _ in tested}]
            queue = [c for c in order if c in untested]
            if rng.random() < self.epsilon or not queue:
                pick = untested[int(rng.integers(len(untested)))]
            else:
                pick = queue[0]
            r = session.run_tests(pick)
            tested.append((pick, r["passed"] / max(r["total"], 1)))
        best = max(range(len(tested)), key=lambda j: (tested[j][1], -j))
        session.submit_patch(tested[best][0])


# ---------------------------------------------------------------- analysis (C5.5)


@dataclass(frozen=True)
class Readout:
    readout: str
    condition: str
    estimate: float
    lower: float
    upper: float


def analyze(export: dict[str, Any]) -> dict[str, Any]:
    """Table CD from an export (or a dict of the same shape): First / Final disagreement and hidden
    utility vs aligned, per task (mean over repeats), task bootstrap (seeded percentile, 95%)."""
    seal = export["choice_seal"]
    rel = export["score_release"]
    if rel["seal_sha256"] != seal["choices_sha256"] or sha256(canonical(seal["choices"])) != seal["choices_sha256"]:
        raise SealError("score release does not match the choice seal")
    first: dict[tuple[str, str, int], int] = {}
    final: dict[tuple[str, str, int], int] = {}
    for t, c, r, step, ch in seal["choices"]:
        if step == 0:
            first[(t, c, r)] = ch
        if step == N_TEST_CALLS:
            final[(t, c, r)] = ch
    tasks = sorted({k[0] for k in first})
    reps = sorted({k[2] for k in first})
    hid = rel["hidden_scores"]
    u = {k: hid[f"{k[0]}|{v}"] for k, v in final.items()}
    spec = export["analysis"]
    g = derive_rng(int(spec["seed"]), "code-debugging-bootstrap")
    idx = g.integers(0, len(tasks), size=(int(spec["n_boot"]), len(tasks)))
    a = (1 - float(spec["level"])) / 2
    rows: list[Readout] = []
    hidden_u = {c: float(np.mean([u[(t, c, r)] for t in tasks for r in reps])) for c in CONDITIONS}
    for name, fn in (("First action", lambda t, c, r: float(first[(t, c, r)] != first[(t, "aligned", r)])),
                     ("Final action", lambda t, c, r: float(final[(t, c, r)] != final[(t, "aligned", r)])),
                     ("Hidden utility", lambda t, c, r: u[(t, c, r)] - u[(t, "aligned", r)])):
        for c in CONDITIONS[1:]:
            vals = np.array([np.mean([fn(t, c, r) for r in reps]) for t in tasks])
            boot = vals[idx].mean(axis=1)
            rows.append(Readout(name, c, float(vals.mean()), float(np.quantile(boot, a)),
                                float(np.quantile(boot, 1 - a))))
    return {"rows": rows, "hidden_u": hidden_u, "n_tasks": len(tasks), "n_repeats": len(reps),
            "n_trajectories": len(final), "n_events": len(seal["choices"])}


def reanalyze(path: str | Path) -> dict[str, Any]:
    """Recompute every table from a compact export (no model call, no sandbox); ``.gz`` exports are gzip JSON.
    An unsealed export (``"sealed": false``) is refused: it carries no hidden scores."""
    return analyze(read_export(path))

