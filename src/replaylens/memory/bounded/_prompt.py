"""Policy calls over retrieved memory text (C1.6): serialization, a scripted stand-in, back-ends, acquisition.

One *item* is one block's decision: the task lines (family and context, or the block name), the
query descriptors, the action menu with descriptions, and the memory's retrieved slot lines (8 slots,
144 characters each, ``EMPTY`` padded) under a ``Records:`` heading.  A request holds one or more
numbered items (``=== Item i of n ===``) and asks for ``{"item_01": ACTION, ...}`` with one enum of
menu tokens per item (menu-row order), the same outer layout as the ledger prompts of
:mod:`replaylens.llm`, so every :class:`~replaylens.llm.Backend` (OpenAI-compatible endpoints, the
embedded model's per-item logit readout and its header prompt cache) reads it unchanged.

:class:`RetrievedMeanBackend` is the scripted agent: it reads each item's retrieved lines from the
prompt text like a model would and applies :func:`~replaylens.memory.retrieved_mean_policy`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from ...llm import (
    FOOTER_TEMPLATE,
    Acquirer,
    AcquireSettings,
    Backend,
    Budget,
    BudgetExhausted,
    Completion,
    ItemDecoder,
    ModelSettings,
    Redactor,
    Request,
    ValidationReport,
    assemble_prompt,
    canonical_json,
    decode_response,
    item_key,
    item_sections,
    make_backend,
    open_store,
    run_sync,
    sha256_text,
)
from ...rng import derive_rng
from ._policy import retrieved_mean_policy

__all__ = [
    "MEMORY_INSTRUCTION",
    "Decision",
    "MemoryItem",
    "MemoryTemplate",
    "RetrievedMeanBackend",
    "acquire_decisions",
    "decide_direct",
    "memory_backend",
    "memory_source_digest",
    "parse_memory_prompt",
    "render_memory_item",
    "render_memory_prompt",
]

MEMORY_INSTRUCTION = (
    "Each record is one slot retrieved from a bounded memory of earlier tasks: the slots nearest to the query "
    "descriptors, nearest first (EMPTY = no slot). action is the action taken, n the number of earlier tasks the "
    "slot summarizes, u their mean measured utility (comparable across actions; higher is better), d1, d2, d3 "
    "their mean descriptors and t their latest logical time. Do not infer or invent outcomes that are not shown. "
    "Choose the action you expect to give the highest utility on the query task."
)

ITEM_TEMPLATE = (
    "{task}"
    "Query descriptors: {query}\n"
    "Actions (choose exactly one):\n"
    "{actions}\n"
    "Memory semantics: {instruction}\n"
    "Records:\n"
    "{records}\n"
)
ANSWER_TEMPLATE = "Answer with exactly one action: {choices}.\nAnswer:"
HEADER_TEMPLATE = (
    "You will make {n} independent decision{s}. Each numbered item is a separate task with its own retrieved "
    "memory; decide each item only from its own text."
)


@dataclass(frozen=True)
class MemoryTemplate:
    """The frozen text of a memory policy call (recorded, with its sha256, in every run manifest)."""

    instruction: str = MEMORY_INSTRUCTION
    item: str = ITEM_TEMPLATE
    answer: str = ANSWER_TEMPLATE
    header: str = HEADER_TEMPLATE
    footer: str = FOOTER_TEMPLATE
    system: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"instruction": self.instruction, "item": self.item, "answer": self.answer, "header": self.header,
                "footer": self.footer, "system": self.system}

    def sha256(self) -> str:
        return sha256_text(canonical_json(self.to_dict()))


@dataclass(frozen=True)
class MemoryItem:
    """One block's decision: task lines, query descriptors, menu (token, description) rows, retrieved lines."""

    task: tuple[tuple[str, str], ...]
    query: tuple[float, ...]
    menu: tuple[tuple[str, str | None], ...]
    retrieved: tuple[str, ...]

    @property
    def tokens(self) -> tuple[str, ...]:
        return tuple(t for t, _ in self.menu)


def _choices(tokens: Sequence[str]) -> str:
    if len(tokens) == 1:
        return tokens[0]
    if len(tokens) == 2:
        return f"{tokens[0]} or {tokens[1]}"
    return ", ".join(tokens[:-1]) + f", or {tokens[-1]}"


def _one_line(text: str) -> str:
    return text.replace("\r", " ").replace("\n", " ")


