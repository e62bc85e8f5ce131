"""tab:representation-interaction: the paired OCRR − time-preserving-placebo interaction (issue 14 point 5)."""

from __future__ import annotations

import pytest

from replaylens.paper.experiments import all_reproductions
from replaylens.paper.experiments.synthetic_suite import (
    representation_controls,
    representation_interaction,
    semantic_null,
)

METRICS = {"U": ("Future utility", "Mean utility"), "A": ("Future actions changed", "Action"),
           "O": ("Oracle-match change", "Oracle")}


@pytest.fixture(scope="module")
def rows() -> dict[tuple[str, str], float]:
    return {(r.row, r.column): float(r.ours) for r in representation_interaction() if r.ours is not None}


def test_registered_under_issue_14_with_the_tables_label() -> None:
    rep = all_reproductions()["representation-interaction"]
    assert rep.issue == "14"
    out = rep.run()
    assert {r.table for r in out} == {"tab:representation-interaction"}
    cols = {(r.row, r.column) for r in out}
    for metric, _ in METRICS.values():  # every paper interval excludes zero: a sign row each
        assert {(metric, c) for c in ("estimate", "lower", "upper", "p < 0.001", "sign")} <= cols


def test_interaction_is_ocrr_minus_the_placebo_row_of_representation_controls(rows: dict[tuple[str, str],
                                                                                       float]) -> None:
    ctl = {(r.row, r.column): r.ours for r in representation_controls()}
    for metric, col in METRICS.values():
        want = float(ctl[("OCRR", col)]) - float(ctl[("TP placebo", col)])  # type: ignore[arg-type]
        assert rows[(metric, "estimate")] == pytest.approx(want, abs=1e-12)
        assert rows[(metric, "lower")] <= rows[(metric, "estimate")] <= rows[(metric, "upper")]


def test_same_numbers_as_the_semantic_null_detail_rows(rows: dict[tuple[str, str], float]) -> None:
    detail = {(r.row, r.column): r.ours for r in semantic_null() if r.row.startswith("OCRR − time placebo")}
    for y, (metric, _) in METRICS.items():
        for col in ("estimate", "lower", "upper"):
            assert rows[(metric, col)] == detail[(f"OCRR − time placebo ({y})", col)]
