"""``replaylens validate``: check input files."""

from __future__ import annotations

from pathlib import Path

import click

from ._app import cli, user_errors


@cli.command()
@click.option("--history", "history_path", required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--future", "future_path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--utilities", "util_path", type=click.Path(dir_okay=False, path_type=Path))
@user_errors
def validate(history_path: Path, future_path: Path | None, util_path: Path | None) -> None:
    """Validate input files (exit 2 with FILE:LINE: field 'F': message on the first problem)."""
    from ..records import check_inputs, read_evaluator, read_futures, read_history

    h = read_history(history_path)
    f = read_futures(future_path) if future_path else None
    e = read_evaluator(util_path) if util_path else None
    if f is not None:
        check_inputs(h, f, e, strict=True)
    click.echo(f"ok: {len(h)} records in {len(h.streams)} streams" +
               (f"; {len(f)} future tasks" if f is not None else "") + ("; utilities cover every menu" if e else ""))
