"""Issue 14 point 2: one declared tolerance policy (never wider than declared), the sign guard and the
sign rule (no row passes with the opposite sign of a paper value whose interval excludes zero)."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from replaylens.paper.reproduce import (
    POLICY,
    REPRODUCTIONS,
    Quantity,
    apply_policy,
    classify,
    compare,
    policy_tolerance,
    register_reproduction,
)


def _one(table: str, row: str, column: str, paper: float, ours: float, tol: float) -> str:
    return apply_policy([compare(table, row, column, paper, ours, tol)])[0].status


def test_every_quantity_kind_has_a_rule_and_a_reason() -> None:
    assert set(POLICY) == set(Quantity)
    assert all(rule.rule and len(rule.reason) > 40 for rule in POLICY.values())


def test_the_issue_examples_no_longer_pass() -> None:
    # persistent-agent ΔU (×10⁻³, tolerance 5): Fold II rekey 0.870 vs −0.142
    assert _one("tab:public-persistent-agent-folds", "Fold II Rekey", "ΔU", 0.870, -0.142, 5.0) == "differs"
    # utility-resolution ΔU 0.134 vs −0.110
    assert _one("tab:utility-resolution-compact", "Measured: rekey", "ΔU", 0.134, -0.110, 5.0) == "differs"
    # diagnostic-dominance on − off ΔU 0.008 vs −0.008
    assert _one("diagnostic dominance", "on − off (writer = lookup)", "ΔU", 0.008, -0.008, 0.03) == "differs"
    # the order-sensitive stream count: 14 vs 21 with a declared tolerance of exactly 7
    r = compare("canonical exact checks", "Order-sensitive", "streams where d=0.60 differs", 14.0, 21.0, 7.0)
    assert r.status == "match" and classify(r) is Quantity.COUNT
    assert apply_policy([r])[0].status == "differs" and math.isclose(policy_tolerance(r) or 0, 1.4)
    # learned-pair per-fit responses: 0.25 is narrowed to the proportion ceiling
    r = compare("tab:content-fit-pairs", "Recurrent fit 1", "A_ho estimate", 0.738, 0.579, 0.25)
    assert classify(r) is Quantity.PROPORTION and policy_tolerance(r) == 0.10
    out = apply_policy([r])[0]
    assert out.status == "differs" and "narrowed to 0.1" in out.note


def test_issue_28_examples_are_sign_level_not_matches() -> None:
    # persistent agent Fold I Pair ΔU −0.786 vs −0.049; utility-resolution −0.341 vs −0.040; public-data 5.666 vs 2.834
    assert _one("tab:public-persistent-agent-folds", "Fold I Pair", "ΔU estimate", -0.786, -0.049, 5.0) == "sign-level"
    assert _one("tab:utility-resolution-compact", "Measured: pair", "ΔU", -0.341, -0.040, 5.0) == "sign-level"
    assert _one("tab:public-data-pooled", "OCRR − Shuffled", "U estimate", 5.666, 2.834, 5.0) == "sign-level"
    # within a quarter of the paper's value: match; ours = 0 against a nonzero paper value: differs
    assert _one("tab:x", "r", "ΔU", -0.786, -0.62, 5.0) == "match"
    assert _one("tab:x", "r", "ΔU", 0.341, 0.0, 5.0) == "differs"
    # near zero the floor applies, still capped by |paper|
    assert _one("tab:x", "r", "ΔU", 0.0, 0.009, 5.0) == "match"
    assert _one("tab:x", "r", "ΔU", 0.004, 0.009, 5.0) == "sign-level"


def test_exact_rows_are_design_or_sign_level_never_match() -> None:
    out = apply_policy([compare("structure", "tasks", "count", 24.0, 24.0, 0.0),
                        compare("structure", "tasks", "count", 24.0, 23.0, 0.0),
                        compare("tab:x", "r", "sign", 1.0, 1.0, 0.0),
                        compare("tab:x", "r", "p < 0.001", 1.0, 0.0, 0.0)])
    assert [r.status for r in out] == ["design", "design failed", "sign-level", "differs"]
    derived = compare("OCRR − No update by stratum", "temporal/low", "future utility", 0.105, 0.104, 0.06,
                      derived="spec target")
    assert apply_policy([derived])[0].status == "derived" and "spec target" in derived.note
    sens = compare("tab:x", "r", "A estimate", 0.7, 0.7, None, sensitivity="previous reading")
    assert apply_policy([sens])[0].status == "sensitivity"


def test_rows_within_the_policy_keep_their_status() -> None:
    assert _one("tab:public-ucb1-pooled", "Rekey", "ΔU estimate", -7.540, -7.842, 5.0) == "match"
    assert _one("tab:content-blind", "A pair-displacing", "Correct", 15.0, 16.0, 1.0) == "match"
    assert _one("tab:x", "Fold I Value", "ΔU", 0.0, 0.0, 5.0) == "match"
    assert _one("structure", "tasks", "count", 24.0, 24.0, 0.0) == "design"
    na = apply_policy([compare("tab:x", "r", "c", 0.3, None, None)])[0]
    assert na.status == "n/a"


finite = st.floats(min_value=-100, max_value=100, allow_nan=False, allow_infinity=False)


@given(paper=finite, ours=finite, tol=st.floats(min_value=0, max_value=50),
       column=st.sampled_from(["ΔU", "A", "count", "U estimate", "Γ_A", "share"]))
def test_policy_never_widens_and_never_passes_an_opposite_sign(paper: float, ours: float, tol: float,
                                                               column: str) -> None:
    r = compare("tab:x", "row", column, paper, ours, tol)
    out = apply_policy([r])[0]
    assert out.tolerance is not None and out.tolerance <= tol + 1e-12  # never wider than declared
    if r.status == "differs":
        assert out.status in ("differs", "sign-level", "design failed")  # the policy only narrows
    if out.status == "match":
        assert abs(ours - paper) <= max(0.25 * abs(paper), 0.010, 0.10, 1.0) + 1e-9
        if paper != 0:  # (within the 1e-12 comparison slack of zero, a value has no sign)
            assert abs(ours) <= 1e-12 or math.copysign(1, ours) == math.copysign(1, paper)
    if out.status == "sign-level":
        assert paper != 0 and ours != 0 and math.copysign(1, ours) == math.copysign(1, paper)


def _interval(paper: tuple[float, float, float], ours: tuple[float, float, float], tol: float) -> list:
    return [compare("tab:c", "OCRR − Shuffled", f"U {side}", p, o, tol)
            for side, p, o in zip(("estimate", "lower", "upper"), paper, ours, strict=True)]


def test_sign_rule_adds_a_sign_row_and_fails_opposite_signs() -> None:
    # the paper's interval [3.4, 8.1] excludes zero; ours is negative: no row passes and the sign row differs
    out = apply_policy(_interval((5.666, 3.416, 8.063), (-0.2, -1.0, -0.1), 50.0))
    sign = [r for r in out if r.column == "U sign"]
    assert len(sign) == 1 and (sign[0].paper, sign[0].ours, sign[0].status) == (1.0, -1.0, "differs")
    assert all(r.status == "differs" for r in out)
    side = [r for r in out if r.column == "U excludes 0"]
    assert len(side) == 1 and (side[0].paper, side[0].ours, side[0].status) == (1.0, -1.0, "differs")
    # same sign: the sign and interval rows are sign-level
    out = apply_policy(_interval((5.666, 3.416, 8.063), (5.0, 3.0, 7.5), 1.0))
    assert [r.status for r in out] == ["match"] * 3 + ["sign-level"] * 2
    assert [r.column for r in out[3:]] == ["U sign", "U excludes 0"]
    # our estimate has the paper's sign but our interval contains zero: the interval row differs
    out = apply_policy(_interval((5.666, 3.416, 8.063), (5.0, -0.5, 9.0), 1.0))
    assert [(r.column, r.status) for r in out[3:]] == [("U sign", "sign-level"), ("U excludes 0", "differs")]
    # an interval that includes zero gets no sign row
    out = apply_policy(_interval((0.870, -0.016, 1.714), (0.5, -0.1, 1.2), 5.0))
    assert not [r for r in out if r.column.endswith("sign")]
    # a hosted-model interval shown for reference (n/a estimate) gets no sign row either
    rows = [compare("tab:c", "r", f"U {s}", p, o, None) for s, p, o in
            (("estimate", 1.0, -1.0), ("lower", 0.5, -2.0), ("upper", 1.5, 0.0))]
    assert apply_policy(rows) == rows


def test_registered_reproductions_run_under_the_policy() -> None:
    name = "test-policy-wrapper"

    @register_reproduction(name, "a test reproduction")
    def _rows() -> list:
        return [compare("tab:t", "r", "ΔU", 0.870, -0.142, 5.0)]

    try:
        assert _rows()[0].status == "match"  # the raw computation, as declared
        assert REPRODUCTIONS[name].run()[0].status == "differs"  # what `replaylens paper reproduce` reports
    finally:
        del REPRODUCTIONS[name]


def test_shown_p_values_get_a_threshold_side_row() -> None:
    rows = [compare("tab:x", "a − b (Action)", "sign-flip p", 0.004, 0.067, None),
            compare("tab:x", "a − b (Utility)", "sign-flip p", 0.003, 0.017, None),
            compare("tab:x", "a − b (Oracle)", "sign-flip p", 0.5, None, None)]
    out = apply_policy(rows)
    side = [(r.row, r.paper, r.ours, r.status) for r in out if r.column == "sign-flip p < 0.05 (1 = yes)"]
    assert side == [("a − b (Action)", 1.0, 0.0, "differs"), ("a − b (Utility)", 1.0, 1.0, "sign-level")]
    assert [r.status for r in out[:3]] == ["n/a"] * 3  # the p-values themselves are shown, not compared


def test_a_sensitivity_row_beside_an_interval_does_not_hide_its_sign_rows() -> None:
    rows = [*_interval((5.666, 3.416, 8.063), (5.0, 3.0, 7.5), 1.0),
            compare("tab:c", "OCRR − Shuffled", "U estimate", 5.666, -1.0, None, sensitivity="previous reading")]
    out = apply_policy(rows)
    assert [(r.column, r.status) for r in out[4:]] == [("U sign", "sign-level"), ("U excludes 0", "sign-level")]


def test_a_floating_point_allowance_is_an_exact_check() -> None:
    out = apply_policy([compare("consistency", "Measured: pair", "harm + tie + gain", 1.0, 1.0 - 1e-12, 1e-9)])
    assert out[0].status == "design"
