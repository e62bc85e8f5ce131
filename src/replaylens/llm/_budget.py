"""Cost before and during a model audit: token counting, prices, the no-call estimate and run budgets.

* :class:`Pricing` — USD per million input / output tokens (``--price-in``/``--price-out`` or a pricing file);
* :class:`TokenCounter` — the model's own tokenizer where one is available locally (a GGUF file read with
  ``llama_cpp.Llama(vocab_only=True)``, with its chat template), else the declared, calibrated approximation
  :data:`APPROXIMATION`;
* :func:`estimate_requests` — requests, input and output tokens and cost of planned requests, no call made;
* :class:`Budget` — ``--max-requests`` / ``--max-cost``, counted over the whole run directory (every journaled
  attempt, this invocation's and earlier ones'), checked before each attempt.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ._serialize import canonical_json, item_key
from ._types import Request

__all__ = ["APPROXIMATION", "Budget", "approx_tokens", "Pricing", "TokenCounter", "estimate_requests", "load_pricing",
           "max_answer", "usage_by_cell"]

APPROX_PIECES = re.compile(r" ?[A-Za-z]+|[0-9]| ?[^\sA-Za-z0-9]+|\s+")
"""Pre-tokenizer pieces (GPT-2 style: words with their leading space, single digits, punctuation runs,
whitespace runs — a run of padding is one piece, never characters / 4)."""
APPROX_TOKENS_PER_PIECE = 1.19
"""Tokens per piece, measured on the built-in example with the embedded SmolLM2 tokenizer (1.188 json_object,
1.186 json_schema; ``python scripts/calibrate_tokens.py``)."""
APPROX_PER_MESSAGE = 7
"""Chat-template tokens per message (role markers and separators; 7.00 measured the same way)."""
APPROXIMATION = (f"approximation: tokens = {APPROX_TOKENS_PER_PIECE:g} × pre-tokenizer pieces (words, digits, "
                 f"punctuation and whitespace runs) + {APPROX_PER_MESSAGE} per message, calibrated on the "
                 "built-in example")


def approx_tokens(text: str) -> int:
    """The stated approximation of a text's token count (:data:`APPROXIMATION`)."""
    return math.ceil(APPROX_TOKENS_PER_PIECE * len(APPROX_PIECES.findall(text)))


def _chat_counter(llm: Any) -> Callable[[Sequence[Mapping[str, str]]], int] | None:
    """Tokens of a chat request rendered with the GGUF's own chat template (what a llama.cpp server feeds the
    model), or None when the file carries no template."""
    meta = getattr(llm, "metadata", None) or {}
    template = meta.get("tokenizer.chat_template")
    if not template:
        return None
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    def piece(key: str) -> str:
        i = meta.get(key)
        return llm.detokenize([int(i)], special=True).decode("utf-8", "replace") if i is not None else ""

    fmt = Jinja2ChatFormatter(template, eos_token=piece("tokenizer.ggml.eos_token_id"),
                              bos_token=piece("tokenizer.ggml.bos_token_id"))

    def count(messages: Sequence[Mapping[str, str]]) -> int:
        msgs: list[Any] = [dict(m) for m in messages]
        prompt = fmt(messages=msgs).prompt
        return len(llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=True))

    return count


@dataclass(frozen=True)
class Pricing:
    """USD per million input and output tokens (None: no price given, cost not computed)."""

    price_in: float | None = None
    price_out: float | None = None

    def __post_init__(self) -> None:
        for v in (self.price_in, self.price_out):
            if v is not None and not (math.isfinite(v) and v >= 0):
                raise ConfigError(f"prices must be finite and >= 0; got {v}")

    @property
    def known(self) -> bool:
        return self.price_in is not None and self.price_out is not None

    def cost(self, input_tokens: float, output_tokens: float) -> float | None:
        if not self.known:
            return None
        assert self.price_in is not None and self.price_out is not None
        return (input_tokens * self.price_in + output_tokens * self.price_out) / 1e6


def load_pricing(path: str | os.PathLike[str] | None, model: str, price_in: float | None,
                 price_out: float | None) -> Pricing:
    """Prices from the command line, else from a JSON pricing file: ``{"input": X, "output": Y}`` or
    ``{"MODEL": {"input": X, "output": Y}, ...}`` (USD per million tokens; ``MODEL`` as given to --model)."""
    if path is None or (price_in is not None and price_out is not None):
        return Pricing(price_in, price_out)
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{p}: cannot read the pricing file: {exc}") from None
    entry = data.get(model) if isinstance(data, dict) and model in data else data
    if not isinstance(entry, dict) or not {"input", "output"} <= set(entry):
        raise ConfigError(f"{p}: field 'input'/'output' missing (for model {model!r}); expected "
                          '{"input": USD_PER_M, "output": USD_PER_M} or {"MODEL": {...}}')
    try:
        return Pricing(price_in if price_in is not None else float(entry["input"]),
                       price_out if price_out is not None else float(entry["output"]))
    except (TypeError, ValueError):
        raise ConfigError(f"{p}: field 'input'/'output' must be numbers") from None


