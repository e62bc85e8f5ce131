"""The sealed planning run (C4, C7): run directory with a frozen manifest, the seeded schedule of
trajectories, the choice seal (agent and reference choices), the final-test score release and the compact
export."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import ConfigError
from ...rng import derive_rng
from . import _agents, _envs
from ._agents import LLMPlanner, acquire_with_model, model_gate, model_manifest
from ._planning import (
    CONFIGS,
    LABEL_BUDGET,
    N_EXPERIMENTS,
    N_STAGES,
    PLAN_CONDITIONS,
    PlanningSession,
    PlanningSuite,
    ScriptedPlanner,
    analyze_planning,
    final_test_utility,
    planning_view,
    reference_choices,
    run_trajectory,
    tool_schemas,
)
from ._protocol import SealError, canonical, sha256, source_hash, write_export
from ._sealed import SealedRunDirectory, declare_retries, export_turns

__all__ = ["PlanningRun"]


class PlanningRun(SealedRunDirectory):
    """Run directory: manifest (frozen first) → acquire (attempts.jsonl) → seal (choice matrix incl. references)
    → score (final-test file loaded only here, refuses without a valid seal) → export."""

    released = "final-test utilities"

    def __init__(self, root: str | Path, suite: PlanningSuite, *, seed: int, repeats: int = 2,
                 planner: ScriptedPlanner | LLMPlanner | None = None, clock: Callable[[], str] | None = None,
                 tasks: Sequence[str] | None = None, conditions: Sequence[str] = PLAN_CONDITIONS) -> None:
        self.root = Path(root)
        self.suite, self.seed, self.repeats = suite, seed, repeats
        self.planner = planner or ScriptedPlanner()
        self._clock = clock or (lambda: datetime.now(UTC).isoformat())
        if tasks is not None or tuple(conditions) != PLAN_CONDITIONS:  # a subset (smoke runs); analysis needs all
            unknown = sorted(set(tasks or ()) - {t.task_id for t in suite.tasks})
            bad = sorted(set(conditions) - set(PLAN_CONDITIONS))
            if unknown or bad or not conditions:
                raise ConfigError(f"unknown tasks {unknown} or conditions {bad} (field tasks / conditions)")
            keep = set(tasks) if tasks is not None else {t.task_id for t in suite.tasks}
            self.suite = PlanningSuite(suite.seed, tuple(t for t in suite.tasks if t.task_id in keep),
                                       {k: v for k, v in suite.hidden.items() if k in keep}, suite.data_sha256)
        self.conditions = tuple(conditions)
        self.plan: list[dict[str, Any]] = [
            {"request_id": f"{t.task_id}|{c}|{r}", "task": t.task_id, "condition": c, "repeat": r}
            for t in self.suite.tasks for c in self.conditions for r in range(repeats)]
        order = derive_rng(seed, "planning-order").permutation(len(self.plan))
        for k, j in enumerate(order):
            self.plan[int(j)]["schedule_index"] = k

    def freeze_manifest(self) -> str:
        self.root.mkdir(parents=True, exist_ok=True)
        hidden = canonical(self.suite.sealed_doc())
        (self.root / "final_test.json").write_bytes(hidden)
        manifest = {
            "experiment": "sequential-planning", "protocol_version": 1,
            "seeds": {"base": self.seed, "suite": self.suite.seed,
                      "derivation": "derive_rng(seed, purpose, *indices) (SeedSequence)"},
            "data_sha256": self.suite.data_sha256,
            "tasks_sha256": sha256(canonical([t.to_dict() for t in self.suite.tasks])),
            "final_test_sha256": sha256(hidden), "plan_sha256": sha256(canonical(self.plan)),
            "tool_schemas_sha256": sha256(canonical(tool_schemas(["<96 displayed IDs>"]))),
            "configurations": [list(c) for c in CONFIGS],
            "budgets": {"experiments": N_EXPERIMENTS, "label_accesses": LABEL_BUDGET, "repeats": self.repeats},
            "planner": {"name": self.planner.name, "epsilon": self.planner.epsilon, "model": "scripted",
                        "note": "no temperature/seed supplied to any model; scripted stand-in"},
            "source_sha256": source_hash(ScriptedPlanner, PlanningSession, planning_view, reference_choices),
            "analysis_sha256": source_hash(analyze_planning),
            "retry_policy": "at most one format correction per trajectory (unused by the scripted planner)",
        }
        if not isinstance(self.planner, ScriptedPlanner):
            manifest.update(model_manifest(self.planner, _envs.PlanningEnv, tool_schemas(["<96 displayed IDs>"])))
            manifest["planner"] = manifest.pop("agent")
            manifest["transport_sha256"] = source_hash(*_agents.transport_objects())
            manifest["conditions"] = list(self.conditions)
        h = self._freeze(manifest)
        declare_retries(self, self.planner)
        return h

    def _env(self, req: dict[str, Any]) -> Any:
        return _envs.PlanningEnv(self.suite.task(req["task"]), req["condition"])

    def replace(self, request_id: str) -> dict[str, Any]:
        """Replace a capacity / transport failure of a model trajectory under a recorded amendment."""
        if isinstance(self.planner, ScriptedPlanner):
            raise SealError("the scripted planner makes no model calls to replace")
        req = next((r for r in self.plan if r["request_id"] == request_id), None)
        if req is None:
            raise ConfigError(f"unknown request {request_id!r}")
        acquire_with_model(self, self.planner, self._env, [self.plan.index(req)], only=[request_id])
        return [a for a in self.attempts() if a["request_id"] == request_id][-1]

    def acquire(self) -> dict[str, int] | None:
        """Every planned trajectory once, in the seeded schedule; one fresh generator per trajectory.  A model
        planner resumes: finished trajectories are never asked again, interrupted ones re-run as recovery."""
        self.manifest_sha()
        if not isinstance(self.planner, ScriptedPlanner):
            order = sorted(range(len(self.plan)), key=lambda i: self.plan[i]["schedule_index"])
            return acquire_with_model(self, self.planner, self._env, order)
        lines = []
        for req in sorted(self.plan, key=lambda r: r["schedule_index"]):
            task = self.suite.task(req["task"])
            g = derive_rng(self.seed, "planning-agent", req["request_id"])
            started = self._clock()
            s = run_trajectory(task, req["condition"], self.planner, g)
            lines.append(canonical({"attempt_id": f"{req['request_id']}#0", "request_id": req["request_id"],
                                    "kind": "original", "started_at": started, "ended_at": self._clock(),
                                    "status": "ok", "events": s.events, "label_accesses": s.label_accesses,
                                    "usage": None}))
        with open(self.root / "attempts.jsonl", "ab") as fh:
            fh.write(b"".join(x + b"\n" for x in lines))
        return None

    def validate(self) -> dict[str, dict[str, Any]]:
        sel: dict[str, dict[str, Any]] = {}
        for a in self.attempts():
            if a["status"] == "ok":
                if a["request_id"] in sel:
                    raise SealError(f"{a['request_id']} has more than one successful attempt")
                sel[a["request_id"]] = a
        missing = [r["request_id"] for r in self.plan if r["request_id"] not in sel]
        if missing:
            raise SealError(f"{len(missing)} planned trajectories have no successful attempt (e.g. {missing[0]})")
        for rid, a in sel.items():
            tools = [e["tool"] for e in a["events"]]
            if tools != ["run_experiment"] * N_EXPERIMENTS + ["submit_configuration"]:
                raise SealError(f"{rid}: protocol violation {tools}")
            if not 0 <= a["label_accesses"] <= LABEL_BUDGET:
                raise SealError(f"{rid}: label budget exceeded")
        if not isinstance(self.planner, ScriptedPlanner):
            model_gate(self, sel)
        (self.root / "selection.json").write_bytes(canonical({k: v["attempt_id"] for k, v in sel.items()}))
        return sel

    def _choice_list(self, sel: dict[str, dict[str, Any]]) -> list[list[Any]]:
        rows = [[r["task"], r["condition"], "agent", r["repeat"], e["step"], e["choice"]]
                for r in self.plan for e in sel[r["request_id"]]["events"]]
        for t in self.suite.tasks:
            for c in self.conditions:
                for ref, seq in reference_choices(t, c).items():
                    steps = range(N_STAGES - len(seq), N_STAGES)
                    rows += [[t.task_id, c, ref, 0, k, ch] for k, ch in zip(steps, seq, strict=True)]
        return rows

    def seal(self) -> str:
        choices = self._choice_list(self.validate())
        return self._seal(choices, {"trajectories": len(self.plan),
                                    "agent_decisions": sum(r[2] == "agent" for r in choices), "rows": len(choices)})

    def score(self) -> dict[str, Any]:
        """Final-test utility of every sealed choice and every initial configuration (loads the test file here only)."""
        seal = self.check_seal()
        hb = (self.root / "final_test.json").read_bytes()
        if sha256(hb) != json.loads((self.root / "manifest.json").read_text())["final_test_sha256"]:
            raise SealError("final_test.json does not match the manifest digest")
        pools = json.loads(hb)
        need: dict[str, set[int]] = {t.task_id: set(t.initial) for t in self.suite.tasks}
        for row in seal["choices"]:
            need[row[0]].add(int(row[5]))
        scores: dict[str, float] = {}
        for tid, cfgs in need.items():
            X = np.array([[float(v) for v in row] for row in pools[tid]["X"]])
            y = np.array(pools[tid]["y"], dtype=np.float64)
            ordered = sorted(cfgs)
            for c, u in zip(ordered, final_test_utility(self.suite.task(tid), ordered, X, y), strict=True):
                scores[f"{tid}|{c}"] = u
        doc = {"seal_sha256": seal["choices_sha256"], "scorer_sha256": source_hash(PlanningRun.score),
               "released_at": self._clock(), "final_test_utility": scores}
        (self.root / "score_release.json").write_bytes(canonical(doc))
        return doc

    def export(self, path: str | Path, *, n_boot: int = 10_000) -> Path:
        sel = self.validate()
        doc = {"manifest": json.loads((self.root / "manifest.json").read_text()),
               "tasks": [t.to_dict() for t in self.suite.tasks], "plan": self.plan,
               "choice_seal": json.loads((self.root / "choice_seal.json").read_text()),
               "score_release": json.loads((self.root / "score_release.json").read_text()),
               "events": {rid: a["events"] for rid, a in sel.items()},
               "analysis": {"n_boot": n_boot, "seed": self.seed}}
        if not isinstance(self.planner, ScriptedPlanner):
            doc["amendments"] = self.amendments()
            doc["attempts"] = self.attempts()
            doc["model_turns"] = export_turns(self.root)
            doc["usage_summary"] = json.loads((self.root / "usage_summary.json").read_text())
        return write_export(path, doc)
