"""``replaylens check-writer``: the conformance kit for a writer/policy."""

from __future__ import annotations

import sys

import click

from ..settings import DEFAULT_CELLS
from ._app import cli, parse_params, table_console, traceback_option, user_errors


@cli.command("check-writer")
@click.argument("agent_spec")
@click.option("--agent-param", multiple=True, metavar="KEY=JSON", help="Keyword argument for the agent factory.")
@click.option("--streams", default=8, show_default=True, type=click.IntRange(min=2),
              help="Streams of the built-in bandit the agent is replayed on.")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0),
              help="Root seed of the bandit, the slot draws and the per-decision rng.")
@click.option("--cells", default=",".join(DEFAULT_CELLS), show_default=True,
              help="Relations to replay (comma list); drop mask for an agent that cannot take NaN outcomes.")
@traceback_option
@user_errors
def check_writer_cmd(agent_spec: str, agent_param: tuple[str, ...], streams: int, seed: int, cells: str) -> None:
    """Conformance kit: which relations does a writer/policy depend on, and do its declared invariances hold?"""
    from rich.table import Table

    from ..agents import load_agent
    from ..testing import check_writer

    agent = load_agent(agent_spec, parse_params(agent_param))
    rep = check_writer(agent, n_streams=streams, seed=seed, cells=cells)
    table = Table(title=f"check-writer: {rep.agent}")
    for col in ("relation", "what it changes", "response", "changed decisions", "changed states", "status"):
        table.add_column(col)
    for r in rep.relations:
        table.add_row(r.relation, r.description, f"{100 * r.response:.1f}%", f"{r.changed}/{r.decisions}", r.state,
                      r.status)
    table_console().print(table)
    for c in rep.checks:
        click.echo(f"[{'pass' if c.passed else 'FAIL'}] {c.name}: {c.detail}")
    deps = rep.depends_on()
    click.echo(f"{rep.agent} depends on: {', '.join(deps) if deps else 'none of the replayed relations'}")
    if not rep.passed:
        click.echo("check-writer: FAILED", err=True)
        sys.exit(1)
    click.echo("check-writer: passed")