class TokenCounter:
    """Counts tokens with a GGUF model's tokenizer (``gguf`` given and llama-cpp-python installed) — a chat
    request through the model's own chat template, as a llama.cpp server renders it — else with the declared
    approximation :data:`APPROXIMATION`.  ``method`` says which, for the output."""

    def __init__(self, gguf: str | None = None) -> None:
        self._tok: Callable[[str], int] | None = None
        self._chat: Callable[[Sequence[Mapping[str, str]]], int] | None = None
        self.method = APPROXIMATION
        if gguf is not None:
            try:
                import llama_cpp
            except ImportError:
                return
            llm = llama_cpp.Llama(model_path=gguf, vocab_only=True, verbose=False)
            self._tok = lambda text: len(llm.tokenize(text.encode("utf-8"), add_bos=True, special=True))
            self._chat = _chat_counter(llm)
            self.method = f"the model's own tokenizer ({Path(gguf).name}, llama_cpp vocab_only)"

    @classmethod
    def named(cls, tokenizer: str) -> TokenCounter:
        """The tokenizer a user names: a GGUF file, or ``embedded`` (the bundled SmolLM2); one clear line when
        it cannot be loaded."""
        from ._local import embedded_model_path, llama_available

        if not llama_available():
            raise ConfigError("--tokenizer needs llama-cpp-python: install the local extra (pip install "
                              "'replaylens[local]')")
        path = embedded_model_path() if tokenizer == "embedded" else tokenizer
        if path is None or not Path(path).is_file():
            raise ConfigError(f"--tokenizer {tokenizer}: no such GGUF file" if tokenizer != "embedded" else
                              "--tokenizer embedded: the embedded model is not installed (the local extra)")
        return cls(path)

    @property
    def exact(self) -> bool:
        return self._tok is not None

    def count(self, text: str) -> int:
        if self._tok is not None:
            return self._tok(text)
        return approx_tokens(text)

    def count_messages(self, messages: Sequence[Mapping[str, str]]) -> int:
        """Input tokens of one chat request: rendered with the model's chat template when known, else each
        message's text plus :data:`APPROX_PER_MESSAGE` template tokens."""
        if self._chat is not None:
            try:
                return self._chat(messages)
            except Exception:  # an unusual template: fall back to the per-message count
                self._chat = None
        per = 0 if self._tok is not None else APPROX_PER_MESSAGE
        return sum(self.count(m["content"]) + per for m in messages)


GRAMMAR_SPACE = "\n" + " " * 20
"""The widest whitespace llama.cpp's JSON-schema grammar allows at each separator (``"\n" [ \t]{0,20}``)."""


def max_answer(request: Request, wide: bool = False) -> str:
    """The longest schema-valid answer of a request (each item's longest menu token): the output bound.

    ``wide``: with the widest whitespace a schema grammar allows around every token (``json_object`` /
    ``text`` modes, where the model, not the server, lays out the JSON)."""
    items = {item_key(i): max(d.enum, key=len) if d.enum else "" for i, d in enumerate(request.decoders)}
    if not wide:
        return canonical_json(items)
    w = GRAMMAR_SPACE
    body = f"{w},{w}".join(f"{json.dumps(k)}{w}:{w}{json.dumps(v, ensure_ascii=False)}" for k, v in items.items())
    return "{" + w + body + w + "}" + w


def estimate_requests(requests: Sequence[Request], *, counter: TokenCounter, pricing: Pricing,
                      messages: Callable[[Request], Sequence[Mapping[str, str]]] | None = None,
                      max_tokens: int | None = None, group: Callable[[Request], str] | None = None,
                      wide: bool = False) -> dict[str, Any]:
    """Requests, input and output tokens and cost of ``requests`` (no call is made).

    Input: the request's messages counted with ``counter`` (with the model's chat template when known).  Output: the
    longest schema-valid answer (``max_tokens`` when given, the cap a server applies), an upper bound.
    ``group`` splits the totals (e.g. per cell).
    """
    msgs = messages or (lambda r: r.messages())
    tot: dict[str, Any] = {"requests": 0, "input_tokens": 0, "output_tokens": 0}
    groups: dict[str, dict[str, Any]] = {}
    for r in requests:
        t_in = counter.count_messages(msgs(r))
        t_out = max_tokens if max_tokens is not None else counter.count(max_answer(r, wide)) + 1  # + end token
        for d in [tot, *([groups.setdefault(group(r), {"requests": 0, "input_tokens": 0, "output_tokens": 0})]
                         if group is not None else [])]:
            d["requests"] += 1
            d["input_tokens"] += t_in
            d["output_tokens"] += t_out
    for d in [tot, *groups.values()]:
        d["cost_usd"] = pricing.cost(d["input_tokens"], d["output_tokens"])
    return {**tot, "tokenizer": counter.method,
            "output_bound": f"max_tokens = {max_tokens}" if max_tokens is not None
            else "the longest schema-valid answer per request" + (" with the widest whitespace the schema grammar "
                                                                  "allows" if wide else "") + ", plus its end token",
            "price_in_usd_per_m": pricing.price_in, "price_out_usd_per_m": pricing.price_out,
            **({"groups": groups} if group is not None else {})}


