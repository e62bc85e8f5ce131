"""The audit's gate (issue 24): declared expectations (``--expect``, ``--expect-invariant``, the project
config), and what a CI run reads after the audit — JUnit XML, the GitHub step summary, the exit code."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from ..report import Expectation
from ._app import F
from ._config import config_option
from ._regress import fail_on_option

__all__ = ["GateOptions", "finish_gate", "gate_expectations", "gate_options", "refuse_several_agents"]


@dataclass(frozen=True)
class GateOptions:
    """The audit options that decide and report the verdict (not the replay)."""

    expect: tuple[str, ...] = ()
    junit_xml: Path | None = None
    baseline: Path | None = None
    fail_on: str = ""
    on_inconclusive: str = "pass"

    def check(self) -> None:
        """Refuse (one line, exit 2) options that would otherwise be ignored: ``--fail-on`` without ``--baseline``."""
        from ..errors import ConfigError

        if self.fail_on and self.baseline is None:
            raise ConfigError("--fail-on compares against a stored run: give --baseline OUT_DIR (or drop --fail-on)")


_OPTIONS = [
    config_option,
    click.option("--expect", "expect_specs", multiple=True, metavar="CELL=KIND[:TOL]",
                 help="Declare an expectation (repeatable): KIND is invariant (no decision change beyond TOL), "
                      "responds (decisions must change), or free. Declared expectations set the exit code "
                      "(1 when one fails); they and the defaults are judged in report.html and summary.json."),
    click.option("--junit-xml", "junit_xml", default=None, type=click.Path(dir_okay=False, path_type=Path),
                 help="Write a JUnit XML file: one testcase per expectation; a failed declared expectation is a "
                      "failure naming the cell, the count and one changed decision."),
    click.option("--baseline", "baseline", default=None, type=click.Path(path_type=Path),
                 help="A stored run (its OUT directory or summary.json) of the same plan and inputs: report per cell "
                      "the paired difference against it (OUT/baseline.json); --fail-on makes a regression exit 1."),
    fail_on_option,
    click.option("--on-inconclusive", "on_inconclusive", default="pass", show_default=True,
                 type=click.Choice(["pass", "fail"]),
                 help="What an INCONCLUSIVE declared expectation (neither shown within its margin nor beyond it) "
                      "does to the exit code: pass (exit 0, the line says INCONCLUSIVE) or fail (exit 1)."),
]


def gate_options(fn: F) -> F:
    """Add the gate options to a command; the command receives them as one ``gate: GateOptions``."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        gate = GateOptions(expect=tuple(kwargs.pop("expect_specs", ())), junit_xml=kwargs.pop("junit_xml", None),
                           baseline=kwargs.pop("baseline", None), fail_on=kwargs.pop("fail_on", ""),
                           on_inconclusive=kwargs.pop("on_inconclusive", "pass"))
        return fn(*args, gate=gate, **kwargs)

    for opt in reversed(_OPTIONS):
        wrapper = opt(wrapper)
    return wrapper  # type: ignore[return-value]


def refuse_several_agents(gate: GateOptions, expect_invariant: str) -> None:
    """A gate judges one agent: refuse (one line) gate options on a several-agent audit rather than ignore them."""
    from ..errors import ConfigError

    used = [name for name, on in (("--expect", gate.expect), ("--expect-invariant", expect_invariant),
                                  ("--junit-xml", gate.junit_xml), ("--baseline", gate.baseline)) if on]
    if used:
        raise ConfigError(f"{', '.join(used)} judge one agent per run; audit each agent on its own (or compare "
                          "their OUT/<agent> directories with `replaylens compare`)")


def gate_expectations(gate: GateOptions | None, invariant: str, tolerance: float | None,
                      plan: Any) -> dict[str, Expectation]:
    """Declared expectations: ``--expect`` (or the config's ``expect`` table) and the ``--expect-invariant``
    cells (comma-separated, ``rekey`` included) at ``--tolerance`` (which win for a cell named in both); every
    cell either names must be a replayed row."""
    from ..errors import ConfigError
    from ..report import parse_expect_specs
    from ._expect import declared_expectations

    extra = parse_expect_specs(gate.expect) if gate is not None else {}
    names = [c.strip() for c in invariant.split(",") if c.strip()]
    known = set(plan.cell_names[1:]) | ({"rekey"} if len(plan.maps) > 1 else set())
    for option, cells in (("--expect-invariant", names), ("--expect", list(extra))):
        for name in cells:
            if name not in known:
                raise ConfigError(f"{option}: {name!r} is not a replayed cell (replayed: "
                                  f"{', '.join(sorted(known))}); add it to --cells")
    return declared_expectations(names, tolerance, extra)


def finish_gate(result: Any, out: Path, gate: GateOptions | None, *, history: Any = None,
                futures: Any = None) -> int:
    """Write the CI outputs of a finished audit and print one line per failed declared expectation;
    the exit code (1 when a declared expectation failed, else 0)."""
    from .._durable import atomic_write
    from ..report import failure_lines, junit_xml, step_summary

    summary = result.document()   # read-only here: no copy of every per-stream value
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
    regressed = _against_baseline(out, gate) if gate is not None and gate.baseline is not None else []
    return 1 if failed or regressed else 0


def _against_baseline(out: Path, gate: GateOptions) -> list[str]:
    """Compare the finished run in OUT with ``--baseline`` (refused unless same plan, inputs and seed);
    write OUT/baseline.json, print one line per row and per regression; the regression lines."""
    import json

    from .._durable import atomic_write
    from ..report import baseline_dir, compare_audits, load_results, strict_json
    from ._regress import regression_document

    assert gate.baseline is not None
    c = compare_audits(load_results(baseline_dir(gate.baseline)), load_results(out))
    doc = regression_document(c, gate.fail_on, gate.on_inconclusive)
    lines = doc["regressions"]
    atomic_write(out / "baseline.json", (json.dumps(strict_json(doc), indent=2, allow_nan=False) + "\n").encode())
    for r in c["rows"]:
        lo, hi = r["action_ci"]
        ci = "n/a" if lo is None or lo != lo else f"{100 * lo:+.1f}, {100 * hi:+.1f}"
        click.echo(f"baseline {r['cell']}: decisions changed {100 * r['action']:+.1f}pp [{ci}], utility "
                   f"{r['delta_utility']:+.4f}, oracle {100 * r['delta_oracle']:+.1f}pp; changed in baseline only "
                   f"{r['n_a_only']}, in this run only {r['n_b_only']} of {r['n_compared']}")
    for v in doc["checks"]:
        if v["fails"] or v["status"] == "INCONCLUSIVE":
            click.echo(v["line"], err=True)
    return list(lines)
