"""Deciding through a model: the retrieved records in the prompt of the memory back-ends (``replaylens.memory``).

Each decision is one request: the future request's text, the menu, and the top-k records, best first, one line
each (``id=… action=A n=1 u=OUTCOME text=…``; a masked outcome shows ``u=masked``).  ``scripted/mean`` (the Mean
rule over those lines, no model) is asked directly; any other back-end (``local/…``, ``openai/…``) is journaled
under ``run_dir`` in one sub-run per distinct set of requests, so a rerun resumes with zero calls.  Identical
prompts are asked once (the decision is a function of the prompt).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from ._items import MemoryItem

__all__ = ["ModelDecider", "record_line"]


def record_line(it: MemoryItem) -> str:
    u = "masked" if math.isnan(it.outcome) else f"{it.outcome:.6f}"
    return f"id={it.id} action={it.action} n=1 u={u} text={it.text}"


@dataclass(eq=False)
class ModelDecider:
    """Asks ``model`` (``scripted/mean``, ``local/PATH.gguf``, ``local/embedded``, ``openai/NAME``) to decide."""

    model: str
    run_dir: str | None = None
    base_url: str | None = None
    api_key_env: str | None = "OPENAI_API_KEY"
    env_file: str | None = ".env"
    threads: int | None = None
    seed: int = 0
    local_readout: str = "logits"
    """``local/`` models: ``logits`` (menu labels must be single tokens) or ``grammar`` (any labels)."""
    backend: Any = field(init=False, repr=False)

    def __post_init__(self) -> None:
        from ..bounded import memory_backend

        self.backend = memory_backend(self.model, base_url=self.base_url, api_key_env=self.api_key_env,
                                      env_file=self.env_file, threads=self.threads, seed=self.seed,
                                      local_readout=self.local_readout)
        if self.run_dir is None and self.backend.settings.provider != "scripted":
            raise ConfigError(f"deciding through {self.model} needs run_dir (every model call is journaled there)")

    def decide(self, asks: Sequence[tuple[str, Sequence[MemoryItem], tuple[str, ...]]]) -> list[str]:
        """One action per (request text, retrieved records best first, menu)."""
        from ...llm import AcquireSettings, canonical_json, make_request, sha256_text
        from ..bounded import (
            MemoryItem as PromptItem,
        )
        from ..bounded import (
            MemoryTemplate,
            RetrievedMeanBackend,
            acquire_decisions,
            decide_direct,
            item_decoder,
            manifest_core,
            render_memory_prompt,
        )

        tpl = MemoryTemplate()
        digest = self.backend.settings.digest()
        reqs: list[Any] = []
        ids: list[str] = []
        for text, items, menu in asks:
            item = PromptItem(task=(("Request", text),), query=(), menu=tuple((a, None) for a in menu),
                              retrieved=tuple(record_line(it) for it in items))
            req = make_request(render_memory_prompt([item], tpl), [item_decoder(item.menu, {a: a for a in menu})],
                               settings_digest=digest, repeat=0, meta={"source": "retrieval-agent"},
                               system=tpl.system)
            ids.append(req.request_id)
            if req.request_id not in {r.request_id for r in reqs}:
                reqs.append(req)
        if isinstance(self.backend, RetrievedMeanBackend) and self.run_dir is None:
            got = decide_direct(reqs, self.backend)
        else:
            acq = AcquireSettings(concurrency=1 if self.backend.settings.provider == "local" else 8)
            key = sha256_text(canonical_json(sorted(r.request_id for r in reqs)))[:16]
            manifest = {"experiment": "retrieval-agent-decisions", "protocol_version": 1,
                        **manifest_core(self.backend, acq, tpl), "expected_requests": len(reqs),
                        "items_per_request": 1}
            got = acquire_decisions(reqs, self.backend, Path(str(self.run_dir)) / key, manifest, acquire=acq,
                                    order_key="retrieval").decisions
        out = []
        for rid, (text, _, _) in zip(ids, asks, strict=True):
            d = got.get(rid)
            if d is None or not d.actions:
                raise ConfigError(f"{self.model} gave no valid decision for the request {text!r}")
            out.append(str(d.actions[0]))
        return out
