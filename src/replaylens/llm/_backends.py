"""Model back-ends behind one protocol: OpenAI-compatible endpoints and scripted rule agents.

A back-end turns a :class:`Request` into a :class:`Completion` or raises a classified
:class:`BackendError`; validation, retries and recording live in the acquisition layer.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..agents import REFERENCE_RULES, FutureInput, ReferenceRule
from ..errors import ConfigError
from ..rng import derive_rng
from ._secrets import load_api_key, sanitize_url
from ._serialize import canonical_json, item_key, micro_array, parse_prompt
from ._types import (
    RESPONSE_FORMATS,
    AccessError,
    BackendError,
    CapacityError,
    Completion,
    ModelSettings,
    Request,
    TransportError,
)

__all__ = ["Backend", "OpenAIBackend", "ScriptedBackend", "format_messages", "prepare_backend",
           "scripted_tokens"]

DEFAULT_OPENAI_URL = "https://api.openai.com/v1"


class Backend:
    """Protocol of a model back-end.  ``open``/``close`` bracket one event loop's use of it."""

    settings: ModelSettings

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def complete(self, request: Request, timeout: float) -> Completion:  # pragma: no cover - interface
        raise NotImplementedError

    def secrets(self) -> list[str]:
        """Values that must never appear in an artifact (redacted wherever text is written)."""
        return []


# ---------------------------------------------------------------------------------------------- scripted

_STRATUM = ("ledger", "ledger")
_FI = FutureInput("", _STRATUM[0], _STRATUM[1], "", 0, 0)


def scripted_tokens(prompt: str, rule: str, *, noise: float = 0.0,
                    rng: np.random.Generator | None = None) -> list[str] | None:
    """The answer tokens of a reference rule that reads the prompt text like a model would.

    Each item's displayed producer keys are mapped through its producer-key dictionary (when one
    is shown), the rule (``replaylens.agents`` reference rules: first appearance, then menu order)
    picks a menu token, and with probability ``noise`` a uniformly drawn menu token replaces it.
    None when the prompt does not follow the default layout.
    """
    items = parse_prompt(prompt)
    if not items or any(not it.menu for it in items):
        return None
    ref = ReferenceRule(rule)
    out: list[str] = []
    for it in items:
        keys = [it.dictionary.get(k, k) for k, _ in it.records]
        micro = micro_array([u for _, u in it.records])
        state = {_STRATUM: tuple(zip(keys, micro.tolist(), strict=True))}
        tok = ref.act(state, _FI, it.menu, np.random.default_rng(0))
        if noise > 0 and rng is not None and rng.random() < noise:
            tok = it.menu[int(rng.integers(len(it.menu)))]
        out.append(tok)
    return out


class ScriptedBackend(Backend):
    """A reference rule (mean, sum, count, latest, best) answering from the rendered prompt text.

    ``noise`` = ε: with probability ε an item's answer is a uniformly drawn menu token, from a
    Generator derived from (seed, request id) — a repeat is a different request id, so repeats
    disagree at rate ~ε while a resumed or re-asked request gets the same answer.
    """

    def __init__(self, rule: str = "mean", *, noise: float = 0.0, seed: int = 0) -> None:
        if rule not in REFERENCE_RULES:
            raise ConfigError(f"unknown scripted rule {rule!r}; use one of {', '.join(REFERENCE_RULES)}")
        if not 0.0 <= noise <= 1.0:
            raise ConfigError(f"noise must lie in [0, 1]; got {noise}")
        self.rule = rule
        self.noise = float(noise)
        self.seed = int(seed)
        self.settings = ModelSettings("scripted", f"scripted/{rule}",
                                      params={"noise": self.noise, "seed": self.seed} if noise else {})

    async def complete(self, request: Request, timeout: float) -> Completion:
        rng = derive_rng(self.seed, "scripted-noise", request.request_id)
        toks = scripted_tokens(request.prompt, self.rule, noise=self.noise, rng=rng)
        if toks is None or len(toks) != request.n_items:
            text = "{}"
        else:
            text = canonical_json({item_key(i): t for i, t in enumerate(toks)})
        return Completion(text=text, model=self.settings.model, finish_reason="stop")


# ---------------------------------------------------------------------------------------------- OpenAI

def _retry_after(headers: Any) -> float | None:
    if headers is None:
        return None
    val = headers.get("retry-after")
    if val is None:
        return None
    try:
        x = float(val)
    except ValueError:
        return None
    return x if math.isfinite(x) and x >= 0 else None


# A 5xx whose body is a request-validation error (pydantic / FastAPI wording, e.g. llama-cpp-python's
# "Input should be 'text' or 'json_object'") is the server refusing this request, not a transient fault.
_VALIDATION = re.compile(r"Input should be|validation error|Extra inputs are not permitted|Field required|"
                         r"literal_error|extra_forbidden|not supported|unsupported|Unrecognized request argument",
                         re.IGNORECASE)


