"""The sealed code-debugging run (C5, C7): one acquisition run directory with a frozen manifest, attempts,
amendments, the choice seal, the hidden-test score release and the compact export."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from ...rng import derive_rng
from . import _agents, _envs, _sandbox
from ._agents import LLMDebugger, acquire_with_model, model_gate, model_manifest
from ._debugging import (
    CONDITIONS,
    N_TEST_CALLS,
    PI_PAIR,
    PI_VALUE,
    DebugTask,
    ScriptedDebugger,
    Suite,
    ToolSession,
    _run_many,
    analyze,
    condition_view,
)
from ._protocol import SealError, canonical, sha256, source_hash, write_export
from ._sandbox import RunResult, SandboxLimits, TestCase, run_candidate
from ._sealed import SealedRunDirectory, declare_retries, export_turns

__all__ = ["DebugRun"]


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
        return _envs.DebugEnv(next(t for t in self.suite.tasks if t.task_id == req["task"]), req["condition"],
                        self._public)

    def acquire(self, capacity_failures: Sequence[str] = ()) -> dict[str, int] | None:
        """Run every planned trajectory once (``capacity_failures``: request IDs whose original fails; scripted
        agent only).  A model agent resumes: finished trajectories are never asked again."""
        self.manifest_sha()
        order = derive_rng(self.seed, "code-debugging-order").permutation(len(self.plan))
        if not isinstance(self.agent, ScriptedDebugger):
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
