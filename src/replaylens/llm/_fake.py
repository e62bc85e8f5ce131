"""A fault-injecting fake OpenAI-compatible server on 127.0.0.1 (tests and benchmarks; stdlib only).

It answers ``POST /v1/chat/completions`` by reading the prompt like a model would (a scripted
reference rule over the rendered ledger, see :func:`scripted_tokens`) and can inject, per request,
one of :data:`FAULTS`: timeouts, HTTP 429/500/503, invalid JSON, a label outside the menu, empty
output, a wrong model name, a mismatched input echo, a malformed HTTP body, a leaked credential.
Faults are drawn from a Generator derived from (seed, prompt digest, occurrence), or chosen by a
``policy(prompt_sha256, occurrence) -> fault`` callable.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ..errors import ConfigError
from ..rng import derive_rng
from ._backends import PROBE_PROMPT, scripted_tokens
from ._serialize import canonical_json, item_key

__all__ = ["FAULTS", "TOOL_FAULTS", "FakeOpenAIServer", "scripted_tool_call"]

FAULTS = ("ok", "timeout", "429", "500", "503", "invalid_json", "off_menu", "empty", "wrong_model",
          "echo_mismatch", "garbage_body", "leak_key", "leak_key_error", "refusal", "length", "tool_call", "401",
          "invalid_arguments", "unknown_tool", "non_menu_id", "repeat_id", "no_tool_call", "long_rationale",
          "leak_masked_key", "leak_masked_key_error")
TOOL_FAULTS = ("invalid_arguments", "unknown_tool", "non_menu_id", "repeat_id", "no_tool_call", "long_rationale")
"""Faults of tool-call requests (a body with ``tools``); ``invalid_json`` / ``off_menu`` map to the first / third."""

MASK_STYLES: dict[str, Callable[[str], str]] = {
    "openai": lambda k: f"{k[:5]}{'*' * 5}{k[-9:]}",           # Incorrect API key provided: sk-RL*****b8a6f0e5d
    "openai-long": lambda k: f"{k[:8]}{'*' * max(len(k) - 12, 3)}{k[-4:]}",
    "ellipsis": lambda k: f"{k[:3]}…{k[-4:]}",                     # sk-…e5d0 (console style)
    "dots": lambda k: f"{k[:7]}...{k[-4:]}",
    "x": lambda k: f"{'x' * max(len(k) - 4, 3)}{k[-4:]}",
    "bullets": lambda k: f"{'•' * 8}{k[-4:]}",
    "head": lambda k: f"{k[:6]}{'*' * 12}",
}
"""How providers echo a key in an error: ``mask_style`` picks one (the fake echoes the key it received)."""

_LEDGER_ROW = re.compile(r"^\d\d \| (\S+) \|", re.MULTILINE)


def scripted_tool_call(body: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The fake server's default tool call: the forced tool (else the first offered one); each enum argument takes
    the last enum value that is neither a ledger row's ID (``NN | ID | ...`` lines) nor used by an earlier call;
    on a forced turn the arguments repeat the first earlier call's (a tested choice); strings say ``scripted``."""
    tools = [t["function"] for t in body.get("tools", [])]
    choice = body.get("tool_choice")
    forced = choice.get("function", {}).get("name") if isinstance(choice, dict) else None
    fn: dict[str, Any] = next((t for t in tools if t["name"] == forced),
                              tools[0] if tools else {"name": "none", "parameters": {}})
    used: list[Any] = []
    shown: set[str] = set()
    for m in body.get("messages", []):
        if m.get("role") == "assistant":
            for c in m.get("tool_calls") or []:
                try:
                    used += list(json.loads(c["function"]["arguments"]).values())
                except (json.JSONDecodeError, KeyError, TypeError, AttributeError):
                    continue
        elif m.get("role") == "user":
            shown.update(_LEDGER_ROW.findall(str(m.get("content") or "")))
    props = fn.get("parameters", {}).get("properties", {})
    first_call: dict[str, Any] | None = None
    for m in body.get("messages", []):
        for c in (m.get("tool_calls") or []) if m.get("role") == "assistant" else []:
            try:
                first_call = first_call or json.loads(c["function"]["arguments"])
            except (json.JSONDecodeError, KeyError, TypeError):
                continue
    args: dict[str, Any] = {}
    for k, sch in props.items():
        if forced is not None and first_call is not None and k in first_call:
            args[k] = first_call[k]
        elif "enum" in sch:
            free = [v for v in sch["enum"] if v not in used and v not in shown] or list(sch["enum"])
            args[k] = free[-1]
        else:
            args[k] = "scripted"
    return str(fn["name"]), args


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 512

    def handle_error(self, request: Any, client_address: Any) -> None:  # quiet: clients disconnect on timeouts
        return None


