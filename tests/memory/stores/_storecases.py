"""Shared cases for the store tests: a small text corpus with planted exact ties, and a builder that skips
(or, under REPLAYLENS_REQUIRE=stores, fails) when a backend's package is not installed."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from conftest import require
from replaylens.errors import ConfigError
from replaylens.memory.stores import EXTRA, Embedder, StoreItem, VectorStore, make_store

TOPICS = ("parser", "cache", "scheduler", "tokenizer", "allocator", "router", "indexer", "compiler")
VERBS = ("fix a crash in the", "speed up the", "add tests for the", "refactor the", "document the")


def corpus(n: int = 40) -> list[StoreItem]:
    """``n`` distinct task texts with metadata (no two texts equal)."""
    out = []
    for i in range(n):
        verb, topic = VERBS[i % len(VERBS)], TOPICS[(i // len(VERBS)) % len(TOPICS)]
        out.append(StoreItem(f"r{i:03d}", f"{verb} {topic} module, ticket {i}",
                             {"action": f"a{i % 3}", "outcome": float(i % 7) / 7, "t": i}))
    return out


def tie_corpus() -> tuple[list[StoreItem], list[tuple[str, str, str]]]:
    """Distinct records with three planted pairs of equal text (an earlier and a later id of each pair, far
    apart in insertion order); returns the items and (query text, first-inserted id, last-inserted id)."""
    base = corpus(30)
    twins = [("retry the flaky upload job with a longer timeout", "tie-a"),
             ("pin the numpy version in the lock file", "tie-b"),
             ("rotate the expired signing certificate", "tie-c")]
    items = list(base)
    cases = []
    for j, (text, tag) in enumerate(twins):
        items.insert(3 + 4 * j, StoreItem(f"{tag}-first", text, {"twin": 0}))
        items.append(StoreItem(f"{tag}-last", text, {"twin": 1}))
        cases.append((text, f"{tag}-first", f"{tag}-last"))
    return items, cases


def build(backend: str, embedder: Embedder, *, path: Path | None = None,
          params: Mapping[str, object] | None = None) -> VectorStore:
    """The store, or a skip naming the missing package (a failure when REPLAYLENS_REQUIRE names stores)."""
    try:
        return make_store(backend, embedder, path=path, params=params or {})
    except ConfigError as exc:
        if EXTRA in str(exc):
            require("stores", f"{backend}: {exc}")
        raise


def census_corpus(n: int, pairs: int, seed: int = 7) -> tuple[list[StoreItem], list[tuple[str, str, str]]]:
    """``n`` random 8-word records (a numpy Generator from ``seed``) with ``pairs`` planted pairs of equal text,
    the earlier one inserted in the first half of the log and the later one in the second half; returns the
    items and (query text, first-inserted id, last-inserted id)."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(400)]
    items = [StoreItem(f"r{i}", " ".join(rng.choice(words, 8)), {"t": i}) for i in range(n)]
    cases = []
    for j in range(pairs):
        text = f"tie {j} " + " ".join(rng.choice(words, 6))
        items.insert(int(rng.integers(0, len(items) // 2)), StoreItem(f"t{j}-first", text, {"twin": 0}))
        items.insert(int(rng.integers(len(items) // 2, len(items) + 1)), StoreItem(f"t{j}-last", text, {"twin": 1}))
        cases.append((text, f"t{j}-first", f"t{j}-last"))
    return items, cases
