"""The two tool environments as a model sees them: prompts, strict tool schemas, format-error classification.

Both wrap the existing sessions (:class:`PlanningSession`, :class:`ToolSession`), so the protocol and the
recorded events are exactly those of the scripted agents.  Before a call reaches a session, the environment
classifies what the one-correction rule treats as a *format error* (C4.4, C10-D5): planning — an already-tried
configuration (an initial record or an earlier experiment) and a submission that is neither an initial nor a
successfully tested configuration; debugging — nothing beyond the schema (re-testing a candidate is a valid
call, as in :class:`ToolSession`).  Schema, unknown-tool and non-menu-ID errors are caught by the schema check.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ...llm import FormatError, ToolSpec
from ._debugging import N_TEST_CALLS, DebugTask, ToolSession, condition_view
from ._planning import N_EXPERIMENTS, RATIONALE_MAX, PlanningSession, PlanningTask, planning_view, tool_schemas
from ._sandbox import RunResult

__all__ = ["DebugEnv", "PlanningEnv", "debug_tool_schemas"]

PLANNING_SYSTEM = (
    "You are an experiment-planning agent. You choose a classification pipeline for one task using tools only.\n"
    "Protocol: call run_experiment exactly three times, one configuration per call, then call "
    "submit_configuration once. run_experiment trains the configuration on the candidate pool and returns its "
    "validation utility (higher is better, at most 1). Only configurations that are not in the initial records "
    "and were not run before may be run. Submit one of the initial configurations or a successfully tested one. "
    "Configuration IDs do not encode settings: read the settings in the menu. Each call carries a short "
    f"rationale (at most {RATIONALE_MAX} characters). Test scores are never shown.")

DEBUG_SYSTEM = (
    "You are a debugging agent. For one function you choose the correct implementation among candidate patches "
    "using tools only.\nProtocol: call run_tests exactly three times, then call submit_patch once. run_tests runs "
    "a candidate on the public tests and returns only how many tests pass. submit_patch records your final "
    "choice; hidden tests decide whether it is correct.")


class PlanningEnv:
    """C4 as a tool environment: the task card, the 8 initial records as the condition shows them, the menu."""

    stages = N_EXPERIMENTS + 1
    submit = "submit_configuration"

    def __init__(self, task: PlanningTask, condition: str) -> None:
        self.session = PlanningSession(task, condition)
        self.history, self.menu = planning_view(task, condition)
        self.tools = tuple(ToolSpec(s["name"], s["parameters"], _PLAN_DESC[s["name"]])
                           for s in tool_schemas([cid for cid, _ in self.menu]))
        self._decode = {cid: i for i, (cid, _) in enumerate(self.menu)}

    def system(self) -> str:
        return PLANNING_SYSTEM

    def opening(self) -> str:
        card = self.session.task.card
        lines = ["Task card:", *(f"- {k.replace('_', ' ')}: {v}" for k, v in card.items()), "",
                 "Initial records (position | configuration ID | validation utility):"]
        lines += [f"{i + 1:02d} | {cid} | {u:.6f}" for i, (cid, u) in enumerate(self.history)]
        lines += ["", "Menu (configuration ID: settings), in executable order:"]
        lines += [f"{cid}: " + ", ".join(f"{k}={v}" for k, v in s.items()) for cid, s in self.menu]
        lines += ["", f"Experiments remaining: {N_EXPERIMENTS}. Call run_experiment now."]
        return "\n".join(lines)

    def stage_tool(self, stage: int) -> str:
        return "run_experiment" if stage < N_EXPERIMENTS else self.submit

    @property
    def events(self) -> list[dict[str, Any]]:
        return self.session.events

    @property
    def label_accesses(self) -> int:
        return self.session.label_accesses

    def execute(self, name: str, args: Mapping[str, Any]) -> dict[str, Any]:
        s = self.session
        c = self._decode[str(args["configuration_id"])]
        if name == "run_experiment" and c in s.tried:
            raise FormatError(f"{args['configuration_id']} was already tried (initial record or earlier experiment)",
                              "already_tried")
        if name == self.submit:
            ok_new = {e["choice"] for e in s.events if e["response"]["status"] == "ok"}
            if c not in set(s.task.initial) | ok_new:
                raise FormatError(f"{args['configuration_id']} is neither an initial nor a successfully tested "
                                  "configuration", "not_submittable")
        return s.call(name, dict(args))


_PLAN_DESC = {"run_experiment": "Train one untried configuration and return its validation utility.",
              "submit_configuration": "Submit the final configuration (an initial or a successfully tested one)."}


def debug_tool_schemas(enum: list[str]) -> list[dict[str, Any]]:
    """Strict JSON schemas of ``run_tests`` / ``submit_patch`` (``candidate_id`` from the displayed menu)."""
    params = {"type": "object", "additionalProperties": False, "required": ["candidate_id"],
              "properties": {"candidate_id": {"type": "string", "enum": list(enum)}}}
    return [{"name": n, "strict": True, "parameters": params} for n in ("run_tests", "submit_patch")]


class DebugEnv:
    """C5 as a tool environment: the function spec, public tests, the 4-entry ledger, the 12 candidate sources."""

    stages = N_TEST_CALLS + 1
    submit = "submit_patch"

    def __init__(self, task: DebugTask, condition: str, runner: Callable[[DebugTask, int], RunResult]) -> None:
        self.session = ToolSession(task, condition, runner)
        self.ledger, self.menu = condition_view(task, condition)
        desc = {"run_tests": "Run one candidate on the public tests; returns the number of passing tests.",
                "submit_patch": "Submit the final candidate."}
        self.tools = tuple(ToolSpec(s["name"], s["parameters"], desc[s["name"]])
                           for s in debug_tool_schemas(self.session.schema_enum))

    def system(self) -> str:
        return DEBUG_SYSTEM

    def opening(self) -> str:
        t = self.session.task
        lines = [f"Function: {t.func}", f"Specification: {t.spec}", "", "Public tests (arguments -> expected):"]
        lines += [f"- {t.func}{tc.args!r} -> {tc.expected!r}" for tc in t.public]
        lines += ["", "Ledger of earlier patch attempts (position | candidate ID | public pass fraction):"]
        lines += [f"{i + 1:02d} | {cid} | {f:.2f}" for i, (cid, f) in enumerate(self.ledger)]
        lines += ["", "Candidates:"]
        for cid, src in self.menu:
            lines += [f"### {cid}", src.rstrip("\n"), ""]
        lines += [f"Test calls remaining: {N_TEST_CALLS}. Call run_tests now."]
        return "\n".join(lines)

    def stage_tool(self, stage: int) -> str:
        return "run_tests" if stage < N_TEST_CALLS else self.submit

    @property
    def events(self) -> list[dict[str, Any]]:
        return self.session.events

    @property
    def label_accesses(self) -> int:
        return 0

    def execute(self, name: str, args: Mapping[str, Any]) -> dict[str, Any]:
        cid = str(args["candidate_id"])
        if name == "run_tests":
            return dict(self.session.run_tests(cid))
        return dict(self.session.submit_patch(cid))
