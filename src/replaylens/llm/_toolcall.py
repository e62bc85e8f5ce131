"""One small tool-calling layer for tool-using agents (C4, C5; partC C8 ``ToolAgentBackend``).

A *tool turn* sends a conversation (``messages``), strict JSON-schema tools and a ``tool_choice``
(``"required"``: any offered tool; a tool name: that tool only) and gets back exactly one tool call
``{name, arguments}`` plus usage and the raw text.  Back-ends:

* :class:`OpenAIToolBackend` — any OpenAI-compatible endpoint through the ``openai`` SDK
  (chat-completions ``tools`` with ``strict`` schemas, ``parallel_tool_calls: false``); the client
  options, key handling and error classification are shared with :class:`OpenAIBackend`;
* :class:`LlamaToolBackend` — the embedded GGUF via llama-cpp-python, generating one JSON tool call
  under a GBNF grammar built from the tool schemas (:func:`tool_call_grammar`): the name is one of
  the allowed tools and the arguments satisfy that tool's schema.  Greedy by default; an optional
  temperature with a per-turn seed drawn from a recorded generator;
* :class:`ScriptedToolBackend` — a Python policy (tests).

:func:`parse_tool_call` validates a returned call against the offered schemas and raises
:class:`FormatError` (schema-invalid arguments, an unknown or disallowed tool, an ID outside the
enum); the agent decides what a format error costs (the one-correction rule lives in ``tools``).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError, ReplayLensError
from ..rng import derive_rng
from ._backends import (
    openai_call_errors,
    openai_client_kwargs,
    openai_endpoint,
    openai_error,
    openai_usage,
    parse_chat_response,
    scrub_error,
)
from ._local import LlamaCppBackend, RepeatMemo
from ._serialize import canonical_json, sha256_text
from ._types import ModelSettings

__all__ = ["REQUIRED", "FormatError", "LlamaToolBackend", "OpenAIToolBackend", "ScriptedToolBackend", "ToolCall",
           "ToolSpec", "ToolTurn", "ToolTurnBackend", "ToolTurnRequest", "backoff_delay", "make_tool_backend",
           "parse_tool_call", "sampling_seed", "tool_call_grammar", "validate_arguments"]

REQUIRED = "required"
"""``tool_choice`` value: the model must call one of the offered tools (any)."""


class FormatError(ReplayLensError):
    """A tool call that is not a valid call of an allowed tool (``kind`` names the failure)."""

    def __init__(self, message: str, kind: str = "schema_invalid") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class ToolSpec:
    """One tool: a name, an optional description and a strict JSON schema for its arguments."""

    name: str
    parameters: Mapping[str, Any]
    description: str = ""

    def to_openai(self) -> dict[str, Any]:
        fn: dict[str, Any] = {"name": self.name, "parameters": dict(self.parameters), "strict": True}
        if self.description:
            fn["description"] = self.description
        return {"type": "function", "function": fn}


@dataclass(frozen=True, eq=False)
class ToolTurnRequest:
    """One turn: the conversation so far, the offered tools and the tool choice."""

    messages: tuple[Mapping[str, Any], ...]
    tools: tuple[ToolSpec, ...]
    tool_choice: str = REQUIRED

    def __post_init__(self) -> None:
        names = [t.name for t in self.tools]
        if len(set(names)) != len(names) or not names:
            raise ConfigError("a tool turn needs at least one tool and unique tool names")
        if self.tool_choice != REQUIRED and self.tool_choice not in names:
            raise ConfigError(f"tool_choice {self.tool_choice!r} is not an offered tool")

    @property
    def allowed(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tools) if self.tool_choice == REQUIRED else (self.tool_choice,)

    def tool(self, name: str) -> ToolSpec:
        return next(t for t in self.tools if t.name == name)

    def openai_tool_choice(self) -> Any:
        if self.tool_choice == REQUIRED:
            return REQUIRED
        return {"type": "function", "function": {"name": self.tool_choice}}

    def body(self, settings: ModelSettings) -> dict[str, Any]:
        """The request body (what an OpenAI-compatible endpoint receives; the local model hashes the same)."""
        b: dict[str, Any] = {"model": settings.model, "messages": [dict(m) for m in self.messages],
                             "tools": [t.to_openai() for t in self.tools], "tool_choice": self.openai_tool_choice(),
                             "parallel_tool_calls": False, **dict(settings.params)}
        if settings.reasoning_effort is not None:
            b["reasoning_effort"] = settings.reasoning_effort
        if settings.service_tier is not None:
            b["service_tier"] = settings.service_tier
        return b

    def request_bytes(self, settings: ModelSettings) -> bytes:
        """Canonical JSON of :meth:`body` (the bytes whose sha256 is the turn's ``prompt_sha256``)."""
        return canonical_json(self.body(settings)).encode("utf-8")

    def prompt_sha256(self, settings: ModelSettings) -> str:
        return sha256_text(self.request_bytes(settings).decode("utf-8"))


@dataclass
class ToolTurn:
    """What a back-end returned for one turn (not yet validated)."""

    name: str | None
    arguments_text: str | None
    raw_text: str | None = None
    usage: dict[str, Any] | None = None
    model: str | None = None
    reasoning_effort: str | None = None
    service_tier: str | None = None
    finish_reason: str | None = None
    response_id: str | None = None
    server_input_sha256: str | None = None
    n_calls: int = 1
    notifications: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ToolCall:
    """A validated tool call."""

    name: str
    arguments: dict[str, Any]


# ---------------------------------------------------------------------------------------------- validation

_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "integer": (int,), "number": (int, float),
                                       "boolean": (bool,), "object": (dict,), "array": (list,)}


