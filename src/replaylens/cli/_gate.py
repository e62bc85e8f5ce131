"""The audit's gate (issue 24): declared expectations (``--expect``, ``--expect-invariant``, the project
config), and what a CI run reads after the audit — JUnit XML, the GitHub step summary, the exit code."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from ..report._verdict import Expectation
from ._app import F
from ._config import config_option

__all__ = ["GateOptions", "finish_gate", "gate_expectations", "gate_options"]


@dataclass(frozen=True)
class GateOptions:
    """The audit options that decide and report the verdict (not the replay)."""

    expect: tuple[str, ...] = ()
    junit_xml: Path | None = None


_OPTIONS = [
    config_option,
    click.option("--expect", "expect_specs", multiple=True, metavar="CELL=KIND[:TOL]",
                 help="Declare an expectation (repeatable): KIND is invariant (no decision change beyond TOL), "
                      "responds (decisions must change), or free. Declared expectations set the exit code "
                      "(1 when one fails); they and the defaults are judged in report.html and summary.json."),
    click.option("--junit-xml", "junit_xml", default=None, type=click.Path(dir_okay=False, path_type=Path),
                 help="Write a JUnit XML file: one testcase per expectation; a failed declared expectation is a "
                      "failure naming the cell, the count and one changed decision."),
]


def gate_options(fn: F) -> F:
    """Add the gate options to a command; the command receives them as one ``gate: GateOptions``."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        gate = GateOptions(expect=tuple(kwargs.pop("expect_specs", ())), junit_xml=kwargs.pop("junit_xml", None))
        return fn(*args, gate=gate, **kwargs)

    for opt in reversed(_OPTIONS):
        wrapper = opt(wrapper)
    return wrapper  # type: ignore[return-value]


def gate_expectations(gate: GateOptions | None, invariant: list[str], tolerance: float,
                      plan: Any) -> dict[str, Expectation]:
    """Declared expectations: ``--expect`` (or the config's ``expect`` table) and ``--expect-invariant`` cells
    at ``--tolerance`` (which win for a cell named in both); every cell must be a replayed row."""
    from ..errors import ConfigError
    from ..report._verdict import parse_expect_specs
    from ._expect import declared_expectations

    extra = parse_expect_specs(gate.expect) if gate is not None else {}
    known = set(plan.cell_names[1:]) | ({"rekey"} if len(plan.maps) > 1 else set())
    for name in extra:
        if name not in known:
            raise ConfigError(f"--expect: {name!r} is not a replayed cell (replayed: {', '.join(sorted(known))}); "
                              "add it to --cells")
    return declared_expectations(invariant, tolerance, extra)


def finish_gate(result: Any, out: Path, gate: GateOptions | None, *, history: Any = None,
                futures: Any = None) -> int:
    """Write the CI outputs of a finished audit and print one line per failed declared expectation;
    the exit code (1 when a declared expectation failed, else 0)."""
    from .._durable import atomic_write
    from ..report._ci import junit_xml, step_summary
    from ..report._verdict import failure_lines

    summary = result.summary()
    failed = failure_lines(summary["verdict"])
    if gate is not None and gate.junit_xml is not None:
        examples = None
        if summary["verdict"]["overall"] != "SAFE" and history is not None and futures is not None:
            from ..report import changed_examples

            examples = changed_examples(result.decisions, history, futures, per_row=1, max_records=8)
        gate.junit_xml.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(gate.junit_xml, junit_xml([summary], [examples]).encode())
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if target:
        with open(target, "a", encoding="utf-8") as fh:
            fh.write(step_summary(summary, str(out / "report.html")))
    for line in failed:
        click.echo(line, err=True)
    return 1 if failed else 0
