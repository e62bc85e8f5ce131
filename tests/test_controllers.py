"""Controllers: OCRR ledger rules, variants, baselines, closed loop, and replay-path agreement."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from replaylens.agents import FutureInput, TaskInput
from replaylens.bandit import make_bandit
from replaylens.paper.controllers import (
    AgentController,
    ExtraSampling,
    GenericMemory,
    GenericSkill,
    LedgerController,
    NoUpdate,
    SelectedStatic,
    ShuffledOutcome,
    StaticPredictor,
    condition_summary,
    ocrr_agent,
    run_closed_loop,
)
from replaylens.paper.controllers._ledger import OCRR, UCB1, LedgerState
from replaylens.replay import replay

ARMS = ("coverage", "adaptive", "replicate", "mixed")
STRATA = (("source", "low"), ("source", "high"), ("temporal", "low"), ("temporal", "high"),
          ("survival", "balanced"), ("survival", "rare"))


@dataclass
class FakeWorld:
    n_streams: int
    strata: tuple
    arms: tuple
    dev_utility: np.ndarray
    adapt_utility: np.ndarray
    future_utility: np.ndarray

    @property
    def learning_blocks(self) -> tuple:
        return self.strata[:4]


@pytest.fixture(scope="module")
def world() -> FakeWorld:
    g = np.random.default_rng(7)
    return FakeWorld(6, STRATA, ARMS, g.random((6, 6, 24, 4)), g.random((6, 4, 48, 4)), g.random((6, 6, 48, 4)))


def _fut(f: str = "source", c: str = "low") -> FutureInput:
    return FutureInput("r00", f, c, "x", 0, 0)


def _task(t: int, f: str = "source", c: str = "low") -> TaskInput:
    return TaskInput("r00", f, c, t, f"t{t}")


def test_empty_ocrr_selects_replicate_and_scores_078() -> None:
    ctl = LedgerController(OCRR)
    s = ctl.init_state()
    assert ctl.act(s, _fut(), ARMS, np.random.default_rng(0)) == "replicate"
    assert np.allclose(ctl.scores(s, "source", "low", ARMS), 0.5 + 0.28)


def test_ocrr_score_formula_and_global_backoff() -> None:
    ctl = LedgerController(OCRR)
    s = ctl.init_state()
    for t, u in enumerate([0.9, 0.8, 0.7, 0.6, 0.5]):
        s = ctl.update(s, _task(t), "adaptive", u)
    n, ubar = 5, 0.7
    lcb = ubar - 1.64 * np.sqrt(max(ubar * (1 - ubar), 0.02) / n)
    expect = ubar + 0.28 / np.sqrt(1 + n) + 0.1 * max(0.0, lcb)
    sc = ctl.scores(s, "source", "low", ARMS)
    assert sc[1] == pytest.approx(expect, abs=1e-12)
    # another block: adaptive falls back to the global mean 0.7 with local n = 0
    sc2 = ctl.scores(s, "temporal", "low", ARMS)
    assert sc2[1] == pytest.approx(0.7 + 0.28, abs=1e-12)
    assert sc2[0] == pytest.approx(0.5 + 0.28)


def test_quarantine_for_six_steps_and_all_quarantined_falls_back_to_replicate() -> None:
    ctl = LedgerController(OCRR)
    s = ctl.init_state()
    t = 0
    for a in ARMS:  # six poor outcomes on every arm: each gets quarantined
        for _ in range(6):
            s = ctl.update(s, _task(t), a, 0.1)
            t += 1
    sc = ctl.scores(s, "source", "low", ARMS)
    assert np.isneginf(sc[-1])  # the last arm was quarantined within the last 6 updates
    # frozen future clock: whatever is quarantined now stays quarantined for every future task
    assert ctl.act(s, _fut(), ARMS, np.random.default_rng(0)) in ARMS
    s_all = s
    for a in ARMS:  # one more poor outcome on each arm renews every quarantine
        s_all = ctl.update(s_all, _task(t), a, 0.1)
        t += 1
    assert np.isneginf(ctl.scores(s_all, "source", "low", ARMS)).all()
    assert ctl.act(s_all, _fut(), ARMS, np.random.default_rng(0)) == "replicate"
    # six further updates elsewhere expire the quarantine
    s_late = s_all
    for k in range(6):
        s_late = ctl.update(s_late, _task(t + k, "temporal", "low"), "coverage", 0.9)
    assert np.isfinite(ctl.scores(s_late, "source", "low", ARMS)).all()


def _feed(ctl: LedgerController, values: list[float], arm: str = "coverage", t0: int = 0) -> LedgerState:
    s = ctl.init_state()
    for k, u in enumerate(values):
        s = ctl.update(s, _task(t0 + k), arm, u)
    return s


def test_quarantine_trigger_pins_the_paper_rule() -> None:
    """Paper L1093: at least six observations (the current one included), a current utility below 0.32
    and a running mean (the current one included) below 0.46; both comparisons strict."""
    ctl = LedgerController(OCRR)

    def quarantined(values: list[float]) -> bool:
        s = _feed(ctl, values)
        return bool(np.isneginf(ctl.scores(s, "source", "low", ARMS)[0]))

    assert not quarantined([0.1] * 5)  # five observations are not enough
    assert quarantined([0.1] * 6)  # the sixth observation counts itself
    assert not quarantined([0.1] * 5 + [0.32])  # current utility must be strictly below 0.32
    assert quarantined([0.5] * 5 + [0.2])  # running mean 0.45 includes the current outcome (before: 0.5)
    assert not quarantined([0.492] * 5 + [0.3])  # running mean exactly 0.46 is not below 0.46
    assert not quarantined([0.9] * 5 + [0.1])  # a poor current outcome alone does not quarantine


def test_quarantine_lasts_exactly_six_subsequent_policy_steps() -> None:
    """Quarantined for the next six policy steps (clock = adaptation updates, any block); the frozen
    future does not advance the clock."""
    ctl = LedgerController(OCRR)
    s = _feed(ctl, [0.1] * 6)
    for k in range(7):
        sc = ctl.scores(s, "source", "low", ARMS)
        assert bool(np.isneginf(sc[0])) == (k < 6), k
        assert np.isfinite(sc[1:]).all()
        # repeated future decisions leave the state (and the clock) untouched
        first = ctl.act(s, _fut(), ARMS, np.random.default_rng(0))
        assert ctl.act(s, _fut(), ARMS, np.random.default_rng(1)) == first
        s = ctl.update(s, _task(6 + k, "temporal", "low"), "mixed", 0.9)


def test_ucb1_unvisited_arms_are_infinite() -> None:
    ctl = LedgerController(UCB1)
    s = ctl.update(ctl.init_state(), _task(0), "coverage", 0.4)
    sc = ctl.scores(s, "source", "low", ARMS)
    assert np.isinf(sc[1:]).all() and np.isfinite(sc[0])
    assert ctl.act(s, _fut(), ARMS, np.random.default_rng(0)) == "replicate"
    assert ctl.act(ctl.init_state(), _fut("survival", "rare"), ARMS, np.random.default_rng(0)) == "replicate"


@pytest.mark.parametrize("variant", ["ocrr", "ucb1", "local-only", "global-only"])
def test_ledger_array_path_equals_reference(variant: str) -> None:
    sub = make_bandit(n_streams=4, slots_per_block=20, n_future=3, rng=5)
    ag = ocrr_agent(variant)
    a = replay(sub.history, sub.futures, sub.evaluator, ag, cells="all", draws=2, path="array")
    b = replay(sub.history, sub.futures, sub.evaluator, ag, cells="all", draws=2, path="reference")
    assert a.equals(b)


@pytest.mark.parametrize("variant", ["ucb1", "local-only", "global-only"])
def test_count_sum_variants_obey_the_pair_zero_law(variant: str) -> None:
    sub = make_bandit(n_streams=6, slots_per_block=24, n_future=3, rng=9)
    d = replay(sub.history, sub.futures, sub.evaluator, ocrr_agent(variant), cells="pair,reorder", draws=3)
    assert (d.actions[1] == d.actions[0]).all() and (d.actions[2] == d.actions[0]).all()


def test_priority_renamed_with_labels_makes_rename_exactly_zero() -> None:
    """Label-equivariance calibration: renaming the tie priority together with the labels."""
    sub = make_bandit(n_streams=4, slots_per_block=24, n_future=3, rng=2)
    from replaylens.maps import all_permutations

    lex = tuple(sorted(ARMS, reverse=True))
    for pi in all_permutations(4):
        prio = tuple(ARMS[pi.images[ARMS.index(a)]] for a in lex)  # π applied to the priority list
        d = replay(sub.history, sub.futures, sub.evaluator, ocrr_agent("ocrr", priority=prio), cells="rename",
                   maps=[",".join(map(str, pi.images))])
        m = d.plan.map_names.index(pi.name) if not pi.is_identity else 0
        base = replay(sub.history, sub.futures, sub.evaluator, ocrr_agent("ocrr"), cells="", maps="")
        assert np.array_equal(d.actions[1, m], base.actions[0, 0])


def test_closed_loop_runs_every_controller_and_oracle_check(world: FakeWorld) -> None:
    ctls = [AgentController(ocrr_agent(), ARMS), NoUpdate(ARMS), GenericMemory(ARMS), GenericSkill(ARMS),
            StaticPredictor(ARMS), SelectedStatic(ARMS), ExtraSampling(ARMS), ShuffledOutcome(ARMS)]
    res = [run_closed_loop(world, c, seed=3) for c in ctls]
    rows = condition_summary(world, res)
    # utility + oracle gap = the same mean oracle utility for every condition within a split
    for split in ("adaptation", "future"):
        tot = {round(r["utility"] + r["oracle_gap"], 12) for r in rows if r["split"] == split}
        assert len(tot) == 1
    no = res[1]
    assert (no.future_actions == ARMS.index("mixed")).all()
    assert {r["cost"] for r in rows if r["condition"] == "extra-sampling"} == {30.0}
    # determinism: same seed, same actions (stochastic controllers included)
    again = run_closed_loop(world, ExtraSampling(ARMS), seed=3)
    assert np.array_equal(again.adapt_actions, res[6].adapt_actions)
    # the adaptation trace only contains the chosen arm's utility
    ocrr = res[0]
    r, b, t = np.indices(ocrr.adapt_actions.shape)
    assert np.array_equal(ocrr.adapt_utility, world.adapt_utility[r, b, t, ocrr.adapt_actions])


def test_generic_memory_rules(world: FakeWorld) -> None:
    gm = GenericMemory(ARMS)
    s = gm.start(0, np.random.default_rng(0))
    assert gm.choose(s, STRATA[0], 0, np.random.default_rng(0)) == 0
    s = gm.observe(s, STRATA[0], 0, 0.3, 0, np.random.default_rng(0))
    assert gm.choose(s, STRATA[0], 1, np.random.default_rng(0)) == 1  # failed: round-robin
    s = gm.observe(s, STRATA[0], 1, 0.7, 1, np.random.default_rng(0))
    assert gm.choose(s, STRATA[0], 2, np.random.default_rng(0)) == 1  # success: repeat
    assert gm.choose_future(s, STRATA[0], 2, np.random.default_rng(0)) == 1
    assert gm.choose_future(s, STRATA[4], 2, np.random.default_rng(0)) == 0


def test_generic_memory_moves_on_after_a_failure_and_keeps_the_last_success_for_the_future() -> None:
    """Paper L2139: "repeats the last arm after a value at least 0.56 and otherwise follows round-robin"; L1102:
    "stores the last successful arm".  After a failure the rule moves on round-robin even when an earlier success
    is stored (it does not go back to it), and the frozen future uses the last success, not the last arm tried
    (docs/reproduction-notes.md, issue 14 (e))."""
    gm, rng, key = GenericMemory(ARMS), np.random.default_rng(0), STRATA[2]
    s = gm.observe(gm.start(0, rng), key, 0, 0.70, 0, rng)  # coverage succeeds
    s = gm.observe(s, key, 0, 0.40, 1, rng)                   # coverage fails
    assert gm.choose(s, key, 2, rng) == 1                     # -> adaptive, not back to coverage
    s = gm.observe(s, key, 1, 0.10, 2, rng)
    assert gm.choose(s, key, 3, rng) == 2                     # -> replicate
    s = gm.observe(s, key, 2, 0.55, 3, rng)                   # 0.55 < 0.56 is a failure
    assert gm.choose(s, key, 4, rng) == 3                     # -> mixed
    s = gm.observe(s, key, 3, 0.20, 4, rng)
    assert gm.choose(s, key, 5, rng) == 0                     # wraps to coverage
    assert gm.choose_future(s, key, 5, rng) == 0             # last success (coverage), not the last arm (mixed)
    s = gm.observe(s, key, 0, 0.56, 5, rng)                   # exactly 0.56 is a success
    assert gm.choose(s, key, 6, rng) == 0
    assert gm.choose(s, STRATA[0], 6, rng) == 0               # another key is unvisited: coverage


def test_static_controllers_use_development(world: FakeWorld) -> None:
    sp = StaticPredictor(ARMS)
    s = sp.develop(sp.start(0, np.random.default_rng(0)), STRATA[0], world.dev_utility[0, 0],
                   np.random.default_rng(0))
    assert sp.choose(s, STRATA[0], 0, np.random.default_rng(0)) == int(np.argmax(world.dev_utility[0, 0].mean(0)))
    ss = SelectedStatic(ARMS)
    s2 = ss.develop(ss.start(0, np.random.default_rng(0)), STRATA[0], world.dev_utility[0, 0],
                    np.random.default_rng(0))
    j = np.arange(24)
    means = [world.dev_utility[0, 0][j[j % 4 == a], a].mean() for a in range(4)]
    assert ss.choose(s2, STRATA[0], 0, np.random.default_rng(0)) == int(np.argmax(means))
