"""An LLM-backed ReplayLens agent: a whole-history reader that serializes the stratum's visible ledger.

Per decision it renders one prompt item (the paper's layout), asks the model through the
acquisition layer (every attempt journaled in the run directory, so an interrupted audit
resumes without re-asking) and decodes the answer token back to a menu label.  The agent is
stochastic: the repeat key of each request is the first draw of the engine's per-decision
generator, so fresh repeats (and different cells, maps or draws) are fresh calls, while the
array path, the per-record path and any re-run of the same decision hit the same cache entry.
"""

from __future__ import annotations

import hashlib
import os
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..agents import Agent, FutureInput, HistoryReader, QueryBatch, RecordBatch, Visible
from ..errors import AgentError, ConfigError
from ._acquire import Acquirer, AcquireSettings, AcquireSummary
from ._backends import Backend, prepare_backend
from ._budget import Budget
from ._cache import with_cache
from ._factory import make_backend
from ._secrets import Redactor
from ._serialize import (
    Binding,
    ItemDecoder,
    MenuRow,
    PromptItem,
    PromptTemplate,
    ShownRecord,
    TextNamespace,
    render_prompt,
    resolve_namespace,
)
from ._store import RunStore, open_store
from ._types import BudgetExhausted, Request, make_request

__all__ = ["LLMAgent", "display_model_name", "make_agent", "source_digest"]

MODES = ("online", "plan", "estimate")
PROMPT_SOURCES = ("_serialize.py", "_agent.py")
TRANSPORT_SOURCES = ("_types.py", "_backends.py", "_acquire.py", "_store.py", "_secrets.py", "_budget.py")


def source_digest(names: Sequence[str]) -> str:
    """sha256 over the sorted (path, sha256) pairs of this package's source files ``names``."""
    here = Path(__file__).parent
    pairs = sorted((n, hashlib.sha256((here / n).read_bytes()).hexdigest()) for n in names if (here / n).exists())
    return hashlib.sha256("".join(f"{n}\0{h}\n" for n, h in pairs).encode()).hexdigest()


def display_model_name(model: str) -> str:
    """The model's name for reports: ``local/PATH.gguf`` → the GGUF file's stem (never a filesystem path)."""
    provider, _, name = model.partition("/")
    if provider == "local":
        return f"local/{Path(name).stem}"
    return model


