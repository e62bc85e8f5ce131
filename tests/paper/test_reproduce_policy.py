"""Issues 28 and 50: one declared policy by declared kind (never wider than declared), the near-zero rule, sign level
only where the paper claims a sign, indicators apart, and a side check for every declared paper interval that
excludes zero."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replaylens.errors import ConfigError
from replaylens.paper.reproduce import (
    POLICY,
    REPRODUCTIONS,
    VALUE_KINDS,
    Interval,
    Kind,
    Kinds,
    apply_policy,
    compare,
    kind_bound,
    register_reproduction,
)


def _one(paper: float, ours: float, tol: float, kind: Kind, claim: bool = False) -> str:
    kinds = Kinds(sign_claims=(("*", "*", "*", "test"),)) if claim else Kinds()
    return apply_policy([compare("tab:x", "r", "c", paper, ours, tol, kind=kind)], kinds)[0].status


def test_every_kind_has_a_rule_and_a_reason() -> None:
    assert set(POLICY) == set(Kind)
    assert all(rule.rule and len(rule.reason) > 40 for rule in POLICY.values())


def test_an_undeclared_kind_stops_the_run() -> None:
    with pytest.raises(ConfigError, match="no kind declared"):
        apply_policy([compare("tab:x", "r", "c", 0.5, 0.5, 0.1)])
    # a declaration by table and column pattern, a row-specific one taking precedence
    kinds = Kinds(columns=(("tab:*", "c", Kind.PROPORTION), ("tab:x", "special", "c", Kind.DESIGN)))
    out = apply_policy([compare("tab:x", "r", "c", 0.5, 0.5, 0.1), compare("tab:x", "special", "c", 0.5, 0.5, 0.1)],
                       kinds)
    assert [(r.kind, r.status) for r in out] == [("proportion", "match"), ("design constant", "design")]


def test_the_issue_50_examples() -> None:
    # learned-control per-fit pair action 0.186 → 0.089 and its lower limit 0.141 → 0.059: half the paper's value
    assert _one(0.186, 0.089, 0.20, Kind.PROPORTION) == "differs"
    assert _one(0.141, 0.059, 0.20, Kind.LIMIT) == "differs"
    # a signed estimate no longer gets a proportion bound: Dev. excess BCE 0.133 → 0.075, OCRR Minimum 0.024 → 0.001
    assert _one(0.133, 0.075, 0.20, Kind.MAGNITUDE) == "differs"
    assert _one(0.024, 0.001, 0.024, Kind.ESTIMATE) == "differs"
    # near zero: 0.000 never matches a nonzero paper value, nor does twice it
    for paper in (-0.010, 0.003, 0.010, 0.005, 0.001):
        assert _one(paper, 0.0, 0.010, Kind.ESTIMATE) == "differs"
        assert _one(paper, 0.0004 * math.copysign(1, paper), 0.010, Kind.ESTIMATE) == "differs"
        assert _one(paper, 2 * paper, 0.010, Kind.ESTIMATE) == "differs"
    assert _one(0.010, 0.007, 0.010, Kind.ESTIMATE) == "match"
    # sign level only where the paper claims the sign; never for non-negative quantities or interval limits
    assert _one(0.001, 0.012, 0.001, Kind.ESTIMATE) == "differs"
    assert _one(0.001, 0.012, 0.001, Kind.ESTIMATE, claim=True) == "sign-level"
    assert _one(0.002, 0.099, 0.003, Kind.LIMIT, claim=True) == "differs"
    assert _one(0.5, 0.9, 0.1, Kind.MAGNITUDE, claim=True) == "differs"
    assert _one(0.3, 0.9, 0.1, Kind.PROPORTION, claim=True) == "differs"
    # the order-sensitive profile count 14 vs 21 (declared tolerance 7): the count bound
    assert _one(14, 21, 7, Kind.COUNT) == "differs" and _one(14, 15, 7, Kind.COUNT) == "match"
    # a measured gate outcome is an indicator, not design
    assert _one(0.0, 1.0, 0.0, Kind.INDICATOR) == "disagrees" and _one(1.0, 1.0, 0.0, Kind.INDICATOR) == "agrees"
    assert _one(24.0, 24.0, 0.0, Kind.DESIGN) == "design" and _one(24.0, 23.0, 0.0, Kind.DESIGN) == "design failed"


def test_proportion_bound_excludes_half_and_twice_the_share_and_its_complement() -> None:
    for p in (0.02, 0.1, 0.186, 0.3, 0.5, 0.7, 0.9, 0.98):
        b = kind_bound(Kind.PROPORTION, p)
        assert b <= 0.10 + 1e-12
        assert b < p / 2 and b < (1 - p) / 2  # neither half nor twice the share, nor of its complement
    assert kind_bound(Kind.PROPORTION, 1.0) == kind_bound(Kind.PROPORTION, 0.0) == 0.0005


def test_rows_within_the_policy_and_kept_statuses() -> None:
    assert _one(-7.540, -7.842, 5.0, Kind.ESTIMATE) == "match"
    assert _one(15.0, 16.0, 1.0, Kind.COUNT) == "match"
    assert _one(0.0, 0.009, 5.0, Kind.ESTIMATE) == "match"  # a printed zero keeps the 0.010 floor
    assert _one(0.0, 1.0, 5.0, Kind.COUNT) == "differs"  # a count of zero is exact
    na = apply_policy([compare("tab:x", "r", "c", 0.3, None, None)])[0]
    assert na.status == "n/a"
    derived = compare("OCRR − No update by stratum", "temporal/low", "future utility", 0.105, 0.104, 0.06,
                      derived="spec target")
    assert apply_policy([derived])[0].status == "derived"
    declared = Kinds(derived=(("tab:x", "* (mean over fits)", "*", "mean of printed fits"),),
                     shown=(("tab:x", "*", "Action sign", "non-negative"),))
    out = apply_policy([compare("tab:x", "A (mean over fits)", "c", 0.4, 0.4, 0.1),
                        compare("tab:x", "Fit 1", "Action sign", 1.0, 1.0, 0.0)], declared)
    assert [r.status for r in out] == ["derived", "n/a"] and "mean of printed fits" in out[0].note
    sens = compare("tab:x", "r", "A estimate", 0.7, 0.7, None, sensitivity="previous reading")
    assert apply_policy([sens])[0].status == "sensitivity"
    assert apply_policy([compare("c", "r", "harm + tie + gain", 1.0, 1.0 - 1e-12, 1e-9, kind=Kind.DESIGN)])[0].status \
        == "design"


finite = st.floats(min_value=-100, max_value=100, allow_nan=False, allow_infinity=False)


@given(paper=finite, ours=finite, tol=st.floats(min_value=0, max_value=50), kind=st.sampled_from(list(Kind)))
def test_policy_never_widens_and_a_match_is_never_zero_half_twice_or_opposite(paper: float, ours: float, tol: float,
                                                                             kind: Kind) -> None:
    out = apply_policy([compare("tab:x", "row", "c", paper, ours, tol, kind=kind)])[0]
    assert out.tolerance is not None and out.tolerance <= tol + 1e-12  # never wider than declared
    if out.status == "match":
        assert kind in VALUE_KINDS
        assert abs(ours - paper) <= kind_bound(kind, paper) + 1e-9
        if paper != 0:
            assert abs(ours - paper) < abs(paper) / 2 and abs(ours) >= 0.0005
            assert math.copysign(1, ours) == math.copysign(1, paper)
    if out.status == "sign-level":
        assert kind is Kind.ESTIMATE


def _interval(paper: tuple[float, float, float], ours: tuple[float, float, float], tol: float) -> list:
    return [compare("tab:c", "OCRR − Shuffled", f"U {side}", p, o, tol)
            for side, p, o in zip(("estimate", "lower", "upper"), paper, ours, strict=True)]


_CI = Kinds(columns=(("tab:c", "* estimate", Kind.ESTIMATE),),
            intervals=(Interval("tab:c", "{} estimate", "{} lower", "{} upper"),))


def test_side_checks_follow_the_declared_interval() -> None:
    # the paper's interval [3.4, 8.1] excludes zero; ours is negative: the sign and side indicators disagree
    out = apply_policy(_interval((5.666, 3.416, 8.063), (-0.2, -1.0, -0.1), 50.0), _CI)
    sign = [r for r in out if r.column == "U sign"]
    assert len(sign) == 1 and (sign[0].paper, sign[0].ours, sign[0].status) == (1.0, -1.0, "disagrees")
    side = [r for r in out if r.column == "U excludes 0"]
    assert len(side) == 1 and (side[0].paper, side[0].ours, side[0].status) == (1.0, -1.0, "disagrees")
    assert "[3.416, 8.063]" in side[0].note and side[0].kind == Kind.INDICATOR
    assert [r.kind for r in out[:3]] == [Kind.ESTIMATE, Kind.LIMIT, Kind.LIMIT]
    # within the bound: match, and a sign-level estimate outside it, since the paper's interval claims the sign
    out = apply_policy(_interval((5.666, 3.416, 8.063), (5.0, 3.0, 7.5), 5.0), _CI)
    assert [r.status for r in out] == ["match"] * 3 + ["agrees"] * 2
    out = apply_policy(_interval((5.666, 3.416, 8.063), (2.0, 1.0, 3.0), 5.0), _CI)
    assert [r.status for r in out[:3]] == ["sign-level", "differs", "differs"]
    # an interval that includes zero gets no side check and its estimate no sign level
    out = apply_policy(_interval((0.870, -0.016, 1.714), (0.3, -0.1, 1.2), 5.0), _CI)
    assert len(out) == 3 and out[0].status == "differs"
    # without a declared interval, columns named estimate/lower/upper are not grouped (found from declarations)
    plain = Kinds(columns=(("tab:c", "*", Kind.ESTIMATE),))
    assert len(apply_policy(_interval((5.666, 3.416, 8.063), (5.0, 3.0, 7.5), 5.0), plain)) == 3
    # a hosted-model interval shown for reference (n/a) gets none either
    rows = [compare("tab:c", "r", f"U {s}", p, o, None) for s, p, o in
            (("estimate", 1.0, -1.0), ("lower", 0.5, -2.0), ("upper", 1.5, 0.0))]
    assert apply_policy(rows, _CI) == rows


_SHARE = Kinds(columns=(("tab:f", "Pair action", Kind.PROPORTION), ("tab:c", "* estimate", Kind.ESTIMATE)),
               intervals=(Interval("tab:f", "Pair action", "Pair action lower", "Pair action upper"),
                          Interval("tab:c", "{} estimate", "{} lower", "{} upper"),
                          Interval("text", "", "lower", "upper")))


def test_a_limit_of_a_share_takes_the_proportion_bound() -> None:
    """Issue 50 follow-up (docs/decisions.md): a limit of a declared share is a proportion, not an interval limit."""
    # learned-control ordinary fit 1: the paper's interval [0.637, 0.704], ours [0.470, 0.556]; the upper limit
    # matched under the interval-limit bound (0.176, a quarter of 0.704), not under the proportion bound (0.074)
    rows = [compare("tab:f", "Ordinary fit 1", "Pair action", 0.670, 0.513, 0.20),
            compare("tab:f", "Ordinary fit 1", "Pair action lower", 0.637, 0.470, 0.20),
            compare("tab:f", "Ordinary fit 1", "Pair action upper", 0.704, 0.556, 0.20)]
    out = apply_policy(rows, _SHARE)
    assert [(r.kind, r.status) for r in out[:3]] == [(Kind.PROPORTION, "differs")] * 3
    assert [(r.column, r.status) for r in out[3:]] == [("Pair action excludes 0", "agrees")]  # side check kept
    assert out[2].tolerance == pytest.approx(kind_bound(Kind.PROPORTION, 0.704)) and "proportion bound" in out[2].note
    assert _one(0.704, 0.556, 0.20, Kind.LIMIT) == "match"  # what the interval-limit bound admitted
    # near 1 the complement decides: 0.958 against 0.979 is half the paper's complement
    near_one = [compare("tab:f", "r", "Pair action", 0.9, 0.9, 0.2), compare("tab:f", "r", "Pair action upper",
                                                                             0.958, 0.979, 0.2)]
    assert apply_policy(near_one, _SHARE)[1].status == "differs"
    # limits of a signed estimate keep the interval-limit bound; so do limits printed without an estimate
    kinds = [_SHARE.declared(compare(t, "r", c, 0.5, 0.5, 0.1)) for t, c in
             (("tab:c", "U lower"), ("tab:c", "U upper"), ("text", "lower"), ("tab:f", "Pair action lower"))]
    assert kinds == [Kind.LIMIT, Kind.LIMIT, Kind.LIMIT, Kind.PROPORTION]
    # an explicit declaration of a limit wins over the estimate's kind
    explicit = Kinds(columns=(("tab:f", "Pair action lower", Kind.LIMIT), *_SHARE.columns), intervals=_SHARE.intervals)
    assert explicit.declared(compare("tab:f", "r", "Pair action lower", 0.5, 0.5, 0.1)) is Kind.LIMIT


@given(p=st.floats(min_value=0, max_value=1))
def test_the_proportion_bound_is_never_wider_than_the_limit_bound_on_a_share(p: float) -> None:
    assert kind_bound(Kind.PROPORTION, p) <= kind_bound(Kind.LIMIT, p) + 1e-15


def test_an_interval_with_limits_only_gets_its_side_check() -> None:
    kinds = Kinds(intervals=(Interval("text", "", "lower", "upper"),))
    out = apply_policy([compare("text", "r", "lower", 0.015, 0.02, 0.01), compare("text", "r", "upper", 0.035, 0.05,
                                                                                  0.01)], kinds)
    assert [(r.column, r.status) for r in out[2:]] == [("excludes 0", "agrees")]


def test_registered_reproductions_run_under_their_declarations() -> None:
    name = "test-policy-wrapper"

    @register_reproduction(name, "a test reproduction", kinds=Kinds(columns=(("tab:t", "ΔU", Kind.ESTIMATE),)))
    def _rows() -> list:
        return [compare("tab:t", "r", "ΔU", 0.870, -0.142, 5.0)]

    try:
        assert _rows()[0].status == "match"  # the raw computation, as declared
        assert REPRODUCTIONS[name].run()[0].status == "differs"  # what `replaylens paper reproduce` reports
    finally:
        del REPRODUCTIONS[name]


def test_shown_p_values_get_a_threshold_side_indicator() -> None:
    rows = [compare("tab:x", "a − b (Action)", "sign-flip p", 0.004, 0.067, None),
            compare("tab:x", "a − b (Utility)", "sign-flip p", 0.003, 0.017, None),
            compare("tab:x", "a − b (Oracle)", "sign-flip p", 0.5, None, None)]
    out = apply_policy(rows)
    side = [(r.row, r.paper, r.ours, r.status) for r in out if r.column == "sign-flip p < 0.05 (1 = yes)"]
    assert side == [("a − b (Action)", 1.0, 0.0, "disagrees"), ("a − b (Utility)", 1.0, 1.0, "agrees")]
    assert [r.status for r in out[:3]] == ["n/a"] * 3


def test_a_sensitivity_row_beside_an_interval_does_not_hide_its_side_checks() -> None:
    rows = [*_interval((5.666, 3.416, 8.063), (5.0, 3.0, 7.5), 1.0),
            compare("tab:c", "OCRR − Shuffled", "U estimate", 5.666, -1.0, None, sensitivity="previous reading")]
    out = apply_policy(rows, _CI)
    assert [(r.column, r.status) for r in out[4:]] == [("U sign", "agrees"), ("U excludes 0", "agrees")]