class FakeOpenAIServer:
    """Start with ``with FakeOpenAIServer(...) as srv:`` (or ``start()``/``stop()``); ``srv.url`` is the base URL.

    ``api_key``: when set, requests without ``Authorization: Bearer <api_key>`` get HTTP 401, echoing the key they
    carried masked in the provider style ``mask_style`` (see :data:`MASK_STYLES`).
    ``latency_s``: added to every response.  ``noise``: the scripted answer's random-token rate.
    ``response_formats``: the ``response_format`` types accepted (``text`` = none sent); any other is rejected
    with ``reject_status`` and a request-validation body like llama-cpp-python's ("Input should be ...").
    The preflight probe (:data:`PROBE_PROMPT`) is answered without fault injection and logged in ``probes``,
    not in ``log``/``n_requests``; ``hits`` counts every POST.
    """

    def __init__(self, *, rule: str = "mean", latency_s: float = 0.0, faults: Mapping[str, float] | None = None,
                 seed: int = 0, policy: Callable[[str, int], str] | None = None, model: str | None = None,
                 api_key: str | None = None, echo_input: bool = True, timeout_sleep_s: float = 5.0,
                 service_tier: str = "default", noise: float = 0.0,
                 tool_policy: Callable[[Mapping[str, Any]], tuple[str, Mapping[str, Any]]] | None = None,
                 response_formats: tuple[str, ...] = ("json_schema", "json_object", "text"),
                 reject_status: int = 500, mask_style: str = "openai") -> None:
        for f in (faults or {}):
            if f not in FAULTS:
                raise ConfigError(f"unknown fault {f!r}; use {FAULTS}")
        if sum((faults or {}).values()) > 1.0 + 1e-12:
            raise ConfigError("fault probabilities must sum to at most 1")
        self.rule = rule
        self.latency_s = float(latency_s)
        self.faults = dict(faults or {})
        self.seed = int(seed)
        self.policy = policy
        self.model = model
        self.api_key = api_key
        self.echo_input = echo_input
        self.timeout_sleep_s = float(timeout_sleep_s)
        self.service_tier = service_tier
        self.noise = float(noise)
        self.tool_policy = tool_policy or scripted_tool_call
        self.response_formats = tuple(response_formats)
        self.reject_status = int(reject_status)
        self.mask = MASK_STYLES[mask_style]
        self.probes: list[str] = []  # response_format type of each preflight probe (never fault-injected)
        self.hits = 0                # every POST, probes and rejected requests included
        self.seen: Counter[str] = Counter()
        self.log: list[tuple[str, int, str]] = []  # (prompt sha256, occurrence, fault)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("server not started")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> FakeOpenAIServer:
        handler = _make_handler(self)
        self._server = _Server(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def n_requests(self) -> int:
        with self._lock:
            return len(self.log)

    # ------------------------------------------------------------------ behaviour

    def choose_fault(self, sha: str, occurrence: int) -> str:
        if self.policy is not None:
            return self.policy(sha, occurrence)
        if not self.faults:
            return "ok"
        x = float(derive_rng(self.seed, "fault", sha, occurrence).random())
        acc = 0.0
        for name, p in self.faults.items():
            acc += p
            if x < acc:
                return name
        return "ok"

    def sleep(self, seconds: float) -> None:
        self._stop.wait(seconds)

    def answer(self, content: str, body: Mapping[str, Any], sha: str, occurrence: int) -> dict[str, str]:
        n = _n_items(body, content)
        rng = derive_rng(self.seed, "answer", sha, occurrence)
        toks = scripted_tokens(content, self.rule, noise=self.noise, rng=rng)
        if toks is None:
            return {}
        return {item_key(i): t for i, t in enumerate(toks[:n])}


def _n_items(body: Mapping[str, Any], content: str) -> int:
    try:
        return len(body["response_format"]["json_schema"]["schema"]["required"])
    except (KeyError, TypeError):
        return content.count("=== Item ")


def _make_handler(srv: FakeOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 10
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            return None

        def _send(self, code: int, payload: bytes, headers: Mapping[str, str] | None = None,
                  ctype: str = "application/json") -> None:
            lines = [f"HTTP/1.1 {code} {self.responses.get(code, ('',))[0]}", f"Content-Type: {ctype}",
                     f"Content-Length: {len(payload)}", *(f"{k}: {v}" for k, v in (headers or {}).items())]
            try:
                self.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload)  # one send
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        def _error(self, code: int, message: str, headers: Mapping[str, str] | None = None) -> None:
            body = json.dumps({"error": {"message": message, "type": "fake_error", "code": str(code)}})
            self._send(code, body.encode(), headers)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._error(404, f"no route {self.path}")
                return
            with srv._lock:
                srv.hits += 1
            auth = self.headers.get("Authorization") or ""
            if srv.api_key is not None and auth != f"Bearer {srv.api_key}":
                given = auth.removeprefix("Bearer ")
                self._error(401, f"Incorrect API key provided: {srv.mask(given)}" if given else "invalid API key")
                return
            try:
                body = json.loads(raw)
                msgs = body["messages"]
                content = next(m["content"] for m in reversed(msgs) if m.get("role") == "user")
            except (json.JSONDecodeError, KeyError, StopIteration, TypeError):
                self._error(400, "malformed request")
                return
            rf = body.get("response_format")
            kind = rf.get("type", "?") if isinstance(rf, dict) else "text"
            if content == PROBE_PROMPT:
                with srv._lock:
                    srv.probes.append(kind)
            if kind not in srv.response_formats:
                allowed = " or ".join(f"'{k}'" for k in srv.response_formats if k != "text") or "absent"
                self._error(srv.reject_status, f"1 validation error for CreateChatCompletionRequest\nresponse_format"
                                               f".type\n  Input should be {allowed} [type=literal_error]")
                return
            if content == PROBE_PROMPT:
                self._respond("ok", body, content, "probe", 0, auth)
                return
            echo = content
            if body.get("tools"):  # tool turns: the digest of the canonical request body (the client's prompt digest)
                echo = canonical_json(body)
            sha = hashlib.sha256(echo.encode("utf-8")).hexdigest()
            with srv._lock:
                occ = srv.seen[sha]
                srv.seen[sha] += 1
                fault = srv.choose_fault(sha, occ)
                srv.log.append((sha, occ, fault))
            if srv.latency_s > 0:
                srv.sleep(srv.latency_s)
            self._respond(fault, body, content, sha, occ, auth)

        def _respond(self, fault: str, body: dict[str, Any], content: str, sha: str, occ: int, auth: str) -> None:
            if fault == "timeout":
                srv.sleep(srv.timeout_sleep_s)
                self.close_connection = True
                return
            if fault in ("429", "503"):
                self._error(int(fault), "capacity exceeded, retry later", {"Retry-After": "0"})
                return
            if fault == "500":
                self._error(500, "internal error")
                return
            if fault == "401":
                self._error(401, "invalid API key")
                return
            if fault == "leak_key_error":
                self._error(500, f"upstream failure; request carried {auth}")
                return
            if fault == "leak_masked_key_error":
                self._error(500, f"upstream failure for key {srv.mask(auth.removeprefix('Bearer '))}")
                return
            if fault == "garbage_body":
                self._send(200, b"<html>not json", ctype="application/json")
                return
            if body.get("tools"):
                self._respond_tool(fault, body, content, sha, occ, auth)
                return
            ans = srv.answer(content, body, sha, occ)
            text: str | None = canonical_json(ans)
            finish = "stop"
            refusal = None
            tool_calls = None
            if fault == "invalid_json":
                text = text[:-1] if text else "{"
            elif fault == "off_menu":
                text = canonical_json({k: "not-a-menu-label" for k in ans} or {"item_01": "not-a-menu-label"})
            elif fault == "empty":
                text = ""
            elif fault == "leak_key":
                text = f"my credentials are {auth}"
            elif fault == "leak_masked_key":
                text = f"my key is {srv.mask(auth.removeprefix('Bearer '))}"
            elif fault == "refusal":
                text, refusal = None, "I cannot help with that."
            elif fault == "length":
                text, finish = (text or "")[:3], "length"
            elif fault == "tool_call":
                tool_calls = [{"id": "call_1", "type": "function",
                               "function": {"name": "lookup", "arguments": "{}"}}]
            model = srv.model or body.get("model", "fake")
            if fault == "wrong_model":
                model = "some-other-model"
            headers = {}
            if srv.echo_input:
                headers["x-input-sha256"] = ("0" * 64) if fault == "echo_mismatch" else sha
            if body.get("reasoning_effort") is not None:
                headers["x-reasoning-effort"] = str(body["reasoning_effort"])
            n_in = max(1, len(content) // 4)
            n_out = max(1, len(text or "") // 4)
            payload = {
                "id": f"chatcmpl-{sha[:12]}-{occ}", "object": "chat.completion", "created": int(time.time()),
                "model": model, "service_tier": srv.service_tier, "system_fingerprint": "fp_fake",
                "choices": [{"index": 0, "finish_reason": finish, "logprobs": None,
                             "message": {"role": "assistant", "content": text, "refusal": refusal,
                                         **({"tool_calls": tool_calls} if tool_calls else {})}}],
                "usage": {"prompt_tokens": n_in, "completion_tokens": n_out + 3, "total_tokens": n_in + n_out + 3,
                          "prompt_tokens_details": {"cached_tokens": n_in // 2},
                          "completion_tokens_details": {"reasoning_tokens": 3}},
            }
            self._send(200, json.dumps(payload).encode(), headers)

        def _respond_tool(self, fault: str, body: dict[str, Any], content: str, sha: str, occ: int,
                          auth: str) -> None:
            fault = {"invalid_json": "invalid_arguments", "off_menu": "non_menu_id"}.get(fault, fault)
            name, args0 = srv.tool_policy(body)
            args = dict(args0)
            enum_keys = [k for k, v in _tool_props(body, name).items() if "enum" in v]
            text: str | None = None
            if fault == "unknown_tool":
                name = "delete_everything"
            elif fault == "non_menu_id" and enum_keys:
                args[enum_keys[0]] = "NOT-ON-MENU"
            elif fault == "repeat_id" and enum_keys:
                shown = _LEDGER_ROW.findall(content)
                args[enum_keys[0]] = shown[0] if shown else args[enum_keys[0]]
            elif fault == "long_rationale":
                args["rationale"] = "x" * 400
            elif fault == "leak_key":
                text = f"my credentials are {auth}"
            arguments = canonical_json(args)
            if fault == "invalid_arguments":
                arguments = arguments[:-1]
            calls = [] if fault == "no_tool_call" else [
                {"id": f"call_{sha[:8]}_{occ}", "type": "function", "function": {"name": name, "arguments": arguments}}]
            if fault == "no_tool_call":
                text = "I would rather explain my choice in prose."
            model = srv.model or body.get("model", "fake")
            if fault == "wrong_model":
                model = "some-other-model"
            headers = {}
            if srv.echo_input:
                headers["x-input-sha256"] = ("0" * 64) if fault == "echo_mismatch" else sha
            n_in = max(1, len(canonical_json(body.get("messages", []))) // 4)
            n_out = max(1, len(arguments) // 4)
            payload = {
                "id": f"chatcmpl-{sha[:12]}-{occ}", "object": "chat.completion", "created": int(time.time()),
                "model": model, "service_tier": srv.service_tier, "system_fingerprint": "fp_fake",
                "choices": [{"index": 0, "finish_reason": "tool_calls" if calls else "stop", "logprobs": None,
                             "message": {"role": "assistant", "content": text, "refusal": None,
                                         **({"tool_calls": calls} if calls else {})}}],
                "usage": {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out,
                          "prompt_tokens_details": {"cached_tokens": n_in // 2},
                          "completion_tokens_details": {"reasoning_tokens": 0}},
            }
            self._send(200, json.dumps(payload).encode(), headers)

    return Handler


def _tool_props(body: Mapping[str, Any], name: str) -> dict[str, Any]:
    for t in body.get("tools", []):
        fn = t.get("function", {})
        if fn.get("name") == name:
            return dict(fn.get("parameters", {}).get("properties", {}))
    return {}


def main(argv: list[str] | None = None) -> None:
    """``python -m replaylens.llm --latency 0.1``: serve until killed; prints the base URL first."""
    import argparse
    import sys

    ap = argparse.ArgumentParser(description="fault-injecting fake OpenAI-compatible server (127.0.0.1)")
    ap.add_argument("--latency", type=float, default=0.0)
    ap.add_argument("--rule", default="mean")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--api-key", default=None)
    ap.add_argument("--fault", action="append", default=[], metavar="NAME=P", help="fault probability, repeatable")
    args = ap.parse_args(argv)
    faults = {k: float(v) for k, _, v in (f.partition("=") for f in args.fault)}
    srv = FakeOpenAIServer(rule=args.rule, latency_s=args.latency, faults=faults, seed=args.seed,
                           api_key=args.api_key).start()
    print(srv.url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        srv.stop()
        sys.stdout.flush()
