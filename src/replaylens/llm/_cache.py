"""A cross-run request cache: one SQLite file (WAL mode), content-addressed by what determines an answer.

The key is the sha256 of (model settings including the endpoint base URL and every decoding
parameter, the full messages, the response format / output schema, and the request's repeat key),
so a fresh repeat is always a fresh call and a changed decoding parameter always misses.  Only
answers that decode to valid menu tokens are stored (a format retry is never served a cached
invalid answer), and only deterministic decoding is cached unless ``sampled=True``.

The cache sits in front of a :class:`Backend` (:class:`CachedBackend`); the acquisition layer and
its journal are unchanged: a hit is an attempt with the note ``request-cache hit``, no usage (nothing
was paid) and latency ~0.

Every stored completion is bound to its request key by a digest (sha256 of key and stored text) checked on
read; an entry whose digest differs, whose text does not decode, or whose answer is not a valid answer to the
request is discarded (deleted, the endpoint asked, one warning line per run) and never served.  A damaged
file (not a database, an unexpected table schema, a failed integrity check, any SQLite error) is one
:class:`~replaylens.errors.ConfigError` naming the file and ``--no-cache`` / ``--cache PATH``.  Only an
original attempt reads the cache: a format retry or a replacement always asks the endpoint.
"""

from __future__ import annotations

import contextvars
import dataclasses
import hashlib
import json
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ._backends import Backend
from ._serialize import canonical_json, decode_response, sha256_text
from ._types import Completion, ModelSettings, Request

__all__ = ["ATTEMPT_ROLE", "CACHE_ENV", "CACHE_NOTE", "CachedBackend", "RequestCache", "default_cache_path",
           "deterministic", "embedding_cache_key", "entry_digest", "request_cache_key", "vector_digest", "with_cache"]

CACHE_ENV = "REPLAYLENS_CACHE"
CACHE_NOTE = "request-cache hit"
DISCARDED_NOTE = "cache entry discarded"
_SCHEMA = """CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY, model TEXT NOT NULL, completion TEXT NOT NULL,
    created TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')), digest TEXT)"""
_COLUMNS = {"key", "model", "completion"}
_VECTOR_SCHEMA = """CREATE TABLE IF NOT EXISTS vectors (
    key TEXT PRIMARY KEY, model TEXT NOT NULL, vector BLOB NOT NULL, digest TEXT NOT NULL,
    created TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')))"""
_VECTOR_COLUMNS = {"key", "model", "vector", "digest"}
ATTEMPT_ROLE: contextvars.ContextVar[str] = contextvars.ContextVar("replaylens_attempt_role", default="original")
"""The protocol role of the attempt being made (set by the acquisition layer): only ``original`` and
``recovery`` attempts may be answered from the cache."""


def entry_digest(key: str, completion: str) -> str:
    """sha256 binding a stored completion to its request key (checked on every read)."""
    return sha256_text(canonical_json([key, completion]))


def embedding_cache_key(endpoint: str, model: str, text: str) -> str:
    """sha256 of (endpoint base URL, model, sha256 of the input text): one embedding request's cache key."""
    return sha256_text(canonical_json({"kind": "embedding", "endpoint": endpoint.rstrip("/"), "model": model,
                                       "input_sha256": sha256_text(text)}))


def vector_digest(key: str, blob: bytes) -> str:
    """sha256 binding a stored vector (its bytes) to its key (checked on every read)."""
    return hashlib.sha256(key.encode("utf-8") + b"\0" + blob).hexdigest()


def answer_digest(comp: Completion) -> str:
    """sha256 of the answer a decision used (its text), as the run manifest records it."""
    return sha256_text(canonical_json(comp.text))


class _Discarded(Exception):
    """A stored entry that must not be served (digest mismatch, undecodable or invalid answer)."""
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


_OPEN_TRIES = 40


def _transient(exc: BaseException) -> bool:
    """SQLite's "database is locked" / "busy": another connection holds the file, which is not damage."""
    msg = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in msg or "busy" in msg)


