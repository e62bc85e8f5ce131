"""``replaylens paper reproduce``: the paper's values next to ours."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from ...cli import table_console, user_errors
from ._group import paper


@paper.command()
@click.argument("names", nargs=-1)
@click.option("--list", "list_", is_flag=True, help="List the registered reproductions.")
@click.option("--all", "all_", is_flag=True, help="Run every reproduction.")
@click.option("--issue", "issue", default=None, help="With --all or --list: only the reproductions of this issue.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per compared cell.")
@click.option("--markdown", "markdown", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the rows as markdown (docs/paper/reproduction.md is generated this way); when only "
                   "some reproductions run and FILE exists, their sections are replaced and the totals recounted.")
@click.option("--check", "check", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="Regenerate the chosen sections in memory and exit 1 if any differs from FILE "
                   "(docs/paper/reproduction.md; timing rows excepted); FILE is not written.")
@user_errors
def reproduce(names: tuple[str, ...], list_: bool, all_: bool, issue: str | None, as_json: bool,
              markdown: Path | None, check: Path | None) -> None:
    """Run paper reproductions (NAME ...): the paper's value next to ours, with the status of each comparison."""
    from ...errors import ConfigError
    from ..experiments import all_reproductions
    from ..reproduce import get_reproduction

    every = all_reproductions()
    regs = every
    if issue is not None:
        regs = {k: r for k, r in every.items() if r.issue == issue}
        if not regs:
            raise ConfigError(f"no reproduction belongs to issue {issue!r}")
    if list_:
        for r in regs.values():
            click.echo(f"{r.name:32s} {r.title}")
        return
    if all_:
        chosen = list(regs)
    elif names:
        chosen = list(dict.fromkeys(get_reproduction(n).name for n in names))
    else:
        raise ConfigError("give a reproduction NAME, --all or --list")
    from collections import Counter

    n_status: Counter[str] = Counter()
    collected: list[dict[str, Any]] = []
    for nm in chosen:
        rows = get_reproduction(nm).run()
        for row in rows:
            n_status[row.status] += 1
            collected.append({"reproduction": nm, **row.to_dict()})
            if as_json:
                click.echo(json.dumps(collected[-1]))
        if not as_json:
            _print_rows(nm, rows)
    if markdown is not None:
        from ..._durable import atomic_write
        from ..reproduce import render_reproduction_markdown, update_reproduction_markdown

        titles = {n: r.title for n, r in every.items()}
        if set(chosen) != set(every) and markdown.is_file():
            text = update_reproduction_markdown(markdown.read_text(encoding="utf-8"), collected, titles, list(every))
        else:
            text = render_reproduction_markdown(collected, titles)
        markdown.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(markdown, (text + "\n").encode("utf-8"))
    if not as_json:
        from ..reproduce import STATUSES

        click.echo(", ".join(f"{n_status[s]} {s}" for s in STATUSES))
    if check is not None:
        _check(check, collected, {n: r.title for n, r in every.items()})


def _check(path: Path, collected: list[dict[str, Any]], titles: dict[str, str]) -> None:
    """Exit 1 naming each regenerated section that differs from ``path`` (and its first differing line)."""
    from ..reproduce import differing_lines

    diff = differing_lines(path.read_text(encoding="utf-8"), collected, titles)
    for name, (old, new) in diff.items():
        click.echo(f"{path}: section `{name}` differs from the regenerated one: {old!r} -> {new!r}", err=True)
    if diff:
        raise SystemExit(1)
    click.echo(f"{path}: the {len({r['reproduction'] for r in collected})} regenerated section(s) are identical "
               "(timing rows excepted)", err=True)


def _print_rows(name: str, rows: list[Any]) -> None:
    from rich.table import Table

    t = Table(title=name)
    for col in ("table", "row", "column", "paper", "ours", "tol", "status"):
        t.add_column(col)

    def f(x: float | None) -> str:
        return "—" if x is None else f"{x:.3f}"

    colours = {"match": "green", "self-check": "cyan", "differs": "red", "self-check failed": "red"}
    for r in rows:
        style = colours.get(r.status, "yellow")
        t.add_row(r.table, r.row, r.column, f(r.paper), f(r.ours), f(r.tolerance), f"[{style}]{r.status}[/]")
    table_console().print(t)
    notes = sorted({r.note for r in rows if r.note})
    for n in notes:
        click.echo(f"note: {n}")
