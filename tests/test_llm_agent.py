"""The LLM-backed ReplayLens agent: textual decisions through the journaled acquisition layer."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import replaylens as rl
from replaylens.bandit import make_bandit
from replaylens.cli._main import cli
from replaylens.errors import AgentError, ConfigError
from replaylens.llm import FakeOpenAIServer, acquire_run, make_agent, validate
from replaylens.paper.joint import PAPER_ACTIONS
from replaylens.readouts import t_gr
from replaylens.records import write_evaluator, write_futures, write_history

CELLS = "value,pair,key_slot,mask,reorder,rename"
ARMS = list(PAPER_ACTIONS)
KEY = "sk-agent-test-91c0ffee5eed"


@pytest.fixture(scope="module")
def sub():  # type: ignore[no-untyped-def]
    return make_bandit(n_streams=3, slots_per_block=8, n_future=2, rng=3)


def _n_attempts(run: Path) -> int:
    p = run / "attempts.jsonl"
    return 0 if not p.exists() else sum(1 for x in p.read_text().splitlines() if x.strip())


@pytest.mark.parametrize(("rule", "namespace", "actions"), [
    ("mean", "arm", None),
    ("sum", "opaque", ARMS),
    ("latest", "AD", PAPER_ACTIONS),
    ("best", "semantic", PAPER_ACTIONS),
])
def test_textual_rule_reproduces_the_reference_agent_in_every_cell(sub, tmp_path: Path, rule: str,  # type: ignore[no-untyped-def]
                                                                   namespace: str, actions: object) -> None:
    agent = make_agent(f"scripted/{rule}", run_dir=str(tmp_path / "run"), namespace=namespace,
                       actions=actions, budget=None)
    assert agent.stochastic and agent.array is not None
    dec = rl.replay(sub.history, sub.futures, sub.evaluator, agent, cells=CELLS)
    ref = rl.replay(sub.history, sub.futures, sub.evaluator, rl.reference_agent(rule), cells=CELLS)
    assert np.array_equal(dec.actions, ref.actions)
    # every prompt went through the run directory, one request per decision, none repeated
    assert _n_attempts(tmp_path / "run") == dec.actions.size
    rep = validate(tmp_path / "run")
    assert rep.ok and rep.n_selected == dec.actions.size


def test_paths_and_reruns_share_the_cache(sub, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run = tmp_path / "run"
    with FakeOpenAIServer(api_key=KEY) as srv:
        agent = make_agent("openai/fake-model", run_dir=str(run), base_url=srv.url, api_key_env=None,
                           concurrency=8, actions=PAPER_ACTIONS, namespace="opaque")
        with pytest.raises(ConfigError, match="401"):            # model-access failure: the audit stops
            rl.replay(sub.history, sub.futures, sub.evaluator, agent, cells="value", maps="id")
    with FakeOpenAIServer(policy=lambda sha, occ: "off_menu") as srv:
        agent = make_agent("openai/fake-model", run_dir=str(tmp_path / "run1"), base_url=srv.url, api_key_env=None)
        with pytest.raises(AgentError, match="never imputed"):   # invalid answers: no decision is invented
            rl.replay(sub.history, sub.futures, sub.evaluator, agent, cells="value", maps="id")
        assert srv.n_requests == 2 * 3 * 3 * 2 * 2            # each decision: original + one format retry
    with FakeOpenAIServer() as srv:
        agent = make_agent("openai/fake-model", run_dir=str(tmp_path / "run2"), base_url=srv.url, api_key_env=None,
                           concurrency=8, actions=PAPER_ACTIONS, namespace="opaque")
        arr = rl.replay(sub.history, sub.futures, sub.evaluator, agent, cells="value,rename", maps="id+ACMR")
        n = srv.n_requests
        assert n == arr.actions.size
        per = rl.replay(sub.history, sub.futures, sub.evaluator, agent, cells="value,rename", maps="id+ACMR",
                        path="reference")
        again = rl.replay(sub.history, sub.futures, sub.evaluator, agent, cells="value,rename", maps="id+ACMR")
        assert srv.n_requests == n                      # identical prompt bytes on both paths; re-analysis is free
        assert per.equals(arr) and again.equals(arr)
        ref = rl.replay(sub.history, sub.futures, sub.evaluator, rl.reference_agent("mean"), cells="value,rename",
                        maps="id+ACMR")
        assert np.array_equal(arr.actions, ref.actions)


def test_noisy_repeats_disagree_and_exercise_t_gr(sub, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    kw = {"cells": "value", "maps": "id", "repeats": 2, "seed": 4}
    a = make_agent("scripted/mean", run_dir=str(tmp_path / "a"), noise=0.4, seed=11)
    dec = rl.replay(sub.history, sub.futures, sub.evaluator, a, **kw)  # type: ignore[arg-type]
    within = (dec.actions[:, :, :, 0] != dec.actions[:, :, :, 1]).mean()
    assert 0.1 < within < 0.6                           # fresh repeats are fresh calls
    tg = t_gr(dec, "value")
    assert np.isfinite(tg.estimate)
    b = make_agent("scripted/mean", run_dir=str(tmp_path / "b"), noise=0.4, seed=11)
    assert rl.replay(sub.history, sub.futures, sub.evaluator, b, **kw).equals(dec)  # type: ignore[arg-type]
    c = make_agent("scripted/mean", run_dir=str(tmp_path / "c"), noise=0.0)
    clean = rl.replay(sub.history, sub.futures, sub.evaluator, c, **kw)  # type: ignore[arg-type]
    assert (clean.actions[:, :, :, 0] == clean.actions[:, :, :, 1]).all()


def test_plan_first_then_acquire_then_analyse_offline(sub, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run = tmp_path / "run"
    kw = {"cells": "pair", "maps": "id+ARMC"}
    planner = make_agent("scripted/count", run_dir=str(run), mode="plan")
    rl.replay(sub.history, sub.futures, sub.evaluator, planner, **kw)  # type: ignore[arg-type]
    n_plan = sum(1 for _ in (run / "plan.jsonl").read_text().splitlines())
    assert n_plan == 2 * 2 * 3 * 3 * 2 and _n_attempts(run) == 0
    offline = make_agent("scripted/count", run_dir=str(run), offline=True)
    with pytest.raises(AgentError):
        rl.replay(sub.history, sub.futures, sub.evaluator, offline, **kw)  # type: ignore[arg-type]
    summary = acquire_run(run)
    assert summary.decided == n_plan and summary.calls == n_plan
    dec = rl.replay(sub.history, sub.futures, sub.evaluator, offline, **kw)  # type: ignore[arg-type]
    ref = rl.replay(sub.history, sub.futures, sub.evaluator, rl.reference_agent("count"), **kw)  # type: ignore[arg-type]
    assert np.array_equal(dec.actions, ref.actions) and _n_attempts(run) == n_plan
    with pytest.raises(rl.JournalError):   # a run directory keeps its frozen settings
        rl.replay(sub.history, sub.futures, sub.evaluator, make_agent("scripted/mean", run_dir=str(run)), **kw)  # type: ignore[arg-type]


def test_load_agent_factory_and_cli_audit(sub, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    agent = rl.load_agent("replaylens.llm:make_agent", {"model": "scripted/mean", "run_dir": str(tmp_path / "x")})
    json.dumps(dict(agent.spec))
    assert agent.spec["factory"] == "replaylens.llm:make_agent" and "key" not in json.dumps(dict(agent.spec)).lower()
    with pytest.raises(ConfigError, match="actions"):
        make_agent("scripted/mean", run_dir=str(tmp_path / "y"), namespace="AD")
    h, f, u = tmp_path / "h.jsonl", tmp_path / "f.jsonl", tmp_path / "u.jsonl"
    write_history(sub.history, h)
    write_futures(sub.futures, f)
    write_evaluator(sub.evaluator, u)
    out = tmp_path / "audit"
    args = ["audit", "--history", str(h), "--future", str(f), "--utilities", str(u), "--out", str(out),
            "--agent", "replaylens.llm:make_agent", "--agent-param", 'model="scripted/mean"',
            "--agent-param", f'run_dir="{tmp_path / "llm"}"', "--cells", "value,pair", "--maps", "id+ACMR",
            "--resamples", "200", "--quiet"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    rows = {r["cell"]: r for r in json.loads((out / "summary.json").read_text())["rows"]}
    assert rows["pair"]["n_changed"] == 0 and rows["value"]["action"] > 0   # mean rule: pair-invariant
    assert validate(tmp_path / "llm").ok
