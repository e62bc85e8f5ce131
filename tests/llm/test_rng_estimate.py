"""Issue 23 (6): ``--estimate`` needs no API key, counts tokens with the model's own tokenizer when one is
available (else a stated, calibrated approximation), assumes the response format the run would use, and
lands within ±25 % of llama-cpp-python's server-reported usage with the output bound respected."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from local_server import embedded_gguf, local_server

from replaylens.bandit import make_bandit
from replaylens.cli._main import cli
from replaylens.llm._budget import TokenCounter, approx_tokens
from replaylens.records import write_evaluator, write_futures, write_history


def _number(text: str, label: str) -> int:
    m = re.search(rf"{label}:\s+([\d,]+)", text)
    assert m is not None, text
    return int(m.group(1).replace(",", ""))


def _inputs(d: Path, **kw: object) -> list[str]:
    sub = make_bandit(**kw)  # type: ignore[arg-type]
    return ["--history", str(write_history(sub.history, d / "h.jsonl")),
            "--future", str(write_futures(sub.futures, d / "f.jsonl")),
            "--utilities", str(write_evaluator(sub.evaluator, d / "u.jsonl"))]


def test_estimate_needs_no_api_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/guide/llm.md's worked example, as written, with no OPENAI_API_KEY anywhere."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)  # no .env either
    inputs = _inputs(tmp_path, n_streams=2, n_future=2)
    res = CliRunner().invoke(cli, ["audit", *inputs, "--agent", "llm", "--model", "openai/gpt-x", "--base-url",
                                   "https://api.example/v1", "--cells", "value,rename", "--maps", "1032",
                                   "--out", "a", "--estimate", "--price-in", "0.15", "--price-out", "0.6"])
    assert res.exit_code == 0, res.output
    assert "no request made" in res.output and not (tmp_path / "a").exists()
    # auto mode, nothing sent: the larger of json_object / json_schema is assumed, and both are named
    assert "response format assumed: json_object" in res.output and "with json_schema:" in res.output


def _embedded() -> str | None:
    from replaylens.llm import embedded_model_path, llama_available

    return embedded_model_path() if llama_available() else None


def test_approximation_is_calibrated_on_the_builtin_example(tmp_path: Path) -> None:
    """The stated approximation against the embedded model's own tokenizer on the built-in example's prompts
    (the docs/guide/llm.md worked example: demo bandit, 4 streams, cells value and rename, one map)."""
    gguf = _embedded()
    if gguf is None:
        from conftest import require

        require("local", "the embedded model (local extra) is not installed")
        return
    from replaylens.llm import make_agent
    from replaylens.replay import replay

    sub = make_bandit(n_streams=4, n_future=16)
    agent = make_agent("openai/gpt-x", base_url="https://api.example/v1", api_key_env=None, mode="estimate",
                       run_dir=str(tmp_path / "llm"))
    replay(sub.history, sub.futures, sub.evaluator, agent, cells="value,rename", maps="1032")
    llm = agent.array
    reqs = list(llm.estimated.values())  # type: ignore[union-attr]
    exact = TokenCounter(gguf)
    texts = [m["content"] for r in reqs[:64] for m in r.messages()]
    ratio = sum(approx_tokens(t) for t in texts) / sum(exact.count(t) for t in texts)
    assert 0.9 <= ratio <= 1.1, ratio


def test_estimate_within_25_percent_of_llama_cpp_server_usage(tmp_path: Path) -> None:
    gguf = embedded_gguf()
    if gguf is None:
        from conftest import require

        require("local", "llama-cpp-python[server] and the embedded model (the local extra) are not installed")
        return
    inputs = _inputs(tmp_path, n_streams=2, n_future=1, slots_per_block=4, contexts=("easy",), held_out=())
    with local_server(gguf, tmp_path) as url:
        base = ["audit", *inputs, "--agent", "llm", "--model", "openai/smollm2", "--base-url", url,
                "--api-key-env", "", "--cells", "value", "--maps", "1032", "--resamples", "200", "--quiet"]
        estimates = {}
        for label, extra in (("tokenizer", ["--tokenizer", "embedded"]), ("approximation", [])):
            res = CliRunner().invoke(cli, [*base, "--out", str(tmp_path / f"e-{label}"), "--estimate", *extra])
            assert res.exit_code == 0, res.output
            estimates[label] = (_number(res.output, "model requests"), _number(res.output, "input tokens"),
                                _number(res.output, "output tokens"))
        res = CliRunner().invoke(cli, [*base, "--out", str(tmp_path / "run"), "--concurrency", "2"])
        assert res.exit_code == 0, res.output
        log = next((tmp_path / "run" / "llm").glob("*/attempts.jsonl"))   # the model setup's request journal
        atts = [json.loads(x) for x in log.read_text().splitlines()]
        used_in = sum(a["usage"]["input_tokens"] for a in atts)
        used_out = sum(a["usage"]["output_tokens"] for a in atts)
        for label, (n, t_in, t_out) in estimates.items():
            print(f"{label}: estimated {t_in} in / {t_out} out (bound); server {used_in} in / {used_out} out")
            assert n == len(atts), label
            assert abs(t_in - used_in) <= 0.25 * used_in, (label, t_in, used_in)
            assert t_out >= used_out, (label, t_out, used_out)  # the output bound is respected