def render_memory_item(item: MemoryItem, template: MemoryTemplate) -> str:
    """One item's exact text, ending with the answer prefix ``Answer:``."""
    if not item.menu:
        raise ConfigError("a memory decision needs at least one menu action")
    task = "".join(f"{k}: {_one_line(v)}\n" for k, v in item.task)
    query = " ".join(f"d{i + 1}={x:.6f}" for i, x in enumerate(item.query))
    actions = "\n".join(f"- {t}: {d}" if d else f"- {t}" for t, d in item.menu)
    records = "\n".join(_one_line(ln) for ln in item.retrieved) if item.retrieved else "(none)"
    body = template.item.format(task=task, query=query, actions=actions, instruction=template.instruction,
                                records=records)
    return body + template.answer.format(choices=_choices(item.tokens))


def render_memory_prompt(items: Sequence[MemoryItem], template: MemoryTemplate) -> str:
    """The exact user message of one request: header, numbered items, output instruction."""
    return assemble_prompt(template.header, [render_memory_item(it, template) for it in items], template.footer)


def parse_memory_prompt(text: str) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """(menu tokens, retrieved lines) of every item of a memory prompt (what the scripted stand-in reads)."""
    return [(sec.menu, sec.records) for sec in item_sections(text)]


# ---------------------------------------------------------------------------------------------- back-ends

NOISE_META = ("seed", "memory", "stream", "blocks", "history", "repeat")


class RetrievedMeanBackend(Backend):
    """The scripted agent: the Mean rule over each item's retrieved slot lines (read from the prompt text).

    With ``noise`` = ε an item's answer is replaced, with probability ε, by a uniformly drawn menu
    token.  When the request's meta carries the memory design's coordinates (``seed``, ``memory``,
    ``stream``, ``blocks``, ``history``, ``repeat``) the draw for item i comes from
    ``derive_rng(seed, "memory-policy", memory, stream, blocks[i], history, repeat)``, otherwise from
    ``derive_rng(self.seed, "memory-policy", request_id, i)``: fresh repeats disagree at rate ~ε, a
    re-asked request gets the same answer.
    """

    def __init__(self, *, noise: float = 0.0, seed: int = 0) -> None:
        if not 0.0 <= noise <= 1.0:
            raise ConfigError(f"noise must lie in [0, 1]; got {noise}")
        self.noise = float(noise)
        self.seed = int(seed)
        self.settings = ModelSettings("scripted", "scripted/retrieved-mean",
                                      params={"noise": self.noise, "seed": self.seed} if noise else {})

    def tokens(self, request: Request) -> list[str] | None:
        items = parse_memory_prompt(request.prompt)
        if len(items) != request.n_items or any(not menu for menu, _ in items):
            return None
        meta = request.meta
        keyed = all(k in meta for k in NOISE_META)
        out = []
        for i, (menu, lines) in enumerate(items):
            tok = retrieved_mean_policy(lines, menu)
            if self.noise > 0:
                g = (derive_rng(int(meta["seed"]), "memory-policy", str(meta["memory"]), str(meta["stream"]),
                                str(meta["blocks"][i]), str(meta["history"]), int(meta["repeat"])) if keyed
                     else derive_rng(self.seed, "memory-policy", request.request_id, i))
                if g.random() < self.noise:
                    tok = menu[int(g.integers(len(menu)))]
            out.append(tok)
        return out

    async def complete(self, request: Request, timeout: float) -> Completion:
        toks = self.tokens(request)
        text = "{}" if toks is None else canonical_json({item_key(i): t for i, t in enumerate(toks)})
        return Completion(text=text, model=self.settings.model, finish_reason="stop")


def memory_backend(model: str, *, base_url: str | None = None, api_key_env: str | None = "OPENAI_API_KEY",
                   env_file: str | os.PathLike[str] | None = ".env", threads: int | None = None,
                   noise: float = 0.0, seed: int = 0, n_ctx: int = 4096, response_format: str = "auto",
                   local_readout: str = "logits") -> Backend:
    """A back-end for memory prompts: ``scripted/mean`` (:class:`RetrievedMeanBackend`), ``local/PATH.gguf``
    (the embedded model's per-item ``local_readout``: ``logits`` over single-token menu labels, or ``grammar``
    for labels of several tokens; ``threads`` CPU threads) or ``openai/NAME``."""
    provider, _, name = model.partition("/")
    if provider == "scripted":
        if name not in ("mean", "retrieved-mean"):
            raise ConfigError(f"memory prompts have one scripted rule, scripted/mean (the Mean rule over the "
                              f"retrieved slots); got {model!r}")
        return RetrievedMeanBackend(noise=noise, seed=seed)
    return make_backend(model, base_url=base_url, api_key_env=api_key_env, env_file=env_file, seed=seed,
                        n_ctx=n_ctx, n_threads=threads, response_format=response_format, local_readout=local_readout)


