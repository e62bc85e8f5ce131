"""A cross-run request cache: one SQLite file (WAL mode), content-addressed by what determines an answer.

The key is the sha256 of (model settings including the endpoint base URL and every decoding
parameter, the full messages, the response format / output schema, and the request's repeat key),
so a fresh repeat is always a fresh call and a changed decoding parameter always misses.  Only
answers that decode to valid menu tokens are stored (a format retry is never served a cached
invalid answer), and only deterministic decoding is cached unless ``sampled=True``.

The cache sits in front of a :class:`Backend` (:class:`CachedBackend`); the acquisition layer and
its journal are unchanged: a hit is an attempt with the note ``request-cache hit``, no usage (nothing
was paid) and latency ~0.

Every stored completion is bound to its request key by a keyed digest (HMAC-SHA256 of key and stored text under
this user's cache key, a 32-byte file kept outside the cache: :func:`cache_key_path`) checked on read, so an entry
written by anyone without that file — a poisoned shared or restored cache — is never served; an entry whose digest
differs, whose text does not decode, or whose answer is not a valid answer to the
request is discarded (deleted, the endpoint asked, one warning line per run) and never served.  A damaged
file (not a database, an unexpected table schema, a failed integrity check, any SQLite error) is one
:class:`~replaylens.errors.ConfigError` naming the file and ``--no-cache`` / ``--cache PATH``.  Only an
original attempt reads the cache: a format retry or a replacement always asks the endpoint.
"""

from __future__ import annotations

import contextvars
import dataclasses
import hashlib
import hmac
import json
import os
import secrets
import sqlite3
import stat
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

__all__ = ["ATTEMPT_ROLE", "CACHE_ENV", "CACHE_KEY_ENV", "CACHE_NOTE", "CachedBackend", "RequestCache",
           "cache_key_path", "cache_secret", "default_cache_path", "deterministic", "embedding_cache_key",
           "entry_digest", "request_cache_key", "vector_digest", "with_cache"]

CACHE_ENV = "REPLAYLENS_CACHE"
CACHE_KEY_ENV = "REPLAYLENS_CACHE_KEY"
_SECRET_BYTES = 32
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


def cache_key_path() -> Path:
    """``$REPLAYLENS_CACHE_KEY``, else ``platformdirs.user_data_dir("replaylens")/cache.key``: the file holding this
    user's secret for the cache digests — in the data directory, not beside the cache, which CI caches restore
    and users share."""
    env = os.environ.get(CACHE_KEY_ENV)
    if env:
        return Path(env)
    from platformdirs import user_data_dir

    return Path(user_data_dir("replaylens")) / "cache.key"


def _key_error(path: Path, what: str) -> ConfigError:
    return ConfigError(f"request cache key {path}: {what} (use --no-cache, or set ${CACHE_KEY_ENV} to another file)")


def _create_secret(path: Path) -> None:
    """Write a fresh secret next to ``path`` (0600) and link it into place; a concurrent creator's file wins."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, secrets.token_bytes(_SECRET_BYTES))
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)


def cache_secret(path: Path | None = None) -> bytes:
    """This user's cache secret (created on first use: 32 random bytes, mode 0600); one-line
    :class:`~replaylens.errors.ConfigError` when it is unreadable, damaged, or open to other users."""
    path = cache_key_path() if path is None else path
    try:
        if not path.exists():
            _create_secret(path)
        st = path.stat()
        data = path.read_bytes()
    except OSError as exc:
        raise _key_error(path, exc.strerror or str(exc)) from None
    if os.name == "posix" and (st.st_mode & 0o077 or st.st_uid != os.getuid()):
        raise _key_error(path, f"mode {stat.filemode(st.st_mode)}, owner uid {st.st_uid}: it must be this user's "
                               "alone (chmod 600), or anyone who can write it can forge cache entries")
    if len(data) != _SECRET_BYTES:
        raise _key_error(path, f"{len(data)} bytes, not {_SECRET_BYTES}: damaged; delete it (every cached answer "
                               "is then asked once more)")
    return data


def entry_digest(key: str, completion: str, secret: bytes | None = None) -> str:
    """HMAC-SHA256 under ``secret`` (default :func:`cache_secret`) binding a stored completion to its request key."""
    sec = cache_secret() if secret is None else secret
    return hmac.new(sec, canonical_json([key, completion]).encode("utf-8"), hashlib.sha256).hexdigest()


def embedding_cache_key(endpoint: str, model: str, text: str) -> str:
    """sha256 of (endpoint base URL, model, sha256 of the input text): one embedding request's cache key."""
    return sha256_text(canonical_json({"kind": "embedding", "endpoint": endpoint.rstrip("/"), "model": model,
                                       "input_sha256": sha256_text(text)}))


def vector_digest(key: str, blob: bytes, secret: bytes | None = None) -> str:
    """HMAC-SHA256 under ``secret`` (default :func:`cache_secret`) binding a stored vector's bytes to its key."""
    sec = cache_secret() if secret is None else secret
    return hmac.new(sec, key.encode("utf-8") + b"\0" + blob, hashlib.sha256).hexdigest()


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

    def __init__(self, path: str | os.PathLike[str], *, secret: bytes | None = None) -> None:
        self.path = Path(path)
        self._secret = cache_secret() if secret is None else secret
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
        if not vcols:  # embedding vectors (replaylens.memory.retrieval's cached OpenAI-compatible embedder)
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
            if not isinstance(blob, str) or not hmac.compare_digest(str(digest),
                                                                     entry_digest(key, blob, self._secret)):
                raise _Discarded("its digest does not match its request key and text under this user's cache key")
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
                  (key, comp.model or "", blob, entry_digest(key, blob, self._secret)))

    def get_vector(self, key: str) -> bytes | None:
        """The stored vector bytes of ``key``; None on a miss, or when the entry's digest does not bind it to
        ``key`` (then the entry is deleted and ``key`` appended to ``discarded``)."""
        rows = self._sql("SELECT vector, digest FROM vectors WHERE key = ?", (key,))
        if not rows:
            return None
        blob, digest = rows[0]
        if not isinstance(blob, bytes) or not hmac.compare_digest(str(digest),
                                                                  vector_digest(key, blob, self._secret)):
            self._sql("DELETE FROM vectors WHERE key = ?", (key,))
            self.discarded.append(key)
            return None
        return blob

    def put_vector(self, key: str, model: str, blob: bytes) -> None:
        self._sql("INSERT OR REPLACE INTO vectors (key, model, vector, digest) VALUES (?, ?, ?, ?)",
                  (key, model, blob, vector_digest(key, blob, self._secret)))

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
