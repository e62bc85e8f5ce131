"""Tool-using agents: a resource-limited sandbox for candidate code and the code-debugging substrate
(C5) with sealed hidden evaluation (C7). See docs/tools.md."""

from ._debugging import (
    CONDITIONS,
    PI_PAIR,
    PI_VALUE,
    DebugRun,
    DebugTask,
    ProtocolViolation,
    Readout,
    ScriptedDebugger,
    SealError,
    Suite,
    ToolSession,
    analyze,
    build_suite,
    condition_view,
    reanalyze,
    rename_id,
)
from ._families import FAMILIES, Instance, make_instance
from ._sandbox import RunResult, SandboxLimits, TestCase, run_candidate, same_value

__all__ = [
    "CONDITIONS", "FAMILIES", "PI_PAIR", "PI_VALUE", "DebugRun", "DebugTask", "Instance", "ProtocolViolation",
    "Readout", "RunResult", "SandboxLimits", "ScriptedDebugger", "SealError", "Suite", "TestCase", "ToolSession",
    "analyze", "build_suite", "condition_view", "make_instance", "reanalyze", "rename_id", "run_candidate",
    "same_value",
]
