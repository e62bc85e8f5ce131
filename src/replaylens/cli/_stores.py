"""``check-migration --store BACKEND``: store migrations on real vector stores and memory frameworks.

Kept apart from ``cli/_migration.py`` (the four finite memories): that command applies :func:`store_options` and
hands over to :func:`run_store_check` when ``--store`` is given.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from ._app import json_object

F = TypeVar("F", bound=Callable[..., Any])

BACKENDS = ("exact", "chroma", "qdrant", "langgraph", "faiss", "hnswlib", "mem0")
DEFAULT_STORE_OPS = "backend,reindex,reorder,batch,relabel,duplicate,embedder,half-embedder"


def store_options(fn: F) -> F:
    """The ``--store`` family of options (decorates ``check-migration``)."""
    opts = [
        click.option("--store", default=None, metavar="BACKEND",
                     help=f"Check migrations of a real vector store instead of --memory: {', '.join(BACKENDS)} "
                          "(pip install 'replaylens[stores]'), or file.py:factory. --events then names a history "
                          "file (JSONL/CSV/Parquet; the text is metadata.text, else the task); with --store, --ops "
                          f"defaults to {DEFAULT_STORE_OPS} (plus the same-order rebuild control, always run)."),
        click.option("--example", default=None, type=click.Choice(["tool-use", "experiments"]),
                     help="With --store: use a shipped example log instead of --events."),
        click.option("--store-params", default="{}", show_default=True, metavar="JSON",
                     help="With --store: the reference index parameters, e.g. '{\"ef\": 10}' for hnswlib."),
        click.option("--embedder", default="hashing:256", show_default=True,
                     help="With --store: hashing[:DIM], wordllama[:DIM] or openai:MODEL@BASE_URL."),
        click.option("--migrate-to", default="", metavar="BACKEND[,BACKEND]",
                     help="With --store: target backend(s) of the backend-swap migration."),
        click.option("--reindex-params", default=None, metavar="JSON",
                     help="With --store: index parameters the reindex migration rebuilds with (default: hnswlib's "
                          "seed + 1; other backends need it)."),
        click.option("--batch-size", "store_batch", default=1, show_default=True, type=click.IntRange(min=1),
                     help="With --store: records per add call in the batch migration (reference: all at once)."),
        click.option("--embedder-to", default=None,
                     help="With --store: the new embedder of the embedder and half-embedder migrations."),
        click.option("--queries", "queries_path", default=None, type=click.Path(dir_okay=False, path_type=Path),
                     help="With --store: future-task file whose texts are the queries (and menus the decision "
                          "menus); default: every distinct record text of a stream."),
        click.option("--control-rebuilds", default=4, show_default=True, type=click.IntRange(min=1),
                     help="With --store: same-order rebuilds of each side of a migration once a first rebuild changed "
                          "an answer (the store's own noise; the migration is then judged by a permutation test). "
                          "A side whose first rebuild repeats itself is read as deterministic (a census)."),
        click.option("--expect-safe", default="", metavar="MIGRATION[,MIGRATION]",
                     help="With --store: exit 1 when one of these migrations (a name like backend:qdrant, a kind "
                          "like reorder, or rebuild: the control) is UNSAFE (or INCONCLUSIVE with "
                          "--on-inconclusive fail)."),
        click.option("--on-inconclusive", default="pass", show_default=True, type=click.Choice(["pass", "fail"]),
                     help="With --store and --expect-safe: what an INCONCLUSIVE expected migration does to the exit "
                          "code (pass: 0, fail: 1)."),
    ]
    for o in reversed(opts):
        fn = o(fn)
    return fn


def _matches(name: str, pattern: str) -> bool:
    return name == pattern or name.partition(":")[0] == pattern


def run_store_check(*, events_path: Path | None, ops: str, seed: int, k: int, as_json: bool, out_dir: Path | None,
                    store: str, example: str | None, store_params: str, embedder: str, migrate_to: str,
                    reindex_params: str | None, store_batch: int, embedder_to: str | None, queries_path: Path | None,
                    control_rebuilds: int, expect_safe: str, explicit_ops: bool = False, policy: str = "none",
                    on_inconclusive: str = "pass",
                    base_url: str | None = None, api_key_env: str | None = "OPENAI_API_KEY", env_file: str = ".env",
                    run_dir: Path | None = None, threads: int | None = None, local_readout: str = "logits") -> None:
    """SAFE / UNSAFE / INCONCLUSIVE per store migration, with retrieval- and decision-level counts (exit 1: an
    --expect-safe migration is UNSAFE, or INCONCLUSIVE under ``on_inconclusive="fail"``).
    ``policy`` "none" decides by the documented rule; a model (scripted/mean, local/embedded, local/PATH.gguf,
    openai/NAME) decides with the retrieved records in its prompt, its calls journaled under ``run_dir`` (default
    OUT/llm)."""
    from ..errors import ConfigError
    from ..memory.retrieval import (
        StoreSpec,
        check_store_migrations,
        crosstab_lines,
        embedding_stats,
        example_path,
        plan_migrations,
        streams_from_history,
    )
    from ..records import read_futures, read_history

    if (events_path is None) == (example is None):
        raise ConfigError("check-migration --store needs the records: --events HISTORY_FILE or --example NAME "
                          "(one of them)")
    ctx = click.get_current_context()
    if not explicit_ops and ctx.get_parameter_source("ops") is click.core.ParameterSource.DEFAULT:
        ops = DEFAULT_STORE_OPS
    hist_path = events_path if events_path is not None else example_path("history.jsonl", str(example))
    if queries_path is None and example is not None:
        queries_path = example_path("future.jsonl", example)
    history = read_history(hist_path)
    futures = read_futures(queries_path) if queries_path is not None else None
    streams = streams_from_history(history, futures)
    if not streams:
        raise ConfigError(f"{queries_path}: no future task belongs to a stream of {hist_path}: nothing to query")
    base = StoreSpec(store, json_object(store_params, "--store-params"), embedder)
    targets = [b.strip() for b in migrate_to.split(",") if b.strip()]
    migs = plan_migrations(base, [o.strip() for o in ops.split(",") if o.strip()], migrate_to=targets,
                           reindex_params=None if reindex_params is None else json_object(reindex_params,
                                                                                         "--reindex-params"),
                           batch_size=store_batch,
                           embedder_to=embedder_to)
    expected = [e.strip() for e in expect_safe.split(",") if e.strip()]
    for e in expected:
        if not any(_matches(m.name, e) for m in migs):
            raise ConfigError(f"--expect-safe: {e!r} is not a checked migration (checked: "
                              f"{', '.join(m.name for m in migs)})")
    decider = _decider(policy, base_url=base_url, api_key_env=api_key_env, env_file=env_file,
                       run_dir=run_dir if run_dir is not None else (out_dir / "llm" if out_dir is not None else None),
                       threads=threads, seed=seed, local_readout=local_readout)
    results = check_store_migrations(streams, base, migs, k=k, seed=seed, control_rebuilds=control_rebuilds,
                                     decider=decider)
    rows = [r.to_dict() for r in results]
    cache_counts = embedding_stats()
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    else:
        click.echo(f"store {base.label()}: {len(streams)} streams, {sum(len(s.queries) for s in streams)} queries, "
                   f"k = {k}")
        for r in results:
            click.echo(r.verdict())
            if r.readout is not None and r.migration.kind != "rebuild":
                for line in crosstab_lines("  two-level", r.readout.to_dict())[1:]:
                    click.echo(line)
            if r.status != "SAFE" and r.example is not None and r.migration.kind != "rebuild":
                for line in example_lines(r.example):
                    click.echo(f"  {line}")
        for c in cache_counts:
            click.echo(f"embedding cache {c['cache']}: {c['embedder']}: {c['texts_from_cache']} texts from the cache, "
                       f"{c['texts_embedded']} embedded in {c['requests']} requests")
    if out_dir is not None:
        from .. import __version__
        from ..report import write_store_report

        write_store_report(out_dir, rows, base=base.to_dict(), k=k, seed=seed, records=hist_path,
                           queries=queries_path, tool_version=__version__, embedding_cache=cache_counts,
                           arguments={"store": store, "example": example, "events": str(events_path),
                                      "store_params": store_params, "embedder": embedder, "ops": ops,
                                      "migrate_to": migrate_to, "reindex_params": reindex_params,
                                      "batch_size": store_batch, "embedder_to": embedder_to, "k": k, "seed": seed,
                                      "control_rebuilds": control_rebuilds, "policy": policy,
                                      "on_inconclusive": on_inconclusive, "expect_safe": expect_safe,
                                      "local_readout": local_readout},
                           policy="best retrieved outcome" if decider is None else f"model {policy}")
        if not as_json:
            click.echo(f"wrote {out_dir}/report.html, summary.json, manifest.json")
    failing = {"UNSAFE", "N/A"} | ({"INCONCLUSIVE"} if on_inconclusive == "fail" else set())
    failed = [r for r in results if r.status in failing and any(_matches(r.name, e) for e in expected)]
    for r in failed:
        click.echo(f"expectation failed: {r.name} expected SAFE, but {r.verdict()}", err=True)
    if failed:
        sys.exit(1)


def _decider(policy: str, *, base_url: str | None, api_key_env: str | None, env_file: str, run_dir: Path | None,
             threads: int | None, seed: int, local_readout: str = "logits") -> Any:
    """None for the documented rule (``--policy none``), else the retrieval agent's model decider."""
    from ..errors import ConfigError

    if policy in ("none", "rule"):
        if local_readout != "logits":
            raise ConfigError("--local-readout applies to a local/ model --policy; the documented rule reads no model")
        return None
    if "/" not in policy:
        raise ConfigError(f"with --store, --policy is none (the documented rule: best retrieved outcome) or a model "
                          f"reading the retrieved records: scripted/mean, local/embedded, local/PATH.gguf, "
                          f"openai/NAME; got {policy!r}")
    from ..memory.retrieval import ModelDecider
    from ._app import resolve_model

    spec = resolve_model(policy)
    if run_dir is None and not spec.startswith("scripted/"):
        raise ConfigError(f"--policy {policy} with --store needs --run-dir DIR or --out DIR (every model call is "
                          "journaled there, so a rerun resumes without calls)")
    return ModelDecider(spec, None if run_dir is None else str(run_dir), base_url, api_key_env or None, env_file,
                        threads, seed, local_readout)