def _short(message: str, n: int = 240) -> str:
    one = " ".join(message.split())
    return one if len(one) <= n else one[: n - 1] + "…"


def _classify(status: int, message: str, headers: Any) -> Exception:
    ra = _retry_after(headers)
    if status >= 500 and status not in (503, 529) and _VALIDATION.search(message):
        return AccessError(f"HTTP {status} (request rejected as invalid): {_short(message)}", http_status=status)
    if status in (429, 503, 529):
        return CapacityError(f"HTTP {status}: {message}", http_status=status, retry_after=ra)
    if status >= 500 or status == 408:
        return TransportError(f"HTTP {status}: {message}", http_status=status, retry_after=ra)
    return AccessError(f"HTTP {status}: {message}", http_status=status)


def openai_client_kwargs(settings: ModelSettings, api_key: str | None) -> dict[str, Any]:
    """Client options shared by every OpenAI-compatible back-end: the SDK's own retries off (every retry is a
    recorded attempt), the base URL always explicit (no environment variable can redirect calls)."""
    if settings.base_url is None:
        raise ConfigError("an OpenAI-compatible back-end needs an explicit base_url")
    return {"api_key": api_key or "no-key", "base_url": settings.base_url, "max_retries": 0, "organization": None,
            "project": None}


def openai_call_errors() -> tuple[type[Exception], ...]:
    """The SDK exceptions a call maps to a classified back-end error (anything else propagates)."""
    import openai

    return (openai.APIConnectionError, openai.APIStatusError, openai.APIResponseValidationError)


def openai_error(exc: Exception, timeout: float) -> Exception:
    """The classified back-end error of an ``openai`` SDK exception (re-raised by the caller)."""
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return TransportError(f"timeout after {timeout:g} s")
    if isinstance(exc, openai.APIConnectionError):
        return TransportError(f"connection error: {type(exc).__name__}: {exc}")
    if isinstance(exc, openai.APIStatusError):
        return _classify(exc.status_code, str(exc), exc.response.headers)
    if isinstance(exc, openai.APIResponseValidationError):
        return TransportError(f"malformed response body: {exc}")
    return TransportError(f"client error: {type(exc).__name__}")


def parse_chat_response(raw: Any) -> Any:
    """The parsed chat completion of a raw SDK response, or a ``TransportError`` for a malformed body."""
    import openai

    try:
        resp = raw.parse()
    except (ValueError, TypeError, openai.APIResponseValidationError) as exc:
        raise TransportError(f"malformed response body: {type(exc).__name__}") from None
    if isinstance(resp, str) or not hasattr(resp, "choices"):
        raise TransportError("malformed response body: not a chat completion")
    return resp


def openai_usage(resp: Any) -> dict[str, Any] | None:
    """Token usage of a chat completion (input, cached input, output, reasoning), None when not reported."""
    u = getattr(resp, "usage", None)
    if u is None:
        return None
    pd = getattr(u, "prompt_tokens_details", None)
    cd = getattr(u, "completion_tokens_details", None)
    return {"input_tokens": u.prompt_tokens, "cached_input_tokens": getattr(pd, "cached_tokens", None),
            "output_tokens": u.completion_tokens, "reasoning_tokens": getattr(cd, "reasoning_tokens", None)}


SCHEMA_INSTRUCTION = ("Reply with exactly one JSON object that matches this JSON schema, and nothing else:\n")


def format_messages(request: Request, response_format: str) -> list[dict[str, str]]:
    """The chat messages sent for ``request`` under a structured-output mode: with ``json_object`` or ``text``
    the output schema is stated in the system message (the user message, whose digest the server may echo,
    is never changed)."""
    msgs = request.messages()
    if response_format == "json_schema":
        return msgs
    note = SCHEMA_INSTRUCTION + canonical_json(request.schema)
    if msgs and msgs[0]["role"] == "system":
        return [{"role": "system", "content": msgs[0]["content"] + "\n\n" + note}, *msgs[1:]]
    return [{"role": "system", "content": note}, *msgs]


def response_format_body(response_format: str, schema: dict[str, Any]) -> dict[str, Any] | None:
    """The ``response_format`` request field of a mode (None: not sent).  ``json_object`` also carries the
    schema in llama.cpp's ``schema`` field (llama-cpp-python turns it into a grammar; others ignore it)."""
    if response_format == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": "decisions", "strict": True, "schema": schema}}
    if response_format == "json_object":
        return {"type": "json_object", "schema": schema}
    return None


PROBE_PROMPT = "Answer A or B as JSON: {\"item_00\": \"A\"}."
"""The user message of the preflight probe (a cheap request; test servers recognise it)."""

