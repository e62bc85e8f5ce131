"""``--fail-on`` and ``--json`` of ``compare`` and ``audit --baseline`` (issue 24)."""

from __future__ import annotations

import json
from typing import Any

import click

from ._app import F

__all__ = ["emit_regressions", "fail_on_options"]

fail_on_option = click.option(
    "--fail-on", "fail_on", default="", metavar="[CELL.]METRIC:THRESHOLD,...",
    help="Exit 1 when the new run regressed against the baseline (A): action:0.05 (decisions changed rose by "
         "> 5 pp), utility:0.01 (ΔU fell by > 0.01), oracle:0.02 (ΔO fell by > 2 pp); prefix a cell to "
         "scope one (pair.action:0).")
json_option = click.option("--json", "as_json", is_flag=True,
                           help="Print the comparison (and any regression) as JSON on stdout.")


def fail_on_options(fn: F) -> F:
    return fail_on_option(json_option(fn))


def emit_regressions(comparison: dict[str, Any], fail_on: str, *, as_json: bool) -> int:
    """Print the regressions (stderr lines, or the JSON document); the exit code: 1 on a regression."""
    from ..report import parse_fail_on, regressions, strict_json

    thresholds = parse_fail_on(fail_on)
    lines = regressions(comparison, thresholds)
    if as_json:
        doc = comparison | {"fail_on": [t.describe() for t in thresholds], "regressions": lines,
                            "passed": not lines}
        click.echo(json.dumps(strict_json(doc), indent=2, allow_nan=False))
    for line in lines:
        click.echo(line, err=True)
    return 1 if lines else 0
