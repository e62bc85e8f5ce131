"""``replaylens prune OUT``: keep an output directory's most recent runs (the policy ``audit --keep-runs`` applies
after every run), and the ``--keep-runs`` / ``--keep`` option type."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ..settings import DEFAULT_KEEP_RUNS
from ._app import cli, user_errors

__all__ = ["KEEP_HELP", "KeepRuns"]

KEEP_HELP = (f"Complete runs OUT keeps: the N most recently published (this run among them), or 'all'. Older "
             f"complete runs are removed; interrupted ones and directories ReplayLens did not make never are. "
             f"Default: {DEFAULT_KEEP_RUNS}.")


class KeepRuns(click.ParamType):
    """A number of runs (>= 1) or ``all`` (None: never pruned); the config's ``keep_runs`` goes through it too."""

    name = "N|all"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int | None:
        from ..errors import ConfigError
        from ..settings import keep_runs

        try:
            return keep_runs(value)
        except ConfigError:
            self.fail(f"{value!r} is not a number of runs (>= 1) or 'all'", param, ctx)


@cli.command()
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.option("--keep", "keep", default=DEFAULT_KEEP_RUNS, show_default=True, type=KeepRuns(),
              help="Complete runs kept: the N most recently published (OUT's latest always among them), or 'all'.")
@click.option("--interrupted", is_flag=True,
              help="Remove the interrupted runs too (their finished shards are lost: the same command then starts "
                   "afresh).")
@click.option("--dry-run", is_flag=True, help="Only list the runs that would be removed.")
@user_errors
def prune(out: Path, keep: int | None, interrupted: bool, dry_run: bool) -> None:
    """Remove the complete runs of OUT (OUT/runs/<run>/) beyond the KEEP most recently published, and so in each
    agent's directory of a several-agent audit in OUT (OUT/<agent>/runs/).  Kept always: OUT's latest run, an
    agent's run a kept comparison links, interrupted runs (rerunning their command resumes them; --interrupted
    removes them), anything without ReplayLens's run marker.  Refused while another run holds OUT (exit 2)."""
    from ..errors import InputError
    from ..report import most_recent, named_agent_outs, prune_agent_runs, prune_runs

    if not (out / "runs").is_dir():
        raise InputError(str(out), None, None, "no runs here (not an audit's output directory: OUT/runs is missing)")
    agents = named_agent_outs(out)   # read before pruning: the agents of every several-agent run
    gone = prune_runs(out, keep, interrupted=interrupted, dry_run=dry_run)
    gone += prune_agent_runs(agents, keep, skip=gone, interrupted=interrupted, dry_run=dry_run)   # (linked stay)
    verb = "would remove" if dry_run else "removed"
    for run in gone:
        click.echo(f"{verb} {run}")
    click.echo(f"{out}: {verb} {len(gone)} run{'' if len(gone) == 1 else 's'}"
               + ("" if keep is None else f" (keeping the {most_recent(keep)}"
                  + (f" of OUT and of each of its {len(agents)} agents' directories)" if agents else ")")))
