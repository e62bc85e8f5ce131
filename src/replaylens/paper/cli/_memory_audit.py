"""``replaylens paper memory-audit``: the paper's model-level finite-memory repair selection (C1)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from ...cli import (
    BUDGET_EXIT,
    cache_options,
    cost_options,
    pop_cost,
    print_estimate,
    resolve_model,
    response_format_option,
    user_errors,
)
from ._group import paper


@paper.command("memory-audit")
@click.option("--model", required=True, help="scripted/mean, local/embedded, local/PATH.gguf or openai/NAME.")
@click.option("--base-url", default=None, help="For openai/...: the endpoint's base URL.")
@click.option("--run-dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Run directory (RUN/development, RUN/dev_selection_freeze.json, RUN/test); rerun to resume.")
@click.option("--export", "export_path", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="After both gates pass, write the compact export (gzip JSON) here.")
@click.option("--api-key-env", default="OPENAI_API_KEY", show_default=True)
@click.option("--env-file", default=".env", show_default=True)
@click.option("--concurrency", default=None, type=click.IntRange(min=1),
              help="Concurrent requests (default 1 for local models, 16 otherwise).")
@click.option("--threads", default=None, type=click.IntRange(min=1), help="Local models: CPU threads.")
@response_format_option
@cost_options
@cache_options
@user_errors
def memory_audit_cmd(model: str, base_url: str | None, run_dir: Path, export_path: Path | None, api_key_env: str,
                     env_file: str, concurrency: int | None, threads: int | None, cache_path: Path | None,
                     no_cache: bool, cache_sampled: bool, response_format: str, **cost_kw: Any) -> None:
    """Finite-memory repair selection (paper §4.5, C1) with MODEL: 704 development requests, the frozen
    selection, then 768 test requests on 48 new streams (four block items per request).

    An interrupted run resumes where it stopped (rerun the same command); a finished run is re-analysed
    with zero model calls.  Needs the public data (replaylens paper data fetch --all).
    """
    from ...llm import AcquireSettings, BudgetExhausted
    from ...memory.bounded import memory_backend
    from ..experiments.memory import export_memory_run, run_memory_audit

    cost = pop_cost(cost_kw)
    spec = resolve_model(model)
    local = spec.startswith("local/")
    if cost.estimate:
        _estimate_memory(spec, base_url, api_key_env, env_file, response_format, cost)
        return
    backend = memory_backend(spec, base_url=base_url, api_key_env=api_key_env or None, env_file=env_file,
                             threads=threads, n_ctx=2048 if local else 4096, response_format=response_format)
    from ...llm import with_cache

    backend = with_cache(backend, False if no_cache else (cache_path or True), sampled=cache_sampled)
    acq = AcquireSettings(concurrency=concurrency or (1 if local else 16))
    try:
        a = run_memory_audit(backend, run_dir, acquire=acq, spend=cost.budget(spec))
    except BudgetExhausted as exc:
        click.echo(f"PARTIAL: {exc}", err=True)
        sys.exit(BUDGET_EXIT)
    if a.dev_report is not None:
        click.echo(f"development: {a.dev_report.summary() if not isinstance(a.dev_report, dict) else a.dev_report}")
    if a.development is None:
        click.echo(f"development not complete; rerun to resume ({run_dir / 'development'})", err=True)
        sys.exit(1)
    for mem, row in a.development.items():
        click.echo(f"  {mem:12s} " + "  ".join(f"{c}={v:.3f}" for c, v in row.items()))
    click.echo(f"selection {a.selection} frozen in {run_dir / 'dev_selection_freeze.json'} "
               f"(sha256 {(a.selection_sha256 or '')[:16]})")
    if a.test_report is not None:
        click.echo(f"test: {a.test_report.summary() if not isinstance(a.test_report, dict) else a.test_report}")
    if a.test is None or a.contrasts is None:
        click.echo(f"test not complete; rerun to resume ({run_dir / 'test'})", err=True)
        sys.exit(1)
    for arm, cols in a.test.items():
        click.echo(f"  {arm:10s} " + "  ".join(f"{c}={float(v.mean()):.3f}" for c, v in cols.items()))
    for comp, (est, lo, hi) in a.contrasts.items():
        click.echo(f"  audit − {comp}: {est:.3f} ×10⁻³ [{lo:.3f}, {hi:.3f}] (97.5%)")
    if export_path is not None:
        click.echo(f"export written to {export_memory_run(run_dir, export_path)}")


TEST_REQUESTS = 768
"""Requests of the test phase (spec C1.8: 48 streams × 16 requests), known before the selection is frozen."""


def _estimate_memory(spec: str, base_url: str | None, api_key_env: str, env_file: str, response_format: str,
                     cost: Any) -> None:
    """Development requests counted exactly; the test phase (built only after the frozen selection, so it cannot
    be rendered beforehand) extrapolated from the development mean per request, as the output declares."""
    from ...llm import ModelSettings, make_backend
    from ..experiments.memory import development_design

    backend: Any
    if spec.startswith(("local/", "scripted/")):
        backend = type("_Settings", (), {"settings": ModelSettings(spec.partition("/")[0], spec)})()
    else:
        backend = make_backend(spec, base_url=base_url, api_key_env=None, env_file=env_file,  # sends nothing
                               response_format=response_format)
        backend.resolve_format(None, probe=False)
    reqs = development_design().requests(backend.settings.digest())
    est = print_estimate(reqs, model=spec, backend=backend, cost=cost, what="memory-audit, development phase")
    f = TEST_REQUESTS / max(est["requests"], 1)
    t_in, t_out = round(est["input_tokens"] * f), round(est["output_tokens"] * f)
    c = cost.pricing(spec).cost(t_in, t_out)
    click.echo(f"  test phase (extrapolated from the development mean per request; its prompts exist only after the "
               f"frozen selection): {TEST_REQUESTS:,} requests, {t_in:,} in / {t_out:,} out tokens"
               + ("" if c is None else f", {c:.4f} USD"))
    total = None if c is None or est["cost_usd"] is None else c + est["cost_usd"]
    click.echo(f"  both phases: {est['requests'] + TEST_REQUESTS:,} requests, {est['input_tokens'] + t_in:,} in / "
               f"{est['output_tokens'] + t_out:,} out tokens" + ("" if total is None else f", {total:.4f} USD"))