# ---------------------------------------------------------------------------------------------- acquisition

@dataclass(frozen=True)
class Decision:
    """The selected decision of one request: semantic actions, displayed tokens and the attempt kind."""

    actions: tuple[str, ...]
    tokens: tuple[str, ...] = ()
    attempt_kind: str | None = None


_SOURCES = ("_prompt.py", "_design.py", "_decisions.py", "_memories.py", "_check.py", "_public.py")


def memory_source_digest() -> str:
    """sha256 over this package's prompt-building and memory modules (recorded in every manifest)."""
    here = Path(__file__).parent
    pairs = sorted((n, hashlib.sha256((here / n).read_bytes()).hexdigest()) for n in _SOURCES if (here / n).exists())
    return hashlib.sha256("".join(f"{n}\0{h}\n" for n, h in pairs).encode()).hexdigest()


def decide_direct(requests: Sequence[Request], backend: Backend, *, timeout_s: float = 60.0) -> dict[str, Decision]:
    """Ask every request once, in order, without a run directory (for fast scripted back-ends only: nothing
    is journaled).  A response that fails the schema is left out."""

    async def go() -> list[Completion]:
        await backend.open()
        try:
            return [await backend.complete(r, timeout_s) for r in requests]
        finally:
            await backend.close()

    out: dict[str, Decision] = {}
    for req, comp in zip(requests, run_sync(go), strict=True):
        d = decode_response(comp.text, req.decoders)
        if d.ok:
            out[req.request_id] = Decision(d.actions, d.tokens, "original")
    return out


@dataclass
class AcquiredDecisions:
    """The gate's report and the selected decision of every decided request."""

    report: ValidationReport
    decisions: dict[str, Decision] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)


def acquire_decisions(requests: Sequence[Request], backend: Backend, run_dir: str | os.PathLike[str],
                      manifest: Mapping[str, Any], *, acquire: AcquireSettings | None = None,
                      order_key: str = "memory", offline: bool = False,
                      spend: Budget | None = None) -> AcquiredDecisions:
    """Freeze ``manifest``, plan ``requests`` in a seeded order, acquire what is missing (resuming), run the
    gate and return the selected decisions.  A finished run is re-read with zero model calls.  ``spend``: a
    request / cost budget (:class:`BudgetExhausted` when reached, after journaling)."""
    acq = acquire or AcquireSettings()
    with open_store(run_dir, manifest, redactor=Redactor(backend.secrets())) as store:
        reqs = store.add_requests(list(requests), order_key=order_key)
        if not offline and any(store.decisions(r.request_id) is None for r in reqs):
            summary = Acquirer(store, backend, acq, budget=spend).run(reqs)
            if summary.access_error is not None:
                raise ConfigError(f"model access failed: {summary.access_error}")
            if summary.budget_stop is not None and summary.failed:
                raise BudgetExhausted(f"budget reached: {summary.budget_stop}; {summary.decided} of {len(reqs)} "
                                      f"requests decided (journaled in {run_dir}); rerun with a higher budget to "
                                      "resume")
        report = store.validate(expected=len(reqs))
        out: dict[str, Decision] = {}
        for r in reqs:
            d = store.decisions(r.request_id)
            if d is None:
                continue
            sel = store.selected(r.request_id) or {}
            out[r.request_id] = Decision(tuple(d), tuple(sel.get("parsed_decisions") or ()), sel.get("kind"))
    return AcquiredDecisions(report, out, list(reqs))


def manifest_core(backend: Backend, acquire: AcquireSettings, template: MemoryTemplate) -> dict[str, Any]:
    """Manifest fields shared by every memory run: settings, acquisition, template, source digests."""
    from ...llm import TRANSPORT_SOURCES, source_digest

    return {"settings": backend.settings.to_dict(), "acquisition": acquire.to_dict(),
            "template": {"sha256": template.sha256(), "fields": template.to_dict()},
            "source_sha256": memory_source_digest(), "transport_sha256": source_digest(TRANSPORT_SOURCES)}


def item_decoder(menu: Sequence[tuple[str, str | None]], decode: Mapping[str, str]) -> ItemDecoder:
    return ItemDecoder(tuple(t for t, _ in menu), dict(decode))
