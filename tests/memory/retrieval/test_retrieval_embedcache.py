"""The OpenAI-compatible embedder behind the cross-run request cache, against a real server: llama-cpp-python's
``llama_cpp.server`` serving ``/v1/embeddings`` with the embedded GGUF (``--embedding true``; mean pooling through
the GGUF override ``llama.pooling_type=int:1``, since SmolLM2's file names no pooling and the server would
otherwise answer per-token vectors).  A rerun sends no request; a tampered entry is discarded and asked again;
a damaged file is one line naming it."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _retrievalcases import example
from local_server import embedded_gguf, local_server

from replaylens.records import write_futures, write_history

SRC = str(Path(__file__).resolve().parents[3] / "src")


@pytest.fixture(scope="module")
def embedding_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of a llama-cpp-python server embedding with the embedded model (skips without the local
    extra, unless REPLAYLENS_REQUIRE names it)."""
    gguf = embedded_gguf()
    try:
        import openai  # noqa: F401
    except ImportError:
        gguf = None
    if gguf is None:
        from conftest import require

        require("local", "llama-cpp-python[server], openai and the embedded model (the local extra) are not installed")
    with local_server(str(gguf), tmp_path_factory.mktemp("embed-server"), "--embedding", "true",
                      "--kv_overrides", "llama.pooling_type=int:1", n_ctx=512, start_tries=480) as url:
        yield url


def _inputs(tmp: Path) -> tuple[Path, Path]:
    h, f, _ = example("tool-use", 1)
    return write_history(h, tmp / "history.jsonl"), write_futures(f, tmp / "future.jsonl")


def _check(hist: Path, fut: Path, out: Path, embedder: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "replaylens", "check-migration", "--store", "exact", "--events",
                           str(hist), "--queries", str(fut), "--embedder", embedder, "--ops", "reorder,relabel",
                           "-k", "3", "--out", str(out)], capture_output=True, text=True, env=env, timeout=600)


def _summary(out: Path) -> dict:  # type: ignore[type-arg]
    return dict(json.loads((out / "summary.json").read_text()))


@pytest.mark.slow
def test_openai_embedder_is_cached_replayed_and_counted(embedding_server: str, tmp_path: Path) -> None:
    hist, fut = _inputs(tmp_path)
    spec = f"openai:smollm2@{embedding_server}"
    cache = Path(os.environ["REPLAYLENS_CACHE"])
    first = _check(hist, fut, tmp_path / "a", spec)
    assert first.returncode == 0, first.stderr[-2000:]
    (c1,) = _summary(tmp_path / "a")["embedding_cache"]
    assert c1["cache"] == str(cache) and c1["embedder"] == f"openai:smollm2@{embedding_server}"
    assert c1["requests"] >= 1 and c1["texts_embedded"] >= 10 and c1["stored"] == c1["texts_embedded"]
    assert "embedding cache" in first.stdout
    with sqlite3.connect(cache) as db:
        n_vectors, dims = db.execute("SELECT count(*), min(length(vector)) FROM vectors").fetchone()
    assert n_vectors == c1["texts_embedded"] and dims == 4 * 576  # SmolLM2-135M: 576-d, float32

    again = _check(hist, fut, tmp_path / "b", spec)  # a rerun: every text from the cache, no request
    assert again.returncode == 0, again.stderr[-2000:]
    (c2,) = _summary(tmp_path / "b")["embedding_cache"]
    assert c2["requests"] == 0 and c2["texts_embedded"] == 0
    assert c2["texts_from_cache"] >= c1["texts_embedded"]
    assert _summary(tmp_path / "b")["migrations"] == _summary(tmp_path / "a")["migrations"]

    with sqlite3.connect(cache) as db:  # one entry's bytes no longer match its digest
        db.execute("UPDATE vectors SET vector = zeroblob(length(vector)) "
                   "WHERE rowid = (SELECT min(rowid) FROM vectors)")
    third = _check(hist, fut, tmp_path / "c", spec)
    assert third.returncode == 0, third.stderr[-2000:]
    (c3,) = _summary(tmp_path / "c")["embedding_cache"]
    assert c3["discarded"] == 1 and c3["texts_embedded"] == 1 and c3["requests"] == 1
    assert third.stderr.count("an embedding entry was discarded") == 1
    assert _summary(tmp_path / "c")["migrations"] == _summary(tmp_path / "a")["migrations"]


def test_a_damaged_cache_is_one_line_naming_it(tmp_path: Path) -> None:
    pytest.importorskip("openai", reason="the openai package (the llm extra) is not installed")
    hist, fut = _inputs(tmp_path)
    cache = Path(os.environ["REPLAYLENS_CACHE"])
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_bytes(b"not a database, " * 200)
    res = _check(hist, fut, tmp_path / "a", "openai:m@http://127.0.0.1:9/v1")
    assert res.returncode == 2, res.stderr
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and str(cache) in lines[0] and "damaged" in lines[0] and "Traceback" not in res.stderr
