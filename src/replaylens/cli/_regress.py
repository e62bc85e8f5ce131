"""``--fail-on`` and ``--json`` of ``compare`` and ``audit --baseline`` (issue 24)."""

from __future__ import annotations

import json
from typing import Any

import click

from ._app import F

__all__ = ["emit_regressions", "fail_on_options", "on_inconclusive_option", "regression_document"]

fail_on_option = click.option(
    "--fail-on", "fail_on", default="", metavar="[CELL.]METRIC:THRESHOLD,...",
    help="Exit 1 when the new run regressed against the baseline (A): action:0.05 (decisions changed rose by "
         "> 5 pp), utility:0.01 (ΔU fell by > 0.01), oracle:0.02 (ΔO fell by > 2 pp); prefix a cell to "
         "scope one (pair.action:0).")
json_option = click.option("--json", "as_json", is_flag=True,
                           help="Print the comparison (and any regression) as JSON on stdout.")


on_inconclusive_option = click.option(
    "--on-inconclusive", "on_inconclusive", default="pass", show_default=True, type=click.Choice(["pass", "fail"]),
    help="What an INCONCLUSIVE regression check (a stochastic agent's difference neither shown beyond nor within "
         "the threshold) does to the exit code: pass (exit 0) or fail (exit 1).")


def fail_on_options(fn: F) -> F:
    return fail_on_option(on_inconclusive_option(json_option(fn)))


def regression_document(comparison: dict[str, Any], fail_on: str, on_inconclusive: str) -> dict[str, Any]:
    """The comparison with its ``--fail-on`` verdicts: ``regressions`` (the failing lines), ``checks`` (every
    (row, threshold) with REGRESSED / NO REGRESSION / INCONCLUSIVE) and ``passed``."""
    from ..report import parse_fail_on, regression_verdicts

    thresholds = parse_fail_on(fail_on)
    checks = regression_verdicts(comparison, thresholds, on_inconclusive=on_inconclusive)
    lines = [v["line"] for v in checks if v["fails"]]
    return comparison | {"fail_on": [t.describe() for t in thresholds], "on_inconclusive": on_inconclusive,
                         "checks": checks, "regressions": lines, "passed": not lines}


def emit_regressions(comparison: dict[str, Any], fail_on: str, *, as_json: bool, on_inconclusive: str = "pass") -> int:
    """Print the regressions (stderr lines, or the JSON document) and every INCONCLUSIVE check; the exit code:
    1 on a regression (or an INCONCLUSIVE check under ``on_inconclusive="fail"``)."""
    from ..report import strict_json

    doc = regression_document(comparison, fail_on, on_inconclusive)
    if as_json:
        click.echo(json.dumps(strict_json(doc), indent=2, allow_nan=False))
    for v in doc["checks"]:
        if v["fails"] or v["status"] == "INCONCLUSIVE":
            click.echo(v["line"], err=True)
    return 0 if doc["passed"] else 1
