"""Code-debugging substrate, tool session, scripted debugger, sealed evaluation and analysis (C5, C7)."""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import ConfigError, ReplayLensError
from ...rng import derive_rng
from . import _sandbox
from ._families import FAMILIES, make_instance
from ._sandbox import RunResult, SandboxLimits, TestCase, run_candidate

if TYPE_CHECKING:
    from ._agents import LLMDebugger

CONDITIONS = ("aligned", "value", "pair", "rename")
PI_VALUE = (1, 0, 3, 2)
PI_PAIR = (2, 3, 0, 1)
N_CANDIDATES = 12
N_TEST_CALLS = 3


class SealError(ReplayLensError):
    """The choice seal is missing, incomplete or does not match the recorded choices."""


class ProtocolViolation(ReplayLensError):
    """A tool call outside the frozen protocol (3 run_tests then 1 submit_patch, IDs from the menu)."""


def canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class SealedRunDirectory:
    """Shared provenance of a sealed run directory: a manifest frozen before acquisition, append-only
    attempts, and a choice seal (sha256 of the complete choice matrix) checked before any hidden score.

    Subclasses provide ``root``, ``_clock``, ``validate()`` and ``_choice_list(selection)``.
    """

    root: Path
    plan: list[dict[str, Any]]
    _clock: Callable[[], str]
    released = "hidden scores"

    def validate(self) -> dict[str, dict[str, Any]]:  # pragma: no cover - overridden
        raise NotImplementedError

    def _choice_list(self, sel: dict[str, dict[str, Any]]) -> list[list[Any]]:  # pragma: no cover - overridden
        raise NotImplementedError

    def _freeze(self, manifest: dict[str, Any]) -> str:
        data = canonical(manifest)
        path = self.root / "manifest.json"
        if path.exists() and path.read_bytes() != data:
            raise SealError("manifest.json is frozen and differs from this run's settings")
        path.write_bytes(data)
        (self.root / "manifest.sha256").write_text(sha256(data))
        return sha256(data)

    def manifest_sha(self) -> str:
        path = self.root / "manifest.json"
        if not path.exists():
            raise SealError("no frozen manifest: call freeze_manifest() before acquisition")
        h = sha256(path.read_bytes())
        if (self.root / "manifest.sha256").read_text().strip() != h:
            raise SealError("manifest.json changed after it was frozen")
        return h

    def attempts(self) -> list[dict[str, Any]]:
        """Finished attempts (a torn last line left by a kill is skipped)."""
        from ._agents import read_jsonl

        return read_jsonl(self.root / "attempts.jsonl")

    def journal(self, agent: Any) -> Any:
        """The model-turn journal of this run (secrets of the agent's back-end redacted in every line)."""
        from ...llm import Redactor
        from ._agents import TurnJournal

        return TurnJournal(self.root, Redactor(agent.backend.secrets()))

    def amend(self, applies_to: Sequence[str], *, reason: str, declared_before_acquisition: bool,
              authorized_by: str = "protocol", max_replacements: int = 1) -> Path:
        """Record a capacity-replacement amendment (C7.6) naming the requests it covers (``"*"``: all)."""
        d = self.root / "amendments"
        d.mkdir(exist_ok=True)
        n = len(list(d.glob("*.json"))) + 1
        doc = {"amendment_id": f"{n:04d}", "created_at": self._clock(), "authorized_by": authorized_by,
               "reason": reason, "applies_to": sorted(applies_to), "declared_before_acquisition":
               declared_before_acquisition, "constraints": {"same_prompts": True, "same_schema": True,
               "same_agent": True, "max_replacements_per_request": max_replacements,
               "successful_originals_untouched": True},
               "manifest_sha256": self.manifest_sha()}
        p = d / f"{n:04d}-capacity-replacement.json"
        p.write_bytes(canonical(doc))
        return p

    def amendments(self) -> list[dict[str, Any]]:
        d = self.root / "amendments"
        return [json.loads(p.read_text()) for p in sorted(d.glob("*.json"))] if d.exists() else []

    def _seal(self, choices: list[list[Any]], counts: dict[str, int]) -> str:
        h = sha256(canonical(choices))
        doc = {"choices": choices, "counts": counts, "manifest_sha256": self.manifest_sha(), "choices_sha256": h,
               "sealed_at": self._clock()}
        (self.root / "choice_seal.json").write_bytes(canonical(doc))
        return h

    def failure_report(self) -> dict[str, Any]:
        """Summary of the acquisition from the public journal (gate verdict, planned / completed trajectories,
        protocol failures by reason, format corrections, capacity failures, attempts by kind, token usage, manifest
        sha256); reads nothing hidden and scores nothing."""
        from ._reports import failure_report

        return failure_report(self)

    def export_unsealed(self, path: str | Path) -> Path:
        """When the gate does not pass: a compact export with ``"sealed": false``, the manifest, the failure
        report, the plan, per-trajectory outcomes and the accepted tool events of the completed trajectories (no
        hidden or final-test score). Refuses when the gate passes."""
        from ._reports import unsealed_export_doc

        return write_export(path, unsealed_export_doc(self))

    def check_seal(self) -> dict[str, Any]:
        p = self.root / "choice_seal.json"
        if not p.exists():
            raise SealError(f"no choice seal: {self.released} are released only after seal()")
        seal = json.loads(p.read_text())
        if seal["manifest_sha256"] != self.manifest_sha():
            raise SealError("the seal was made under a different manifest")
        now = sha256(canonical(self._choice_list(self.validate())))
        if sha256(canonical(seal["choices"])) != seal["choices_sha256"] or now != seal["choices_sha256"]:
            raise SealError("the recorded choices differ from the sealed choice matrix")
        return dict(seal)


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


