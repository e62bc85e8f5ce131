"""The retrieval-memory agent: a writer that ingests every history record into a real store, and a policy that
retrieves the top-k records for a future task and decides by a documented rule.

Decision rule (:func:`decide`, "best retrieved outcome per menu action"):

1. among the k retrieved records, each menu action scores the best (largest) outcome of the retrieved records
   carrying it; masked outcomes (NaN) and actions off the menu are ignored;
2. the action with the highest score wins; an exact tie between actions goes to the action whose best record
   ranks first in the retrieval (the only place the rule reads retrieval order);
3. when no retrieved record carries a menu action with an outcome, the first menu action (canonical order).

The writer's state is the tuple of ingested :class:`MemoryItem` (immutable); the store itself is built by the
policy, once per (transformed history, visible prefix), ingesting the records in history order.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from ...agents import Agent, FutureInput, TaskInput
from ._items import MemoryItem, Retrieved, StoreSpec, build_store, item_from_task, query_store_many, text_of

__all__ = ["RetrievalAgent", "decide", "make_agent"]


def decide(items: Sequence[MemoryItem], menu: Sequence[str]) -> str:
    """The action of the documented rule for records retrieved best first (see the module docstring)."""
    best: dict[str, tuple[float, int]] = {}
    allowed = set(menu)
    for rank, it in enumerate(items):
        if it.action not in allowed or math.isnan(it.outcome):
            continue
        cur = best.get(it.action)
        if cur is None or it.outcome > cur[0]:
            best[it.action] = (it.outcome, rank)
    if not best:
        return menu[0]
    return min(best, key=lambda a: (-best[a][0], best[a][1]))


@dataclass(eq=False)
class RetrievalAgent:
    """Writer and policy of a retrieval-memory agent over the store ``spec`` (top-``k`` retrieval).

    Retrievals are cached per (visible records, query): the decision pass and the retrieval readouts of an
    audit share each store build.
    """

    immutable_state: ClassVar[bool] = True
    """States are tuples ``update`` never mutates: the replay snapshots them without copying."""

    spec: StoreSpec = field(default_factory=StoreSpec)
    k: int = 5
    name: str = "retrieval"
    decider: Any = None
    """A :class:`~replaylens.memory.retrieval._model.ModelDecider`: decide through a model reading the retrieved records
    instead of the rule of :func:`decide`."""
    cache_size: int = 4096
    _cache: OrderedDict[tuple[Hashable, str], Retrieved] = field(default_factory=OrderedDict, repr=False)

    # -- writer
    def init_state(self) -> tuple[MemoryItem, ...]:
        return ()

    def update(self, state: tuple[MemoryItem, ...], task: TaskInput, key: str, outcome: float
               ) -> tuple[MemoryItem, ...]:
        return (*state, item_from_task(task, key, outcome))

    def state_fingerprint(self, state: tuple[MemoryItem, ...]) -> Hashable:
        return tuple(it.key() for it in state)

    # -- retrieval
    def retrieve_many(self, state: tuple[MemoryItem, ...], queries: Sequence[str]) -> list[Retrieved]:
        """Top-k of every query over a store holding ``state`` (one build for the uncached queries)."""
        fp = self.state_fingerprint(state)
        todo = [q for q in dict.fromkeys(queries) if (fp, q) not in self._cache]
        if todo:
            if state:
                with build_store(self.spec, state) as store:
                    got = dict(zip(todo, query_store_many(store, todo, self.k), strict=True))
            else:
                got = {q: Retrieved((), ()) for q in todo}
            for q, r in got.items():
                self._cache[(fp, q)] = r
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        out = []
        for q in queries:
            self._cache.move_to_end((fp, q))
            out.append(self._cache[(fp, q)])
        return out

    def retrieve_fresh(self, state: tuple[MemoryItem, ...], queries: Sequence[str]) -> list[Retrieved]:
        """Top-k of every query over a *new* build of a store holding ``state`` (the cache neither read nor
        written): the same-order rebuild that measures the store's own noise."""
        if not state:
            return [Retrieved((), ()) for _ in queries]
        with build_store(self.spec, state) as store:
            return query_store_many(store, list(queries), self.k)

    def decide_retrieved(self, state: tuple[MemoryItem, ...], texts: Sequence[str], rs: Sequence[Retrieved],
                         menus: Sequence[tuple[str, ...]]) -> list[str]:
        """The decisions of the rule (or the model decider) for given retrievals over ``state``."""
        if self.decider is None:
            return [self._decide(state, r, m) for r, m in zip(rs, menus, strict=True)]
        by_id = {it.id: it for it in state}
        return list(self.decider.decide([(t, [by_id[i] for i in r.ids if i in by_id], m)
                                         for t, r, m in zip(texts, rs, menus, strict=True)]))

    def _decide(self, state: tuple[MemoryItem, ...], r: Retrieved, menu: Sequence[str]) -> str:
        by_id = {it.id: it for it in state}
        return decide([by_id[i] for i in r.ids if i in by_id], menu)

    # -- policy
    def _decide_all(self, state: tuple[MemoryItem, ...], texts: Sequence[str], menus: Sequence[tuple[str, ...]]
                    ) -> list[str]:
        return self.decide_retrieved(state, texts, self.retrieve_many(state, texts), menus)

    def act(self, state: tuple[MemoryItem, ...], task: FutureInput, menu: tuple[str, ...],
            rng: np.random.Generator) -> str:
        return self._decide_all(state, [text_of(task.task, task.metadata)], [menu])[0]

    def act_prefix(self, state: tuple[MemoryItem, ...], tasks: Sequence[FutureInput],
                   menus: Sequence[tuple[str, ...]], rngs: Sequence[np.random.Generator], carry: Any
                   ) -> tuple[Sequence[str], Any]:
        return self._decide_all(state, [text_of(t.task, t.metadata) for t in tasks], menus), carry

    # -- audit hook: retrieval-level readouts of every history cell (see replaylens.memory.retrieval._cells)
    def extra_readouts(self, history: Any, futures: Any, plan: Any, decisions: Any, *, seed: int,
                       n_resamples: int, level: float) -> dict[str, Any]:
        from ._cells import cell_retrieval_readouts

        return {"retrieval": cell_retrieval_readouts(self, history, futures, plan, decisions, seed=seed,
                                                     n_resamples=n_resamples, level=level)}

    def agent(self) -> Agent:
        return Agent(self.name, self, self, spec={"name": self.name, "k": self.k, **self.spec.to_dict()})


