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
from ..replay import check_rng_mode

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
    try:
        return distinct_answers(agent, history) > 1
    except Exception:  # the probe is best effort; the replay itself reports a failing agent
        return False


def distinct_answers(agent: Agent, history: Any, n_asks: int = 8) -> int:
    """How many different answers the same decision gets when asked ``n_asks`` times with different
    per-decision generators (1 for a deterministic agent): the first stream's first 24 records are written,
    then the policy is asked about a probe task over that stream's keys."""
    import itertools

    import numpy as np

    from ..agents import FutureInput, TaskInput

    state = agent.writer.init_state()
    first = history.streams[0]
    recs = list(itertools.islice(history.records(first), 24))   # a Record object for these 24 only
    for r in recs:
        task = TaskInput(r.stream, r.family, r.context, r.slot, r.task, r.event_time, r.event_id, r.metadata)
        state = agent.writer.update(state, task, agent.namespace.kappa(r.key), r.outcome)
    fut = FutureInput(recs[0].stream, recs[0].family, recs[0].context, "probe", 0, recs[-1].slot)
    keys = history.text("key", history.stream_slice(first)).tolist()   # the first stream's keys only
    menu = tuple(agent.namespace.show(k) for k in dict.fromkeys(keys))
    return len({str(agent.policy.act(state, fut, menu, np.random.default_rng(i))) for i in range(n_asks)})


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
