"""Issue 47: verdicts with known error rates -- one test per numbered point of the issue (points 4 and 5, the
store verdicts, are in tests/memory/stores and tests/memory/retrieval).  The full calibration is bench/verdicts.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from replaylens.agents import from_callables
from replaylens.bandit import make_bandit
from replaylens.inference import mean_inference, t_ppf
from replaylens.maps import seeded_uniforms as uniforms
from replaylens.report import MIN_STREAMS_WITHIN, Expectation, JudgeContext, audit, judge, judge_rows
from replaylens.rng import derive_rng
from replaylens.testing._calibration import epsilon_greedy, visibility_shift


def _eps_audit(seed: int, n_streams: int = 8, **kw: object) -> object:
    sub = make_bandit(n_streams=n_streams, n_future=8, rng=1000 + seed)
    return audit(sub.history, sub.futures, sub.evaluator, epsilon_greedy(0.2), cells="pair,reorder", maps="id",
                 seed=seed, n_resamples=500, **kw)  # type: ignore[arg-type]


def test_calibration_agents_array_path_equals_the_per_record_oracle() -> None:
    sub = make_bandit(n_streams=4, n_future=4, rng=5)
    for agent in (epsilon_greedy(0.3), visibility_shift(0.2)):
        got = [audit(sub.history, sub.futures, sub.evaluator, agent, cells="value,pair,mask", maps="id", repeats=2,
                     n_resamples=50, path=path).decisions.actions for path in ("array", "reference")]
        assert np.array_equal(*got)
    seeds = np.array([0, 7, 2**63 + 11, 2**64 - 1], dtype=np.uint64)
    want = np.array([np.random.default_rng(int(s)).random(3) for s in seeds]).T
    assert np.array_equal(uniforms(seeds, 3), want)


def test_point1_an_order_blind_stochastic_agent_does_not_cry_wolf() -> None:
    """40 seeded gates (pair, reorder declared invariant) of an order-blind epsilon-greedy agent at 8 streams:
    the family-wise false alarms stay at the level (5 %) even at margin 0 -- main's percentile-bootstrap rule
    failed 6 of 40 such gates."""
    unsafe0 = unsafe_default = 0
    for seed in range(40):
        res = _eps_audit(seed)
        rows = [r.to_dict() for r in res.rows]   # type: ignore[attr-defined]
        for margin in (0.0, None):
            judged = judge_rows(rows, [Expectation(c, "invariant", margin) for c in ("pair", "reorder")])
            bad = any(j.status == "UNSAFE" for j in judged)
            if margin is None:
                unsafe_default += bad
            else:
                unsafe0 += bad
    assert unsafe0 <= 4       # binomial(40, 0.05): P(> 4) < 5 %
    assert unsafe_default == 0


def test_point1_a_floating_point_leftover_never_decides() -> None:
    row = {"cell": "pair", "migration": "m (pair)", "action_readout": "T_gr(pair,aligned)", "action": 9.0e-17,
           "action_ci": [9.0e-17, 9.0e-17], "n_changed": 3, "n_decisions": 384, "n_streams": 8,
           "per_stream": {"action": [9.0e-17] * 8}}   # no spread: the bound equals the leftover
    j = judge(row, Expectation("pair", "invariant", 0.0))
    assert j.status != "UNSAFE"


def test_point2_shown_intervals_are_student_t_and_cover_at_few_streams() -> None:
    res = _eps_audit(5)
    for r in res.rows:   # type: ignore[attr-defined]
        d = r.to_dict()
        for key, sv in (("action_ci", r.action), ("delta_utility_ci", r.utility), ("delta_oracle_ci", r.oracle)):
            lo, hi = mean_inference(sv.values).interval(0.95)
            assert d[key] == [lo, hi]
    # coverage of the t interval at 8 streams when each stream value averages 24 decisions of a zero-inflated,
    # skewed law (what an audit's per-stream values are); a single draw per stream of that law (skewness ~2)
    # under-covers (about 88 % at 8 streams, 84 % at 4): the documented limit (docs/guide/verdicts.md)
    rng = derive_rng(47, "coverage")
    n_rep = 4000
    for per_stream, lo_ok, hi_ok in ((24, 0.93, 0.97), (1, 0.85, 0.92)):
        hits = 0
        for _ in range(n_rep):
            draws = np.where(rng.random((8, per_stream)) < 0.3, 0.0, rng.exponential(1.0, (8, per_stream)))
            lo, hi = mean_inference((draws - 0.7).mean(axis=1)).interval(0.95)   # true mean 0
            hits += lo <= 0.0 <= hi
        assert lo_ok <= hits / n_rep <= hi_ok, (per_stream, hits / n_rep)


def test_point2_noise_only_cells_rarely_exclude_zero() -> None:
    """ΔU and ΔO of an order-blind stochastic agent are pure noise under pair and reorder: over 30 seeds their
    95 % intervals exclude 0 in about 5 % of cells (main's percentile bootstrap: 4 of 7 seeds at 8 streams)."""
    excl = total = 0
    for seed in range(30):
        for r in _eps_audit(seed).rows:   # type: ignore[attr-defined]
            d = r.to_dict()
            for key in ("delta_utility_ci", "delta_oracle_ci"):
                lo, hi = d[key]
                excl += not (lo <= 0.0 <= hi)
                total += 1
    assert excl / total <= 0.10, (excl, total)


def test_point3_safe_means_shown_and_fewer_streams_never_make_it_likelier() -> None:
    safe = {}
    for n in (4, 16):
        safe[n] = 0
        for seed in range(8):
            res = _eps_audit(seed, n_streams=n, expect={"pair": "invariant"})
            e = next(x for x in res.verdict()["expectations"] if x["cell"] == "pair")   # type: ignore[attr-defined]
            assert e["margin"] == 0.05 and e["margin_source"] == "default"
            safe[n] += e["status"] == "SAFE"
            if e["status"] == "INCONCLUSIVE" and "shown within it only from" in e["line"]:
                assert n < MIN_STREAMS_WITHIN and e["streams_needed"] >= MIN_STREAMS_WITHIN   # a bound below the
                assert f"only from {MIN_STREAMS_WITHIN} streams" in e["line"]                # margin, too few streams
            elif e["status"] == "INCONCLUSIVE":
                assert "detects a response above" in e["line"] and e["detectable"] > 0
    assert safe[4] == 0 and safe[16] >= 6   # (4 < MIN_STREAMS_WITHIN: never SAFE)
    # a zero margin can never be shown for a stochastic agent: INCONCLUSIVE (or UNSAFE), with what would decide
    res = _eps_audit(0, expect={"pair": {"kind": "invariant", "tolerance": 0.0}})
    e = next(x for x in res.verdict()["expectations"] if x["cell"] == "pair")   # type: ignore[attr-defined]
    assert e["status"] in ("INCONCLUSIVE", "UNSAFE")
    assert "margin 0%" in e["line"]


def test_point3_detectable_response_and_streams_to_decide() -> None:
    per = [0.01, -0.02, 0.03, 0.0, 0.02, -0.01, 0.04, 0.01]
    inf = mean_inference(per)
    assert inf.detectable(0.05) == pytest.approx((t_ppf(0.95, 7) + t_ppf(0.8, 7)) * inf.se)
    need = inf.streams_to_decide(0.05, 0.05)
    assert need is not None and need >= 2
    assert t_ppf(0.95, need - 1) * inf.sd / math.sqrt(need) < 0.05 - inf.estimate
    assert not t_ppf(0.95, need - 2) * inf.sd / math.sqrt(need - 1) < 0.05 - inf.estimate


def _uniform_random() -> object:
    return from_callables(lambda: 0, lambda s, t, k, u: s, lambda s, t, m, rng: m[int(rng.integers(len(m)))],
                          name="random", stochastic=True)


def _softmax() -> object:
    def update(s: dict[str, tuple[float, int]], task: object, key: str, u: float) -> dict[str, tuple[float, int]]:
        t, n = s.get(key, (0.0, 0))
        return {**s, key: (t + u, n + 1)}

    def act(s: dict[str, tuple[float, int]], task: object, menu: tuple[str, ...], rng: np.random.Generator) -> str:
        q = np.array([s[k][0] / s[k][1] if k in s else 0.5 for k in menu])
        p = np.exp((q - q.max()) / 0.1)
        return menu[int(rng.choice(len(menu), p=p / p.sum()))]

    return from_callables(dict, update, act, name="softmax", stochastic=True)


def test_point6_common_random_numbers_never_make_t_gr_negative() -> None:
    sub = make_bandit(n_streams=8, n_future=8, rng=3)
    res = audit(sub.history, sub.futures, sub.evaluator, _uniform_random(), cells="value,pair,key_slot", maps="id",
                repeats=2, rng="common", n_resamples=200)
    for r in res.rows:
        assert r.action.estimate == 0.0   # history-blind: identical draws, identical decisions (was -0.41)
    res = audit(sub.history, sub.futures, sub.evaluator, _softmax(), cells="value,key_slot", maps="id", repeats=2,
                rng="common", n_resamples=200, expect={"value": "invariant", "key_slot": "invariant"})
    v = {e["cell"]: e for e in res.verdict()["expectations"]}
    for cell in ("value", "key_slot"):
        assert res.row(cell).action.estimate > 0
        assert v[cell]["status"] != "SAFE", v[cell]["line"]   # 18 of 100 decisions changed: never SAFE


def test_one_repeat_stochastic_changes_are_inconclusive_not_unsafe() -> None:
    sub = make_bandit(n_streams=8, n_future=8, rng=4)
    with pytest.warns(UserWarning, match="read with one repeat"):
        res = audit(sub.history, sub.futures, sub.evaluator, epsilon_greedy(0.2), cells="pair", maps="id",
                    repeats=1, n_resamples=200, expect={"pair": "invariant"})
    e = next(x for x in res.verdict()["expectations"] if x["cell"] == "pair")
    assert e["n_changed"] > 0 and e["status"] == "INCONCLUSIVE" and e["passed"]
    assert "repeats 2" in e["line"]


def test_holm_controls_the_family_and_inconclusive_policy_gates() -> None:
    per = [0.02, 0.05, 0.0, 0.04, 0.03, 0.06, 0.01, 0.03]
    rows = [{"cell": c, "migration": c, "action_readout": f"T_gr({c},aligned)", "action": float(np.mean(per)),
             "action_ci": [0, 0], "n_changed": 5, "n_decisions": 100, "n_streams": 8, "per_stream": {"action": per}}
            for c in ("pair", "reorder", "rename")]
    one = judge(rows[0], Expectation("pair", "invariant", 0.0))
    three = judge_rows(rows, [Expectation(c, "invariant", 0.0) for c in ("pair", "reorder", "rename")])
    assert three[0].p_value == pytest.approx(min(1.0, 3 * one.p_value))
    strict = judge_rows(rows, [Expectation(c, "invariant", 0.03) for c in ("pair", "reorder", "rename")],
                        JudgeContext(on_inconclusive="fail"))
    assert all(j.status == "INCONCLUSIVE" and not j.passed for j in strict)


def test_a_bound_below_the_margin_from_fewer_than_five_streams_is_not_shown_within() -> None:
    """MIN_STREAMS_WITHIN (measured: SAFE at the margin was wrong in 6.7 % of checks at 4 streams): the same small
    per-stream values are SAFE from 5 streams and INCONCLUSIVE at 4, saying why and that 5 streams would decide; a
    declared response's "shown not to respond" (UNSAFE) likewise; the UNSAFE side is not affected."""
    def row(per: list[float]) -> dict[str, object]:
        return {"cell": "pair", "migration": "pair", "action_readout": "T_gr(pair,aligned)",
                "action": float(np.mean(per)), "action_ci": [0, 0], "n_changed": 1, "n_decisions": 100,
                "n_streams": len(per), "per_stream": {"action": per}}

    small = [0.001, 0.0, 0.002, 0.001, 0.0]
    five = judge(row(small), Expectation("pair", "invariant", 0.05))
    assert MIN_STREAMS_WITHIN == 5 and five.status == "SAFE" and five.note == ""
    four = judge(row(small[:4]), Expectation("pair", "invariant", 0.05))
    assert four.status == "INCONCLUSIVE" and four.passed and four.bounds[1] < 0.05
    assert four.streams_needed == MIN_STREAMS_WITHIN
    assert "upper end of the 95% interval +0.2% < margin 5%: the bound is below the margin, but a stochastic " \
           "agent is shown within it only from 5 streams" in four.line(), four.line()
    assert judge(row(small[:4]), Expectation("pair", "responds", 0.05)).status == "INCONCLUSIVE"
    assert judge(row(small), Expectation("pair", "responds", 0.05)).status == "UNSAFE"
    big = [0.30, 0.32, 0.31, 0.29]   # far beyond the margin at 4 streams: UNSAFE, as before
    assert judge(row(big), Expectation("pair", "invariant", 0.05)).status == "UNSAFE"
