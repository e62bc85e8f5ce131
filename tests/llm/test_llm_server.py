"""Issue 18 point 0: any OpenAI-compatible server — a preflight probe picks the structured-output mode, request
validation errors stop the run at once, and a real server (llama-cpp-python's) runs a small audit end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from local_server import embedded_gguf, local_server

from replaylens.bandit import make_bandit
from replaylens.cli._main import cli
from replaylens.llm import AccessError, FakeOpenAIServer, TransportError, make_backend
from replaylens.llm._agent import display_model_name
from replaylens.llm._backends import _classify
from replaylens.records import write_evaluator, write_futures, write_history

DESIGN = ["--cells", "value", "--maps", "1032", "--resamples", "200", "--quiet"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """2 streams, one stratum, one future task each: 2 decisions per cell, short ledgers."""
    d = tmp_path_factory.mktemp("tiny")
    sub = make_bandit(n_streams=2, n_future=1, slots_per_block=4, contexts=("easy",), held_out=())
    return ["--history", str(write_history(sub.history, d / "h.jsonl")),
            "--future", str(write_futures(sub.futures, d / "f.jsonl")),
            "--utilities", str(write_evaluator(sub.evaluator, d / "u.jsonl"))]


def _audit(inputs: list[str], out: Path, url: str, *extra: str, model: str = "openai/fake-model") -> tuple[int, str]:
    res = CliRunner().invoke(cli, ["audit", *inputs, "--agent", "llm", "--model", model, "--base-url", url,
                                   "--api-key-env", "", "--out", str(out), *DESIGN, *extra])
    return res.exit_code, res.output


def _manifest(out: Path) -> dict:  # type: ignore[type-arg]
    return json.loads(next((out / "llm").glob("*/manifest.json")).read_text())   # the model setup's journal


def test_validation_error_bodies_are_not_transient() -> None:
    body = "Error code: 500 - 1 validation error: response_format.type Input should be 'text' or 'json_object'"
    assert isinstance(_classify(500, body, None), AccessError)
    assert isinstance(_classify(500, "internal error", None), TransportError)
    assert isinstance(_classify(400, "bad request", None), AccessError)


@pytest.mark.parametrize(("accepted", "chosen"), [(("json_schema", "json_object", "text"), "json_schema"),
                                                  (("json_object", "text"), "json_object"),
                                                  (("text",), "text")])
def test_preflight_chooses_the_strongest_accepted_mode(tiny: list[str], tmp_path: Path,
                                                       accepted: tuple[str, ...], chosen: str) -> None:
    with FakeOpenAIServer(response_formats=accepted) as srv:
        code, out = _audit(tiny, tmp_path / "a", srv.url)
        assert code == 0, out
        order = ["json_schema", "json_object", "text"]
        assert srv.probes == order[: order.index(chosen) + 1]     # one probe per mode tried, strongest first
        assert _manifest(tmp_path / "a")["settings"]["response_format"] == chosen
        pre = next((tmp_path / "a" / "llm").glob("*/preflight.json"))   # the model setup's request journal
        assert json.loads(pre.read_text())["chosen_by"] == "preflight"
        n = srv.n_requests
        assert n > 0 and srv.hits == n + len(srv.probes)          # no rejected decision request
        code, out = _audit(tiny, tmp_path / "a", srv.url)        # a rerun keeps the frozen mode: no new probe
        assert code == 0, out
        assert srv.hits == n + len(srv.probes) and len(srv.probes) == order.index(chosen) + 1


def test_json_object_mode_states_the_schema_in_the_prompt() -> None:
    from replaylens.llm import ItemDecoder, make_request
    from replaylens.llm._backends import format_messages, response_format_body

    req = make_request("PROMPT", [ItemDecoder(("A", "B"), {"A": "a", "B": "b"})], settings_digest="s", repeat=0,
                       system="SYS")
    strict = format_messages(req, "json_schema")
    assert strict == req.messages()
    obj = format_messages(req, "json_object")
    assert obj[0]["role"] == "system" and obj[0]["content"].startswith("SYS")
    assert '"enum":["A","B"]' in obj[0]["content"]
    assert obj[-1] == {"role": "user", "content": "PROMPT"}               # the user message is never changed
    assert response_format_body("json_object", req.schema) == {"type": "json_object", "schema": req.schema}
    assert response_format_body("text", req.schema) is None


def test_forced_unsupported_mode_stops_at_once_with_one_line(tiny: list[str], tmp_path: Path) -> None:
    with FakeOpenAIServer(response_formats=("json_object", "text")) as srv:
        code, out = _audit(tiny, tmp_path / "f", srv.url, "--response-format", "json_schema", "--concurrency", "1")
        assert code == 2, out
        lines = [ln for ln in out.splitlines() if ln.strip() and not ln.startswith("replaylens: warning:")]
        assert len(lines) == 1 and "Traceback" not in out    # one error line (the few-streams warning aside)
        assert "json_schema" in lines[0] and "--response-format json_object or text" in lines[0]
        assert srv.hits == 1 and srv.probes == []                 # no retry burned, no probe when forced


def test_forced_mode_is_used_without_probe(tiny: list[str], tmp_path: Path) -> None:
    with FakeOpenAIServer() as srv:
        code, out = _audit(tiny, tmp_path / "t", srv.url, "--response-format", "text")
        assert code == 0, out
        assert srv.probes == [] and _manifest(tmp_path / "t")["settings"]["response_format"] == "text"


def test_plain_server_errors_stay_transient(tiny: list[str], tmp_path: Path) -> None:
    with FakeOpenAIServer(policy=lambda sha, occ: "500" if occ == 0 else "ok") as srv:
        # one repeat: each prompt is asked once (a stochastic agent's default is 2 repeats, issue 23)
        code, out = _audit(tiny, tmp_path / "r", srv.url, "--response-format", "json_schema", "--repeats", "1")
        assert code == 0, out                                     # retried under the frozen retry policy
        assert srv.n_requests == 2 * len({sha for sha, _, _ in srv.log})


def test_report_names_the_model_not_its_path() -> None:
    assert display_model_name("local//opt/models/SmolLM2-135M.Q4.gguf") == "local/SmolLM2-135M.Q4"
    assert display_model_name("openai/gpt-x") == "openai/gpt-x"


def test_response_format_must_be_known() -> None:
    with pytest.raises(Exception, match="response_format"):
        make_backend("openai/x", base_url="http://127.0.0.1:9/v1", api_key_env=None, response_format="grammar")


# ------------------------------------------------------------------ a real server nobody here wrote


def test_llama_cpp_server_end_to_end(tiny: list[str], tmp_path: Path) -> None:
    gguf = embedded_gguf()
    if gguf is None:
        from conftest import require

        require("local", "llama-cpp-python[server] and the embedded model (the local extra) are not installed")
        return
    with local_server(gguf, tmp_path) as url:
        code, out = _audit(tiny, tmp_path / "a", url, "--concurrency", "2", model="openai/smollm2")
        assert code == 0, out
        man = _manifest(tmp_path / "a")
        # llama-cpp-python's server rejects json_schema (HTTP 500 "Input should be 'text' or 'json_object'")
        assert man["settings"]["response_format"] == "json_object"
        pre = json.loads(next((tmp_path / "a" / "llm").glob("*/preflight.json")).read_text())
        assert [p["accepted"] for p in pre["probes"]] == [False, True]
        summary = json.loads((tmp_path / "a" / "summary.json").read_text())
        assert summary["agent"] == "llm(openai/smollm2)" and summary["verdicts"]
        atts = [json.loads(x) for x in next((tmp_path / "a" / "llm").glob("*/attempts.jsonl")).read_text().splitlines()]
        assert atts and all(a["usage"]["input_tokens"] > 0 for a in atts)