def example_lines(ex: dict[str, Any]) -> list[str]:
    """The example changed retrieval: records before and after with ids and scores, and the explanation."""
    out = [f"example: stream {ex['stream']}, query {ex['query']!r}: decision {ex['decision_before']} → "
           f"{ex['decision_after']}"]
    for side in ("before", "after"):
        for r in ex[side]:
            out.append(f"  {side:6s} #{r['rank']} {r['id']} score {r['score']:.6f} {r['action']}={r['outcome']} "
                       f"{r['text']!r}")
    if ex.get("explanation"):
        out.append(str(ex["explanation"]))
    return out


def run_stores_demo(run_audit: Callable[..., Any], *, out: Path, seed: int, resamples: int, level: float,
                    quiet: bool) -> None:
    """``demo --stores``: a retrieval-memory agent audited on the shipped tool-use log (two-level readouts per
    cell), then three store checks: Chroma → Qdrant on the tool-use log (ties) and an hnswlib reindex and
    re-ingest on the experiments log at ef = 10 and ef = 200."""
    from ..memory.retrieval import example_path, make_agent
    from ..records import read_evaluator, read_futures, read_history, write_evaluator, write_futures, write_history
    from ..settings import AuditSettings, cell_list

    ex = {n: example_path(n, "tool-use") for n in ("history.jsonl", "future.jsonl", "utilities.jsonl")}
    history, futures = read_history(ex["history.jsonl"]), read_futures(ex["future.jsonl"])
    evaluator = read_evaluator(ex["utilities.jsonl"])
    inputs = out / "inputs"
    hp = write_history(history, inputs / "history.jsonl")
    fp = write_futures(futures, inputs / "future.jsonl")
    up = write_evaluator(evaluator, inputs / "utilities.jsonl")
    agent = make_agent("exact", k=5)
    cells = "value,pair,reorder,mask"
    if not quiet:
        click.echo(f"demo --stores: auditing a retrieval-memory agent (exact store, hashing embedder, top-5, best "
                   f"retrieved outcome) on the shipped tool-use log; inputs in {inputs}")
    args = {"agent": "retrieval", "stores": True, "cells": cells, "seed": seed, "resamples": resamples,
            "level": level}
    settings = AuditSettings(cells=cell_list(cells), maps="", seed=seed, draws=1, repeats=1, n_resamples=resamples,
                             level=level, path="reference")
    run_audit(history=history, futures=futures, evaluator=evaluator, agent=agent, settings=settings,
              inputs=[("history", str(hp)), ("futures", str(fp)), ("utilities", str(up))], command="demo --stores",
              arguments=args, out=out / "audit", quiet=quiet, overwrite=True)
    checks = [("chroma-to-qdrant", "chroma", "{}", "tool-use", "backend", "qdrant"),
              ("hnswlib-ef10", "hnswlib", '{"ef": 10}', "experiments", "reindex,reorder", ""),
              ("hnswlib-ef200", "hnswlib", '{"ef": 200}', "experiments", "reindex,reorder", "")]
    for name, store, params, example, ops, to in checks:
        click.echo(f"\n== check-migration --store {store} --store-params '{params}' --example {example} --ops {ops}"
                   + (f" --migrate-to {to}" if to else "") + f" -k 5 --out {out / name}")
        run_store_check(events_path=None, ops=ops, seed=seed, k=5, as_json=False, out_dir=out / name, store=store,
                        example=example, store_params=params, embedder="hashing:256", migrate_to=to,
                        reindex_params=None, store_batch=1, embedder_to=None, queries_path=None,
                        control_rebuilds=4, expect_safe="", explicit_ops=True)


def retrieval_console_lines(summary: dict[str, Any]) -> list[str]:
    """Console lines of an audit's retrieval-level readouts (``summary["retrieval"]``; none when absent)."""
    if not summary.get("retrieval"):
        return []
    from ..memory.retrieval import crosstab_lines

    out: list[str] = []
    for cell, t in summary["retrieval"].items():
        if "verdict" in t:  # the same-order rebuild control: its verdict line first
            out.append(f"retrieval/decision {t['verdict']}")
        out.extend(crosstab_lines(f"retrieval/decision {cell}", t))
        if t.get("noisy_queries") and "retrieval_changed_beyond_control" in t:
            nt = t.get("noise_test") or {}
            p = f"; permutation test against the rebuilds: p = {nt['p_value']:.4f}" if nt else ""
            out.append(f"  on the {t['n_queries'] - t['noisy_queries']} queries no rebuild changes: retrieval "
                       f"changed for {t['retrieval_changed_beyond_control']}, decision for "
                       f"{t['decisions_changed_beyond_control']}{p}")
    return out
