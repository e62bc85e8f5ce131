"""llama-cpp-python's OpenAI-compatible server on the embedded model, for tests that need a real server."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def embedded_gguf() -> str | None:
    """The embedded model's GGUF path when the local extra (with llama-cpp-python's server) is installed."""
    from replaylens.llm import embedded_model_path, llama_available

    if not llama_available():
        return None
    try:
        import llama_cpp.server  # noqa: F401
    except ImportError:
        return None
    return embedded_model_path()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def local_server(gguf: str, folder: Path, *args: str, n_ctx: int = 2048, start_tries: int = 240) -> Iterator[str]:
    """Start ``python -m llama_cpp.server`` on ``gguf`` (context ``n_ctx``, extra server ``args``), yield its ``/v1``
    URL once it answers ``/models`` (polled every 0.25 s, at most ``start_tries`` times), and stop it afterwards;
    the server's log is ``folder/server.log``."""
    port = _free_port()
    log_path = folder / "server.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", gguf, "--host", "127.0.0.1",
                                 "--port", str(port), "--n_ctx", str(n_ctx), *args], stdout=log,
                                stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            url = f"http://127.0.0.1:{port}/v1"
            for _ in range(start_tries):
                try:
                    with urllib.request.urlopen(f"{url}/models", timeout=1) as r:
                        if r.status == 200:
                            break
                except OSError:
                    time.sleep(0.25)
                assert proc.poll() is None, log_path.read_text()[-2000:]
            yield url
        finally:
            proc.kill()
            proc.wait(timeout=30)
