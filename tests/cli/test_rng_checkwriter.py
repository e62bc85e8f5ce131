"""Issue 23 (4): check-writer judges declarations on decisions, prints each failure and each
state-level finding on its own line, runs on the user's data, survives a NaN-hating agent, reads
stochastic agents with repeats and escapes Rich markup in names."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from replaylens.agents import Agent, from_callables
from replaylens.bandit import make_bandit
from replaylens.cli._main import cli
from replaylens.records import write_evaluator, write_futures, write_history
from replaylens.testing import check_writer

AGENTS = '''
import math
import numpy as np
from replaylens.agents import Agent, from_callables


class CountWriter:
    """Decisions from per-key counts (invariant to pair and reorder); the state also keeps the last
    outcome seen, so its state changes under pair although no decision can."""

    invariant_to = ("pair", "reorder")
    name = "mabwiser.EpsilonGreedy[mean]"

    def init_state(self):
        return ((), None)
    def update(self, state, task, key, outcome):
        counts = dict(state[0])
        counts[key] = counts.get(key, 0) + 1
        return (tuple(sorted(counts.items())), outcome)
    def act(self, state, task, menu, rng):
        c = dict(state[0])
        return max(menu, key=lambda a: (c.get(a, 0), a))
    def state_fingerprint(self, state):
        return state


def counts():
    w = CountWriter()
    return Agent(w.name, w, w, invariant_to=w.invariant_to)


def liar():
    import dataclasses
    import replaylens as rl
    return dataclasses.replace(rl.order_sensitive_agent(0.2), name="liar", invariant_to=("pair", "reorder"))


def nanhater():
    def update(s, task, key, outcome):
        if math.isnan(outcome):
            raise ValueError("NaN reward")
        return {**s, key: s.get(key, 0.0) + outcome}
    return from_callables(dict, update, lambda s, t, m: max(m, key=lambda a: (s.get(a, 0.0), a)), name="nanhater")
'''


@pytest.fixture()
def agents(tmp_path: Path) -> Path:
    p = tmp_path / "my_agents.py"
    p.write_text(AGENTS)
    return p


def _run(args: list[str]):
    return CliRunner().invoke(cli, args)


def test_decision_level_declaration_passes_and_state_finding_is_its_own_line(agents: Path) -> None:
    res = _run(["check-writer", f"{agents}:counts", "--streams", "4", "--cells", "pair,reorder,value"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert any(ln.startswith("note: pair: the state changed in") and "no decision changed" in ln for ln in lines)
    assert "check-writer: passed" in res.output
    assert "check-writer: mabwiser.EpsilonGreedy[mean] (built-in bandit" in res.output  # Rich markup escaped


def test_each_failure_on_its_own_line_with_its_reason(agents: Path) -> None:
    res = _run(["check-writer", f"{agents}:liar", "--streams", "4", "--cells", "pair,reorder,value"])
    assert res.exit_code == 1, res.output
    fails = [ln for ln in res.output.splitlines() if ln.startswith("FAIL: ")]
    for cell in ("pair", "reorder"):  # one line each, with its reason
        assert sum(ln.startswith(f"FAIL: {cell}: declared invariant, but ") and "decisions changed" in ln
                   for ln in fails) == 1, fails


def test_nan_agent_gets_a_mask_finding_and_the_other_cells_are_checked(agents: Path) -> None:
    res = _run(["check-writer", f"{agents}:nanhater", "--streams", "2"])
    assert res.exit_code == 0, res.output
    assert "note: mask: cannot take masked (NaN) outcomes (ValueError in update)" in res.output
    assert "nanhater depends on: key_slot, rekey" in res.output  # the other relations were replayed


def test_check_writer_on_the_users_own_data(agents: Path, tmp_path: Path) -> None:
    sub = make_bandit(n_streams=3, slots_per_block=5, n_future=2, rng=9)
    h, f, u = tmp_path / "h.csv", tmp_path / "f.jsonl", tmp_path / "u.jsonl"
    write_history(sub.history, h)
    write_futures(sub.futures, f)
    write_evaluator(sub.evaluator, u)
    res = _run(["check-writer", f"{agents}:liar", "--history", str(h), "--future", str(f), "--utilities", str(u),
                "--cells", "pair,value"])
    assert "user data, 3 streams" in res.output, res.output
    rep = check_writer(from_callables(dict, lambda s, t, k, o: s, lambda s, t, m: m[0], name="first"),
                       data=(sub.history, sub.futures, sub.evaluator), cells="pair")
    assert rep.extra["data"] == "user data" and rep.extra["streams"] == 3 and rep.passed
    part = _run(["check-writer", f"{agents}:liar", "--history", str(h)])
    assert part.exit_code == 2 and "needs all of --history, --future and --utilities" in part.output


def _eps_update(s: dict[str, tuple[float, int]], task: object, key: str, u: float) -> dict[str, tuple[float, int]]:
    if math.isnan(u):
        return s
    t, n = s.get(key, (0.0, 0))
    return {**s, key: (t + u, n + 1)}


def _eps_act(s: dict[str, tuple[float, int]], task: object, menu: tuple[str, ...], rng: np.random.Generator) -> str:
    if rng.random() < 0.3:
        return menu[int(rng.integers(len(menu)))]
    return max(menu, key=lambda a: (s[a][0] / s[a][1] if a in s else 0.0, a))


def test_stochastic_agent_is_read_with_repeats_and_common_draws() -> None:
    eps = from_callables(dict, _eps_update, _eps_act, name="eps", stochastic=True, invariant_to="pair,reorder")
    rep = check_writer(eps, n_streams=4, cells="pair,reorder,value,rename")
    assert rep.extra["repeats"] == 2 and rep.extra["rng"] == "common"
    by = {r.relation: r for r in rep.relations}
    assert by["pair"].changed == 0 and by["reorder"].changed == 0 and rep.passed, rep.failures()
    assert by["value"].changed > 0  # a real dependence still shows
    blind = Agent("blind", eps.writer, from_callables(dict, _eps_update,
                                                      lambda s, t, m, rng: m[int(rng.integers(len(m)))]).policy,
                  stochastic=True)
    assert check_writer(blind, n_streams=4).depends_on() == []
