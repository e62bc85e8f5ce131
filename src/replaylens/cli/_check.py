"""``replaylens check-writer``: the conformance kit for a writer/policy."""

from __future__ import annotations

import sys
from pathlib import Path

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
@click.option("--history", "history_path", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="Run on your own history (with --future and --utilities) instead of the built-in bandit.")
@click.option("--future", "future_path", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="Future task file (with --history).")
@click.option("--utilities", "util_path", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="Counterfactual utility table (with --history).")
@traceback_option
@user_errors
def check_writer_cmd(agent_spec: str, agent_param: tuple[str, ...], streams: int, seed: int, cells: str,
                     history_path: Path | None, future_path: Path | None, util_path: Path | None) -> None:
    """Conformance kit: which relations does a writer/policy depend on, and do its declared invariances hold?

    Declarations are judged on decisions; a state-level response is printed as information. A
    declared stochastic agent is read with two repeats under common random numbers.
    """
    from rich.markup import escape
    from rich.table import Table

    from ..agents import load_agent
    from ..errors import ConfigError
    from ..testing import check_writer

    paths = (history_path, future_path, util_path)
    data = None
    if any(p is not None for p in paths):
        if any(p is None for p in paths):
            raise ConfigError("check-writer on your own data needs all of --history, --future and --utilities")
        from ..records import check_inputs, read_evaluator, read_futures, read_history

        data = (read_history(history_path), read_futures(future_path), read_evaluator(util_path))  # type: ignore[arg-type]
        check_inputs(*data, strict=True)
    agent = load_agent(agent_spec, parse_params(agent_param))
    rep = check_writer(agent, n_streams=streams, seed=seed, cells=cells, data=data)
    ex = rep.extra
    table = Table(title=escape(f"check-writer: {rep.agent} ({ex['data']}, {ex['streams']} streams, "
                               f"{ex['repeats']} repeat(s), rng {ex['rng']})"))
    for col in ("relation", "what it changes", "response", "changed decisions", "changed states", "status"):
        table.add_column(col)
    for r in rep.relations:
        resp = "n/a" if r.response != r.response else f"{100 * r.response:.1f}%"
        table.add_row(*(escape(x) for x in (r.relation, r.description, resp, f"{r.changed}/{r.decisions}", r.state,
                                            r.status)))
    table_console().print(table)
    for c in rep.checks:
        click.echo(f"[{'pass' if c.passed else 'FAIL'}] {c.name}: {c.detail}")
    for line in rep.notes():
        click.echo(f"note: {line}")
    deps = rep.depends_on()
    click.echo(f"{rep.agent} depends on: {', '.join(deps) if deps else 'none of the replayed relations'}")
    if not rep.passed:
        for line in rep.failures():
            click.echo(f"FAIL: {line}", err=True)
        click.echo("check-writer: FAILED", err=True)
        sys.exit(1)
    click.echo("check-writer: passed")
