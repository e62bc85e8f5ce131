"""Issue 18 points 1–2: the no-call estimate and run budgets (--max-requests / --max-cost) of model audits."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from click.testing import CliRunner

from replaylens.bandit import make_bandit
from replaylens.cli._main import cli
from replaylens.llm import FakeOpenAIServer
from replaylens.llm._budget import Budget, Pricing, TokenCounter, estimate_requests
from replaylens.records import write_evaluator, write_futures, write_history

DESIGN = ["--cells", "value,rename", "--maps", "1032", "--resamples", "200", "--quiet"]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    d = tmp_path_factory.mktemp("inputs")
    sub = make_bandit(n_streams=2, n_future=2)
    return ["--history", str(write_history(sub.history, d / "h.jsonl")),
            "--future", str(write_futures(sub.futures, d / "f.jsonl")),
            "--utilities", str(write_evaluator(sub.evaluator, d / "u.jsonl"))]


def _audit(inputs: list[str], out: Path, *extra: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, ["audit", *inputs, "--agent", "llm", "--out", str(out), *DESIGN, *extra])
    return res.exit_code, res.output + (res.stderr if res.stderr_bytes is not None else "")


def _number(text: str, label: str) -> int:
    m = re.search(rf"{label}:\s+([\d,]+)", text)
    assert m is not None, text
    return int(m.group(1).replace(",", ""))


def test_estimate_makes_no_request_and_counts_what_the_run_asks(inputs: list[str], tmp_path: Path) -> None:
    with FakeOpenAIServer() as srv:
        model = ["--model", "openai/fake-model", "--base-url", srv.url, "--api-key-env", "", "--concurrency", "1"]
        code, out = _audit(inputs, tmp_path / "est", *model, "--estimate", "--price-in", "2", "--price-out", "8")
        assert code == 0, out
        assert srv.hits == 0                            # no request at all, not even the preflight probe
        assert not (tmp_path / "est").exists()          # and nothing written
        n_req, t_in, t_out = (_number(out, k) for k in ("model requests", "input tokens", "output tokens"))
        assert "approximation:" in out and "calibrated" in out  # the approximation is declared
        cost = float(re.search(r"cost: ([\d.]+) USD", out).group(1))  # type: ignore[union-attr]
        assert cost == pytest.approx((t_in * 2 + t_out * 8) / 1e6, abs=1e-4)
        code, out = _audit(inputs, tmp_path / "run", *model)
        assert code == 0, out
        assert srv.n_requests == n_req                  # the estimate counted exactly the requests made


def test_estimate_uses_the_embedded_tokenizer(inputs: list[str], tmp_path: Path) -> None:
    from replaylens.llm import embedded_model_path, llama_available

    path = embedded_model_path() if llama_available() else None
    if path is None:
        from conftest import require

        require("local", "the embedded model (local extra) is not installed")
        return
    counter = TokenCounter(path)
    assert counter.exact and "own tokenizer" in counter.method
    text = "=== Item 1 ===\n01 | A | 0.5312\n" * 10
    assert counter.count(text) != TokenCounter().count(text)
    res = CliRunner().invoke(cli, ["audit", *inputs, "--agent", "llm", "--model", "local/embedded", "--out",
                                   str(tmp_path / "e"), *DESIGN, "--estimate"])
    assert res.exit_code == 0, res.output
    assert "own tokenizer" in res.output and "approximation" not in res.output
    assert "llm(local/SmolLM2" in res.output and path not in res.output   # the model's name, never its path
    assert not (tmp_path / "e").exists()


def test_estimate_totals_are_sums_of_request_counts() -> None:
    from replaylens.llm import ItemDecoder, make_request

    reqs = [make_request("x" * 40 * (k + 1), [ItemDecoder(("A", "BB"), {"A": "a", "BB": "b"})],
                         settings_digest="s", repeat=k) for k in range(3)]
    from replaylens.llm._budget import APPROX_PER_MESSAGE, approx_tokens, max_answer

    est = estimate_requests(reqs, counter=TokenCounter(), pricing=Pricing(1.0, 2.0))
    assert est["requests"] == 3
    t_in = sum(approx_tokens(m["content"]) + APPROX_PER_MESSAGE for r in reqs for m in r.messages())
    t_out = sum(approx_tokens(max_answer(r)) + 1 for r in reqs)   # the longest answer and its end token
    assert est["input_tokens"] == t_in and est["output_tokens"] == t_out
    assert est["cost_usd"] == pytest.approx((t_in * 1 + t_out * 2) / 1e6)


def test_budget_stop_is_partial_and_resumes_to_the_unbudgeted_result(inputs: list[str], tmp_path: Path) -> None:
    model = ["--model", "scripted/mean"]
    code, out = _audit(inputs, tmp_path / "full", *model)
    assert code == 0, out
    full = json.loads((tmp_path / "full" / "summary.json").read_text())
    n_total = full["llm_usage"]["total"]["requests"]
    assert full["partial"] is False and full["llm_usage"]["incomplete_cells"] == []
    assert set(full["llm_usage"]["cells"]) == {"aligned", "value", "rename"}
    assert all(c["input_tokens"] > 0 and c["decided"] == c["planned_requests"]
               for c in full["llm_usage"]["cells"].values())

    code, out = _audit(inputs, tmp_path / "b", *model, "--max-requests", "10")
    assert code == 1, out
    assert "PARTIAL" in out and "--max-requests 10 reached" in out
    part = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert part["partial"] is True and part["llm_usage"]["total"]["attempts"] == 10
    assert part["llm_usage"]["incomplete_cells"]
    assert "PARTIAL RUN" in (tmp_path / "b" / "report.md").read_text()
    assert not (tmp_path / "b" / "decisions.parquet").exists()        # never a half-written result

    code, out = _audit(inputs, tmp_path / "b", *model, "--max-requests", "30")
    assert code == 1                                                  # resumes, stops again at the new budget
    assert json.loads((tmp_path / "b" / "summary.json").read_text())["llm_usage"]["total"]["attempts"] == 30

    code, out = _audit(inputs, tmp_path / "b", *model, "--max-requests", str(10 * n_total))
    assert code == 0, out
    done = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert done["partial"] is False
    assert done["llm_usage"]["total"]["attempts"] == n_total          # nothing asked twice
    assert done["rows"] == full["rows"] and done["verdicts"] == full["verdicts"]
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "b" / "decisions.parquet"),
                                  pd.read_parquet(tmp_path / "full" / "decisions.parquet"))


def test_max_cost_stops_when_the_spend_reaches_it(inputs: list[str], tmp_path: Path) -> None:
    code, out = _audit(inputs, tmp_path / "c", "--model", "scripted/mean", "--concurrency", "1",
                       "--max-cost", "0.01", "--price-in", "100", "--price-out", "100")
    assert code == 1, out
    use = json.loads((tmp_path / "c" / "summary.json").read_text())["llm_usage"]
    spent = use["total"]["cost_usd"]
    per_request = spent / use["total"]["attempts"]
    assert 0.01 <= spent < 0.01 + 2 * per_request
    assert "--max-cost 0.01 USD reached" in out


def test_max_cost_needs_prices(inputs: list[str], tmp_path: Path) -> None:
    code, out = _audit(inputs, tmp_path / "c", "--model", "scripted/mean", "--max-cost", "1")
    assert code == 2 and "--price-in" in out
    with pytest.raises(Exception, match="needs prices"):
        Budget(max_cost=1.0)


def test_cost_options_need_an_llm_agent(inputs: list[str], tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["audit", *inputs, "--agent", "mean", "--out", str(tmp_path / "m"), *DESIGN,
                                   "--estimate"])
    assert res.exit_code == 2 and "--agent llm" in res.output


def test_pricing_file(inputs: list[str], tmp_path: Path) -> None:
    pf = tmp_path / "prices.json"
    pf.write_text(json.dumps({"scripted/mean": {"input": 3, "output": 9}}))
    code, out = _audit(inputs, tmp_path / "p", "--model", "scripted/mean", "--estimate", "--pricing", str(pf))
    assert code == 0 and "at 3 in / 9 out USD" in out


def test_joint_run_budget_resumes_to_the_unbudgeted_rows(tmp_path: Path) -> None:
    import numpy as np

    from replaylens.llm import AcquireSettings, BudgetExhausted, make_backend
    from replaylens.paper.joint import JointBlock, JointDesign, run_joint

    g = np.random.default_rng(5)
    blocks = []
    for s in range(2):
        for fam in ("breast_cancer", "wine"):
            acts = g.permutation(np.repeat(np.arange(4), 6))
            ys = np.round(g.permutation([0.45, 0.55, 0.65, 0.75])[acts], 6)
            blocks.append(JointBlock(f"s{s}", fam, "iid", tuple(int(a) for a in acts), tuple(float(y) for y in ys)))
    design = JointDesign(tuple(blocks), namespaces=("AD",), forms=("full",))
    acq = AcquireSettings(concurrency=4, retries=0)
    with FakeOpenAIServer(response_formats=("json_object", "text")) as srv:   # json_schema refused: probed
        be = make_backend("openai/fake-model", base_url=srv.url, api_key_env=None)
        full = run_joint(design, be, tmp_path / "full", acquire=acq)
        assert full.report.ok and be.settings.response_format == "json_object"
        n = srv.n_requests
        est = estimate_requests(design.requests(be.settings.digest()), counter=TokenCounter(), pricing=Pricing())
        assert est["requests"] == n == design.n_requests
        be2 = make_backend("openai/fake-model", base_url=srv.url, api_key_env=None)
        with pytest.raises(BudgetExhausted, match="--max-requests 3 reached"):
            run_joint(design, be2, tmp_path / "b", acquire=acq, spend=Budget(max_requests=3))
        assert srv.n_requests == n + 3
        be3 = make_backend("openai/fake-model", base_url=srv.url, api_key_env=None)
        done = run_joint(design, be3, tmp_path / "b", acquire=acq, spend=Budget(max_requests=10 * n))
        assert srv.n_requests == 2 * n                                       # the 3 journaled ones not re-asked
        assert done.report.ok and sorted(map(str, done.results.rows)) == sorted(map(str, full.results.rows))


def test_memory_budget_stops_and_resumes(public_data_dir: Path, tmp_path: Path) -> None:
    from replaylens.llm import AcquireSettings, BudgetExhausted
    from replaylens.memory.bounded import RetrievedMeanBackend, acquire_decisions
    from replaylens.paper.memory_audit import MemoryDesign, build_memory_blocks
    from replaylens.paper.memory_audit._design import development_conditions

    d = MemoryDesign("development", build_memory_blocks(2, seed=11, data_dir=public_data_dir),
                     development_conditions(11), 11)
    be = RetrievedMeanBackend(noise=0.2, seed=3)
    reqs = d.requests(be.settings.digest())
    man = {"experiment": "test", "seed": 11, "settings": be.settings.to_dict(), "design": d.to_dict()}
    acq = AcquireSettings(concurrency=2, retries=0)
    full = acquire_decisions(reqs, be, tmp_path / "full", man, acquire=acq)
    with pytest.raises(BudgetExhausted, match="--max-requests 7 reached"):
        acquire_decisions(reqs, be, tmp_path / "b", man, acquire=acq, spend=Budget(max_requests=7))
    done = acquire_decisions(reqs, be, tmp_path / "b", man, acquire=acq, spend=Budget(max_requests=len(reqs)))
    assert done.report.ok and done.report.n_attempts == len(reqs) and done.decisions == full.decisions


def test_memory_audit_estimate_makes_no_request(public_data_dir: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPLAYLENS_DATA_DIR", str(public_data_dir))
    from replaylens.paper.experiments.memory import development_design

    with FakeOpenAIServer() as srv:
        res = CliRunner().invoke(cli, ["paper", "memory-audit", "--model", "openai/fake-model", "--base-url", srv.url,
                                       "--api-key-env", "", "--run-dir", str(tmp_path / "m"), "--estimate",
                                       "--price-in", "1", "--price-out", "4"])
        assert res.exit_code == 0, res.output
        assert srv.hits == 0 and not (tmp_path / "m").exists()
    assert _number(res.output, "model requests") == development_design().n_requests
    assert "test phase (extrapolated" in res.output and "both phases:" in res.output


def test_tool_run_budget_stops_between_trajectories_and_resumes(tmp_path: Path) -> None:
    from _tools import small_debug_suite
    from replaylens.llm import BudgetExhausted, ScriptedToolBackend
    from replaylens.paper.tools import DebugRun, LLMDebugger
    from replaylens.paper.tools._agents import read_jsonl

    policy = _debug_policy
    suite = small_debug_suite()

    def run_in(d: Path, spend: Budget | None) -> DebugRun:
        run = DebugRun(d, suite, seed=3, agent=LLMDebugger(ScriptedToolBackend(policy), spend=spend))
        run.freeze_manifest()
        return run

    full = run_in(tmp_path / "full", None)
    assert full.acquire() == {"ok": 8}
    n_turns = len(read_jsonl(tmp_path / "full" / "turns.jsonl"))
    per = n_turns // 8
    with pytest.raises(BudgetExhausted, match="--max-requests 10 reached"):
        run_in(tmp_path / "b", Budget(max_requests=10)).acquire()
    assert len(read_jsonl(tmp_path / "b" / "turns.jsonl")) == per * -(-10 // per)   # whole trajectories only
    assert run_in(tmp_path / "b", Budget(max_requests=10 * n_turns)).acquire()["ok"] == 8 - -(-10 // per)
    strip = ("attempt_id", "started_at", "ended_at", "latency_s", "turn_id", "turns")
    a = sorted(json.dumps({k: v for k, v in r.items() if k not in strip}, sort_keys=True)
               for r in read_jsonl(tmp_path / "b" / "attempts.jsonl"))
    b = sorted(json.dumps({k: v for k, v in r.items() if k not in strip}, sort_keys=True)
               for r in read_jsonl(tmp_path / "full" / "attempts.jsonl"))
    assert a == b                                                     # the same trajectories as the full run


def test_tools_estimate_makes_no_request_and_bounds_the_turns(tmp_path: Path) -> None:
    from _tools import small_debug_suite
    from replaylens.llm import ScriptedToolBackend
    from replaylens.paper.cli._tools import _estimate_tools
    from replaylens.paper.tools import DebugRun, LLMDebugger
    from replaylens.paper.tools._agents import read_jsonl

    with FakeOpenAIServer() as srv:
        res = CliRunner().invoke(cli, ["paper", "tools", "debug", "--model", "openai/fake-model", "--base-url", srv.url,
                                       "--api-key-env", "", "--run-dir", str(tmp_path / "t"), "--estimate",
                                       "--tasks", "1", "--price-in", "3"])
        assert res.exit_code == 0, res.output
        assert srv.hits == 0 and not (tmp_path / "t").exists()
    assert "at least" in res.output and "not estimated" in res.output
    # the printed bounds hold for a real (scripted) run of the same plan
    calls: list[int] = []

    def policy(req: Any) -> tuple[str, dict[str, Any]]:
        calls.append(1)
        return _debug_policy(req)

    agent = LLMDebugger(ScriptedToolBackend(policy))
    run = DebugRun(tmp_path / "r", small_debug_suite(), seed=3, agent=agent)
    with CliRunner().isolation() as outs:
        _estimate_tools(run, agent, "openai/fake-model", None, "t")
        text = outs[0].getvalue().decode()
    m = re.search(r"at most ([\d,]+) .*; ([\d,]+) when", text)
    assert m is not None, text
    hi, lo = (int(x.replace(",", "")) for x in m.groups())
    run.freeze_manifest()
    assert run.acquire() == {"ok": len(run.plan)}
    n = len(read_jsonl(tmp_path / "r" / "turns.jsonl"))
    assert n == lo < hi and len(calls) == n          # no correction needed: exactly the lower figure


def _debug_policy(req: Any) -> tuple[str, dict[str, Any]]:
    """Test the ledger's candidates in order, submit the first tested one (as in test_tools_agents)."""
    from _tools import LEDGER_ROW

    name = req.tool_choice if req.tool_choice != "required" else req.tools[0].name
    user = next(m["content"] for m in req.messages if m["role"] == "user")
    tested = [json.loads(c["function"]["arguments"])["candidate_id"] for m in req.messages
              if m["role"] == "assistant" and m.get("tool_calls") for c in m["tool_calls"]]
    ids = LEDGER_ROW.findall(user)
    return name, {"candidate_id": tested[0] if name == "submit_patch" else ids[len(tested) % len(ids)]}