_PROBE_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"item_00": {"type": "string", "enum": ["A", "B"]}},
                                 "required": ["item_00"], "additionalProperties": False}


class OpenAIBackend(Backend):
    """Any OpenAI-compatible chat-completions endpoint through the ``openai`` SDK.

    The SDK's own retries are off (``max_retries=0``): every retry is a recorded attempt.  The base
    URL is always passed explicitly, so no environment variable can redirect calls elsewhere.
    ``response_format``: ``auto`` (a preflight probe picks the strongest mode the endpoint accepts, see
    :meth:`resolve_format`) or one of ``json_schema``, ``json_object``, ``text`` (forced, no probe).
    """

    def __init__(self, settings: ModelSettings, *, api_key: str | None, response_format: str = "auto") -> None:
        if settings.base_url is None:
            raise ConfigError("OpenAIBackend needs an explicit base_url")
        if response_format not in ("auto", *RESPONSE_FORMATS):
            raise ConfigError(f"response_format must be auto, {', '.join(RESPONSE_FORMATS)}; got {response_format!r}")
        self.requested_format = response_format if settings.structured else "text"
        if self.requested_format != "auto":
            settings = dataclasses.replace(settings, response_format=self.requested_format)
        self.settings = settings
        self.format_choice: dict[str, Any] | None = None
        self._key = api_key
        self._client: Any = None

    # ------------------------------------------------------------------ preflight

    def resolve_format(self, run_dir: str | os.PathLike[str] | None = None, *, probe: bool = True,
                       timeout: float = 60.0) -> dict[str, Any]:
        """Fix the structured-output mode once, before the run: the user's forced mode; else the one frozen in
        ``run_dir``'s manifest (a resumed run keeps its mode); else, when ``probe``, the strongest mode a cheap
        preflight request is accepted with (json_schema → json_object → text); else json_schema undecided.
        Returns (and keeps in ``format_choice``) the choice and the probe record."""
        if self.format_choice is not None:
            return self.format_choice
        choice: dict[str, Any]
        frozen = _frozen_format(run_dir)
        if self.requested_format != "auto":
            choice = {"response_format": self.requested_format, "chosen_by": "user"}
        elif frozen is not None:
            choice = {"response_format": frozen, "chosen_by": "frozen manifest"}
        elif not probe:
            choice = {"response_format": self.settings.response_format, "chosen_by": "default (no probe)"}
        else:
            choice = self._probe(timeout)
        self.settings = dataclasses.replace(self.settings, response_format=choice["response_format"])
        self.format_choice = choice
        if run_dir is not None and choice["chosen_by"] == "preflight":
            Path(run_dir).mkdir(parents=True, exist_ok=True)
            (Path(run_dir) / "preflight.json").write_text(json.dumps(choice, indent=1) + "\n", encoding="utf-8")
        return choice

    def _probe(self, timeout: float) -> dict[str, Any]:
        from openai import OpenAI

        client = OpenAI(**openai_client_kwargs(self.settings, self._key))
        tried: list[dict[str, Any]] = []
        req = Request("preflight", PROBE_PROMPT, (), "0")
        try:
            for mode in RESPONSE_FORMATS:
                kw: dict[str, Any] = {"model": self.settings.model, **dict(self.settings.params)}
                msgs = req.messages() if mode == "json_schema" else [
                    {"role": "system", "content": SCHEMA_INSTRUCTION + canonical_json(_PROBE_SCHEMA)},
                    *req.messages()]
                body = response_format_body(mode, _PROBE_SCHEMA)
                if body is not None:
                    kw["response_format"] = body
                err = self._probe_call(client, kw, msgs, timeout)
                tried.append({"response_format": mode, "accepted": err is None,
                              **({} if err is None else {"http_status": err.http_status, "error": str(err)})})
                if err is None:
                    return {"response_format": mode, "chosen_by": "preflight", "probes": tried}
        finally:
            client.close()
        last = tried[-1]
        raise ConfigError(f"the endpoint {self.settings.base_url} rejects even a plain chat request "
                          f"({last.get('error')}); check --model and --base-url")

    def _probe_call(self, client: Any, kw: dict[str, Any], msgs: list[dict[str, str]],
                    timeout: float) -> BackendError | None:
        """None when the endpoint accepts the request; the non-transient rejection otherwise.  Transient
        failures are retried twice; then, like an authentication failure, they stop the run."""
        for k in range(3):
            try:
                client.chat.completions.create(messages=msgs, timeout=timeout, **kw)
                return None
            except openai_call_errors() as exc:
                err = openai_error(exc, timeout)
            if isinstance(err, AccessError):
                if err.http_status in (401, 403, 404):
                    raise ConfigError(f"preflight request to {self.settings.base_url} failed: {err}")
                return err
            if k < 2:
                time.sleep(1.0 + k)
        raise ConfigError(f"preflight request to {self.settings.base_url} failed: {err}")

    def unsupported_hint(self) -> str:
        """The option that avoids a rejected structured-output mode."""
        mode = self.settings.response_format
        if mode == "text":
            return "the request has no response_format; check --model, --base-url and --agent-param params"
        weaker = RESPONSE_FORMATS[RESPONSE_FORMATS.index(mode) + 1:]
        return (f"the endpoint may not support response_format {mode}: rerun with --response-format "
                f"{' or '.join(weaker)} (or auto, which probes the endpoint first) in a new --out directory")

    def secrets(self) -> list[str]:
        return [self._key] if self._key else []

    async def open(self) -> None:
        from openai import AsyncOpenAI

        self._client = AsyncOpenAI(**openai_client_kwargs(self.settings, self._key))

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    def _kwargs(self, request: Request) -> dict[str, Any]:
        s = self.settings
        mode = s.response_format if s.structured else "text"
        kw: dict[str, Any] = {"model": s.model, "messages": format_messages(request, mode), **dict(s.params)}
        body = response_format_body(mode, request.schema)
        if body is not None:
            kw["response_format"] = body
        if s.reasoning_effort is not None:
            kw["reasoning_effort"] = s.reasoning_effort
        if s.service_tier is not None:
            kw["service_tier"] = s.service_tier
        return kw

    async def complete(self, request: Request, timeout: float) -> Completion:

        if self._client is None:
            raise RuntimeError("OpenAIBackend.open() was not awaited")
        try:
            raw = await self._client.chat.completions.with_raw_response.create(**self._kwargs(request),
                                                                                 timeout=timeout)
        except openai_call_errors() as exc:
            err = openai_error(exc, timeout)
            if isinstance(err, AccessError) and err.http_status not in (401, 403, 404):
                err = AccessError(f"{err}; {self.unsupported_hint()}", http_status=err.http_status)
            raise err from None
        resp = parse_chat_response(raw)
        headers = raw.headers
        usage = openai_usage(resp)
        choice = resp.choices[0] if resp.choices else None
        msg = choice.message if choice is not None else None
        notes = []
        fp = getattr(resp, "system_fingerprint", None)
        if fp:
            notes.append(f"system_fingerprint={fp}")
        return Completion(
            text=None if msg is None else msg.content, model=resp.model,
            reasoning_effort=headers.get("x-reasoning-effort"), service_tier=getattr(resp, "service_tier", None),
            usage=usage, server_input_sha256=headers.get("x-input-sha256"),
            finish_reason=None if choice is None else choice.finish_reason, response_id=resp.id,
            refusal=None if msg is None else getattr(msg, "refusal", None),
            tool_calls=0 if msg is None or not msg.tool_calls else len(msg.tool_calls), notifications=notes)


