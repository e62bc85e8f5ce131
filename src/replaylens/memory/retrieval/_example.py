"""The built-in realistic examples, shipped as package data (``retrieval/data/<name>/``).

``tool-use`` — tool-use records of data-engineering assistants. Eight assistants (streams) each logged 90 tasks: a
textual request ("join orders.csv with customers.parquet on customer_id"), the tool it used (pandas, duckdb, polars,
awk) and a graded outcome (0–1, one decimal). About a fifth of the records re-run an earlier request verbatim with
another tool (exact duplicates: retrieval ties), and many requests differ from an earlier one only by a file or
column name (near-duplicates). Each assistant then faces 12 new requests (future tasks) with the four tools on the
menu; utilities are the tools' true success rates for the request's kind. Exact duplicates make ties: the backend-
swap example.

``experiments`` — training-run records of four ML research assistants: 300 distinct requests each ("train
resnet18 on cifar10 with learning rate 0.01, batch size 128, 30 epochs and mixup"), the optimizer used (sgd,
adam, adamw, lion) and the accuracy reached (two decimals); 30 new requests each.  No two records share a text,
so an approximate index's misses (not ties) drive its changes: the hnswlib ``ef`` example.

:func:`build_example` generates the files from a fixed seed; the shipped copies in ``retrieval/data`` are
checked against it by the tests.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from ...rng import derive_rng

__all__ = ["EXAMPLES", "EXAMPLE_FILES", "OPTIMIZERS", "TOOLS", "build_example", "example_path", "write_example"]

EXAMPLES = ("tool-use", "experiments")
OPTIMIZERS = ("sgd", "adam", "adamw", "lion")
TOOLS = ("pandas", "duckdb", "polars", "awk")
EXAMPLE_FILES = ("history.jsonl", "future.jsonl", "utilities.jsonl")
_SEED = 20251125
_STREAMS = 8
_RECORDS = 90
_FUTURES = 12

# kind -> (templates, true success per tool)
_KINDS: dict[str, tuple[tuple[str, ...], dict[str, float]]] = {
    "groupby": (("sum the {col} column of {f}.csv grouped by {key}",
                 "total {col} per {key} in {f}.csv"), {"pandas": 0.8, "duckdb": 0.9, "polars": 0.85, "awk": 0.4}),
    "dedup": (("deduplicate the rows of {f}.csv on {key}",
               "drop duplicate {key} rows from {f}.csv"), {"pandas": 0.85, "duckdb": 0.75, "polars": 0.8, "awk": 0.5}),
    "join": (("join {f}.csv with {g}.parquet on {key}",
              "merge {f}.csv and {g}.parquet by {key}"), {"pandas": 0.7, "duckdb": 0.9, "polars": 0.85, "awk": 0.1}),
    "grep": (("count the lines matching ERROR in {f}.log",
              "how many ERROR lines are in {f}.log"), {"pandas": 0.5, "duckdb": 0.6, "polars": 0.55, "awk": 0.95}),
    "convert": (("convert {f}.json to parquet",
                 "rewrite {f}.json as a parquet file"), {"pandas": 0.8, "duckdb": 0.85, "polars": 0.9, "awk": 0.05}),
    "median": (("compute the median {col} of {f}.csv",
                "median of the {col} column in {f}.csv"), {"pandas": 0.9, "duckdb": 0.85, "polars": 0.85,
                                                            "awk": 0.3}),
}
_FILES = ("orders", "sales", "events", "users", "payments", "clicks", "inventory", "shipments", "server", "audit")
_COLS = ("amount", "price", "latency", "quantity", "revenue", "duration")
_KEYS = ("customer_id", "region", "day", "product_id", "user_id")


def _task(rng: Any, kind: str) -> str:
    templates, _ = _KINDS[kind]
    t = templates[int(rng.integers(len(templates)))]
    f, g = rng.choice(_FILES, size=2, replace=False)
    return t.format(f=f, g=g, col=_COLS[int(rng.integers(len(_COLS)))], key=_KEYS[int(rng.integers(len(_KEYS)))])


def _outcome(rng: Any, kind: str, tool: str) -> float:
    p = _KINDS[kind][1][tool]
    return round(min(1.0, max(0.0, p + float(rng.normal(0.0, 0.15)))), 1)


def build_example(name: str = "tool-use", *, streams: int = _STREAMS, records: int = _RECORDS
                  ) -> dict[str, list[dict[str, Any]]]:
    """The example's history, future tasks and utilities as rows (ReplayLens's input formats). The tool-use log
    scales to ``streams`` assistants of ``records`` requests each (the shipped files: 8 x 90; benchmarks use more;
    stream ``s`` draws from its own named generator, so the first streams are the same at any size)."""
    if name == "experiments":
        if (streams, records) != (_STREAMS, _RECORDS):
            raise ConfigError("the experiments example has a fixed size; only tool-use takes streams/records")
        return _experiments()
    if name != "tool-use":
        raise ConfigError(f"unknown example {name!r}; built-in: {', '.join(EXAMPLES)}")
    if streams < 1 or records < 1:
        raise ConfigError(f"the tool-use example needs streams >= 1 and records >= 1; got {streams}, {records}")
    hist: list[dict[str, Any]] = []
    fut: list[dict[str, Any]] = []
    util: list[dict[str, Any]] = []
    kinds = list(_KINDS)
    for s in range(streams):
        stream = f"assistant-{s + 1:02d}"
        rng = derive_rng(_SEED, "history", stream)
        past: list[tuple[str, str]] = []
        for t in range(records):
            if past and rng.random() < 0.2:  # a verbatim re-run of an earlier request with another tool
                text, kind = past[int(rng.integers(len(past)))]
            else:
                kind = kinds[int(rng.integers(len(kinds)))]
                text = _task(rng, kind)
                past.append((text, kind))
            tool = TOOLS[int(rng.integers(len(TOOLS)))]
            hist.append({"stream": stream, "family": "tool-use", "context": "requests", "slot": t,
                         "task": f"{stream}/r{t:03d}", "key": tool, "outcome": _outcome(rng, kind, tool),
                         "event_time": float(t), "event_id": f"{stream}/r{t:03d}",
                         "metadata": {"text": text, "kind": kind}})
        frng = derive_rng(_SEED, "future", stream)
        for j in range(_FUTURES):
            kind = kinds[j % len(kinds)]
            text = past[int(frng.integers(len(past)))][0] if j % 3 == 0 else _task(frng, kind)
            if j % 3 == 0:
                kind = next(k for tx, k in past if tx == text)
            tid = f"{stream}/f{j:02d}"
            fut.append({"stream": stream, "family": "tool-use", "context": "requests", "task": tid,
                        "menu": list(TOOLS), "metadata": {"text": text, "kind": kind}})
            util.extend({"stream": stream, "task": tid, "key": tool, "utility": _KINDS[kind][1][tool]}
                        for tool in TOOLS)
    return {"history.jsonl": hist, "future.jsonl": fut, "utilities.jsonl": util}


_MODELS = ("resnet18", "resnet50", "vit-small", "vit-base", "mobilenet", "efficientnet-b0", "convnext-tiny",
           "densenet121")
_DATA = ("cifar10", "cifar100", "imagenet-subset", "svhn", "food101", "flowers102", "stl10")
_LRS = ("0.1", "0.03", "0.01", "0.003", "0.001", "0.0003")
_BATCH = ("32", "64", "128", "256", "512")
_EPOCHS = ("10", "30", "90", "200")
_AUG = ("no augmentation", "random crops", "mixup", "cutmix", "randaugment")
# true accuracy of each optimizer by model family (transformers like adamw/lion, convnets sgd)
_FAMILY = {"resnet": {"sgd": 0.9, "adam": 0.8, "adamw": 0.85, "lion": 0.8},
           "vit": {"sgd": 0.7, "adam": 0.8, "adamw": 0.9, "lion": 0.85},
           "mobile": {"sgd": 0.8, "adam": 0.85, "adamw": 0.85, "lion": 0.75},
           "other": {"sgd": 0.85, "adam": 0.8, "adamw": 0.9, "lion": 0.8}}


def _family(model: str) -> dict[str, float]:
    key = "resnet" if model.startswith(("resnet", "densenet")) else "vit" if model.startswith("vit") else \
        "mobile" if model.startswith(("mobilenet", "efficientnet")) else "other"
    return _FAMILY[key]


def _run(rng: Any) -> tuple[tuple[int, ...], str, str]:
    c = tuple(int(rng.integers(len(x))) for x in (_MODELS, _DATA, _LRS, _BATCH, _EPOCHS, _AUG))
    text = (f"train {_MODELS[c[0]]} on {_DATA[c[1]]} with learning rate {_LRS[c[2]]}, batch size {_BATCH[c[3]]}, "
            f"{_EPOCHS[c[4]]} epochs and {_AUG[c[5]]}")
    return c, text, _MODELS[c[0]]


def _experiments() -> dict[str, list[dict[str, Any]]]:
    hist: list[dict[str, Any]] = []
    fut: list[dict[str, Any]] = []
    util: list[dict[str, Any]] = []
    for s in range(4):
        stream = f"lab-{s + 1:02d}"
        rng = derive_rng(_SEED, "experiments", stream)
        seen: set[tuple[int, ...]] = set()
        t = 0
        while t < 300:
            c, text, model = _run(rng)
            if c in seen:
                continue
            seen.add(c)
            opt = OPTIMIZERS[int(rng.integers(len(OPTIMIZERS)))]
            acc = round(min(1.0, max(0.0, _family(model)[opt] + float(rng.normal(0.0, 0.08)))), 2)
            hist.append({"stream": stream, "family": "training", "context": "runs", "slot": t,
                         "task": f"{stream}/run{t:03d}", "key": opt, "outcome": acc, "event_time": float(t),
                         "event_id": f"{stream}/run{t:03d}", "metadata": {"text": text}})
            t += 1
        for j in range(30):
            _, text, model = _run(rng)
            tid = f"{stream}/new{j:02d}"
            fut.append({"stream": stream, "family": "training", "context": "runs", "task": tid,
                        "menu": list(OPTIMIZERS), "metadata": {"text": text}})
            util.extend({"stream": stream, "task": tid, "key": o, "utility": _family(model)[o]} for o in OPTIMIZERS)
    return {"history.jsonl": hist, "future.jsonl": fut, "utilities.jsonl": util}


def write_example(folder: str | Path, name: str = "tool-use") -> dict[str, Path]:
    """Write example ``name``'s three files into ``folder`` (JSONL); returns their paths by file name."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for fname, rows in build_example(name).items():
        p = out / fname
        p.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows), encoding="utf-8")
        paths[fname] = p
    return paths


def example_path(file: str = "history.jsonl", name: str = "tool-use") -> Path:
    """The shipped copy of one file (``history.jsonl``, ``future.jsonl`` or ``utilities.jsonl``) of example
    ``name`` (``tool-use`` or ``experiments``)."""
    if name not in EXAMPLES:
        raise ConfigError(f"unknown example {name!r}; built-in: {', '.join(EXAMPLES)}")
    return Path(str(resources.files("replaylens.memory.retrieval") / "data" / name / file))
