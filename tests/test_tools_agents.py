"""Model-driven tool agents: the one-format-correction rule, forced submission, journal, resume, secrets,
replacements, the grammar path with a stand-in llama, and the model planner on a planning subset."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, ClassVar

import pytest

from _tools import LEDGER_ROW, small_debug_suite
from replaylens.errors import ConfigError
from replaylens.llm import FakeOpenAIServer, ScriptedToolBackend, ToolSpec, ToolTurnRequest, make_tool_backend
from replaylens.llm._local import LlamaCppBackend
from replaylens.paper.tools import (
    DebugRun,
    LLMDebugger,
    LLMPlanner,
    PlanningRun,
    SealError,
    build_planning_suite,
    read_export,
    reanalyze,
    reanalyze_planning,
)
from replaylens.paper.tools._agents import read_jsonl


@pytest.fixture(scope="module")
def suite():  # type: ignore[no-untyped-def]
    return small_debug_suite()


def _good(req: ToolTurnRequest) -> tuple[str, dict[str, Any]]:
    """Test the ledger's candidates in order, submit the first tested one."""
    name = req.tool_choice if req.tool_choice != "required" else req.tools[0].name
    user = next(m["content"] for m in req.messages if m["role"] == "user")
    tested = [json.loads(c["function"]["arguments"])["candidate_id"] for m in req.messages
              if m["role"] == "assistant" and m.get("tool_calls") for c in m["tool_calls"]
              if not c["id"].endswith("_rejected")]
    ids = LEDGER_ROW.findall(user)
    return name, {"candidate_id": tested[0] if name == "submit_patch" else ids[len(tested) % len(ids)]}


def _run(tmp: Path, suite: Any, policy: Any, **kw: Any) -> DebugRun:
    run = DebugRun(tmp / "run", suite, seed=3, agent=LLMDebugger(ScriptedToolBackend(policy), **kw))
    run.freeze_manifest()
    return run


def test_forced_submit_and_sealed_pipeline(suite: Any, tmp_path: Path) -> None:
    seen: list[ToolTurnRequest] = []

    def policy(req: ToolTurnRequest) -> tuple[str, dict[str, Any]]:
        seen.append(req)
        return _good(req)

    run = _run(tmp_path, suite, policy)
    assert run.acquire() == {"ok": 8}
    assert [r.tool_choice for r in seen[:4]] == ["required"] * 3 + ["submit_patch"]
    run.seal()
    run.score()
    path = run.export(tmp_path / "e.json.gz")
    assert reanalyze(path)["n_trajectories"] == 8 and len(read_export(path)["model_turns"]) == 32
    turns = read_jsonl(tmp_path / "run" / "turns.jsonl")
    assert all(len(t["prompt_sha256"]) == 64 and t["status"] == "ok" for t in turns)
    # resuming a finished run asks nothing again
    n = len(seen)
    assert run.acquire() == {"done": 8} and len(seen) == n


def test_one_format_correction_then_protocol_failure(suite: Any, tmp_path: Path) -> None:
    state = {"n": 0}

    def once_bad(req: ToolTurnRequest) -> tuple[str, dict[str, Any]]:
        state["n"] += 1
        if state["n"] == 1:
            return "run_tests", {"candidate_id": "P99"}  # non-menu ID: format error, corrected next turn
        return _good(req)

    run = _run(tmp_path / "a", suite, once_bad)
    run.acquire()
    turns = read_jsonl(tmp_path / "a" / "run" / "turns.jsonl")
    retry = [t for t in turns if t["kind"] == "format_retry"]
    assert len(retry) == 1 and turns[0]["status"] == "schema_invalid" and turns[0]["format_error"] == "not_in_enum"
    assert "Format error" in json.dumps(turns[1]) or retry[0]["status"] == "ok"
    run.seal()  # one correction is within the protocol

    def always_bad(req: ToolTurnRequest) -> tuple[str, dict[str, Any]]:
        return "delete_everything", {}

    run2 = _run(tmp_path / "b", suite, always_bad)
    counts = run2.acquire()
    assert counts == {"protocol_violation": 8}
    atts = run2.attempts()
    assert all(a["status"] == "protocol_violation" and a["format_corrections"] == 1 for a in atts)
    assert "second format error" in atts[0]["error"]
    assert run2.acquire() == {"protocol_failure": 8}  # terminal: never re-asked, never imputed
    with pytest.raises(SealError):
        run2.seal()