class RequestCache:
    """One SQLite file shared by runs, commands and processes (WAL: readers never block the writer)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"request cache {self.path}: {exc} (use --no-cache or another --cache PATH)") from None
        try:
            self._db = sqlite3.connect(self.path, timeout=60.0, check_same_thread=False, isolation_level=None)
        except sqlite3.Error as exc:
            raise self.damaged(exc) from None
        for attempt in range(_OPEN_TRIES):
            try:
                self._open()
                break
            except sqlite3.OperationalError as exc:
                # another process or thread is opening or writing the same file: wait, it is not damage
                if not _transient(exc) or attempt == _OPEN_TRIES - 1:
                    self._db.close()
                    raise (self.busy(exc) if _transient(exc) else self.damaged(exc)) from None
                time.sleep(0.05 * (attempt + 1))
            except (sqlite3.Error, _Damaged) as exc:
                self._db.close()
                raise self.damaged(exc) from None
        self.discarded: list[str] = []

    def _open(self) -> None:
        """WAL mode, the schema (created, or checked and upgraded), and an integrity check."""
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        cols = {str(r[1]) for r in self._db.execute("PRAGMA table_info(responses)")}
        if not cols:
            self._db.execute(_SCHEMA)
        elif not cols >= _COLUMNS:
            raise _Damaged(f"table responses has columns {sorted(cols)}, not a ReplayLens request cache")
        elif "digest" not in cols:  # a cache written before digests: its entries are re-asked once
            self._db.execute("ALTER TABLE responses ADD COLUMN digest TEXT")
        vcols = {str(r[1]) for r in self._db.execute("PRAGMA table_info(vectors)")}
        if not vcols:  # embedding vectors (replaylens.retrieval's cached OpenAI-compatible embedder)
            self._db.execute(_VECTOR_SCHEMA)
        elif not vcols >= _VECTOR_COLUMNS:
            raise _Damaged(f"table vectors has columns {sorted(vcols)}, not a ReplayLens request cache")
        check = self._db.execute("PRAGMA quick_check").fetchone()
        if check is None or check[0] != "ok":
            what = " ".join(str(check[0]).split())[:160] if check else "no answer"
            raise _Damaged(f"integrity check failed: {what}")

    def busy(self, exc: BaseException) -> ConfigError:
        """The one-line error of a cache file another process keeps locked."""
        return ConfigError(f"request cache {self.path} stayed locked by another process ({exc}); rerun, or use "
                           "--no-cache or --cache PATH")

    def damaged(self, exc: BaseException) -> ConfigError:
        """The one-line error of a damaged cache file."""
        return ConfigError(f"request cache {self.path} is damaged ({exc}); rerun with --no-cache, or --cache PATH "
                           f"to use another file (or delete {self.path})")

    def _sql(self, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
        try:
            with self._lock:
                return self._db.execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            raise (self.busy(exc) if _transient(exc) else self.damaged(exc)) from None

    def lookup(self, key: str) -> tuple[Completion, str] | None:
        """The stored completion of ``key`` and its entry digest, None on a miss; raises :class:`_Discarded`
        (after deleting the entry) when the entry is not bound to ``key`` or does not decode."""
        rows = self._sql("SELECT completion, digest FROM responses WHERE key = ?", (key,))
        if not rows:
            return None
        blob, digest = rows[0]
        try:
            if not isinstance(blob, str) or digest != entry_digest(key, blob):
                raise _Discarded("its digest does not match its request key and text")
            try:
                comp = Completion(**_completion_fields(canonical_loads(blob)))
            except (ValueError, TypeError, ConfigError):
                raise _Discarded("its stored completion does not decode") from None
            if comp.text is not None and not isinstance(comp.text, str):
                raise _Discarded("its stored answer is not text")
        except _Discarded:
            self.discard(key)
            raise
        return comp, digest

    def get(self, key: str) -> Completion | None:
        """The stored completion of ``key``; None on a miss or a discarded entry."""
        try:
            got = self.lookup(key)
        except _Discarded:
            return None
        return None if got is None else got[0]

    def discard(self, key: str) -> None:
        self._sql("DELETE FROM responses WHERE key = ?", (key,))
        self.discarded.append(key)

    def put(self, key: str, comp: Completion) -> None:
        blob = canonical_json(dataclasses.asdict(comp))
        self._sql("INSERT OR REPLACE INTO responses (key, model, completion, digest) VALUES (?, ?, ?, ?)",
                  (key, comp.model or "", blob, entry_digest(key, blob)))

    def get_vector(self, key: str) -> bytes | None:
        """The stored vector bytes of ``key``; None on a miss, or when the entry's digest does not bind it to
        ``key`` (then the entry is deleted and ``key`` appended to ``discarded``)."""
        rows = self._sql("SELECT vector, digest FROM vectors WHERE key = ?", (key,))
        if not rows:
            return None
        blob, digest = rows[0]
        if not isinstance(blob, bytes) or digest != vector_digest(key, blob):
            self._sql("DELETE FROM vectors WHERE key = ?", (key,))
            self.discarded.append(key)
            return None
        return blob

    def put_vector(self, key: str, model: str, blob: bytes) -> None:
        self._sql("INSERT OR REPLACE INTO vectors (key, model, vector, digest) VALUES (?, ?, ?, ?)",
                  (key, model, blob, vector_digest(key, blob)))

    def __len__(self) -> int:
        return int(self._sql("SELECT count(*) FROM responses")[0][0])

    def close(self) -> None:
        with self._lock:
            self._db.close()


class _Damaged(Exception):
    pass


def canonical_loads(text: str) -> dict[str, Any]:
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
        self.discarded = 0
        self.answers: dict[str, str] = {}  # request cache key -> sha256 of the answer used (hit or stored)

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
                "decisions_from_cache": self.hits, "misses": self.misses, "stored": self.stored,
                "discarded": self.discarded, "answers_sha256": dict(sorted(self.answers.items()))}

    def _valid(self, comp: Completion, request: Request) -> bool:
        """A valid answer to ``request``: decodes to menu tokens, not refused, truncated, a tool call, from
        another model or for another input."""
        return bool(comp.text is not None and not comp.refusal and comp.finish_reason != "length"
                    and not comp.tool_calls
                    and not self.settings.check_observed(comp.model, comp.reasoning_effort, comp.service_tier)
                    and (comp.server_input_sha256 is None or comp.server_input_sha256 == request.prompt_sha256)
                    and decode_response(comp.text, request.decoders).ok)

    def _note_discard(self, why: str) -> None:
        self.discarded += 1
        if self.discarded == 1:  # reported once per run; summary.json / the manifest carry the count
            print(f"replaylens: warning: request cache {self.cache.path}: {DISCARDED_NOTE} ({why}); the endpoint "
                  "is asked instead (and for any further discarded entry)", file=sys.stderr)

    def _cached(self, key: str, request: Request) -> Completion | None:
        try:
            got = self.cache.lookup(key)
        except _Discarded as exc:
            self._note_discard(str(exc))
            return None
        if got is None:
            return None
        comp = got[0]
        try:
            valid = self._valid(comp, request)
        except (TypeError, ValueError, AttributeError):
            valid = False
        if not valid:
            self.cache.discard(key)
            self._note_discard("its stored answer is not a valid answer to the request")
            return None
        return comp

    async def complete(self, request: Request, timeout: float) -> Completion:
        if not self.active:
            return await self.inner.complete(request, timeout)
        key = request_cache_key(self.settings, request)
        got = self._cached(key, request) if ATTEMPT_ROLE.get() in ("original", "recovery") else None
        if got is not None:
            self.hits += 1
            self.answers[key] = answer_digest(got)
            return dataclasses.replace(got, usage=None, notifications=[*got.notifications, f"{CACHE_NOTE} {key}"])
        self.misses += 1
        comp = await self.inner.complete(request, timeout)
        if self._valid(comp, request):
            self.cache.put(key, comp)
            self.stored += 1
            self.answers[key] = answer_digest(comp)
        return comp


def with_cache(backend: Backend, cache: str | os.PathLike[str] | bool | None, *, sampled: bool = False) -> Backend:
    """``backend`` behind the request cache: ``cache`` a path, True (the default path) or False/None (off)."""
    if cache is None or cache is False:
        return backend
    path = default_cache_path() if cache is True else Path(cache)
    return CachedBackend(backend, RequestCache(path), sampled=sampled)