def validate_arguments(schema: Mapping[str, Any], value: Any, path: str = "arguments") -> None:
    """Check ``value`` against the JSON-schema subset the tool schemas use (type, enum, maxLength,
    required, properties, additionalProperties); raises :class:`FormatError` naming the field."""
    typ = schema.get("type")
    if typ is not None:
        kinds = _TYPES.get(str(typ))
        if kinds is None:
            raise ConfigError(f"unsupported schema type {typ!r} at {path}")
        if not isinstance(value, kinds) or (typ in ("integer", "number") and isinstance(value, bool)):
            raise FormatError(f"{path}: expected {typ}, got {type(value).__name__}")
    if "enum" in schema and value not in schema["enum"]:
        shown = value if not isinstance(value, str) or len(value) <= 40 else value[:40] + "…"
        raise FormatError(f"{path}: {shown!r} is not one of the allowed values", "not_in_enum")
    if isinstance(value, str) and "maxLength" in schema and len(value) > int(schema["maxLength"]):
        raise FormatError(f"{path}: longer than {int(schema['maxLength'])} characters ({len(value)})", "too_long")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        missing = [k for k in schema.get("required", []) if k not in value]
        if missing:
            raise FormatError(f"{path}: missing {missing}")
        if schema.get("additionalProperties") is False:
            extra = sorted(set(value) - set(props))
            if extra:
                raise FormatError(f"{path}: unexpected {extra}")
        for k, v in value.items():
            if k in props:
                validate_arguments(props[k], v, f"{path}.{k}")


def parse_tool_call(turn: ToolTurn, request: ToolTurnRequest) -> ToolCall:
    """The validated call of ``turn``: exactly one call of an allowed tool whose arguments parse as a JSON
    object satisfying that tool's schema; else :class:`FormatError`."""
    if turn.n_calls != 1 or turn.name is None:
        raise FormatError(f"expected exactly one tool call, got {turn.n_calls}", "no_tool_call")
    names = [t.name for t in request.tools]
    if turn.name not in names:
        raise FormatError(f"unknown tool {turn.name!r}", "unknown_tool")
    if turn.name not in request.allowed:
        raise FormatError(f"tool {turn.name!r} is not allowed on this turn (use {list(request.allowed)})",
                          "tool_not_allowed")
    try:
        args = json.loads(turn.arguments_text or "")
    except json.JSONDecodeError:
        raise FormatError("the tool arguments are not valid JSON", "invalid_json") from None
    if not isinstance(args, dict):
        raise FormatError("the tool arguments are not a JSON object", "schema_invalid")
    validate_arguments(request.tool(turn.name).parameters, args)
    return ToolCall(turn.name, args)


