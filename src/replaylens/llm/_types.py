"""Requests, completions, frozen model settings and back-end errors shared by every LLM module."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ..errors import BudgetExhausted, ConfigError, ReplayLensError
from ._serialize import ItemDecoder, canonical_json, output_schema, sha256_text

__all__ = [
    "ATTEMPT_KINDS",
    "STATUSES",
    "RESPONSE_FORMATS",
    "AccessError",
    "BackendError",
    "BudgetExhausted",
    "CapacityError",
    "Completion",
    "ModelSettings",
    "Request",
    "TransportError",
    "make_request",
]

RESPONSE_FORMATS = ("json_schema", "json_object", "text")
"""Structured-output modes, strongest first: strict JSON schema, JSON object (schema in the prompt), plain text."""

STATUSES = ("ok", "schema_invalid", "capacity_error", "transport_error", "protocol_violation")
ATTEMPT_KINDS = ("original", "format_retry", "replacement", "recovery")


class BackendError(ReplayLensError):
    """A failed model call, classified for the attempt log (never carries a secret: messages are redacted)."""

    status = "transport_error"

    def __init__(self, message: str, *, http_status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.http_status = http_status
        self.retry_after = retry_after


class CapacityError(BackendError):
    """Rate limit or overload (HTTP 429/503/529): retryable only under a recorded amendment."""

    status = "capacity_error"


class TransportError(BackendError):
    """Timeout, connection failure or server error (HTTP 5xx other than 503/529)."""

    status = "transport_error"


class AccessError(BackendError):
    """Model-access / configuration failure (authentication, unknown model, rejected request).

    Recorded in ``access_failures.jsonl`` (not a scientific attempt) and aborts the acquisition.
    """

    status = "access_error"


_DATED = re.compile(r"-\d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True)
class ModelSettings:
    """Frozen model settings: what is requested and what the observed runtime metadata must match.

    ``params`` are extra request parameters sent verbatim (the paper sends none: no temperature,
    seed or sampling parameter).  ``reasoning_effort`` / ``service_tier`` None are not sent; the
    observed tier must then be absent or ``default``.  An observed model must equal ``model``, a
    dated snapshot of it (``NAME-YYYY-MM-DD``) or one of ``accept_models``.
    """

    provider: str
    model: str
    base_url: str | None = None
    api: str = "chat"
    reasoning_effort: str | None = None
    service_tier: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    structured: bool = True
    api_key_env: str | None = None
    accept_models: tuple[str, ...] = ()
    response_format: str = "json_schema"

    def __post_init__(self) -> None:
        if self.response_format not in RESPONSE_FORMATS:
            raise ConfigError(f"response_format must be one of {RESPONSE_FORMATS}; got {self.response_format!r}")
        if self.api != "chat":
            raise ConfigError(f"only the chat-completions API is supported; got api={self.api!r}")
        banned = {"api_key", "messages", "model", "response_format"} & set(self.params)
        if banned:
            raise ConfigError(f"params may not set {sorted(banned)}")

    def to_dict(self) -> dict[str, Any]:
        return {"provider": self.provider, "model": self.model, "base_url": self.base_url, "api": self.api,
                "reasoning_effort": self.reasoning_effort, "service_tier": self.service_tier,
                "params": dict(self.params), "structured": self.structured, "api_key_env": self.api_key_env,
                "accept_models": list(self.accept_models), "response_format": self.response_format,
                "sampling_parameters_sent": sorted(self.params)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ModelSettings:
        return cls(provider=d["provider"], model=d["model"], base_url=d.get("base_url"), api=d.get("api", "chat"),
                   reasoning_effort=d.get("reasoning_effort"), service_tier=d.get("service_tier"),
                   params=dict(d.get("params") or {}), structured=bool(d.get("structured", True)),
                   api_key_env=d.get("api_key_env"), accept_models=tuple(d.get("accept_models") or ()),
                   response_format=str(d.get("response_format") or "json_schema"))

    def digest(self) -> str:
        """Hash of what determines a response distribution (model and parameters, not the transport)."""
        core = {"provider": self.provider, "model": self.model, "api": self.api,
                "reasoning_effort": self.reasoning_effort, "service_tier": self.service_tier,
                "params": dict(self.params), "structured": self.structured}
        if self.response_format != "json_schema":  # the historical default keeps its request ids
            core["response_format"] = self.response_format
        return sha256_text(canonical_json(core))

    def check_observed(self, model: str | None, effort: str | None, tier: str | None) -> list[str]:
        """Mismatches between observed runtime metadata and these settings (unobserved fields pass)."""
        bad = []
        if model is not None:
            ok = model == self.model or model in self.accept_models or (
                _DATED.search(model) is not None and _DATED.sub("", model) == self.model)
            if not ok:
                bad.append(f"observed model {model!r} != frozen {self.model!r}")
        if effort is not None and self.reasoning_effort is not None and effort != self.reasoning_effort:
            bad.append(f"observed reasoning effort {effort!r} != frozen {self.reasoning_effort!r}")
        if tier is not None:
            want = self.service_tier or "default"
            if tier != want and not (self.service_tier is None and tier in ("default", "auto")):
                bad.append(f"observed service tier {tier!r} != frozen {want!r}")
        return bad


@dataclass(frozen=True, eq=False)
class Request:
    """One model request: the exact prompt bytes, the output schema, per-item decoders and a repeat key.

    ``request_id`` is the cache key: a hash of (model settings, prompt digest, schema digest, system
    prompt, repeat key) — the same prompt under a fresh repeat is a fresh call.
    """

    request_id: str
    prompt: str
    decoders: tuple[ItemDecoder, ...]
    repeat: str
    meta: Mapping[str, Any] = field(default_factory=dict)
    system: str | None = None

    @cached_property
    def schema(self) -> dict[str, Any]:
        return output_schema(self.decoders)

    @cached_property
    def prompt_sha256(self) -> str:
        return sha256_text(self.prompt)

    @cached_property
    def schema_sha256(self) -> str:
        return sha256_text(canonical_json(self.schema))

    @property
    def n_items(self) -> int:
        return len(self.decoders)

    def messages(self) -> list[dict[str, str]]:
        msgs = [] if self.system is None else [{"role": "system", "content": self.system}]
        return [*msgs, {"role": "user", "content": self.prompt}]


def make_request(prompt: str, decoders: Sequence[ItemDecoder], *, settings_digest: str, repeat: int | str,
                 meta: Mapping[str, Any] | None = None, system: str | None = None) -> Request:
    """Build a request and its cache key (model, parameters, request digest, repeat)."""
    schema_sha = sha256_text(canonical_json(output_schema(decoders)))
    key = canonical_json([settings_digest, sha256_text(prompt), schema_sha,
                          None if system is None else sha256_text(system), str(repeat)])
    rid = "r" + sha256_text(key)[:31]
    return Request(rid, prompt, tuple(decoders), str(repeat), dict(meta or {}), system)


@dataclass
class Completion:
    """What a back-end returned for one attempt (text not yet validated)."""

    text: str | None
    model: str | None = None
    reasoning_effort: str | None = None
    service_tier: str | None = None
    usage: dict[str, int] | None = None
    server_input_sha256: str | None = None
    finish_reason: str | None = None
    response_id: str | None = None
    refusal: str | None = None
    tool_calls: int = 0
    notifications: list[str] = field(default_factory=list)