def attempt_tokens(attempt: Mapping[str, Any], prompt_chars: int) -> tuple[int, int, bool]:
    """(input, output, reported) tokens of a journaled attempt: the server's usage, else ceil(chars / 4)."""
    use = attempt.get("usage") or {}
    if use.get("input_tokens") is not None and use.get("output_tokens") is not None:
        return int(use["input_tokens"]), int(use["output_tokens"]), True
    raw = attempt.get("raw_response") or ""
    return math.ceil(prompt_chars / 4), math.ceil(len(raw) / 4), False


@dataclass(frozen=True)
class Budget:
    """Run budget: at most ``max_requests`` attempts and ``max_cost`` USD over the run directory.

    Checked before each attempt; with concurrency c, at most c − 1 attempts already in flight can finish after
    the cost limit is seen to be reached.  Cost uses the server's reported usage, else ceil(chars / 4).
    """

    max_requests: int | None = None
    max_cost: float | None = None
    pricing: Pricing = Pricing()

    def __post_init__(self) -> None:
        if self.max_requests is not None and self.max_requests < 0:
            raise ConfigError(f"--max-requests must be >= 0; got {self.max_requests}")
        if self.max_cost is not None:
            if not (math.isfinite(self.max_cost) and self.max_cost >= 0):
                raise ConfigError(f"--max-cost must be a finite number >= 0; got {self.max_cost}")
            if not self.pricing.known:
                raise ConfigError("--max-cost needs prices: --price-in and --price-out (USD per million tokens) "
                                  "or --pricing FILE")

    def reached(self, requests: int, cost: float) -> str | None:
        """Why no further attempt may start (None: within budget)."""
        if self.max_requests is not None and requests >= self.max_requests:
            return f"--max-requests {self.max_requests} reached ({requests} requests made in this run directory)"
        if self.max_cost is not None and cost >= self.max_cost:
            return f"--max-cost {self.max_cost:g} USD reached ({cost:.6f} USD spent in this run directory)"
        return None

    def spent(self, store: Any) -> tuple[int, float]:
        """(journaled attempts, their cost) over a whole run directory (a :class:`RunStore`)."""
        n, cost = 0, 0.0
        for rid, atts in store.attempts.items():
            row = store.plan.get(rid)
            chars = 0
            if row is not None:
                chars = len(store.prompt_text(row["prompt_sha256"]))
                if row.get("system_sha256"):
                    chars += len(store.prompt_text(row["system_sha256"]))
            for a in atts:
                n += 1
                cost += self.attempt_cost(a, chars)
        return n, cost

    def after(self, requests: int, cost: float) -> Budget:
        """What is left of this budget once ``requests`` / ``cost`` were spent elsewhere (an earlier phase)."""
        return Budget(None if self.max_requests is None else max(self.max_requests - requests, 0),
                      None if self.max_cost is None else max(self.max_cost - cost, 0.0), self.pricing)

    def attempt_cost(self, attempt: Mapping[str, Any], prompt_chars: int) -> float:
        t_in, t_out, _ = attempt_tokens(attempt, prompt_chars)
        return self.pricing.cost(t_in, t_out) or 0.0


def usage_by_cell(store: Any, pricing: Pricing) -> dict[str, dict[str, Any]]:
    """Requests, attempts, decided requests, tokens and cost per cell (plan entries' ``cell``) of a run store."""
    out: dict[str, dict[str, Any]] = {}
    for rid, row in store.plan.items():
        cell = str((row.get("meta") or {}).get("cell", "unattributed"))
        d = out.setdefault(cell, {"requests": 0, "decided": 0, "attempts": 0, "input_tokens": 0,
                                  "output_tokens": 0, "usage_reported": True})
        d["requests"] += 1
        d["decided"] += store.next_step(rid) is None
        chars = len(store.prompt_text(row["prompt_sha256"])) if row.get("prompt_sha256") else 0
        for a in store.attempts.get(rid, []):
            t_in, t_out, rep = attempt_tokens(a, chars)
            d["attempts"] += 1
            d["input_tokens"] += t_in
            d["output_tokens"] += t_out
            d["usage_reported"] = d["usage_reported"] and rep
    for d in out.values():
        d["cost_usd"] = pricing.cost(d["input_tokens"], d["output_tokens"])
    return out