# ---------------------------------------------------------------------------------------------- grammar

_CHAR = r'[^"\\\x7F\x00-\x1F]'


def _lit(text: str) -> str:
    return json.dumps(text, ensure_ascii=True)  # JSON string escapes are valid GBNF literal escapes


def _value_rule(schema: Mapping[str, Any], name: str, rules: dict[str, str], cap: int | None) -> str:
    typ = schema.get("type")
    if "enum" in schema:
        rules[name] = " | ".join(_lit(json.dumps(v, ensure_ascii=False)) for v in schema["enum"])
    elif typ == "object":
        props = schema.get("properties", {})
        keys = list(schema.get("required", list(props)))
        if set(keys) != set(props) or schema.get("additionalProperties") is not False:
            raise ConfigError("grammar tools need strict objects (every property required, no additional ones)")
        parts = []
        for i, k in enumerate(keys):
            sub = _value_rule(props[k], f"{name}-{i}", rules, cap)
            parts.append(_lit(("{" if i == 0 else ", ") + json.dumps(k) + ": ") + " " + sub)
        rules[name] = " ".join(parts) + ' "}"' if parts else '"{}"'
    elif typ == "string":
        n = schema.get("maxLength")
        n = cap if n is None else (int(n) if cap is None else min(int(n), cap))
        rules[name] = '"\\"" ' + (f"{_CHAR}{{0,{n}}}" if n is not None else f"{_CHAR}*") + ' "\\""'
    elif typ == "integer":
        rules[name] = '"-"? ("0" | [1-9] [0-9]{0,15})'
    elif typ == "number":
        rules[name] = '"-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})?'
    elif typ == "boolean":
        rules[name] = '"true" | "false"'
    else:
        raise ConfigError(f"unsupported schema for the grammar at {name}: {dict(schema)}")
    return name


def tool_call_grammar(tools: Sequence[ToolSpec], allowed: Sequence[str], *, string_cap: int | None = None) -> str:
    """GBNF for one JSON tool call ``{"name": N, "arguments": {...}}`` with N in ``allowed`` and arguments
    satisfying N's schema (keys in ``required`` order, no free whitespace).  ``string_cap`` bounds free
    strings further (never above their ``maxLength``), so every output is schema-valid."""
    rules: dict[str, str] = {}
    alts = []
    by = {t.name: t for t in tools}
    for i, n in enumerate(allowed):
        if n not in by:
            raise ConfigError(f"allowed tool {n!r} is not offered")
        args = _value_rule(by[n].parameters, f"args{i}", rules, string_cap)
        rules[f"call{i}"] = _lit('{"name": ' + json.dumps(n) + ', "arguments": ') + f" {args} " + _lit("}")
        alts.append(f"call{i}")
    return "\n".join([f"root ::= {' | '.join(alts)}", *(f"{k} ::= {v}" for k, v in rules.items())]) + "\n"


# ---------------------------------------------------------------------------------------------- back-ends


class ToolTurnBackend:
    """Protocol of a tool-turn back-end (synchronous: a trajectory is sequential)."""

    settings: ModelSettings

    def open(self) -> None:
        return None

    def close(self) -> None:
        return None

    def turn(self, request: ToolTurnRequest, timeout: float, *, sampling_seed: int | None = None
             ) -> ToolTurn:  # pragma: no cover - interface
        raise NotImplementedError

    def secrets(self) -> list[str]:
        return []

    def describe(self) -> dict[str, Any]:
        return {**self.settings.to_dict(), "settings_digest": self.settings.digest()}


