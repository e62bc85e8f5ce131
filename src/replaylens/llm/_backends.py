"""Model back-ends behind one protocol: OpenAI-compatible endpoints and scripted rule agents.

A back-end turns a :class:`Request` into a :class:`Completion` or raises a classified
:class:`BackendError`; validation, retries and recording live in the acquisition layer.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from ..agents import REFERENCE_RULES, FutureInput, ReferenceRule
from ..errors import ConfigError
from ..rng import derive_rng
from ._secrets import load_api_key, sanitize_url
from ._serialize import canonical_json, item_key, micro_array, parse_prompt
from ._types import AccessError, CapacityError, Completion, ModelSettings, Request, TransportError

__all__ = ["Backend", "OpenAIBackend", "ScriptedBackend", "make_backend", "scripted_tokens"]

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


def _classify(status: int, message: str, headers: Any) -> Exception:
    ra = _retry_after(headers)
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


class OpenAIBackend(Backend):
    """Any OpenAI-compatible chat-completions endpoint through the ``openai`` SDK.

    The SDK's own retries are off (``max_retries=0``): every retry is a recorded attempt.  The base
    URL is always passed explicitly, so no environment variable can redirect calls elsewhere.
    """

    def __init__(self, settings: ModelSettings, *, api_key: str | None) -> None:
        if settings.base_url is None:
            raise ConfigError("OpenAIBackend needs an explicit base_url")
        self.settings = settings
        self._key = api_key
        self._client: Any = None

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
        kw: dict[str, Any] = {"model": s.model, "messages": request.messages(), **dict(s.params)}
        if s.structured:
            kw["response_format"] = {"type": "json_schema",
                                     "json_schema": {"name": "decisions", "strict": True, "schema": request.schema}}
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
            raise openai_error(exc, timeout) from None
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


def make_backend(
    model: str,
    *,
    base_url: str | None = None,
    api_key_env: str | None = "OPENAI_API_KEY",
    env_file: str | os.PathLike[str] | None = ".env",
    reasoning_effort: str | None = None,
    service_tier: str | None = None,
    params: dict[str, Any] | None = None,
    structured: bool = True,
    accept_models: tuple[str, ...] | list[str] = (),
    noise: float = 0.0,
    seed: int = 0,
    n_threads: int | None = None,
    n_ctx: int = 4096,
) -> Backend:
    """Back-end from a model spec: ``openai/NAME`` (any OpenAI-compatible endpoint at ``base_url``),
    ``scripted/RULE`` (mean, sum, count, latest, best) or ``local/PATH`` (a GGUF file via llama-cpp-python).

    The API key is read from ``api_key_env`` in the environment, else from ``env_file``; a missing key
    is an error (no fallback to another provider or endpoint).  ``api_key_env=None`` declares an
    endpoint without authentication.
    """
    provider, sep, name = model.partition("/")
    if not sep or not name:
        raise ConfigError(f"model must look like openai/NAME, scripted/RULE or local/PATH; got {model!r}")
    if provider == "scripted":
        return ScriptedBackend(name, noise=noise, seed=seed)
    if provider == "local":
        from ._local import LlamaCppBackend

        return LlamaCppBackend(name, seed=seed, n_ctx=n_ctx, n_threads=n_threads)
    if provider != "openai":
        raise ConfigError(f"unknown model provider {provider!r}; use openai/NAME, scripted/RULE or local/PATH")
    url, key = openai_endpoint(base_url, api_key_env, env_file)
    settings = ModelSettings("openai", name, base_url=url, reasoning_effort=reasoning_effort,
                             service_tier=service_tier, params=dict(params or {}), structured=structured,
                             api_key_env=api_key_env or None, accept_models=tuple(accept_models))
    return OpenAIBackend(settings, api_key=key)
