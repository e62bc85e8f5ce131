"""Stochastic agents are never read from one independent repeat silently (issue 23).

* :func:`resolve_repeats`: the default number of repeats — 2 for a declared stochastic agent under
  independent per-decision generators (so every action readout is the repeat-corrected T_gr), 1
  otherwise (a deterministic agent; or ``rng="common"``, where aligned and intervened decisions share
  their draws and one repeat reads a history-blind random agent as exactly 0).
* :func:`stochastic_warnings`: one line each for an undeclared stochastic agent (the check-writer
  detector: the same decision asked with different generators gets different answers) and for an
  explicit single repeat of a declared stochastic agent under independent generators.
"""

from __future__ import annotations

from typing import Any

from ..agents import Agent
from ..replay._seeds import check_rng_mode

__all__ = ["resolve_repeats", "stochastic_warnings"]


def resolve_repeats(repeats: int | None, agent: Agent, rng: str = "independent") -> int:
    """``repeats`` when given, else 2 for a declared stochastic agent under ``rng="independent"``, else 1."""
    if repeats is not None:
        return int(repeats)
    return 2 if agent.stochastic and check_rng_mode(rng) == "independent" else 1


def undeclared_stochastic(agent: Agent, history: Any) -> bool:
    """True when ``agent`` is not declared stochastic but answers one decision differently under
    different per-decision generators (the detector ``check-writer`` uses)."""
    if agent.stochastic:
        return False
    from ..testing._checks import _undeclared_stochastic

    try:
        return not _undeclared_stochastic(agent, history).passed
    except Exception:  # the probe is best effort; the replay itself reports a failing agent
        return False


def stochastic_warnings(agent: Agent, history: Any, repeats: int, rng: str) -> list[str]:
    """Warning lines for a stochastic agent read without repeats or common random numbers."""
    if undeclared_stochastic(agent, history):
        return [f"agent {agent.name} answers the same decision differently under different generators but is not "
                "declared stochastic: its single-repeat readouts mix in sampling noise. Declare it (class attribute "
                "`stochastic = True`, or rl.Agent(..., stochastic=True)) and audit with --repeats 2 or --rng common"]
    if agent.stochastic and repeats < 2 and rng == "independent":
        return [f"agent {agent.name} is stochastic and read with one repeat under independent generators: action "
                "readouts mix in sampling noise; use --repeats 2 (repeat-corrected T_gr) or --rng common"]
    return []