class ScriptedToolBackend(ToolTurnBackend):
    """A Python policy ``policy(request) -> ToolTurn | (name, arguments)`` (tests and stand-ins)."""

    def __init__(self, policy: Callable[[ToolTurnRequest], ToolTurn | tuple[str, Mapping[str, Any]]], *,
                 name: str = "scripted/tool-policy") -> None:
        self.policy = policy
        self.settings = ModelSettings("scripted", name)
        self.calls = 0

    def turn(self, request: ToolTurnRequest, timeout: float, *, sampling_seed: int | None = None) -> ToolTurn:
        self.calls += 1
        out = self.policy(request)
        if isinstance(out, ToolTurn):
            return out
        name, args = out
        text = canonical_json(dict(args))
        return ToolTurn(name, text, raw_text=text, model=self.settings.model, finish_reason="tool_calls",
                        usage={"input_tokens": 0, "cached_input_tokens": 0, "output_tokens": 0,
                               "reasoning_tokens": 0})


class OpenAIToolBackend(ToolTurnBackend):
    """Chat-completions tool calls on any OpenAI-compatible endpoint (``openai`` SDK, no SDK retries)."""

    def __init__(self, settings: ModelSettings, *, api_key: str | None) -> None:
        openai_client_kwargs(settings, api_key)  # validates the base URL
        self.settings = settings
        self._key = api_key
        self._client: Any = None

    def secrets(self) -> list[str]:
        return [self._key] if self._key else []

    def open(self) -> None:
        from openai import OpenAI

        if self._client is None:
            self._client = OpenAI(**openai_client_kwargs(self.settings, self._key))

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def turn(self, request: ToolTurnRequest, timeout: float, *, sampling_seed: int | None = None) -> ToolTurn:
        self.open()
        body = request.body(self.settings)
        try:
            raw = self._client.chat.completions.with_raw_response.create(**body, timeout=timeout)
        except openai_call_errors() as exc:
            raise scrub_error(openai_error(exc, timeout), self.secrets()) from None
        resp = parse_chat_response(raw)
        headers = raw.headers
        choice = resp.choices[0] if resp.choices else None
        msg = choice.message if choice is not None else None
        calls = list(getattr(msg, "tool_calls", None) or [])
        fn = getattr(calls[0], "function", None) if calls else None
        fp = getattr(resp, "system_fingerprint", None)
        notes = [f"system_fingerprint={fp}"] if fp else []
        return ToolTurn(
            name=None if fn is None else fn.name, arguments_text=None if fn is None else fn.arguments,
            raw_text=None if msg is None else msg.content, usage=openai_usage(resp), model=resp.model,
            reasoning_effort=headers.get("x-reasoning-effort"), service_tier=getattr(resp, "service_tier", None),
            finish_reason=None if choice is None else choice.finish_reason, response_id=resp.id,
            server_input_sha256=headers.get("x-input-sha256"), n_calls=len(calls), notifications=notes)


def _plain_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """Role/content turns for a chat template without tool roles: an assistant tool call becomes its JSON
    text, a tool result a user turn ``Result of NAME: {...}``."""
    out: list[dict[str, str]] = []
    names: dict[str, str] = {}
    for m in messages:
        role = str(m.get("role"))
        if role == "assistant" and m.get("tool_calls"):
            parts = []
            for c in m["tool_calls"]:
                names[str(c.get("id"))] = str(c["function"]["name"])
                parts.append('{"name": ' + json.dumps(c["function"]["name"]) + ', "arguments": '
                             + str(c["function"]["arguments"]) + "}")
            out.append({"role": "assistant", "content": "\n".join(parts)})
        elif role == "tool":
            out.append({"role": "user", "content": f"Result of {names.get(str(m.get('tool_call_id')), 'tool')}: "
                                                    f"{m.get('content')}"})
        else:
            out.append({"role": role, "content": str(m.get("content") or "")})
    return out


