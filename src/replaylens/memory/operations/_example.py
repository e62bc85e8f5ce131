"""The shipped operation example: a tool-choice assistant's log full of near-duplicate requests.

Per stream (one assistant) and block (context ``build`` / ``data``), 40 records: a request text drawn from six
per-context templates, written with varying case and punctuation (near duplicates), the tool an ε-greedy
logger chose (menu ``make``, ``bazel``, ``pandas``, ``duckdb``), and its outcome around the tool's mean for the
context.  12 future requests per block (``metadata.text``: a request of the block's templates, from a generator of
its own); their utilities are the tools' means plus noise.  Near-duplicate
requests were answered with different tools, so merging them and averaging their outcomes moves outcomes
across tools (it breaks the key–outcome binding), while keep-latest-per-key only forgets older evidence.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ...records import Evaluator, FutureTask, FutureTasks, History, history_from_records
from ...rng import derive_rng

__all__ = ["EXAMPLE_SEED", "OperationExample", "build_operation_example"]

EXAMPLE_SEED = 20261129
TOOLS = ("make", "bazel", "pandas", "duckdb")
_MEANS: Mapping[str, np.ndarray] = {"build": np.array([0.62, 0.55, 0.30, 0.35]),
                                    "data": np.array([0.30, 0.28, 0.52, 0.60])}
_TEMPLATES: Mapping[str, tuple[str, ...]] = {
    "build": ("rebuild the project", "run the unit tests", "compile the docs", "clean build artifacts",
              "link the release binary", "rebuild after a header change"),
    "data": ("load the sales csv", "join orders with customers", "aggregate revenue by month",
             "deduplicate the user table", "filter rows by date", "export the report to parquet"),
}


@dataclass(frozen=True)
class OperationExample:
    """History, future tasks and evaluator of the shipped example."""

    history: History
    futures: FutureTasks
    evaluator: Evaluator


def _variant(text: str, g: np.random.Generator) -> str:
    style = int(g.integers(4))
    if style == 1:
        text = text.capitalize()
    elif style == 2:
        text = text.upper()
    return text + ("", ".", "!", " please")[int(g.integers(3))]


def build_operation_example(n_streams: int = 8, records_per_block: int = 40, n_future: int = 12,
                            seed: int = EXAMPLE_SEED) -> OperationExample:
    """The example, every draw from generators derived from ``seed`` and the stream's name."""
    rows: list[dict[str, object]] = []
    tasks: list[FutureTask] = []
    table: dict[tuple[str, str], dict[str, float]] = {}
    for r in range(n_streams):
        stream = f"a{r:02d}"
        g = derive_rng(seed, "operation-example", stream)
        slot = 0
        for ctx, means in _MEANS.items():
            mu = np.clip(means + g.normal(0.0, 0.05, len(TOOLS)), 0.05, 0.95)
            sums, counts = np.zeros(len(TOOLS)), np.zeros(len(TOOLS))
            for t in range(records_per_block):
                if t < len(TOOLS) or g.random() < 0.35:
                    a = t if t < len(TOOLS) else int(g.integers(len(TOOLS)))
                else:
                    a = int(np.argmax(sums / np.maximum(counts, 1)))
                y = round(float(np.clip(mu[a] + g.normal(0.0, 0.2), 0.0, 1.0)), 6)
                sums[a] += y
                counts[a] += 1
                text = _variant(_TEMPLATES[ctx][int(g.integers(len(_TEMPLATES[ctx])))], g)
                rows.append({"stream": stream, "family": "assistant", "context": ctx, "slot": slot,
                             "task": text, "key": TOOLS[a], "outcome": y, "event_time": float(slot),
                             "event_id": f"{stream}-{slot:03d}"})
                slot += 1
            asks = derive_rng(seed, "operation-example-queries", stream, ctx)
            for j in range(n_future):
                tid = f"{stream}-{ctx}-future-{j:02d}"
                ask = _TEMPLATES[ctx][int(asks.integers(len(_TEMPLATES[ctx])))]
                tasks.append(FutureTask(stream, "assistant", ctx, tid, TOOLS, j, metadata={"text": ask}))
                u = np.clip(mu + g.normal(0.0, 0.03, len(TOOLS)), 0.0, 1.0)
                table[(stream, tid)] = {a: round(float(x), 6) for a, x in zip(TOOLS, u, strict=True)}
    history = history_from_records(rows, source="<operation example>")
    return OperationExample(history, FutureTasks(tuple(tasks), source="<operation example>"),
                            Evaluator(table, "<operation example>"))