class LLMAgent:
    """The LLM agent (see the module docstring).  Build it with :func:`make_agent`.

    ``actions``: the action vocabulary in canonical order, or a mapping label → description (also
    in canonical order); required for token namespaces.  ``domains`` / ``contexts`` map family /
    context names to the text shown.  ``ledger="block"`` shows the stratum's own block (the paper's
    displayed ledger; a stratum without a block sees an empty ledger), ``"stream"`` every visible
    record.  ``mode="plan"`` only writes plan entries (no calls; placeholder answers), ``mode="estimate"``
    only collects the requests in :attr:`estimated` (nothing written, no call), and ``offline=True`` serves
    recorded decisions only (a missing one is an error).  ``budget`` (set any time before acquisition) stops
    acquisition cleanly with :class:`BudgetExhausted`; ``cell_layout`` = (cell names, draws, maps) of the
    replay plan tags each array-path request with its cell (for usage per cell).
    """

    def __init__(self, backend: Backend, run_dir: str | os.PathLike[str], *,
                 namespace: str | TextNamespace = "arm",
                 actions: Sequence[str] | Mapping[str, str] | None = None,
                 domains: Mapping[str, str] | None = None, contexts: Mapping[str, str] | None = None,
                 template: PromptTemplate | None = None, acquire: AcquireSettings | None = None,
                 seed: int = 0, mode: str = "online", offline: bool = False, ledger: str = "block",
                 name: str = "llm", chunk: int = 4096, spec: Mapping[str, Any] | None = None) -> None:
        if mode not in MODES:
            raise ConfigError(f"mode must be one of {MODES}; got {mode!r}")
        if ledger not in ("block", "stream"):
            raise ConfigError(f"ledger must be 'block' or 'stream'; got {ledger!r}")
        self.backend = backend
        self.run_dir = Path(run_dir)
        self.namespace = resolve_namespace(namespace)
        if isinstance(actions, Mapping):
            self.vocabulary: tuple[str, ...] | None = tuple(actions)
            self.descriptions: dict[str, str] | None = {str(k): str(v) for k, v in actions.items()}
        else:
            self.vocabulary = None if actions is None else tuple(actions)
            self.descriptions = None
        if self.vocabulary is None and not self.namespace.readable:
            raise ConfigError(f"namespace {self.namespace.name!r} binds tokens to labels by vocabulary index: "
                              "pass `actions` (the labels in canonical order)")
        self.binding = Binding(self.namespace, self.vocabulary or ())
        self.domains = dict(domains or {})
        self.contexts = dict(contexts or {})
        self.template = template or PromptTemplate()
        self.acquire_settings = acquire or AcquireSettings()
        self.seed = int(seed)
        self.mode = mode
        self.offline = bool(offline)
        self.ledger = ledger
        self.name = name
        self.chunk = int(chunk)
        self.spec = dict(spec or {"name": name})
        self.last_summary: AcquireSummary | None = None
        self.budget: Budget | None = None
        self.cell_layout: tuple[tuple[str, ...], int, int] | None = None
        self.estimated: dict[str, Request] = {}
        self._prepared = False
        self._store: RunStore | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None

    # ------------------------------------------------------------------ audit hooks

    def bind_plan(self, cell_names: Sequence[str], n_draws: int, n_maps: int) -> None:
        """Tag each array-path request with its replay cell (history rows are ordered stream, cell, draw, map),
        so token usage can be reported per cell."""
        self.cell_layout = (tuple(cell_names), int(n_draws), int(n_maps))

    def set_budget(self, budget: Budget | None) -> None:
        """Stop acquisition cleanly with :class:`BudgetExhausted` once ``budget`` is reached."""
        self.budget = budget

    def set_mode(self, mode: str) -> None:
        """``online`` (ask the model), ``plan`` (write plan entries only) or ``estimate`` (collect requests only)."""
        if mode not in MODES:
            raise ConfigError(f"mode must be one of {MODES}; got {mode!r}")
        self.mode = mode

    # ------------------------------------------------------------------ provenance

    def manifest(self) -> dict[str, Any]:
        return {
            "experiment": "replay-agent", "protocol_version": 1, "seed": self.seed,
            "settings": self.backend.settings.to_dict(), "acquisition": self.acquire_settings.to_dict(),
            "template": {"sha256": self.template.sha256(), "fields": self.template.to_dict()},
            "namespace": self.namespace.to_dict(),
            "vocabulary": None if self.vocabulary is None else list(self.vocabulary),
            "descriptions": self.descriptions, "domains": self.domains, "contexts": self.contexts,
            "ledger": self.ledger, "items_per_request": 1,
            "schema": "object {item_NN: enum of the displayed menu tokens in menu-row order}, additionalProperties "
                      "false, all keys required",
            "source_sha256": source_digest(PROMPT_SOURCES), "transport_sha256": source_digest(TRANSPORT_SOURCES),
            "seed_registry": {
                "base": self.seed,
                "acquisition_order": "derive_rng(seed, 'acquisition-order', batch, sha256(sorted new request ids))",
                "backoff": "derive_rng(seed, 'backoff', request_id, k)",
                "repeat_key": "first integer drawn from the replay engine's per-decision generator",
            },
        }

    def prepare(self) -> None:
        """Fix what the requests depend on before the first one is built: an OpenAI-compatible back-end's
        structured-output mode (user choice, frozen manifest, or a preflight probe in online mode)."""
        if not self._prepared:
            prepare_backend(self.backend, self.run_dir, probe=self.mode == "online" and not self.offline)
            self._prepared = True

    @property
    def store(self) -> RunStore:
        self.prepare()
        if self._store is None:
            red = Redactor(self.backend.secrets())
            self._store = open_store(self.run_dir, self.manifest(), redactor=red)
            self._finalizer = weakref.finalize(self, self._store.close)
        return self._store

    def close(self) -> None:
        """Release the run directory (also happens when the agent is garbage-collected or at exit)."""
        if self._finalizer is not None:
            self._finalizer()
            self._finalizer = None
        self._store = None

    # ------------------------------------------------------------------ prompts

    def _rows(self, menu: Sequence[str]) -> tuple[MenuRow, ...]:
        if self.descriptions is None:
            desc: list[str | None] = [None] * len(menu)
        else:
            vocab = self.vocabulary or ()
            unknown = [a for a in menu if a not in vocab]
            if unknown:
                raise ConfigError(f"menu labels {unknown} are not in the declared actions {list(vocab)}")
            # descriptions stay with the menu's canonical rows; consistent renaming changes only the tokens
            canon = sorted(menu, key=vocab.index)
            desc = [self.descriptions.get(c) for c in canon]
        shown = self.namespace.joint
        return tuple(MenuRow(self.binding.token(a) if shown else a, d) for a, d in zip(menu, desc, strict=True))

    def build_request(self, family: str, context: str, index: int, menu: Sequence[str],
                      records: Sequence[tuple[str, float]], repeat: int | str,
                      meta: Mapping[str, Any] | None = None) -> Request:
        """The request of one decision (the stratum's displayed ledger, its menu and its repeat key)."""
        self.prepare()
        rows = self._rows(menu)
        shown = [ShownRecord(self.binding.token(k) if not self.namespace.readable else k,
                             None if np.isnan(u) else float(u)) for k, u in records]
        item = PromptItem(domain=self.domains.get(family, family), context=self.contexts.get(context, context),
                          phase="future", index=int(index), menu=rows, records=tuple(shown),
                          dictionary=self.binding.dictionary())
        decoder = ItemDecoder(tuple(r.token for r in rows), {r.token: a for r, a in zip(rows, menu, strict=True)})
        prompt = render_prompt([item], self.template)
        return make_request(prompt, [decoder], settings_digest=self.backend.settings.digest(), repeat=repeat,
                            meta=dict(meta or {}), system=self.template.system)

    # ------------------------------------------------------------------ acquisition

    def decide(self, requests: Sequence[Request]) -> list[str | None]:
        """Plan, acquire (unless offline/plan mode) and return each request's decoded label (None: placeholder)."""
        if self.mode == "estimate":
            for r in requests:
                self.estimated.setdefault(r.request_id, r)
            return [None] * len(requests)
        store = self.store
        store.add_requests(requests, order_key="agent")
        if self.mode == "plan":
            return [None] * len(requests)
        acq = Acquirer(store, self.backend, self.acquire_settings, budget=self.budget)
        summary = acq.run(requests, offline=self.offline)
        self.last_summary = summary
        stats = getattr(self.backend, "stats", None)
        if callable(stats):  # the request cache's counters go into the audit manifest (agent spec)
            self.spec["request_cache"] = stats()
        if summary.access_error is not None:
            raise ConfigError(f"model access failed ({self.backend.settings.model}): {summary.access_error}")
        if summary.budget_stop is not None and any(store.decisions(r.request_id) is None for r in requests):
            raise BudgetExhausted(f"budget reached: {summary.budget_stop}; the run is partial (journaled in "
                                  f"{self.run_dir}); rerun with a higher budget to resume")
        out: list[str | None] = []
        failed: dict[str, int] = {}
        for r in requests:
            d = store.decisions(r.request_id)
            if d is None:
                reason = summary.failed.get(r.request_id, "no decision")
                failed[reason] = failed.get(reason, 0) + 1
                out.append(None)
            else:
                out.append(d[0])
        if failed:
            n = sum(failed.values())
            raise AgentError(
                f"{n} of {len(requests)} LLM decisions have no valid response ({failed}); missing decisions are "
                f"never imputed. Attempts are in {self.run_dir / 'attempts.jsonl'}; capacity/transport failures can "
                "be replaced only under a recorded amendment (replaylens.llm.amend), then rerun the same command")
        return out

    # ------------------------------------------------------------------ per-record path (HistoryReader)

    def _act_one(self, visible: tuple[Visible, ...], task: FutureInput, menu: tuple[str, ...],
                 rng: np.random.Generator) -> str:
        repeat = int(rng.integers(0, 2**63 - 1))
        recs = [(v.key, v.outcome) for v in visible if self.ledger == "stream" or v.task.block == task.stratum]
        req = self.build_request(task.family, task.context, task.index, menu, recs, repeat,
                                 {"stream": task.stream, "family": task.family, "context": task.context,
                                  "task": task.task, "index": task.index, "menu": list(menu)})
        got = self.decide([req])[0]
        return menu[0] if got is None else got

    # ------------------------------------------------------------------ array path (all decisions of a shard at once)

    def act_batch(self, records: RecordBatch, queries: QueryBatch) -> np.ndarray:
        labels = records.labels
        code = {lab: i for i, lab in enumerate(labels)}
        n_q = int(queries.row.shape[0])
        # a task's index within its (stream, stratum): rank among the stream's asked tasks of that stratum
        local: dict[tuple[int, int], list[int]] = {}
        for s, b, t in zip(queries.stream.tolist(), queries.block.tolist(), queries.task.tolist(), strict=True):
            local.setdefault((s, b), []).append(t)
        rank = {k: {t: i for i, t in enumerate(sorted(set(v)))} for k, v in local.items()}
        out = np.empty(n_q, dtype=np.int64)
        for lo in range(0, n_q, self.chunk):
            reqs: list[Request] = []
            for q in range(lo, min(lo + self.chunk, n_q)):
                h = int(queries.row[q])
                n = int(records.cuts[h, int(queries.cut[q])])
                blk = int(queries.block[q])
                vis = records.valid[h, :n]
                if self.ledger == "block":
                    vis = vis & (records.blocks[h, :n] == blk)
                pos = np.flatnonzero(vis)
                recs = [(labels[int(records.keys[h, t])], float(records.outcomes[h, t])) for t in pos]
                menu = tuple(labels[int(c)] for c in queries.menu[q] if c >= 0)
                fam, ctx = records.block_names[blk]
                s, t = int(queries.stream[q]), int(queries.task[q])
                idx = rank[(s, blk)][t]
                repeat = int(np.random.default_rng(int(queries.seed[q])).integers(0, 2**63 - 1))
                meta: dict[str, Any] = {"stream": queries.stream_names[s], "family": fam, "context": ctx,
                                        "task": queries.task_names[t], "index": idx, "menu": list(menu)}
                if self.cell_layout is not None:  # history rows are ordered (stream, cell, draw, map)
                    names, n_draws, n_maps = self.cell_layout
                    meta["cell"] = names[(h // (n_draws * n_maps)) % len(names)]
                reqs.append(self.build_request(fam, ctx, idx, menu, recs, repeat, meta))
            got = self.decide(reqs)
            for q, g in zip(range(lo, lo + len(reqs)), got, strict=True):
                out[q] = int(queries.menu[q][0]) if g is None else code[g]
        return out

    def agent(self) -> Agent:
        reader = HistoryReader(self._act_one, name=self.name, stochastic=True)
        return Agent(self.name, reader, reader, array=self, stochastic=True, task_invariant=False,
                     spec=self.spec)


def make_agent(
    model: str = "scripted/mean",
    *,
    run_dir: str = "replaylens-llm",
    base_url: str | None = None,
    api_key_env: str | None = "OPENAI_API_KEY",
    env_file: str | None = ".env",
    namespace: str = "arm",
    actions: Sequence[str] | Mapping[str, str] | None = None,
    domains: Mapping[str, str] | None = None,
    contexts: Mapping[str, str] | None = None,
    template: str | None = None,
    budget: int | None = 6000,
    concurrency: int = 4,
    timeout_s: float = 180.0,
    retries: int = 3,
    backoff_base_s: float = 1.0,
    backoff_max_s: float = 60.0,
    reasoning_effort: str | None = None,
    service_tier: str | None = None,
    params: dict[str, Any] | None = None,
    structured: bool = True,
    accept_models: Sequence[str] = (),
    noise: float = 0.0,
    seed: int = 0,
    mode: str = "online",
    offline: bool = False,
    ledger: str = "block",
    local_readout: str = "logits",
    response_format: str = "auto",
    cache: str | bool | None = None,
    cache_sampled: bool = False,
) -> Agent:
    """Factory for ``load_agent("replaylens.llm:make_agent", {...})`` / ``--agent replaylens.llm:make_agent``.

    ``model``: ``openai/NAME`` (any OpenAI-compatible endpoint at ``base_url``; key from ``api_key_env``
    in the environment or ``env_file``), ``scripted/RULE`` (mean, sum, count, latest, best; ``noise``
    = probability of a seeded random answer) or ``local/PATH.gguf``.  ``run_dir`` holds the
    provenance (manifest, plan, attempts); rerunning the same audit resumes from it and a finished
    run is re-analysed with zero model calls.  ``template`` is a JSON prompt-template file.
    ``local_readout`` (``local/`` models only): ``"logits"`` (one forward pass, argmax over the menu
    tokens' logits) or ``"grammar"`` (greedy generation constrained to the menu tokens by a GBNF grammar).
    ``cache``: the cross-run request cache (a SQLite path, True for the default path, None/False off);
    ``cache_sampled`` also caches sampled (non-greedy, temperature != 0) answers.
    """
    if model.startswith("local/"):
        from ._local import LlamaCppBackend

        backend: Backend = LlamaCppBackend(model.partition("/")[2], seed=seed, readout=local_readout)
    elif local_readout != "logits":
        raise ConfigError(f"local_readout applies to local/PATH models only; got model {model!r}")
    else:
        backend = make_backend(model, base_url=base_url, api_key_env=api_key_env, env_file=env_file,
                               reasoning_effort=reasoning_effort, service_tier=service_tier, params=params,
                               structured=structured, accept_models=tuple(accept_models), noise=noise,
                               seed=seed, response_format=response_format)
    backend = with_cache(backend, cache, sampled=cache_sampled)
    tpl = PromptTemplate.from_file(template) if template else PromptTemplate()
    tpl = tpl.with_budget(budget)
    acq = AcquireSettings(concurrency=concurrency, timeout_s=timeout_s, retries=retries,
                          backoff_base_s=backoff_base_s, backoff_max_s=backoff_max_s)
    spec = {"name": "llm", "factory": "replaylens.llm:make_agent", "model": model,
            "model_name": display_model_name(model), "response_format": response_format,
            "base_url": backend.settings.base_url,
            "run_dir": str(run_dir), "namespace": namespace, "template_sha256": tpl.sha256(), "ledger": ledger,
            "reasoning_effort": reasoning_effort, "service_tier": service_tier, "params": dict(params or {}),
            "structured": structured, "noise": noise, "seed": seed, "mode": mode,
            "actions": None if actions is None else (dict(actions) if isinstance(actions, Mapping) else list(actions))}
    if model.startswith("local/"):
        spec["local_readout"] = local_readout
    llm = LLMAgent(backend, run_dir, namespace=namespace, actions=actions, domains=domains, contexts=contexts,
                   template=tpl, acquire=acq, seed=seed, mode=mode, offline=offline, ledger=ledger,
                   name=f"llm({display_model_name(model)})", spec=spec)
    return llm.agent()
