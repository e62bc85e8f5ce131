"""Shared helpers of the retrieval tests: the shipped examples, cut to a few streams, as store inputs."""

from __future__ import annotations

from typing import Any

from conftest import require
from replaylens.memory.retrieval import StreamInput, example_path, streams_from_history
from replaylens.records import Evaluator, FutureTasks, History, read_evaluator, read_futures, read_history


def example(name: str = "tool-use", n_streams: int | None = None) -> tuple[History, FutureTasks, Any]:
    """(history, futures, evaluator) of a shipped example, optionally its first ``n_streams`` streams."""
    h = read_history(example_path("history.jsonl", name))
    f = read_futures(example_path("future.jsonl", name))
    ev = read_evaluator(example_path("utilities.jsonl", name))
    if n_streams is not None:
        keep = h.streams[:n_streams]
        h = h.select(keep)
        f = FutureTasks(tuple(t for t in f if t.stream in keep), f.source)
        ev = Evaluator({k: v for k, v in ev.table.items() if k[0] in keep}, ev.source)  # CLI inputs are strict
    return h, f, ev


def store_inputs(name: str = "tool-use", n_streams: int | None = None) -> list[StreamInput]:
    h, f, _ = example(name, n_streams)
    return streams_from_history(h, f)


def need(backend: str) -> None:
    """Skip (one line naming the reason) when ``backend``'s package cannot import, unless REPLAYLENS_REQUIRE says
    the stores extra must be there."""
    from replaylens.errors import ConfigError
    from replaylens.memory.stores import HashingEmbedder, make_store

    try:
        make_store(backend, HashingEmbedder(16)).close()
    except ConfigError as exc:
        require("stores", f"{backend}: {exc}")