class LlamaToolBackend(ToolTurnBackend):
    """The embedded GGUF (llama-cpp-python): one grammar-constrained JSON tool call per turn.

    The conversation is rendered with the model's own chat template (tool results as user turns, see
    :func:`_plain_messages`); generation is greedy (temperature 0, top-k 1) unless ``temperature`` > 0,
    when each turn samples with the ``sampling_seed`` its caller draws from a recorded generator.  The
    context is not reset between turns, so a trajectory's growing conversation reuses its evaluated
    prefix (llama.cpp's prefix match).  ``string_cap`` bounds generated free text (the rationale).

    Greedy decoding is a function of the prompt tokens and the grammar, so a greedy turn whose exact
    tokens, grammar and limits were already decoded is answered from a repeat memo (``memo_size``
    entries, LRU) with the identical text — a fresh repeat of a greedy trajectory costs no model pass.
    A memo answer is marked ``repeat_memo=hit`` in the turn's notifications and counts every input token
    as cached.  Sampled turns (``temperature`` > 0) are never memoized.  With ``memo_path`` the memo is
    also a JSON-lines file (keys include the model file's name and size), read on start and appended
    as answers are decoded, so a restarted run keeps it (a torn last line is skipped).
    """

    def __init__(self, path: str, *, llama: Any = None, n_ctx: int = 8192, n_threads: int | None = None,
                 temperature: float = 0.0, seed: int = 0, string_cap: int | None = 160,
                 max_tokens: int = 512, memo_size: int = 4096,
                 memo_path: str | os.PathLike[str] | None = None) -> None:
        if temperature < 0:
            raise ConfigError(f"temperature must be >= 0; got {temperature}")
        self._base = LlamaCppBackend(path, seed=seed, n_ctx=n_ctx, llama=llama, readout="grammar",
                                     n_threads=n_threads, cache_size=0)
        self.llm = self._base.llm
        self.temperature = float(temperature)
        self.seed = int(seed)
        self.string_cap = string_cap
        self.max_tokens = int(max_tokens)
        self.settings = ModelSettings("local", f"local/{path}", params={
            "decoding": "gbnf-json-tool-call", "temperature": self.temperature, "string_cap": string_cap,
            "max_tokens": self.max_tokens, "prompt_format": self._base.prompt_format})
        self._grammars: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.last_prompt = ""
        self.memo_size = int(memo_size)
        self._memo: RepeatMemo[tuple[str, Any, int]] = RepeatMemo(
            self.memo_size, memo_path, encode=lambda a: {"t": a[0], "f": a[1], "n": a[2]},
            decode=lambda row: (str(row["t"]), row["f"], int(row["n"])))

    def open(self) -> None:
        self._memo.open()

    def close(self) -> None:
        self._memo.close()

    def render(self, request: ToolTurnRequest) -> str:
        msgs = _plain_messages(request.messages)
        chat = self._base._chat
        if chat is None:
            return "".join(f"{m['role']}: {m['content']}\n" for m in msgs) + "assistant: "
        return str(chat(messages=msgs).prompt)

    def _grammar(self, text: str) -> Any:
        if text not in self._grammars:
            self._grammars[text] = self._base._make_grammar(text)
        return self._grammars[text]

    def turn(self, request: ToolTurnRequest, timeout: float, *, sampling_seed: int | None = None) -> ToolTurn:
        prompt = self.render(request)
        gtext = tool_call_grammar(request.tools, request.allowed, string_cap=self.string_cap)
        with self._lock:
            self.last_prompt = prompt
            ids = self._base._tokenize(prompt)
            prev = [int(v) for v in getattr(self.llm, "_input_ids", ())]
            cached = 0
            for a, b in zip(prev, ids, strict=False):
                if a != b:
                    break
                cached += 1
            greedy = self.temperature == 0.0
            key = None
            if greedy and self.memo_size > 0:
                key = hashlib.sha256(canonical_json({"model": self._base._model_key.decode(), "ids": ids,
                                                     "grammar": gtext, "max_tokens": self.max_tokens})
                                     .encode()).digest()
            hit = self._memo.get(key) if key is not None else None
            t0 = time.perf_counter()
            if hit is not None:
                text, finish, n_out = hit
            else:
                out = self.llm.create_completion(
                    ids, max_tokens=self.max_tokens, temperature=self.temperature, top_k=1 if greedy else 0,
                    top_p=1.0, min_p=0.0, repeat_penalty=1.0,
                    seed=self.seed if sampling_seed is None else int(sampling_seed), grammar=self._grammar(gtext))
                text = str(out["choices"][0]["text"])
                finish = out["choices"][0].get("finish_reason")
                u = out.get("usage") or {}
                n_out = int(u.get("completion_tokens", len(self.llm.tokenize(text.encode("utf-8"), add_bos=False))))
                if key is not None:
                    self._memo.put(key, (text, finish, n_out))
            elapsed = time.perf_counter() - t0
        n_cached = len(ids) if hit is not None else min(cached, max(len(ids) - 1, 0))
        usage = {"input_tokens": len(ids), "cached_input_tokens": n_cached, "output_tokens": n_out,
                 "reasoning_tokens": 0}
        name: str | None = None
        args_text: str | None = None
        try:
            obj = json.loads(text)
            name = str(obj["name"])
            args_text = canonical_json(obj["arguments"])
        except (json.JSONDecodeError, KeyError, TypeError):
            pass  # an incomplete generation (max_tokens) fails validation as a format error
        return ToolTurn(name, args_text, raw_text=text, usage=usage, model=self.settings.model,
                        finish_reason=finish, n_calls=1 if name is not None else 0,
                        notifications=[f"generation_s={elapsed:.3f}", *(["repeat_memo=hit"] if hit else [])])


