"""The wordllama embedder offline from its wheel, and the OpenAI-compatible embedder against a real HTTP server."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from conftest import require
from replaylens.errors import ConfigError
from replaylens.memory.stores import EXTRA, HashingEmbedder, OpenAIEmbedder, WordLlamaEmbedder, make_embedder


def _wordllama(dim: int = 256) -> WordLlamaEmbedder:
    try:
        return WordLlamaEmbedder(dim)
    except ConfigError as exc:
        if EXTRA in str(exc):
            require("stores", f"wordllama: {exc}")
        raise


def test_wordllama_offline_deterministic_and_semantic() -> None:
    e = _wordllama()
    texts = ["restart the database server", "reboot the db server", "bake a chocolate cake"]
    v = e.embed(texts)
    assert v.shape == (3, 256) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(v, _wordllama().embed(texts))  # a second load: the same vectors
    assert float(v[0] @ v[1]) > float(v[0] @ v[2]) + 0.1
    for i, t in enumerate(texts):  # a row does not depend on the rest of its batch
        np.testing.assert_allclose(e.embed([t])[0], v[i], atol=1e-6)
    assert make_embedder("wordllama").fingerprint() == e.fingerprint()


def test_wordllama_truncated_dim() -> None:
    e = _wordllama(64)
    assert e.dim == 64 and e.embed(["a short text"]).shape == (1, 64)
    assert e.fingerprint() != _wordllama().fingerprint()


class _Embeddings(BaseHTTPRequestHandler):
    """An OpenAI-compatible /v1/embeddings endpoint serving the hashing embedder's vectors."""

    calls: list[int] = []  # noqa: RUF012  (batch sizes seen, shared across requests)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        type(self).calls.append(len(texts))
        vecs = HashingEmbedder(32).embed(texts)
        data = [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vecs)][::-1]
        out = json.dumps({"object": "list", "data": data, "model": body["model"],
                          "usage": {"prompt_tokens": 1, "total_tokens": 1}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def endpoint() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Embeddings)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_openai_embedder_batches_and_keeps_order(endpoint: str) -> None:
    _Embeddings.calls.clear()
    e = OpenAIEmbedder("hash-32", endpoint, batch_size=3)
    texts = [f"task number {i}" for i in range(7)]
    v = e.embed(texts)
    np.testing.assert_allclose(v, HashingEmbedder(32).embed(texts), atol=1e-6)  # rows in the order sent
    assert e.dim == 32
    assert _Embeddings.calls == [3, 3, 1]
    assert make_embedder(f"openai:hash-32@{endpoint}").fingerprint() == e.fingerprint()


def test_openai_embedder_unreachable_endpoint_is_one_line() -> None:
    e = OpenAIEmbedder("m", "http://127.0.0.1:9/v1", dim=8, timeout_s=2)
    with pytest.raises(ConfigError, match=r"embedding request to http://127\.0\.0\.1:9/v1"):
        e.embed(["x"])