# ---------------------------------------------------------------- provenance: manifest, seal, release, amendments


def source_hash(*objs: Any) -> str:
    parts = sorted((inspect.getsourcefile(o) or "", sha256(inspect.getsource(o).encode())) for o in objs)
    return sha256(canonical([[Path(p).name, h] for p, h in parts]))


class DebugRun(SealedRunDirectory):
    """One acquisition run directory: manifest (frozen first), attempts, amendments, seal, score release."""

    def __init__(self, root: str | Path, suite: Suite, *, seed: int, repeats: int = 2,
                 agent: ScriptedDebugger | LLMDebugger | None = None,
                 clock: Callable[[], str] | None = None) -> None:
        self.root = Path(root)
        self.suite, self.seed, self.repeats = suite, seed, repeats
        self.agent = agent or ScriptedDebugger()
        self._clock = clock or (lambda: datetime.now(UTC).isoformat())
        self._public_cache: dict[tuple[str, int], RunResult] = {}
        self.plan: list[dict[str, Any]] = [
            {"request_id": f"{t.task_id}|{c}|{r}", "task": t.task_id, "condition": c, "repeat": r}
            for t in suite.tasks for c in CONDITIONS for r in range(repeats)]

    # -- manifest
    def freeze_manifest(self) -> str:
        self.root.mkdir(parents=True, exist_ok=True)
        hidden_bytes = canonical(self.suite.sealed_doc())
        (self.root / "hidden_tests.json").write_bytes(hidden_bytes)
        manifest = {
            "experiment": "code-debugging", "protocol_version": 1,
            "seeds": {"base": self.seed, "suite": self.suite.seed},
            "tasks_sha256": sha256(canonical([t.to_dict() for t in self.suite.tasks])),
            "hidden_tests_sha256": sha256(hidden_bytes),
            "plan_sha256": sha256(canonical(self.plan)),
            "tool_schemas": {"run_tests": ["candidate_id"], "submit_patch": ["candidate_id"]},
            "conditions": {"value": list(PI_VALUE), "pair": list(PI_PAIR), "rename": "P_i -> R_(i+1) mod 12"},
            "protocol": {"test_calls": N_TEST_CALLS, "submissions": 1, "repeats": self.repeats},
            "agent": {"name": self.agent.name, "epsilon": self.agent.epsilon, "model": "scripted",
                      "note": "no temperature/seed supplied to any model; scripted stand-in"},
            "source_sha256": source_hash(ScriptedDebugger, ToolSession, condition_view),
            "transport_sha256": source_hash(_sandbox.run_candidate),
            "analysis_sha256": source_hash(analyze),
            "retry_policy": "no retries; capacity replacements only under a recorded amendment",
        }
        if not isinstance(self.agent, ScriptedDebugger):
            from . import _agents, _envs

            manifest.update(model_manifest(self.agent, _envs.DebugEnv, _envs.debug_tool_schemas(["<12 IDs>"])))
            manifest["transport_sha256"] = source_hash(_sandbox.run_candidate, *_agents.transport_objects())
        h = self._freeze(manifest)
        declare_retries(self, self.agent)
        return h

    # -- acquisition
    def _public(self, task: DebugTask, c: int) -> RunResult:
        key = (task.task_id, c)
        if key not in self._public_cache:
            self._public_cache[key] = run_candidate(task.sources[c], task.func, task.public, trusted=True)
        return self._public_cache[key]

    def _append(self, rec: dict[str, Any]) -> None:
        with open(self.root / "attempts.jsonl", "ab") as fh:
            fh.write(canonical(rec) + b"\n")

    def _trajectory(self, req: dict[str, Any], kind: str, fail: bool) -> dict[str, Any]:
        task = next(t for t in self.suite.tasks if t.task_id == req["task"])
        n = sum(1 for a in self.attempts() if a["request_id"] == req["request_id"])
        rec: dict[str, Any] = {"attempt_id": f"{req['request_id']}#{n}", "request_id": req["request_id"],
                               "kind": kind, "started_at": self._clock()}
        if fail:
            rec.update(status="capacity_error", events=[], usage=None)
        else:
            shown, menu = condition_view(task, req["condition"])
            session = ToolSession(task, req["condition"], self._public)
            g = derive_rng(self.seed, "code-debugging-agent", req["request_id"], kind)
            if not isinstance(self.agent, ScriptedDebugger):
                raise ConfigError("capacity_failures simulate failures of the scripted debugger only")
            self.agent.run(session, shown, menu, g)
            rec.update(status="ok", events=session.events, usage=None)
        rec["ended_at"] = self._clock()
        self._append(rec)
        return rec

    def _env(self, req: dict[str, Any]) -> Any:
        from ._envs import DebugEnv

        return DebugEnv(next(t for t in self.suite.tasks if t.task_id == req["task"]), req["condition"],
                        self._public)

    def acquire(self, capacity_failures: Sequence[str] = ()) -> dict[str, int] | None:
        """Run every planned trajectory once (``capacity_failures``: request IDs whose original fails; scripted
        agent only).  A model agent resumes: finished trajectories are never asked again."""
        self.manifest_sha()
        order = derive_rng(self.seed, "code-debugging-order").permutation(len(self.plan))
        if not isinstance(self.agent, ScriptedDebugger):
            from ._agents import acquire_with_model

            return acquire_with_model(self, self.agent, self._env, [int(j) for j in order])
        for j in order:
            req = self.plan[int(j)]
            self._trajectory(req, "original", req["request_id"] in capacity_failures)
        return None

    def replace(self, request_id: str) -> dict[str, Any]:
        """One replacement for a capacity failure, only under a recorded amendment naming it."""
        if not any(request_id in a["applies_to"] or "*" in a["applies_to"] for a in self.amendments()):
            raise SealError(f"no recorded amendment authorizes a replacement for {request_id}")
        mine = [a for a in self.attempts() if a["request_id"] == request_id]
        if not mine or mine[-1]["status"] != "capacity_error" or any(a["kind"] == "replacement" for a in mine):
            raise SealError(f"{request_id}: only one replacement, and only after a capacity failure")
        req = next(r for r in self.plan if r["request_id"] == request_id)
        if not isinstance(self.agent, ScriptedDebugger):
            from ._agents import acquire_with_model

            acquire_with_model(self, self.agent, self._env, [self.plan.index(req)], only=[request_id])
            return [a for a in self.attempts() if a["request_id"] == request_id][-1]
        return self._trajectory(req, "replacement", False)

    # -- validation gate and seal
    def selected(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for a in self.attempts():
            if a["status"] == "ok":
                if a["request_id"] in out:
                    raise SealError(f"{a['request_id']} has more than one successful attempt")
                out[a["request_id"]] = a
        return out

    def validate(self) -> dict[str, dict[str, Any]]:
        sel = self.selected()
        missing = [r["request_id"] for r in self.plan if r["request_id"] not in sel]
        if missing:
            raise SealError(f"{len(missing)} planned trajectories have no successful attempt (e.g. {missing[0]})")
        for rid, a in sel.items():
            tools = [e["tool"] for e in a["events"]]
            if tools != ["run_tests"] * N_TEST_CALLS + ["submit_patch"]:
                raise SealError(f"{rid}: protocol violation {tools}")
            if a["kind"] == "replacement" and not any(rid in m["applies_to"] or "*" in m["applies_to"]
                                                     for m in self.amendments()):
                raise SealError(f"{rid}: replacement without an amendment")
        if not isinstance(self.agent, ScriptedDebugger):
            from ._agents import model_gate

            model_gate(self, sel)
        (self.root / "selection.json").write_bytes(canonical({k: v["attempt_id"] for k, v in sel.items()}))
        return sel

    def _choice_list(self, sel: dict[str, dict[str, Any]]) -> list[list[Any]]:
        return [[r["task"], r["condition"], r["repeat"], e["step"], e["choice"]]
                for r in self.plan for e in sel[r["request_id"]]["events"]]

    def seal(self) -> str:
        sel = self.validate()
        choices = self._choice_list(sel)
        return self._seal(choices, {"trajectories": len(sel), "events": len(choices)})

    def score(self, limits: SandboxLimits | None = None) -> dict[str, Any]:
        """Hidden scoring: refuses without a valid seal; loads the hidden file only here."""
        seal = self.check_seal()
        hb = (self.root / "hidden_tests.json").read_bytes()
        manifest = json.loads((self.root / "manifest.json").read_text())
        if sha256(hb) != manifest["hidden_tests_sha256"]:
            raise SealError("hidden_tests.json does not match the manifest digest")
        import ast
        hidden = {k: tuple(TestCase(ast.literal_eval(a), ast.literal_eval(e)) for a, e in v)
                  for k, v in json.loads(hb).items()}
        tasks = {t.task_id: t for t in self.suite.tasks}
        submitted = sorted({(r[0], r[4]) for r in seal["choices"] if r[3] == N_TEST_CALLS})
        res = _run_many([(tasks[t].sources[c], tasks[t].func, hidden[t]) for t, c in submitted], limits)
        scores = {f"{t}|{c}": r.passed / r.total if r.status == "ok" else 0.0
                  for (t, c), r in zip(submitted, res, strict=True)}
        doc = {"seal_sha256": seal["choices_sha256"], "scorer_sha256": source_hash(DebugRun.score),
               "released_at": self._clock(), "hidden_scores": scores}
        (self.root / "score_release.json").write_bytes(canonical(doc))
        return doc

    def export(self, path: str | Path) -> Path:
        """Compact export: everything re-analysis needs, no model or sandbox call."""
        sel = self.validate()
        doc = {"manifest": json.loads((self.root / "manifest.json").read_text()),
               "tasks": [t.to_dict() for t in self.suite.tasks], "plan": self.plan,
               "choice_seal": json.loads((self.root / "choice_seal.json").read_text()),
               "score_release": json.loads((self.root / "score_release.json").read_text()),
               "amendments": self.amendments(), "attempts": self.attempts(),
               "events": {rid: a["events"] for rid, a in sel.items()},
               "analysis": {"n_boot": 10_000, "level": 0.95, "seed": self.seed}}
        if not isinstance(self.agent, ScriptedDebugger):
            doc["model_turns"] = export_turns(self.root)
        return write_export(path, doc)


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


def write_export(path: str | Path, doc: dict[str, Any]) -> Path:
    """Write an export as canonical JSON (gzip when the name ends in ``.gz``, with a fixed mtime)."""
    import gzip

    p = Path(path)
    data = canonical(doc)
    p.write_bytes(gzip.compress(data, 9, mtime=0) if p.suffix == ".gz" else data)
    return p


def read_export(path: str | Path, *, unsealed: bool = False) -> dict[str, Any]:
    """Read an export. A sealed export (no ``sealed`` field, as written by ``export()``) must carry the choice seal
    and the score release; an unsealed one (``"sealed": false``) is refused unless ``unsealed`` is true (its
    failure report and completed trajectories can be shown, no score can be computed from it)."""
    import gzip

    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{p}: no such export file")
    data = p.read_bytes()
    try:
        doc = json.loads(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{p}: not a JSON export ({type(exc).__name__})") from None
    if isinstance(doc, dict) and doc.get("sealed", True) is not True:
        if unsealed and doc.get("sealed") is False:
            return doc
        gate = (doc.get("failure_report") or {}).get("gate") or {}
        raise ConfigError(f"{p}: field 'sealed' is {json.dumps(doc.get('sealed'))}: the validation gate did not pass "
                          f"({gate.get('error') or 'no seal'}), so the export carries no hidden / final-test scores "
                          "and no table is computed from it; see its failure_report")
    if not isinstance(doc, dict) or "choice_seal" not in doc or "score_release" not in doc:
        raise ConfigError(f"{p}: field 'choice_seal' / 'score_release' missing (not a sealed export)")
    return doc


def export_turns(root: Path) -> list[dict[str, Any]]:
    """Compact per-turn provenance for an export: digests, kinds, statuses, parsed calls, usage (no prompt text)."""
    from ._agents import read_jsonl

    keep = ("turn_id", "attempt_id", "request_id", "stage", "kind", "role", "tool_choice", "prompt_sha256",
            "server_input_sha256", "status", "format_error", "error", "tool_name", "arguments_text", "decoded_choice",
            "usage", "runtime_metadata", "latency_s")
    return [{k: t.get(k) for k in keep} for t in read_jsonl(root / "turns.jsonl")]


def model_manifest(agent: Any, env_cls: Any, schemas: list[dict[str, Any]]) -> dict[str, Any]:
    """Manifest fields of a model-driven run (agent settings, prompt/tool-schema digests, source hash)."""
    from . import _agents

    mod = inspect.getmodule(env_cls)
    return {"agent": agent.describe(), "tool_schemas_sha256": sha256(canonical(schemas)),
            "prompt_source_sha256": sha256(inspect.getsource(mod).encode()) if mod else None,
            "source_sha256": source_hash(env_cls, _agents.LLMToolAgent, ToolSession),
            "retry_policy": ("at most one format correction per trajectory (C4.4); a second format error is a "
                             "recorded protocol failure; capacity/transport replacements only under an amendment")}


def declare_retries(run: SealedRunDirectory, agent: Any) -> None:
    """With ``agent.retries`` > 0, the frozen replacement amendment (declared before acquisition, all requests)."""
    if getattr(agent, "retries", 0) > 0 and not run.amendments():
        run.amend(["*"], reason="frozen capacity/transport replacement policy", declared_before_acquisition=True,
                  max_replacements=int(agent.retries))
