"""Issue 23 (3): a stochastic agent never gets a single-repeat readout silently; plain classes
declare ``stochastic`` / ``invariant_to`` as class attributes; audit warns on an undeclared one."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from replaylens.agents import as_agent, load_agent
from replaylens.bandit import make_bandit
from replaylens.cli._main import cli
from replaylens.errors import ConfigError
from replaylens.records import write_evaluator, write_futures, write_history
from replaylens.report import audit


class EpsilonGreedy:
    """The docs/guide/agents.md example: declared stochastic, invariant to the order of intact records."""

    stochastic = True
    invariant_to = ("pair", "reorder")

    def init_state(self) -> dict[str, tuple[float, int]]:
        return {}

    def update(self, state: dict[str, tuple[float, int]], task: object, key: str,
               outcome: float) -> dict[str, tuple[float, int]]:
        if outcome != outcome:
            return state
        s, n = state.get(key, (0.0, 0))
        return {**state, key: (s + outcome, n + 1)}

    def act(self, state: dict[str, tuple[float, int]], task: object, menu: tuple[str, ...],
            rng: np.random.Generator) -> str:
        if rng.random() < 0.3:
            return menu[int(rng.integers(len(menu)))]
        return max(menu, key=lambda a: state[a][0] / state[a][1] if a in state else 0.0)


class Undeclared(EpsilonGreedy):
    stochastic = False
    invariant_to = ()


def eps() -> EpsilonGreedy:
    return EpsilonGreedy()


@pytest.fixture(scope="module")
def bandit():
    return make_bandit(n_streams=8, slots_per_block=8, n_future=4)


def test_plain_class_declares_by_class_attributes() -> None:
    a = as_agent(EpsilonGreedy())
    assert a.stochastic is True and a.invariant_to == ("pair", "reorder")
    assert load_agent(f"{Path(__file__).resolve()}:eps").stochastic is True

    class Bad(EpsilonGreedy):
        stochastic = "yes"  # type: ignore[assignment]

    with pytest.raises(ConfigError, match="stochastic must be True or False"):
        as_agent(Bad())


def test_declared_stochastic_agent_defaults_to_two_repeats(bandit) -> None:
    res = audit(bandit.history, bandit.futures, bandit.evaluator, EpsilonGreedy(), cells="pair,reorder",
                n_resamples=500)
    assert res.decisions.plan.repeats == 2
    assert all(r.stochastic for r in res.rows)  # every action readout is the repeat-corrected T_gr
    assert res.summary()["warnings"] == []
    common = audit(bandit.history, bandit.futures, bandit.evaluator, EpsilonGreedy(), cells="pair,reorder",
                   rng="common", n_resamples=500)
    assert common.decisions.plan.repeats == 1


def test_single_repeat_and_undeclared_stochastic_agents_warn(bandit) -> None:
    h, f, e = bandit.history, bandit.futures, bandit.evaluator
    with pytest.warns(UserWarning, match="--repeats 2"):
        res = audit(h, f, e, EpsilonGreedy(), cells="pair", repeats=1, n_resamples=200)
    assert any("--repeats 2" in w for w in res.summary()["warnings"])
    with pytest.warns(UserWarning, match="not declared stochastic"):
        audit(h, f, e, Undeclared(), cells="pair", n_resamples=200)


def test_cli_default_options_give_no_false_alarm_on_a_stochastic_agent(bandit, tmp_path: Path) -> None:
    write_history(bandit.history, tmp_path / "h.jsonl")
    write_futures(bandit.futures, tmp_path / "f.jsonl")
    write_evaluator(bandit.evaluator, tmp_path / "u.jsonl")
    base = ["audit", "--history", str(tmp_path / "h.jsonl"), "--future", str(tmp_path / "f.jsonl"),
            "--utilities", str(tmp_path / "u.jsonl"), "--agent", f"{Path(__file__).resolve()}:eps",
            "--cells", "pair,reorder,value", "--resamples", "2000", "--expect-invariant", "pair,reorder"]
    r = CliRunner().invoke(cli, [*base, "--out", str(tmp_path / "a")])
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "a" / "summary.json").read_text())["repeats"] == 2
    r = CliRunner().invoke(cli, [*base, "--out", str(tmp_path / "b"), "--repeats", "1"])
    assert "--repeats 2" in r.output and "warning" in r.output
