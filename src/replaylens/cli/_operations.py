"""``replaylens check-operation``: memory operations that rewrite records (replaylens.memory.operations)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from ._app import cli, json_object, parse_params, traceback_option, user_errors

_DEMO_OPS = "merge-text,keep-latest"
_DEMO_AGENTS = ("mean", "latest")


def _items(values: tuple[str, ...]) -> list[str]:
    return [x.strip() for v in values for x in v.split(",") if x.strip()]


@cli.command("check-operation")
@click.option("--history", "history_path", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="History file (JSONL, CSV or Parquet) whose records the operation rewrites.")
@click.option("--future", "future_path", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="Future task file (with --agent).")
@click.option("--utilities", "util_path", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="Counterfactual utility table (with --agent).")
@click.option("--op", "ops", multiple=True, metavar="OP[,OP]",
              help="Operation(s): dedup, keep-latest, forget-age:AGE, forget-count:N, merge-text, or "
                   "file.py:factory / module:factory returning records -> records (called once per stream).")
@click.option("--agent", "agent_specs", multiple=True, metavar="AGENT",
              help="Replay this agent on the history before and after (a built-in name like mean or latest, or "
                   "module:factory); repeatable.")
@click.option("--agent-param", multiple=True, metavar="KEY=JSON", help="Keyword argument for the agent factory.")
@click.option("--canary", "canaries", multiple=True, metavar="ID[,ID]",
              help="Records that must survive intact: event ids (or task ids of records without one).")
@click.option("--canary-where", default=None, metavar="MODULE:FN",
              help="Predicate record -> bool marking more canaries (file.py:fn or module:fn).")
@click.option("--expect-property", "expect_props", default="", metavar="P[,P]",
              help="Declared properties that gate the exit code: idempotent, order_independent, monotone.")
@click.option("--expect-safe", default="", metavar="OP[,OP]",
              help="Exit 1 when one of these operations (or 'all') is UNSAFE for an agent.")
@click.option("--on-inconclusive", type=click.Choice(["pass", "fail"]), default="pass", show_default=True,
              help="Whether an INCONCLUSIVE operation named in --expect-safe fails the run.")
@click.option("--margin", default=None, type=click.FloatRange(0, 1),
              help="Allowed share of changed decisions (census: compared as integers; default 0) or T_gr margin "
                   "for a stochastic agent (default 0.05).")
@click.option("--repeats", default=None, type=click.IntRange(min=1),
              help="Repeats per decision (default 1, or 2 for an agent declared stochastic).")
@click.option("--rng", default="independent", show_default=True, type=click.Choice(["independent", "common"]))
@click.option("--level", default=0.95, show_default=True, type=click.FloatRange(0.5, 0.999),
              help="One-sided confidence level of a stochastic agent's T_gr bounds.")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0),
              help="Seed of the replay and of the property checks' shuffles and subsets.")
@click.option("--store", default=None, metavar="BACKEND",
              help="Also the retrieval-level response: each stream's records in this store (exact, chroma, qdrant, "
                   "langgraph, faiss, hnswlib, mem0, lancedb or file.py:factory) before and after, queried with the "
                   "future tasks' texts (needs --future).")
@click.option("--embedder", default="hashing:256", show_default=True, help="With --store: the embedder.")
@click.option("-k", "store_k", default=5, show_default=True, type=click.IntRange(min=1), help="With --store: top k.")
@click.option("--store-params", default="{}", show_default=True, metavar="JSON",
              help="With --store: the backend's index parameters.")
@click.option("--demo", is_flag=True,
              help=f"Run on the shipped example (ops {_DEMO_OPS}; agents {', '.join(_DEMO_AGENTS)}) unless given.")
@click.option("--json", "as_json", is_flag=True, help="Print the reports as JSON.")
@click.option("--out", "out_dir", default=None, type=click.Path(file_okay=False, path_type=Path),
              help="Also write OUT/operations.json and OUT/manifest.json.")
@traceback_option
@user_errors
def check_operation_cmd(history_path: Path | None, future_path: Path | None, util_path: Path | None,
                        ops: tuple[str, ...], agent_specs: tuple[str, ...], agent_param: tuple[str, ...],
                        canaries: tuple[str, ...], canary_where: str | None, expect_props: str, expect_safe: str,
                        on_inconclusive: str, margin: float | None, repeats: int | None, rng: str, level: float,
                        seed: int, store: str | None, embedder: str, store_k: int, store_params: str, demo: bool,
                        as_json: bool, out_dir: Path | None) -> None:
    """Which relations of the records does a memory operation (deduplication, consolidation, forgetting, merging)
    preserve, do the canaries survive, is it idempotent and order-independent, and do the agent's decisions
    change?  Exit 1 when a declared expectation fails (--expect-safe, --canary, --expect-property)."""
    from .. import __version__
    from .._imports import import_target
    from ..agents import load_agent
    from ..errors import ConfigError
    from ..memory.operations import INCONCLUSIVE, UNSAFE, build_operation_example, check_operations, stream_records
    from ..records import Evaluator, FutureTasks, check_inputs, read_evaluator, read_futures, read_history

    futures: FutureTasks | None = None
    evaluator: Evaluator | None = None
    op_list = _items(ops) or (_DEMO_OPS.split(",") if demo else [])
    if not op_list:
        raise ConfigError("check-operation needs --op (a built-in operation or file.py:factory), or --demo")
    specs = list(agent_specs) or (list(_DEMO_AGENTS) if demo else [])
    if demo:
        if history_path is not None:
            raise ConfigError("--demo uses the shipped example: leave out --history, --future and --utilities")
        ex = build_operation_example()
        history, futures, evaluator = ex.history, ex.futures, ex.evaluator
    else:
        if history_path is None:
            raise ConfigError("check-operation needs --history (or --demo)")
        history = read_history(history_path)
        if specs:
            if future_path is None or util_path is None:
                raise ConfigError("--agent needs --future and --utilities (the decisions are replayed and scored)")
            futures, evaluator = read_futures(future_path), read_evaluator(util_path)
            check_inputs(history, futures, evaluator, strict=True)
        elif store is not None:
            if future_path is None:
                raise ConfigError("--store needs --future (the future tasks' texts are the queries)")
            futures = read_futures(future_path)
    agents = [load_agent(s, parse_params(agent_param)) for s in specs]
    predicate = None
    if canary_where is not None:
        predicate = import_target(canary_where, "canary predicate")
        if not callable(predicate):
            raise ConfigError(f"--canary-where {canary_where} is not callable")
    declared = [p.strip().replace("-", "_") for p in expect_props.split(",") if p.strip()]
    records = stream_records(history)
    # every operation's decision responses are judged as one family (Holm over the stochastic rows)
    reports = check_operations(history, op_list, futures=futures, evaluator=evaluator, agents=agents,
                               canaries=_items(canaries), canary_where=predicate, expect_properties=declared,
                               seed=seed, repeats=repeats, rng=rng, margin=margin, level=level, records=records,
                               store=store, store_embedder=embedder, store_k=store_k,
                               store_params=json_object(store_params, "--store-params"))
    want = {x.strip() for x in expect_safe.split(",") if x.strip()}
    unknown = sorted(want - {"all", *op_list, *(r.op for r in reports)})
    if unknown:
        raise ConfigError(f"--expect-safe {unknown[0]} names no checked operation ({', '.join(op_list)})")
    failures: list[str] = []
    for spec, r in zip(op_list, reports, strict=True):
        if want & {"all", spec, r.op}:
            bad = [d for d in r.decisions if d.status == UNSAFE or (d.status == INCONCLUSIVE and
                                                                     on_inconclusive == "fail")]
            failures += [f"expectation failed: {r.op} declared safe, but {d.status} for agent {d.agent}"
                         for d in bad]
            if not agents:
                raise ConfigError("--expect-safe needs --agent (the verdict is on the agent's decisions)")
        failures += [f"expectation failed: {r.op}: {f.check}: {f.summary}" for f in r.failed_findings()]
    rows = [r.to_dict() for r in reports]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    else:
        for r in reports:
            for line in r.lines():
                click.echo(line)
    if out_dir is not None:
        args = {"history": str(history_path) if history_path else "<operation example>", "ops": op_list,
                "agents": specs, "seed": seed, "repeats": repeats, "rng": rng, "margin": margin, "level": level,
                "demo": demo, "store": store, "embedder": embedder if store else None,
                "k": store_k if store else None}
        _write(out_dir, rows, args, __version__, history.fingerprint())
        if not as_json:
            click.echo(f"wrote {out_dir}/operations.json, manifest.json")
    if failures:
        for line in failures:
            click.echo(line, err=True)
        sys.exit(1)


def run_operations_demo(*, out: Path, seed: int, level: float) -> None:
    """``replaylens demo --operations``: ``check-operation --demo --out OUT`` (the shipped example's verdicts)."""
    click.get_current_context().invoke(check_operation_cmd, demo=True, out_dir=out, seed=seed, level=level)


def _write(out: Path, rows: list[dict[str, Any]], args: dict[str, Any], tool: str, fingerprint: str) -> None:
    from ..report import package_versions

    out.mkdir(parents=True, exist_ok=True)
    (out / "operations.json").write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    manifest = {"tool": "replaylens check-operation", "version": tool, "arguments": args,
                "history_fingerprint": fingerprint, "packages": package_versions()}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


@cli.command("check-store")
@click.option("--index", "index_spec", default=None, metavar="PATH|lancedb:DIR[:TABLE]|chroma:DIR[:NAME]",
              help="The index: a file (JSONL, CSV or Parquet) with id, text, vector; a LanceDB table; or a "
                   "persistent Chroma collection.")
@click.option("--embedder", default="wordllama:256", show_default=True,
              help="The declared embedder every stored vector should come from: hashing[:DIM], wordllama[:DIM] or "
                   "openai:MODEL@BASE_URL.")
@click.option("--sample", default=None, type=click.IntRange(min=1),
              help="Re-embed a seeded sample of this many records (default: every record).")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0))
