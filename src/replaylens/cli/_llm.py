"""``replaylens llm ...`` and ``reanalyze``: journaled model acquisition runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ._app import cli, model_progress, user_errors


@cli.group()
def llm() -> None:
    """LLM acquisition runs: validate, amend, acquire (every call is journaled in the run directory)."""


@llm.command("validate")
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--expected", type=click.IntRange(min=0), default=None, help="Expected number of requests.")
@user_errors
def llm_validate(run_dir: Path, expected: int | None) -> None:
    """Run the validation gate: counts against the plan, statuses, format retries, metadata checks."""
    from ..llm import validate as validate_run

    rep = validate_run(run_dir, expected=expected)
    click.echo(rep.summary())
    for p in rep.problems:
        click.echo(f"  problem: {p}")
    if not rep.ok:
        sys.exit(1)


@llm.command("amend")
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--reason", required=True)
@click.option("--authorized-by", required=True)
@click.option("--request-id", "request_ids", multiple=True, help="Failed request allowed one replacement.")
@user_errors
def llm_amend(run_dir: Path, reason: str, authorized_by: str, request_ids: tuple[str, ...]) -> None:
    """Record a capacity-replacement amendment (the only way a failed request may be replaced)."""
    from ..llm import amend as amend_run

    rec = amend_run(run_dir, reason=reason, authorized_by=authorized_by, request_ids=list(request_ids) or None)
    click.echo(json.dumps(rec, indent=2, default=str))


@llm.command("acquire")
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--env-file", default=".env", show_default=True)
@user_errors
def llm_acquire(run_dir: Path, env_file: str) -> None:
    """Acquire every planned request that still needs an attempt, with the run's frozen settings."""
    from rich.console import Console

    from ..llm import acquire_run

    with model_progress(Console(stderr=True)):
        summary = acquire_run(run_dir, env_file=env_file)
    click.echo(f"calls {summary.calls}, decided {summary.decided}, by status {summary.by_status}"
               + (f", access error: {summary.access_error}" if summary.access_error else ""))
    if summary.failed:
        click.echo(f"{len(summary.failed)} request(s) failed; see {run_dir}/attempts.jsonl")
        sys.exit(1)
