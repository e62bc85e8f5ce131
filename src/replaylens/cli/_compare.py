"""``replaylens compare OUT_A OUT_B``: paired comparison of two audits on the same plan."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import click

from ._app import cli, user_errors
from ._regress import emit_regressions, fail_on_options


@cli.command()
@click.argument("out_a", type=click.Path(file_okay=False, path_type=Path))
@click.argument("out_b", type=click.Path(file_okay=False, path_type=Path))
@click.option("--out", "html_out", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="Write the HTML comparison page here (self-contained, offline).")
@click.option("--resamples", default=None, type=click.IntRange(min=1),
              help="Stream-cluster bootstrap draws (default: those of OUT_A).")
@click.option("--level", default=None, type=click.FloatRange(0.5, 0.9999), help="Interval level (default: OUT_A's).")
@fail_on_options
@user_errors
def compare(out_a: Path, out_b: Path, html_out: Path | None, resamples: int | None, level: float | None,
            fail_on: str, as_json: bool, on_inconclusive: str) -> None:
    """Compare two audits of the same plan (same inputs and seed), e.g. agent v1 vs v2: per cell the
    difference B − A in action response, ΔU and ΔO with a stream-cluster bootstrap interval on the
    paired per-stream differences.  Refuses audits of different plans, inputs or seeds (exit 2).
    With --fail-on (OUT_A the baseline), exit 1 when B regressed past a threshold."""
    from rich.console import Console
    from rich.table import Table

    from .._durable import umask_mode
    from ..report import compare_audits, load_results, render_comparison

    a, b = load_results(out_a), load_results(out_b)
    c = compare_audits(a, b, n_resamples=resamples, level=level)
    if as_json:  # issue 24: machine-readable comparison and regressions, exit 1 on a regression
        sys.exit(emit_regressions(c, fail_on, as_json=True, on_inconclusive=on_inconclusive))
    lv = f"{100 * c['level']:g}%"
    table = Table(title=f"{c['b']} − {c['a']} ({c['n_streams']} streams, paired by stream)")
    for col, right in (("cell", False), (f"Δ action response [{lv}]", True), (f"ΔΔU [{lv}]", True),
                       (f"ΔΔO [{lv}]", True), ("changed in A only / B only", True),
                       ("decisions A ≠ B", True)):
        table.add_column(col, justify="right" if right else "left")

    def iv(x: float, ci: list[float], pct: bool) -> str:
        if pct:
            return f"{100 * x:+.1f}pp [{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]"
        return f"{x:+.4f} [{ci[0]:+.4f}, {ci[1]:+.4f}]"

    for r in c["rows"]:
        table.add_row(r["cell"], iv(r["action"], r["action_ci"], True),
                      iv(r["delta_utility"], r["delta_utility_ci"], False),
                      iv(r["delta_oracle"], r["delta_oracle_ci"], True),
                      f"{r['n_a_only']} / {r['n_b_only']} of {r['n_compared']}",
                      f"{r['n_differ']} / {r['n_decisions']}")
    Console(width=max(132, Console().width)).print(table)
    click.echo(f"aligned replay: mean utility {c['aligned_a']:.4f} ({c['a']}) vs {c['aligned_b']:.4f} ({c['b']}); "
               f"{c['n_differ_aligned']} of {c['n_aligned']} aligned decisions differ")
    if html_out is not None:
        html_out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=html_out.parent, prefix=".compare-", suffix=".html")
        os.fchmod(fd, umask_mode())  # the user's umask, not mkstemp's 0600
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(render_comparison(c, a.manifest))
        os.replace(tmp, html_out)
        click.echo(f"wrote {html_out}")
    sys.exit(emit_regressions(c, fail_on, as_json=False, on_inconclusive=on_inconclusive))