@click.option("--tolerance", default=1e-3, show_default=True, type=click.FloatRange(0, 1),
              help="A record matches when its stored vector's cosine with the re-embedding is >= 1 - tolerance.")
@click.option("--expect-clean", is_flag=True, help="Exit 1 when any checked record does not match.")
@click.option("--demo", is_flag=True,
              help="Check the built-in example: the operation example's texts, 30 % embedded by hashing:256 "
                   "and the rest by wordllama:256 (the declared embedder).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@user_errors
def check_store_cmd(index_spec: str | None, embedder: str, sample: int | None, seed: int, tolerance: float,
                    expect_clean: bool, demo: bool, as_json: bool) -> None:
    """Mixed embedding generations: does an index hold vectors from more than one embedder?  Re-embeds the stored
    texts with the declared embedder and reports the share of records whose vector does not match, with an
    example.  (The decision response of a half-migrated index: check-migration --store ... --ops half-embedder.)"""
    from ..errors import ConfigError
    from ..memory.generations import build_mixed_index, check_generations, read_index
    from ..memory.operations import build_operation_example
    from ..report import package_versions

    if demo == (index_spec is not None):
        raise ConfigError("check-store needs --index (or --demo)")
    if demo:
        texts = build_operation_example().history.text("task").tolist()
        index = build_mixed_index(texts, embedder, "hashing:256", share=0.3, source="<demo: 30 % hashing:256>")
    else:
        assert index_spec is not None
        index = read_index(index_spec)
    rep = check_generations(index, embedder, sample=sample, seed=seed, tolerance=tolerance)
    if as_json:
        click.echo(json.dumps(rep.to_dict() | {"packages": package_versions()}, indent=2))
    else:
        click.echo(rep.line())
    if expect_clean and not rep.clean:
        click.echo(f"expectation failed: {rep.n_mismatched} of {rep.n_checked} records do not match "
                   f"{rep.embedder}", err=True)
        sys.exit(1)
