"""Replay: plan, execute (vectorized or per-record reference), journal and collect decisions."""

from ._engine import ROLES, StreamData, decision_seeds, prepare_streams, run_shard
from ._journal import Journal
from ._plan import ReplayPlan, default_maps, plan_replay
from ._result import DECISION_COLUMNS, Decisions
from ._run import PreparedReplay, prepare_replay, replay, support_lookup
from ._seeds import RNG_MODES, check_rng_mode
from ._states import StateResponse, state_fingerprinter, state_response

__all__ = [
    "DECISION_COLUMNS",
    "RNG_MODES",
    "ROLES",
    "Decisions",
    "Journal",
    "PreparedReplay",
    "ReplayPlan",
    "StateResponse",
    "StreamData",
    "check_rng_mode",
    "decision_seeds",
    "default_maps",
    "plan_replay",
    "prepare_replay",
    "prepare_streams",
    "replay",
    "run_shard",
    "state_fingerprinter",
    "state_response",
    "support_lookup",
]