def prepare_backend(backend: Backend, run_dir: str | os.PathLike[str] | None, *, probe: bool = True) -> None:
    """Fix what request ids depend on before the first request is built (an OpenAI-compatible back-end's
    structured-output mode: forced, frozen in ``run_dir``, or probed); a no-op for other back-ends."""
    resolve = getattr(backend, "resolve_format", None)
    if resolve is not None:
        resolve(run_dir, probe=probe)


def _frozen_format(run_dir: str | os.PathLike[str] | None) -> str | None:
    """The response format frozen in an existing run directory's manifest (None: no run there yet)."""
    if run_dir is None:
        return None
    p = Path(run_dir) / "manifest.json"
    if not p.exists():
        return None
    try:
        d = json.loads(p.read_text(encoding="utf-8"))
        return str(d["settings"].get("response_format") or "json_schema")
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError):
        return None


# ---------------------------------------------------------------------------------------------- factory

def openai_endpoint(base_url: str | None, api_key_env: str | None,
                    env_file: str | os.PathLike[str] | None) -> tuple[str, str | None]:
    """(sanitized base URL, API key) of an OpenAI-compatible endpoint: the key comes from ``api_key_env``
    in the environment, else from ``env_file``; a missing key is an error (never a fallback), and
    ``api_key_env=None`` declares an endpoint without authentication."""
    url = sanitize_url(base_url) if base_url else DEFAULT_OPENAI_URL
    if base_url and url != base_url.rstrip("?#"):
        raise ConfigError("base_url must not carry credentials, a query or a fragment")
    key = None
    if api_key_env:
        key = load_api_key(api_key_env, env_file)
        if key is None:
            where = f" or in {env_file}" if env_file is not None else ""
            raise ConfigError(f"no API key: set {api_key_env} in the environment{where} "
                              "(or pass api_key_env=None for an endpoint without authentication)")
    return url, key
