"""Issue 26, point 2: no fragment of the API key is stored or printed, however a provider masks its echo."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from replaylens.bandit import make_bandit
from replaylens.cli._main import cli
from replaylens.llm import FakeOpenAIServer
from replaylens.llm._fake import MASK_STYLES
from replaylens.llm._secrets import REDACTED, Redactor
from replaylens.records import write_evaluator, write_futures, write_history

KEY = "sk-RLq7ZxW9Pa3Hb8a6f0e5dQz9w"
# no run of 4 leading or trailing characters of the key may survive anywhere (these do not occur by chance:
# the artifacts' digests are lowercase hex)
FRAGMENTS = [KEY[:4], KEY[-4:], KEY[:5], KEY[-9:]]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    d = tmp_path_factory.mktemp("secret-inputs")
    sub = make_bandit(n_streams=3, slots_per_block=8, n_future=2, rng=3)
    return ["--history", str(write_history(sub.history, d / "h.jsonl")),
            "--future", str(write_futures(sub.futures, d / "f.jsonl")),
            "--utilities", str(write_evaluator(sub.evaluator, d / "u.jsonl"))]


def _scan(root: Path, *texts: str) -> list[str]:
    found = []
    for p in [q for q in root.rglob("*") if q.is_file()]:
        data = p.read_bytes()
        found += [f"{p}: {f!r}" for f in FRAGMENTS if f.encode() in data]
        found += [f"{p}: {f!r} (JSON-escaped)" for f in FRAGMENTS
                  if f.encode("unicode_escape") in data and f.encode("unicode_escape") != f.encode()]
    for t in texts:
        found += [f"console: {f!r}" for f in FRAGMENTS if f in t]
    return found


@pytest.mark.slow
@pytest.mark.parametrize("style", sorted(MASK_STYLES))
def test_masked_echoes_never_reach_an_artifact_or_the_console(style: str, inputs: list[str], tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    policy = ("leak_masked_key_error", "leak_masked_key", "ok")  # per prompt: a 500 echo, a content echo, ok
    with FakeOpenAIServer(model="fake-model", api_key=KEY, mask_style=style,
                          policy=lambda sha, occ: policy[min(occ, 2)]) as srv:
        out = tmp_path / "out"
        res = CliRunner().invoke(cli, ["audit", *inputs, "--out", str(out), "--agent", "llm",
                                       "--model", "openai/fake-model", "--base-url", srv.url, "--retries", "4",
                                       "--cells", "value", "--maps", "id+ACMR", "--resamples", "50",
                                       "--cache", str(tmp_path / "cache.sqlite")])
        assert res.exit_code == 0, res.output
    attempts = next((out / "llm").glob("*/attempts.jsonl")).read_text()   # the model setup's request journal
    assert REDACTED in attempts  # the server did echo the (masked) key, and it was redacted
    assert _scan(tmp_path, res.output) == []


@pytest.mark.parametrize("style", sorted(MASK_STYLES))
def test_a_rejected_key_is_named_masked_by_nobody(style: str, inputs: list[str], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The endpoint rejects the key and echoes it masked (``Incorrect API key provided: sk-RL*****…``): the
    one-line error, the console and every file keep no fragment of it."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with FakeOpenAIServer(model="fake-model", api_key="sk-the-right-one", mask_style=style) as srv:
        for fmt in ("auto", "json_schema"):  # the preflight probe, and the run's own first request
            out = tmp_path / fmt
            res = CliRunner().invoke(cli, ["audit", *inputs, "--out", str(out), "--agent", "llm", "--model",
                                           "openai/fake-model", "--base-url", srv.url, "--cells", "value",
                                           "--maps", "id+ACMR", "--resamples", "50", "--response-format", fmt,
                                           "--cache", str(tmp_path / "cache.sqlite")])
            assert res.exit_code == 2, res.output
            assert "401" in res.output and "Traceback" not in res.output
    assert _scan(tmp_path, res.output) == []


def test_redactor_forms() -> None:
    r = Redactor([KEY])
    for style, mask in MASK_STYLES.items():
        assert r(f"key {mask(KEY)}.") == f"key {REDACTED}.", style
    assert r(f'"{KEY}"') == f'"{REDACTED}"'
    assert r("sk-\\u2026" + KEY[-4:]) == REDACTED          # the ellipsis JSON-escaped
    assert r(f"{KEY[:3]}****{KEY[-2:]}") == f"{KEY[:3]}****{KEY[-2:]}"  # 2 characters are not a fragment
    assert r("a ... b, xxx and *** stay") == "a ... b, xxx and *** stay"
    assert r(f"{KEY[3:9]} alone") == f"{KEY[3:9]} alone"    # an inner run without a mask is no echo