def test_out_of_sequence_submit_is_a_format_error(suite: Any, tmp_path: Path) -> None:
    def early(req: ToolTurnRequest) -> tuple[str, dict[str, Any]]:
        return "submit_patch", {"candidate_id": LEDGER_ROW.findall(req.messages[1]["content"])[0]}

    run = _run(tmp_path, suite, early)
    run.acquire()
    t = read_jsonl(tmp_path / "run" / "turns.jsonl")[0]
    assert t["format_error"] == "tool_not_allowed"


def test_resume_after_interruption(suite: Any, tmp_path: Path) -> None:
    calls = {"n": 0}

    def dies(req: ToolTurnRequest) -> tuple[str, dict[str, Any]]:
        calls["n"] += 1
        if calls["n"] == 10:  # in the middle of the third trajectory
            raise KeyboardInterrupt
        return _good(req)

    run = _run(tmp_path, suite, dies)
    with pytest.raises(KeyboardInterrupt):
        run.acquire()
    done = {a["request_id"] for a in run.attempts()}
    assert len(done) == 2
    asked: list[str] = []

    def counting(req: ToolTurnRequest) -> tuple[str, dict[str, Any]]:
        asked.append(req.messages[1]["content"])
        return _good(req)

    run2 = DebugRun(tmp_path / "run", suite, seed=3, agent=LLMDebugger(ScriptedToolBackend(counting)))
    run2.freeze_manifest()
    assert run2.acquire() == {"done": 2, "ok": 6}
    assert len(asked) == 24  # 6 trajectories × 4 turns: the 2 completed ones were not re-asked
    rec = [a for a in run2.attempts() if a["kind"] == "recovery"]
    assert len(rec) == 1 and rec[0]["recovers"].endswith("#0") and rec[0]["attempt_id"].endswith("#1")
    run2.seal()


def test_a_failed_recovery_is_not_re_run_on_the_next_resume(suite: Any, tmp_path: Path) -> None:
    calls = {"n": 0}

    def dies(req: ToolTurnRequest) -> tuple[str, dict[str, Any]]:
        calls["n"] += 1
        if calls["n"] == 10:
            raise KeyboardInterrupt
        return _good(req)

    def early(req: ToolTurnRequest) -> tuple[str, dict[str, Any]]:
        return "submit_patch", {"candidate_id": LEDGER_ROW.findall(req.messages[1]["content"])[0]}

    def never(req: ToolTurnRequest) -> tuple[str, dict[str, Any]]:
        raise AssertionError("a finished trajectory was asked again")

    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path, suite, dies).acquire()
    run2 = DebugRun(tmp_path / "run", suite, seed=3, agent=LLMDebugger(ScriptedToolBackend(early)))
    run2.freeze_manifest()
    assert run2.acquire() == {"done": 2, "protocol_violation": 6}  # the recovery itself ends in a protocol failure
    run3 = DebugRun(tmp_path / "run", suite, seed=3, agent=LLMDebugger(ScriptedToolBackend(never)))
    run3.freeze_manifest()
    assert run3.acquire() == {"done": 2, "protocol_failure": 6}
    assert [a["kind"] for a in run3.attempts()].count("recovery") == 1


