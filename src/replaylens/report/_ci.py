"""CI outputs of an audit's verdict: JUnit XML (one testcase per expectation) and a Markdown step summary.

The JUnit file follows the shape pytest's ``--junit-xml`` writes (``testsuites > testsuite > testcase``
with ``failure``/``skipped`` children and the ``tests``/``failures``/``errors``/``skipped`` counts), the
shape GitHub, GitLab, Jenkins and Azure read.  A failed *declared* expectation (UNSAFE, or INCONCLUSIVE under
``--on-inconclusive fail``) is a ``failure`` whose message names the cell, the count or bound and one changed
decision; an INCONCLUSIVE one that passes, and a default expectation that does not hold, are ``skipped`` (shown,
never failing: only declared expectations gate); the others pass.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from typing import Any

from ._verdict import verdict_markdown

__all__ = ["example_line", "example_records", "junit_xml", "step_summary"]


def _num(u: Any) -> str:
    return "n/a" if u is None or (isinstance(u, float) and math.isnan(u)) else f"{u:.3g}"


def example_line(e: Mapping[str, Any]) -> str:
    """One changed decision in a line: where, before → after, utilities, how many visible records changed."""
    return (f"stream {e['stream']}, task {e['task']} ({e['stratum']}), map {e['map']}, draw {e['draw']}: "
            f"{e['before_action']} -> {e['after_action']} (utility {_num(e['before_utility'])} -> "
            f"{_num(e['after_utility'])}; oracle {e['oracle']}); {e['changed_records']} of {e['visible_records']} "
            "visible records altered")


def example_records(e: Mapping[str, Any], limit: int = 8) -> list[str]:
    """The altered records of an example, one line each: ``slot: before (task, key, outcome) -> after``."""
    lines = [f"  slot {x['slot']} [{x['block']}]: before ({x['task_before']}, {x['key_before']}, "
             f"{x['outcome_before']}) -> after ({x['task_after']}, {x['key_after']}, {x['outcome_after']})"
             + (f"  [{x['source']}]" if x["source"] else "") for x in e["records"][:limit]]
    more = int(e["changed_records"]) - min(limit, len(e["records"]))
    if more > 0:
        lines.append(f"  ... {more} more altered record(s)")
    return lines


def junit_xml(summaries: Sequence[Mapping[str, Any]],
              examples: Sequence[Mapping[str, list[dict[str, Any]]] | None] = ()) -> str:
    """The JUnit XML text of one or several audits (one ``testsuite`` per agent)."""
    root = ET.Element("testsuites", name="replaylens")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for k, s in enumerate(summaries):
        ex = examples[k] if k < len(examples) else None
        suite = ET.SubElement(root, "testsuite", name=f"replaylens audit: {s['agent']}")
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        for e in s["verdict"]["expectations"]:
            exp = e["expectation"]
            margin = e.get("margin", exp.get("tolerance")) or 0.0
            tc = ET.SubElement(suite, "testcase", classname=f"replaylens.{s['agent']}",
                               name=f"{e['cell']}: {exp['kind']}" + (f" (margin {margin:g})" if margin else ""),
                               time="0")
            counts["tests"] += 1
            if e["passed"] and e["status"] == "INCONCLUSIVE":   # passes under --on-inconclusive pass: shown, skipped
                counts["skipped"] += 1
                ET.SubElement(tc, "skipped", message=f"INCONCLUSIVE (passes under --on-inconclusive pass): "
                                                     f"{e['line']}")
                continue
            if e["passed"]:
                continue
            first = (ex or {}).get(e["cell"]) or []
            sample = f"; e.g. {example_line(first[0])}" if first else ""
            if e["gate"]:
                counts["failures"] += 1
                f = ET.SubElement(tc, "failure", message=f"{e['failure']}{sample}", type="ExpectationFailed")
                f.text = "\n".join([e["line"], *([example_line(first[0]), *example_records(first[0])]
                                                 if first else [])])
            else:
                counts["skipped"] += 1
                ET.SubElement(tc, "skipped", message=f"not gated (default expectation): {e['line']}{sample}")
        for key, v in counts.items():
            suite.set(key, str(v))
            totals[key] += v
        suite.set("time", "0")
    for key, v in totals.items():
        if key != "skipped":  # per suite only: Jenkins' JUnit schema has no skipped count on <testsuites>
            root.set(key, str(v))
    root.set("time", "0")
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def step_summary(summary: Mapping[str, Any], report: str | None = None) -> str:
    """The Markdown appended to ``$GITHUB_STEP_SUMMARY``: the verdict and a link to the report."""
    lines = [f"### ReplayLens audit: {summary['agent']}", "", *verdict_markdown(summary)[2:]]
    if report:
        lines += [f"Full report: `{report}`", ""]
    return "\n".join(lines) + "\n"
