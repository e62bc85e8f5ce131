"""Tool-using agents: a resource-limited sandbox for candidate code and the code-debugging substrate
(C5) with sealed hidden evaluation (C7). See docs/tools.md."""

from ._debug_run import DebugRun
from ._debugging import (
    CONDITIONS,
    PI_PAIR,
    PI_VALUE,
    DebugTask,
    Readout,
    ScriptedDebugger,
    Suite,
    ToolSession,
    analyze,
    build_suite,
    condition_view,
    reanalyze,
    rename_id,
)
from ._families import FAMILIES, Instance, make_instance
from ._protocol import ProtocolViolation, SealError
from ._sandbox import (
    RunResult,
    SandboxLimits,
    SandboxUnavailable,
    TestCase,
    network_isolation,
    run_candidate,
    same_value,
    sandbox_backend,
)

__all__ = [
    "CONDITIONS", "FAMILIES", "PI_PAIR", "PI_VALUE", "DebugRun", "DebugTask", "Instance", "ProtocolViolation",
    "Readout", "RunResult", "SandboxLimits", "ScriptedDebugger", "SealError", "Suite", "TestCase", "ToolSession",
    "analyze", "build_suite", "condition_view", "make_instance", "network_isolation", "reanalyze", "rename_id",
    "run_candidate", "same_value", "SandboxUnavailable", "sandbox_backend",
]

from ._agents import FORCE_MODES, LLMDebugger, LLMPlanner, LLMToolAgent, TurnJournal  # model-driven agents
from ._debugging import N_TEST_CALLS
from ._envs import DebugEnv, PlanningEnv, debug_tool_schemas
from ._planning import (
    CONFIGS,
    FACTORS,
    N_EXPERIMENTS,
    PLAN_CONDITIONS,
    PlanningSession,
    PlanningSuite,
    PlanningTask,
    PlanRow,
    ScriptedPlanner,
    analyze_planning,
    build_planning_suite,
    config_settings,
    crn_equivariance,
    planning_view,
    reanalyze_planning,
    reference_choices,
    tool_schemas,
)
from ._planning_run import PlanningRun
from ._protocol import read_export, write_export
from ._reports import action_profile, failure_summary

__all__ += [
    "CONFIGS", "FACTORS", "PLAN_CONDITIONS", "PlanRow", "PlanningRun", "PlanningSession", "PlanningSuite",
    "PlanningTask", "ScriptedPlanner", "analyze_planning", "build_planning_suite", "config_settings",
    "crn_equivariance", "planning_view", "reanalyze_planning", "reference_choices", "tool_schemas",
]

__all__ += ["FORCE_MODES", "DebugEnv", "LLMDebugger", "LLMPlanner", "LLMToolAgent", "PlanningEnv", "TurnJournal",
            "N_EXPERIMENTS", "N_TEST_CALLS", "action_profile", "debug_tool_schemas", "failure_summary", "read_export",
            "write_export"]