def test_capacity_replacement_under_frozen_amendment_and_secrets(suite: Any, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-test-SECRET-0123456789"
    monkeypatch.setenv("RL_TOOL_KEY", key)

    n = {"calls": 0}

    def policy(sha: str, occ: int) -> str:
        n["calls"] += 1
        return "429" if n["calls"] in (1, 7) else "leak_key"

    with FakeOpenAIServer(policy=policy, api_key=key) as srv:
        be = make_tool_backend("openai/fake", base_url=srv.url, api_key_env="RL_TOOL_KEY", env_file=None)
        run = DebugRun(tmp_path / "run", suite, seed=3,
                       agent=LLMDebugger(be, retries=1, sleep=lambda s: None, backoff_base_s=0.0))
        run.freeze_manifest()
        assert run.amendments()[0]["applies_to"] == ["*"]
        counts = run.acquire()
    assert counts.get("ok") == 8 and counts.get("capacity_error") == 2
    assert any(a["kind"] == "replacement" for a in run.attempts())
    run.seal()
    for p in (tmp_path / "run").rglob("*"):
        if p.is_file():
            assert key not in p.read_text(errors="replace"), p
    assert "[REDACTED]" in (tmp_path / "run" / "turns.jsonl").read_text()


class _StandInLlama:
    """llama_cpp.Llama's surface for the grammar path: answers the first allowed call of the grammar."""

    metadata: ClassVar[dict[str, str]] = {}

    def __init__(self) -> None:
        self._input_ids: list[int] = []
        self.grammars: list[str] = []

    def tokenize(self, data: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        return ([-1] if add_bos else []) + [len(w) for w in data.decode().split()]

    def create_completion(self, ids: list[int], *, grammar: str, **kw: Any) -> dict[str, Any]:
        self.grammars.append(grammar)
        self._input_ids = list(ids)
        name = "submit_patch" if "submit_patch" in grammar else "run_tests"
        cid = re.search(r'args0-0 ::= "\\"(\w+)\\""', grammar)
        text = '{"name": "' + name + '", "arguments": {"candidate_id": "' + (cid.group(1) if cid else "?") + '"}}'
        return {"choices": [{"text": text, "finish_reason": "stop"}], "usage": {"completion_tokens": 12}}


def test_grammar_path_with_a_stand_in(suite: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(LlamaCppBackend, "_make_grammar", lambda self, text: text)
    llama = _StandInLlama()
    be = make_tool_backend("local/stand-in.gguf", llama=llama)
    run = DebugRun(tmp_path / "run", suite, seed=3, agent=LLMDebugger(be, force="every"))
    run.freeze_manifest()
    assert run.acquire() == {"ok": 8}
    assert "submit_patch" not in llama.grammars[0] and "run_tests" not in llama.grammars[3]
    assert llama.grammars[3].startswith("root ::= call0\n")
    t = read_jsonl(tmp_path / "run" / "turns.jsonl")[1]
    assert t["usage"]["cached_input_tokens"] > 0 and t["usage"]["output_tokens"] == 12
    with pytest.raises(ConfigError):
        make_tool_backend("local/x.gguf", llama=llama, temperature=-1.0)
    with pytest.raises(ConfigError):
        LLMDebugger(be, force="sometimes")


def test_greedy_repeat_memo_answers_an_exact_repeat_without_a_model_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(LlamaCppBackend, "_make_grammar", lambda self, text: text)
    params = {"type": "object", "additionalProperties": False, "required": ["candidate_id"],
              "properties": {"candidate_id": {"type": "string", "enum": ["P1", "P2"]}}}
    tools = (ToolSpec("run_tests", params), ToolSpec("submit_patch", params))
    req = ToolTurnRequest(({"role": "system", "content": "s"}, {"role": "user", "content": "ledger"}), tools)
    llama = _StandInLlama()
    be = make_tool_backend("local/stand-in.gguf", llama=llama)
    first, again = be.turn(req, 10.0), be.turn(req, 10.0)
    assert len(llama.grammars) == 1  # the repeat made no model pass
    assert (again.name, again.arguments_text, again.raw_text) == (first.name, first.arguments_text, first.raw_text)
    assert "repeat_memo=hit" in again.notifications and "repeat_memo=hit" not in first.notifications
    assert again.usage["cached_input_tokens"] == again.usage["input_tokens"]
    other = ToolTurnRequest(({"role": "system", "content": "s"}, {"role": "user", "content": "other ledger"}), tools)
    be.turn(other, 10.0)
    assert len(llama.grammars) == 2  # a different prompt is decoded
    sampled = make_tool_backend("local/stand-in.gguf", llama=_StandInLlama(), temperature=0.7)
    sampled.turn(req, 10.0, sampling_seed=1)
    sampled.turn(req, 10.0, sampling_seed=1)
    assert len(sampled.llm.grammars) == 2  # sampled turns are never memoized


def test_greedy_repeat_memo_persists_across_a_restart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(LlamaCppBackend, "_make_grammar", lambda self, text: text)
    params = {"type": "object", "additionalProperties": False, "required": ["candidate_id"],
              "properties": {"candidate_id": {"type": "string", "enum": ["P1", "P2"]}}}
    req = ToolTurnRequest(({"role": "system", "content": "s"}, {"role": "user", "content": "ledger"}),
                          (ToolSpec("run_tests", params), ToolSpec("submit_patch", params)))
    memo = tmp_path / "memo.jsonl"
    first = make_tool_backend("local/stand-in.gguf", llama=_StandInLlama(), memo_path=memo)
    first.open()
    a = first.turn(req, 10.0)
    first.close()
    with memo.open("ab") as fh:
        fh.write(b'{"k": "torn')  # a kill mid-append leaves a torn last line
    llama = _StandInLlama()
    second = make_tool_backend("local/stand-in.gguf", llama=llama, memo_path=memo)
    second.open()
    b = second.turn(req, 10.0)
    second.close()
    assert llama.grammars == [] and "repeat_memo=hit" in b.notifications and b.raw_text == a.raw_text
    assert len(memo.read_text().splitlines()) == 2  # the answer and the torn line, newline-terminated


def test_model_planner_on_a_subset(public_data_dir: Path, tmp_path: Path) -> None:
    psuite = build_planning_suite(20260908, data_dir=public_data_dir, tasks_per_stratum=1)

    def planner(req: ToolTurnRequest) -> tuple[str, dict[str, Any]]:
        user = req.messages[1]["content"]
        shown = set(LEDGER_ROW.findall(user))
        menu = re.findall(r"^(\w{5}): sampling=", user, re.MULTILINE)
        tried = [json.loads(c["function"]["arguments"])["configuration_id"] for m in req.messages
                 if m["role"] == "assistant" and m.get("tool_calls") for c in m["tool_calls"]
                 if not c["id"].endswith("_rejected")]
        rejected = any(c["id"].endswith("_rejected") for m in req.messages
                       if m["role"] == "assistant" and m.get("tool_calls") for c in m["tool_calls"])
        if req.tool_choice == "submit_configuration":
            return "submit_configuration", {"configuration_id": tried[0], "rationale": "best"}
        if not tried and not rejected:  # first call: an already-tried configuration → the one correction
            return "run_experiment", {"configuration_id": sorted(shown)[0], "rationale": "again"}
        free = [m for m in menu if m not in shown and m not in tried]
        return "run_experiment", {"configuration_id": free[0], "rationale": "next"}

    run = PlanningRun(tmp_path / "run", psuite, seed=1, planner=LLMPlanner(ScriptedToolBackend(planner)))
    run.freeze_manifest()
    assert run.acquire() == {"ok": 32}
    turns = read_jsonl(tmp_path / "run" / "turns.jsonl")
    assert sum(t["format_error"] == "already_tried" for t in turns if t.get("format_error")) == 32
    run.seal()
    run.score()
    res = reanalyze_planning(run.export(tmp_path / "p.json.gz"))
    assert res["n_trajectories"] == 32 and res["n_decisions"] == 128
    summary = json.loads((tmp_path / "run" / "usage_summary.json").read_text())
    assert summary["format_corrections"] == 32
