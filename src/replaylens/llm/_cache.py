"""A cross-run request cache: one SQLite file (WAL mode), content-addressed by what determines an answer.

The key is the sha256 of (model settings including the endpoint base URL and every decoding
parameter, the full messages, the response format / output schema, and the request's repeat key),
so a fresh repeat is always a fresh call and a changed decoding parameter always misses.  Only
answers that decode to valid menu tokens are stored (a format retry is never served a cached
invalid answer), and only deterministic decoding is cached unless ``sampled=True``.

The cache sits in front of a :class:`Backend` (:class:`CachedBackend`); the acquisition layer and
its journal are unchanged: a hit is an attempt with the note ``request-cache hit``, no usage (nothing
was paid) and latency ~0.
"""

from __future__ import annotations

import dataclasses
import os
import sqlite3
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ._backends import Backend
from ._serialize import canonical_json, decode_response, sha256_text
from ._types import Completion, ModelSettings, Request

__all__ = ["CACHE_ENV", "CACHE_NOTE", "CachedBackend", "RequestCache", "default_cache_path", "deterministic",
           "request_cache_key", "with_cache"]

CACHE_ENV = "REPLAYLENS_CACHE"
CACHE_NOTE = "request-cache hit"
_SCHEMA = """CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY, model TEXT NOT NULL, completion TEXT NOT NULL,
    created TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')))"""
_NOT_KEYED = ("api_key_env", "accept_models", "sampling_parameters_sent")


def default_cache_path() -> Path:
    """``$REPLAYLENS_CACHE``, else ``platformdirs.user_cache_dir("replaylens")/requests.sqlite``."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("replaylens")) / "requests.sqlite"


def deterministic(settings: ModelSettings) -> bool:
    """Whether the settings decode deterministically: local models (greedy logits / grammar readouts), or an
    endpoint asked for temperature 0 (or top_k 1).  An endpoint left at its default temperature samples."""
    if settings.provider == "local":
        return True
    p = dict(settings.params)
    return p.get("temperature") == 0 or p.get("top_k") == 1


def request_cache_key(settings: ModelSettings, request: Request) -> str:
    """sha256 of (settings incl. base URL and decoding parameters, messages, response schema, repeat key)."""
    s = {k: v for k, v in settings.to_dict().items() if k not in _NOT_KEYED}
    core = {"settings": s, "messages": request.messages(), "schema": request.schema, "repeat": request.repeat}
    return sha256_text(canonical_json(core))


class RequestCache:
    """One SQLite file shared by runs, commands and processes (WAL: readers never block the writer)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=60.0, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"request cache {self.path}: {exc} (use --no-cache or another --cache PATH)") from None
        self._lock = threading.Lock()

    def get(self, key: str) -> Completion | None:
        with self._lock:
            row = self._db.execute("SELECT completion FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        return Completion(**_completion_fields(canonical_loads(row[0])))

    def put(self, key: str, comp: Completion) -> None:
        blob = canonical_json(dataclasses.asdict(comp))
        with self._lock:
            self._db.execute("INSERT OR IGNORE INTO responses (key, model, completion) VALUES (?, ?, ?)",
                             (key, comp.model or "", blob))

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT count(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()


def canonical_loads(text: str) -> dict[str, Any]:
    import json

    out = json.loads(text)
    if not isinstance(out, dict):
        raise ConfigError("request cache: a stored completion is not an object")
    return out


def _completion_fields(d: Mapping[str, Any]) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(Completion)}
    return {k: v for k, v in d.items() if k in names}


class CachedBackend(Backend):
    """A back-end answered from a :class:`RequestCache` where possible; misses go to ``inner``.

    ``hits`` counts requests served from the cache (each a decision that cost no call), ``stored``
    answers written to it.  Not cached: sampled decoding (unless ``sampled``), and any answer that does not
    decode to valid menu tokens, is refused, truncated or calls a tool.
    """

    def __init__(self, inner: Backend, cache: RequestCache, *, sampled: bool = False) -> None:
        self.inner = inner
        self.cache = cache
        self.sampled = bool(sampled)
        self.active = self.sampled or deterministic(inner.settings)
        self.hits = 0
        self.misses = 0
        self.stored = 0

    @property
    def settings(self) -> Any:
        """The wrapped back-end's settings, read live (its structured-output mode is fixed by the preflight)."""
        return self.inner.settings

    @settings.setter
    def settings(self, value: Any) -> None:
        self.inner.settings = value

    def secrets(self) -> list[str]:
        return self.inner.secrets()

    async def open(self) -> None:
        await self.inner.open()

    async def close(self) -> None:
        await self.inner.close()

    def __getattr__(self, name: str) -> Any:  # other back-end attributes (tokenizer, llama handle, ...)
        return getattr(self.inner, name)

    def stats(self) -> dict[str, Any]:
        """What the manifest records: the cache file, whether it applied, hits (decisions from the cache)."""
        return {"path": str(self.cache.path), "active": self.active, "sampled": self.sampled,
                "decisions_from_cache": self.hits, "misses": self.misses, "stored": self.stored}

    async def complete(self, request: Request, timeout: float) -> Completion:
        if not self.active:
            return await self.inner.complete(request, timeout)
        key = request_cache_key(self.settings, request)
        got = self.cache.get(key)
        if got is not None:
            self.hits += 1
            return dataclasses.replace(got, usage=None, notifications=[*got.notifications, f"{CACHE_NOTE} {key}"])
        self.misses += 1
        comp = await self.inner.complete(request, timeout)
        if (comp.text is not None and not comp.refusal and comp.finish_reason != "length" and not comp.tool_calls
                and not self.settings.check_observed(comp.model, comp.reasoning_effort, comp.service_tier)
                and (comp.server_input_sha256 is None or comp.server_input_sha256 == request.prompt_sha256)
                and decode_response(comp.text, request.decoders).ok):
            self.cache.put(key, comp)
            self.stored += 1
        return comp


def with_cache(backend: Backend, cache: str | os.PathLike[str] | bool | None, *, sampled: bool = False) -> Backend:
    """``backend`` behind the request cache: ``cache`` a path, True (the default path) or False/None (off)."""
    if cache is None or cache is False:
        return backend
    path = default_cache_path() if cache is True else Path(cache)
    return CachedBackend(backend, RequestCache(path), sampled=sampled)
