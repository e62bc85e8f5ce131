"""``replaylens paper joint`` and ``paper reanalyze``: the paper's joint history-menu challenge and the
code-debugging export re-analysis."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from ...cli import (
    BUDGET_EXIT,
    CostOptions,
    cache_options,
    cost_options,
    model_progress,
    pop_cost,
    print_estimate,
    resolve_model,
    response_format_option,
    user_errors,
)
from ._group import paper


@paper.command("joint")
@click.option("--model", required=True, help="openai/NAME, scripted/RULE, local/PATH.gguf or local/embedded.")
@click.option("--run-dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Run directory (created, or resumed when it exists).")
@click.option("--base-url", default=None, help="For openai/...: the endpoint's base URL.")
@click.option("--api-key-env", default="OPENAI_API_KEY", show_default=True)
@click.option("--env-file", default=".env", show_default=True)
@click.option("--concurrency", default=None, type=click.IntRange(min=1),
              help="Concurrent requests (default 1 for local models, 16 otherwise).")
@click.option("--threads", default=None, type=click.IntRange(min=1), help="Local models: CPU threads.")
@click.option("--export", "export_path", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="After a passing gate, write the compact export (gzip JSON) here.")
@click.option("--offline", is_flag=True, help="Analyse recorded decisions only (no model calls).")
@click.option("--state-off", is_flag=True, help="The empty-ledger comparator (records removed before serialization).")
@click.option("--prompt-cache", "memo_path", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="Local models: keep the exact repeat memo in this file, so a restarted run keeps it.")
@response_format_option
@cost_options
@cache_options
@user_errors
def llm_joint(model: str, run_dir: Path, base_url: str | None, api_key_env: str, env_file: str,
              concurrency: int | None, threads: int | None, export_path: Path | None, offline: bool,
              state_off: bool, memo_path: Path | None, cache_path: Path | None, no_cache: bool,
              cache_sampled: bool, response_format: str, **cost_kw: Any) -> None:
    """Run the joint history-menu challenge (3,840 requests) with MODEL, journaled in RUN_DIR.

    An interrupted run resumes where it stopped (rerun the same command); a finished run is
    re-analysed with zero model calls.  Needs the public data (replaylens paper data fetch --all).
    """
    from ...llm import AcquireSettings, Backend, BudgetExhausted, make_backend
    from ..experiments.joint_challenge import export_challenge_run, run_challenge
    from ..experiments.public_data import public_world

    cost = pop_cost(cost_kw)
    spec = resolve_model(model)
    backend: Backend
    if cost.estimate:
        _estimate_joint(spec, base_url, api_key_env, env_file, response_format, state_off, cost)
        return
    if spec.startswith("local/"):
        from ...llm import LlamaCppBackend

        backend = LlamaCppBackend(spec.partition("/")[2], n_ctx=2048, n_threads=threads, memo_path=memo_path)
    else:
        backend = make_backend(spec, base_url=base_url, api_key_env=api_key_env, env_file=env_file,
                               response_format=response_format)
    from ...llm import with_cache

    backend = with_cache(backend, False if no_cache else (cache_path or True), sampled=cache_sampled)
    local = spec.startswith("local/")
    conc = concurrency or (1 if local else 16)
    local_timeout = 3600.0  # an in-process model cannot be interrupted mid-request; a busy CPU makes requests slow
    from rich.console import Console

    with model_progress(Console(stderr=True)):
        try:
            ch = run_challenge(public_world(), backend=backend, run_dir=run_dir, offline=offline,
                               state_off=state_off, spend=cost.budget(spec),
                               acquire=AcquireSettings(concurrency=conc, timeout_s=local_timeout if local else 180.0))
        except BudgetExhausted as exc:
            click.echo(f"PARTIAL: {exc}", err=True)
            sys.exit(BUDGET_EXIT)
    n_dec = int((ch.Y >= 0).sum())
    click.echo(f"joint challenge with {ch.agent}: {n_dec}/{ch.Y.size} block decisions, gate "
               f"{'passed' if ch.gate_ok else 'NOT passed'}; run directory {run_dir}")
    stats = getattr(backend, "stats", None)
    if callable(stats):
        click.echo(f"request cache {stats()['path']}: {stats()['decisions_from_cache']} decision(s) from the cache")
    if ch.gate_ok and not state_off:
        con = ch.renaming_contrast("full")
        click.echo(f"assignment minus renaming (Full): {float(con.mean()):.3f}; Mean agreement (Full, 00): "
                   f"{float(ch.agreement('mean', 'full').mean()):.3f}")
    if ch.gate_ok and export_path is not None:
        click.echo(f"export written to {export_challenge_run(run_dir, export_path)}")
    elif export_path is not None:
        click.echo("no export: the validation gate has not passed (rerun to resume)", err=True)
        sys.exit(1)


def _estimate_joint(spec: str, base_url: str | None, api_key_env: str, env_file: str, response_format: str,
                    state_off: bool, cost: CostOptions) -> None:
    """The joint challenge's requests, tokens and cost, with no model loaded and no request made."""
    from ...llm import ModelSettings, make_backend
    from ..experiments.joint_challenge import (
        DESIGN_SEED,
        SEARCH_BUDGET,
        SEARCH_SEED,
        challenge_design,
        search_histories,
    )
    from ..experiments.public_data import public_world

    backend: Any
    if spec.startswith("local/"):  # the request ids do not matter here: no model needs loading
        backend = type("_Local", (), {"settings": ModelSettings("local", spec)})()
    else:
        backend = make_backend(spec, base_url=base_url, api_key_env=api_key_env, env_file=env_file,
                               response_format=response_format)
        if hasattr(backend, "resolve_format"):
            backend.resolve_format(None, probe=False)
    hist = search_histories(public_world(), budget=SEARCH_BUDGET, seed=SEARCH_SEED)
    design = challenge_design(hist, seed=DESIGN_SEED, state_off=state_off)
    reqs = design.requests(backend.settings.digest())
    print_estimate(reqs, model=spec, backend=backend, cost=cost, what="the joint challenge",
                   group=lambda r: f"{r.meta.get('namespace')}/{r.meta.get('form')}")


@paper.command()
@click.argument("export_path", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--json", "as_json", is_flag=True)
@user_errors
def reanalyze(export_path: Path, as_json: bool) -> None:
    """Recompute every code-debugging table from a compact export (no model call, no sandbox)."""
    from ..tools import reanalyze as reanalyze_export

    tables = reanalyze_export(export_path)
    click.echo(json.dumps(tables, indent=2, default=str) if as_json else _format_tables(tables))


def _format_tables(tables: dict[str, Any]) -> str:
    lines = []
    for key, val in tables.items():
        lines.append(f"{key}: {json.dumps(val, default=str)}")
    return "\n".join(lines)
