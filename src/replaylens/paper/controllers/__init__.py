"""Controllers: OCRR and its ledger variants (replayable agents), baselines, and the closed loop."""

from ._baselines import (
    ExtraSampling,
    GenericMemory,
    GenericSkill,
    NoUpdate,
    SelectedStatic,
    ShuffledOutcome,
    StaticPredictor,
)
from ._closed_loop import AgentController, ClosedLoopResult, Controller, World, condition_summary, run_closed_loop
from ._ledger import GLOBAL_ONLY, LOCAL_ONLY, OCRR, UCB1, LedgerController, LedgerSpec, LedgerState, ocrr_agent

__all__ = [
    "GLOBAL_ONLY",
    "LOCAL_ONLY",
    "OCRR",
    "UCB1",
    "AgentController",
    "ClosedLoopResult",
    "Controller",
    "ExtraSampling",
    "GenericMemory",
    "GenericSkill",
    "LedgerController",
    "LedgerSpec",
    "LedgerState",
    "NoUpdate",
    "SelectedStatic",
    "ShuffledOutcome",
    "StaticPredictor",
    "World",
    "condition_summary",
    "ocrr_agent",
    "run_closed_loop",
]
