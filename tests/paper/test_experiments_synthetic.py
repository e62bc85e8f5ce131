"""The synthetic-substrate reproductions: every exact (tolerance 0) comparison must hold."""

from __future__ import annotations

import pytest

from replaylens.paper.experiments import all_reproductions
from replaylens.paper.reproduce import Kind


@pytest.mark.parametrize("name", ["endpoint-witness", "diagnostic-dominance"])
def test_exact_rows_match(name: str) -> None:
    rows = all_reproductions()[name].run()
    exact = [r for r in rows if r.tolerance == 0.0]
    assert exact, "these reproductions have exact structural rows"
    bad = [(r.row, r.column, r.paper, r.ours) for r in exact
           if r.status != ("design" if r.kind == Kind.DESIGN else "agrees" if r.kind == Kind.INDICATOR else "match")]
    assert not bad  # design constants are design rows, measured values declared exact agree exactly (issue 50)
    # every row names the paper's value next to ours and a status
    assert all(r.status in ("match", "sign-level", "differs", "agrees", "derived", "design", "n/a") for r in rows)
