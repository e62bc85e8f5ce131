"""Issues 28 and 50: docs/paper/reproduction.md's statuses say what was compared, and its fast sections are what the
code gives.

* every ``match`` row lies within the bound of its declared kind and the near-zero rule;
* the header's counts are the rows' statuses (derived, design and sensitivity rows are not counted as matches);
* (slow, in CI) the CI set of sections regenerates to the committed text, with the BLAS kernel pinned; the other
  fast sections with ``REPLAYLENS_REPRO_CHECK=1``, the slow ones with ``replaylens paper reproduce --check``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from replaylens.paper.reproduce import (
    CI_REPRODUCTIONS,
    SLOW_REPRODUCTIONS,
    STATUSES,
    VALUE_KINDS,
    Comparison,
    kind_bound,
    per_table_summary,
)
from replaylens.paper.reproduce._markdown import split_row, stale_sections

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "paper" / "reproduction.md"
NOTES = ROOT / "docs" / "paper" / "reproduction-notes.md"
_SHOWN = {"**differs**": "differs", "**design failed**": "design failed", "**self-check failed**": "self-check failed",
          "**disagrees**": "disagrees"}


def _rows() -> list[tuple[str, Comparison]]:
    """(section, row) for every table row of the committed document (cells split on unescaped separators)."""
    out, section = [], ""
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("## `"):
            section = line[4:].split("`", 1)[0]
            continue
        if not section or not line.startswith("| ") or line.startswith("| table |"):
            continue
        table, row, column, paper, ours, tol, status = split_row(line)

        def num(x: str) -> float | None:
            return None if x == "—" else float(x)

        out.append((section, Comparison(table, row, column, num(paper), num(ours), num(tol),
                                        _SHOWN.get(status, status))))
    return out


ROUND = 0.001  # both sides are printed with three decimals


def test_every_match_is_within_its_kinds_bound_and_never_zero_for_a_nonzero_paper_value() -> None:
    from replaylens.paper.experiments import all_reproductions

    regs = all_reproductions()
    stale = set(stale_sections(DOC.read_text(encoding="utf-8").splitlines()))  # the earlier policy's statuses
    rows = _rows()
    assert rows
    bad = []
    for section, r in rows:
        if r.status != "match" or section in stale:
            continue
        assert r.paper is not None and r.ours is not None and r.tolerance is not None
        kind = regs[section].kinds.kind_of(r)
        bound = kind_bound(kind, r.paper)
        if kind not in VALUE_KINDS or r.tolerance > bound + ROUND or abs(r.ours - r.paper) > r.tolerance + ROUND \
                or (r.paper != 0 and (r.ours == 0 or abs(r.ours - r.paper) >= abs(r.paper) / 2 + ROUND)):
            bad.append((section, r))
    assert not bad, bad[:5]


def test_header_counts_are_the_row_statuses_and_derived_rows_are_not_matches() -> None:
    text = DOC.read_text(encoding="utf-8")
    stale = set(stale_sections(text.splitlines()))
    every = _rows()
    rows = [(sec, r) for sec, r in every if sec not in stale]  # rows kept from an earlier generation: not counted
    n = Counter(r.status for _, r in rows)
    assert set(n) <= set(STATUSES)
    plural = {"differs": "differ", "agrees": "agree", "disagrees": "disagree"}
    counts = ", ".join(f"{n.get(s, 0)} {plural.get(s, s)}" for s in STATUSES)
    assert f"**{len(rows)} rows: {counts}.**" in text
    if stale:
        assert f"Not counted: the {len(every) - len(rows)} rows of {len(stale)} sections kept" in text
    derived = [r for sec, r in rows if sec == "condition-summary" and r.row.startswith("temporal/")]
    assert derived and all(r.status == "derived" for r in derived)  # targets the paper did not print
    assert n["derived"] >= 3 and n["design"] > 0


def test_the_notes_give_one_current_line_per_paper_table() -> None:
    """reproduction-notes.md's per-table list is what reproduction.md's rows say now, one line per ``tab:`` label."""
    body = DOC.read_text(encoding="utf-8").split("\n")
    start = next(i for i, ln in enumerate(body) if ln.startswith("## `"))
    expected = per_table_summary(body[start:])
    listed = [ln for ln in NOTES.read_text(encoding="utf-8").splitlines() if ln.startswith("- tab:")]
    assert listed == expected


def _check(names: list[str], public_data_dir: Path) -> subprocess.Popen[str]:
    """``replaylens paper reproduce --check DOC NAMES`` in a subprocess (fits on the default, pinned path)."""
    env = {**os.environ, "REPLAYLENS_DATA_DIR": str(public_data_dir), "PYTHONPATH": str(ROOT / "src")}
    env.pop("REPLAYLENS_PINNED_FITS", None)
    return subprocess.Popen([sys.executable, "-m", "replaylens", "paper", "reproduce", "--check", str(DOC), *names],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _wait(procs: list[subprocess.Popen[str]]) -> list[str]:
    failures = []
    for proc in procs:
        _, err = proc.communicate()
        if proc.returncode != 0:
            failures.append(err[-3000:])
    return failures


def test_check_names_a_section_that_differs(tmp_path: Path) -> None:
    """``--check`` exits 0 on the committed text and 1, naming the section and line, when a value was edited."""
    from click.testing import CliRunner

    from replaylens.cli._main import cli

    res = CliRunner().invoke(cli, ["paper", "reproduce", "--check", str(DOC), "exact-zeros"])
    assert res.exit_code == 0, res.output
    text = DOC.read_text(encoding="utf-8")
    head, sep, rest = text.partition("## `exact-zeros`")
    edited = rest.replace("| 0.000 | 0.000 | 0.000 | design |", "| 0.000 | 0.001 | 0.000 | design |", 1)
    assert sep and edited != rest
    doc = tmp_path / "reproduction.md"
    doc.write_text(head + sep + edited, encoding="utf-8")
    res = CliRunner().invoke(cli, ["paper", "reproduce", "--check", str(doc), "exact-zeros"])
    assert res.exit_code == 1
    assert "section `exact-zeros` differs" in res.output and "0.001" in res.output
    assert doc.read_text(encoding="utf-8") == head + sep + edited  # --check never writes


@pytest.mark.slow
def test_ci_sections_regenerate_to_the_committed_text(public_data_dir: Path) -> None:
    """The CI set (``CI_REPRODUCTIONS``, chosen by measured time) regenerates to the committed text: two
    processes side by side, one per group, so that it fits in about five minutes on CI's two cores."""
    groups = [list(g) for g in CI_REPRODUCTIONS]
    assert not {n for g in groups for n in g} & set(SLOW_REPRODUCTIONS)
    failures = _wait([_check(g, public_data_dir) for g in groups])
    assert not failures, failures


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("REPLAYLENS_REPRO_CHECK") != "1",
                    reason="set REPLAYLENS_REPRO_CHECK=1 to regenerate the other fast sections (about an hour on 2 "
                           "cores); the slow ones: `replaylens paper reproduce --check` (reproduction-notes.md)")
def test_other_fast_sections_regenerate_to_the_committed_text(public_data_dir: Path) -> None:
    """Every section in neither ``CI_REPRODUCTIONS`` nor ``SLOW_REPRODUCTIONS`` (issue 28: 55 min summed)."""
    from replaylens.paper.experiments import all_reproductions

    ci = {n for g in CI_REPRODUCTIONS for n in g}
    names = [n for n in all_reproductions() if n not in SLOW_REPRODUCTIONS and n not in ci]
    failures = _wait([_check(names[k::2], public_data_dir) for k in range(2)])
    assert not failures, failures
