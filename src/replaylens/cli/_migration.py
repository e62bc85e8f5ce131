"""``replaylens check-migration``: memory migrations at state and decision level."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from ._app import cli, resolve_model, user_errors
from ._stores import run_store_check, store_options


@cli.command("check-migration")
@click.option("--memory", "memory_spec", default=None,
              help="Built-in memory (fifo, event-time, reservoir, binned-mean, no-memory) or module:factory "
                   "returning an object with ingest(event), export() and retrieve(query, k). (Or --store.)")
@click.option("--events", "events_path", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="Event file (JSONL, CSV or Parquet): stream, block, event_time, event_id, action, utility, "
                   "descriptors. With --store: a history file.")
@click.option("--ops", default="reorder,merge,reindex,relabel", show_default=True,
              help="Migration operations to check.")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0))
@click.option("-k", "k", default=8, show_default=True, type=click.IntRange(min=1), help="Retrieved slots.")
@click.option("--policy", default="none", show_default=True,
              help="Also audit decisions: 'mean' (scripted Mean rule on the retrieved text, no model), or a model "
                   "reading the retrieved text: scripted/mean, local/embedded, local/PATH.gguf, openai/NAME.")
@click.option("--base-url", default=None, help="For --policy openai/...: the endpoint's base URL.")
@click.option("--api-key-env", default="OPENAI_API_KEY", show_default=True,
              help="For --policy openai/...: environment variable holding the key ('' for none).")
@click.option("--env-file", default=".env", show_default=True)
@click.option("--run-dir", default=None, type=click.Path(file_okay=False, path_type=Path),
              help="Journal of the policy's calls (resumes when rerun); required for local/ and openai/ policies.")
@click.option("--repeats", default=2, show_default=True, type=click.IntRange(min=1),
              help="Fresh calls per block and condition for a model policy (>= 2: repeat-corrected disagreement).")
@click.option("--threads", default=None, type=click.IntRange(min=1), help="Local models: CPU threads.")
@click.option("--local-readout", default="logits", show_default=True, type=click.Choice(["logits", "grammar"]),
              help="Local models: argmax over single-token menu labels (logits), or greedy generation constrained "
                   "to the menu (grammar: action names of several tokens, e.g. the shipped store examples).")
@click.option("--json", "as_json", is_flag=True, help="Print the reports as JSON.")
@click.option("--out", "out_dir", default=None, type=click.Path(file_okay=False, path_type=Path),
              help="Also write OUT/report.html (self-contained, offline), migration.json and manifest.json.")
@store_options
@user_errors
def check_migration_cmd(memory_spec: str | None, events_path: Path | None, ops: str, seed: int, k: int, policy: str,
                        base_url: str | None, api_key_env: str, env_file: str, run_dir: Path | None, repeats: int,
                        threads: int | None, local_readout: str, as_json: bool, out_dir: Path | None,
                        **store_kw: Any) -> None:
    """Which migrations (reorder, merge, reindex, relabel) change a memory pipeline's stored or retrieved state,
    and (with a model --policy) its decisions?  With --store BACKEND (exact, chroma, qdrant, langgraph, faiss,
    hnswlib, mem0): which store migrations change retrieval and decisions, read against a same-order rebuild?"""
    from ..errors import ConfigError

    # --- vector stores and memory frameworks: cli/_stores.py (replaylens.memory.retrieval) ---
    if store_kw["store"] is not None:
        run_store_check(events_path=events_path, ops=ops, seed=seed, k=k, as_json=as_json, out_dir=out_dir,
                        policy=policy, base_url=base_url, api_key_env=api_key_env, env_file=env_file,
                        run_dir=run_dir, threads=threads, local_readout=local_readout, **store_kw)
        return
    if memory_spec is None or events_path is None:
        raise ConfigError("check-migration needs --memory and --events (or --store BACKEND for a vector store)")
    # --- end of the store hunk ---
    from ..memory.bounded import (
        audit_migration_decisions,
        check_migration,
        load_memory_factory,
        memory_backend,
        read_events,
        retrieved_mean_policy,
    )

    factory = load_memory_factory(memory_spec)
    blocks = read_events(events_path)
    op_list = [o.strip() for o in ops.split(",") if o.strip()]
    model = "/" in policy
    if not model and policy not in ("none", "mean"):
        raise ConfigError(f"--policy must be none, mean, scripted/mean, local/embedded, local/PATH.gguf or "
                          f"openai/NAME; got {policy!r}")
    reports = check_migration(factory, blocks, ops=op_list, seed=seed, k=k,
                              policy=retrieved_mean_policy if policy == "mean" else None)
    decisions: dict[str, Any] = {}
    gate = None
    if model:
        spec = resolve_model(policy)
        if run_dir is None and not spec.startswith("scripted/"):
            raise ConfigError(f"--policy {policy} needs --run-dir DIR (every model call is journaled there, so an "
                              "interrupted check resumes without re-asking)")
        backend = memory_backend(spec, base_url=base_url, api_key_env=api_key_env or None, env_file=env_file,
                                 threads=threads, local_readout=local_readout)
        dreps, gate = audit_migration_decisions(factory, blocks, backend, ops=op_list, seed=seed, k=k,
                                                repeats=repeats, run_dir=run_dir)
        decisions = {d.op: d for d in dreps}
    if as_json:
        out = []
        for r in reports:
            row = r.to_dict()
            if r.op in decisions:
                row["decision_audit"] = decisions[r.op].to_dict()
            out.append(row)
        click.echo(json.dumps(out, indent=2))
    else:
        for r in reports:
            click.echo(r.verdict())
            if r.op in decisions:
                click.echo(f"  {decisions[r.op].summary()}")
            if r.changed:
                click.echo("  example diff (aligned vs migrated retrieved text):")
                for line in r.changed[0].diff.splitlines()[:8]:
                    click.echo(f"    {line}")
        if gate is not None:
            click.echo(f"policy calls: {gate.summary()}; run directory {run_dir}")
    if out_dir is not None:
        from .. import __version__
        from ..report import write_migration_report

        rows = [r.to_dict() | ({"decision_audit": decisions[r.op].to_dict()} if r.op in decisions else {})
                for r in reports]
        args = {"memory": memory_spec, "events": str(events_path), "ops": ops, "seed": seed, "k": k, "policy": policy,
                "repeats": repeats}
        write_migration_report(out_dir, rows, memory=memory_spec, events=events_path, seed=seed, k=k, policy=policy,
                               tool_version=__version__, arguments=args)
        if not as_json:
            click.echo(f"wrote {out_dir}/report.html, migration.json, manifest.json")
    if (gate is not None and not gate.ok) or not all(r.safe for r in reports):
        sys.exit(1)  # an UNSAFE migration is a failed expectation (exit code 1)