def make_agent(backend: str = "exact", embedder: str = "hashing:256", k: int = 5,
               params: Mapping[str, Any] | None = None, batch_size: int | None = None,
               name: str = "retrieval", model: str | None = None, run_dir: str | None = None,
               base_url: str | None = None, api_key_env: str | None = "OPENAI_API_KEY",
               env_file: str | None = ".env", threads: int | None = None, seed: int = 0,
               local_readout: str = "logits") -> Agent:
    """A retrieval-memory agent (``--agent replaylens.memory.retrieval:make_agent``): store ``backend`` with index
    ``params``, ``embedder``, top-``k`` retrieval and the rule of :func:`decide` — or, with ``model``
    (``scripted/mean``, ``local/…``, ``openai/NAME`` at ``base_url``), a model reading the retrieved records in
    its prompt (:mod:`replaylens.memory.retrieval._model`; calls journaled under ``run_dir``; a ``local/`` model
    reads its answer by ``local_readout``: ``logits``, or ``grammar`` when action names are several tokens long)."""
    spec = StoreSpec(backend, dict(params or {}), embedder, batch_size)
    from ._items import check_spec

    check_spec(spec)
    decider = None
    if model is not None:
        from ._model import ModelDecider

        decider = ModelDecider(model, run_dir, base_url, api_key_env, env_file, threads, seed, local_readout)
    agent = RetrievalAgent(spec, int(k), name, decider).agent()
    if model is not None:
        agent = replace(agent, spec={**agent.spec, "model": model,
                                     **({"local_readout": local_readout} if local_readout != "logits" else {})})
    return agent