def make_tool_backend(model: str, *, base_url: str | None = None, api_key_env: str | None = "OPENAI_API_KEY",
                      env_file: str | None = ".env", reasoning_effort: str | None = None,
                      service_tier: str | None = None, params: Mapping[str, Any] | None = None,
                      accept_models: Sequence[str] = (), n_threads: int | None = None, n_ctx: int = 8192,
                      temperature: float = 0.0, seed: int = 0, string_cap: int | None = 160,
                      llama: Any = None, memo_size: int = 4096,
                      memo_path: str | os.PathLike[str] | None = None) -> ToolTurnBackend:
    """``openai/NAME`` (an OpenAI-compatible endpoint at ``base_url``; key from ``api_key_env`` / ``env_file``,
    never a parameter) or ``local/PATH.gguf`` (llama-cpp-python, grammar-constrained)."""
    provider, sep, name = model.partition("/")
    if not sep or not name:
        raise ConfigError(f"model must look like openai/NAME or local/PATH.gguf; got {model!r}")
    if provider == "local":
        return LlamaToolBackend(name, llama=llama, n_ctx=n_ctx, n_threads=n_threads, temperature=temperature,
                                seed=seed, string_cap=string_cap, memo_size=memo_size, memo_path=memo_path)
    if provider != "openai":
        raise ConfigError(f"unknown tool-model provider {provider!r}; use openai/NAME or local/PATH.gguf")
    url, key = openai_endpoint(base_url, api_key_env, env_file)
    p = dict(params or {})
    if temperature:
        p.setdefault("temperature", float(temperature))
    settings = ModelSettings("openai", name, base_url=url, reasoning_effort=reasoning_effort,
                             service_tier=service_tier, params=p, api_key_env=api_key_env or None,
                             accept_models=tuple(accept_models))
    return OpenAIToolBackend(settings, api_key=key)


def backoff_delay(seed: int, key: str, failures: int, retry_after: float | None, *, base_s: float = 1.0,
                  max_s: float = 60.0) -> float:
    """Full-jitter exponential back-off from ``derive_rng(seed, "backoff", key, failures)`` honouring
    ``Retry-After`` (the acquisition layer's rule)."""
    cap = min(max_s, base_s * 2.0 ** max(failures - 1, 0))
    delay = float(derive_rng(seed, "backoff", key, failures).uniform(0.0, cap)) if cap > 0 else 0.0
    if retry_after is not None:
        delay = max(delay, min(retry_after, max_s))
    return delay


def sampling_seed(seed: int, *key: str | int) -> int:
    """A per-turn sampler seed for a local model, drawn from a recorded generator."""
    return int(derive_rng(seed, "tool-sampling", *key).integers(0, 2**31 - 1))


