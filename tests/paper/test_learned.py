"""The independent learned endpoint pair (replaylens.paper.learned; paper L756–848, core spec §10)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np
import pytest

from replaylens import FutureInput, TaskInput, replay
from replaylens.bandit import make_bandit
from replaylens.errors import AgentError, ConfigError
from replaylens.paper.learned import (
    ENDPOINT_KEYS,
    TARGET_ENTROPY,
    AdditiveWriter,
    FitSeeds,
    LearnedPairConfig,
    LearnedPairResult,
    RecurrentWriter,
    TrainSettings,
    additive_loss_grad,
    canonical_keys,
    endpoint_gate,
    init_additive,
    init_recurrent,
    make_future_rows,
    make_sequences,
    recurrent_loss_grad,
    run_learned_pair,
    train_additive_models,
    train_recurrent_models,
    writer_from_model,
)
from replaylens.paper.learned._train import _init_seed_rng
from replaylens.paper.reproduce import REPRODUCTIONS
from replaylens.testing import check_writer

TINY = TrainSettings(updates=150, restart_offsets=(0, 1009))
TINY_CFG = LearnedPairConfig(n_fits=1, n_train=32, n_eval=16, n_rows=6, n_calibration_episodes=8, settings=TINY)


def _random_recurrent(seed: int, scale: float = 0.8, hidden: int = 16) -> RecurrentWriter:
    p = init_recurrent(np.random.default_rng(seed), 4, hidden, scale)
    return RecurrentWriter(p["W"], p["P"], p["V"], p["Q"])


def _fitted_additive() -> AdditiveWriter:
    # Q = 2·I − 0.5·11ᵀ: the largest key sum wins (a hand-built readout, not trained)
    return AdditiveWriter(2.0 * np.eye(4) - 0.5)


@pytest.fixture(scope="module")
def tiny_result() -> LearnedPairResult:
    return run_learned_pair(TINY_CFG)


# ---------------------------------------------------------------------------------------------- data


def test_sequences_follow_the_paper_layout() -> None:
    d = make_sequences(512, 7)
    assert d.keys.shape == (512, 32)
    assert np.array_equal(d.keys, np.broadcast_to(canonical_keys(), (512, 32)))
    assert canonical_keys().tolist() == [0] * 8 + [1] * 8 + [2] * 8 + [3] * 8
    assert np.bincount(d.winners, minlength=4).tolist() == [128] * 4  # balanced winner classes
    win = d.keys == d.winners[:, None]
    assert d.utilities[win].min() >= 0.78 and d.utilities[win].max() <= 0.94
    assert d.utilities[~win].min() >= 0.06 and d.utilities[~win].max() <= 0.22
    assert np.array_equal(np.round(d.utilities, 6), d.utilities)  # six-decimal grid
    assert np.array_equal(d.targets(), d.winners)  # a†(D) is the winner by construction
    y = d.soft_targets()
    assert np.allclose(y.sum(axis=1), 0.95 + 3 * 0.05) and np.all(y[np.arange(512), d.winners] == 0.95)
    assert math.isclose(TARGET_ENTROPY, 0.198515, abs_tol=5e-7)
    again = make_sequences(512, 7)
    assert np.array_equal(again.utilities, d.utilities) and np.array_equal(again.winners, d.winners)
    assert not np.array_equal(make_sequences(512, 8).utilities, d.utilities)
    with pytest.raises(ConfigError):
        make_sequences(30, 1)  # not balanced over four classes


def test_centered_sums_are_exact_and_transport_keeps_pairs() -> None:
    d = make_sequences(64, 3)
    ref = np.zeros((64, 4))
    for a in range(4):
        ref[:, a] = np.where(d.keys == a, d.utilities - 0.5, 0.0).sum(axis=1)
    assert np.allclose(d.centered_sums(), ref, atol=1e-12)
    perms = np.stack([np.random.default_rng(i).permutation(32) for i in range(64)])
    moved = d.transport(perms)
    assert np.array_equal(moved.micro_sums(), d.micro_sums())  # exact, any order
    for i in (0, 17):  # intact (key, utility) pairs at new slots
        assert sorted(zip(moved.keys[i], moved.utilities[i], strict=True)) == sorted(
            zip(d.keys[i], d.utilities[i], strict=True))
    mapped = d.relabel(np.array([1, 0, 3, 2]))
    assert np.array_equal(mapped.targets(), np.array([1, 0, 3, 2])[d.winners])
    with pytest.raises(ConfigError):
        d.transport(np.zeros(32, dtype=np.int64))


def test_future_rows_are_uniform_and_fixed_by_seed() -> None:
    rows = make_future_rows(96, 48, 5)
    assert rows.shape == (96, 48, 4) and rows.min() >= 0 and rows.max() <= 1
    assert abs(rows.mean() - 0.5) < 0.01
    assert np.array_equal(rows, make_future_rows(96, 48, 5))


# ---------------------------------------------------------------------------------------------- gradients


def _finite_difference(loss: Callable[[Mapping[str, np.ndarray]], float], params: dict[str, np.ndarray],
                       grads: Mapping[str, np.ndarray], eps: float = 1e-6) -> float:
    worst = 0.0
    for k, p in params.items():
        for idx in np.ndindex(p.shape):
            up = {kk: v.copy() for kk, v in params.items()}
            dn = {kk: v.copy() for kk, v in params.items()}
            up[k][idx] += eps
            dn[k][idx] -= eps
            fd = (loss(up) - loss(dn)) / (2 * eps)
            worst = max(worst, abs(fd - grads[k][idx]) / max(1e-7, abs(fd) + abs(grads[k][idx])))
    return worst


@pytest.mark.parametrize("form", ["paper", "sum", "half"])
def test_recurrent_bptt_gradient_matches_finite_differences(form: str) -> None:
    data = make_sequences(8, 11)  # full 32-slot sequences: BPTT through all steps
    params = init_recurrent(np.random.default_rng(2), 4, 5, 0.6)
    settings = TrainSettings(l2=1e-2, l2_form=form)
    loss, bce, grads = recurrent_loss_grad(params, data, settings)
    penalty = (1e-2 if form == "sum" else 5e-3) * sum(float(np.sum(v**2)) for v in params.values())
    data_term = 4 * bce if form == "paper" else bce  # the written objective sums over the 4 keys per sequence
    assert math.isclose(loss, data_term + penalty, rel_tol=1e-12)
    assert _finite_difference(lambda p: recurrent_loss_grad(p, data, settings)[0], params, grads) < 1e-5


def test_additive_gradient_matches_finite_differences() -> None:
    data = make_sequences(16, 4)
    params = init_additive(np.random.default_rng(3), 4, 0.3)
    _, _, grads = additive_loss_grad(params, data)
    assert _finite_difference(lambda p: additive_loss_grad(p, data)[0], params, grads) < 1e-6


def test_training_loop_is_clipped_adam_with_l2() -> None:
    """An independent re-implementation of three updates (torch conventions) gives the same parameters."""
    data = make_sequences(16, 5)
    s = TrainSettings(updates=3, dtype="float64", clip_norm=0.05)  # a small cap so that clipping engages
    model = train_additive_models([data], [42], s)[0]
    q = init_additive(_init_seed_rng(42, "additive"), 4, 0.08)["Q"]
    m = np.zeros_like(q)
    v = np.zeros_like(q)
    clipped = False
    for it in range(1, 4):
        g = additive_loss_grad({"Q": q}, data, s)[2]["Q"]  # 4·(mean-BCE gradient) + 1e-4·Q
        norm = float(np.sqrt(np.sum(g**2)))
        if norm > 0.05:
            clipped = True
            g = g * (0.05 / (norm + 1e-6))
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        q = q - (0.015 / (1 - 0.9**it)) * m / (np.sqrt(v) / math.sqrt(1 - 0.999**it) + 1e-8)
    assert clipped
    assert np.allclose(model.params["Q"], q, rtol=1e-12, atol=1e-15)
    assert model.trace.shape == (3,)


def test_batched_models_equal_models_trained_alone() -> None:
    d1, d2 = make_sequences(32, 1), make_sequences(32, 2)
    s = TrainSettings(updates=25)
    together = train_recurrent_models([d1, d2, d1], [5, 6, 7], s)
    alone = [train_recurrent_models([d], [seed], s)[0] for d, seed in ((d1, 5), (d2, 6), (d1, 7))]
    for a, b in zip(together, alone, strict=True):
        for k in ("W", "P", "V", "Q"):
            assert np.array_equal(a.params[k], b.params[k])
        assert a.final_loss == b.final_loss and np.array_equal(a.trace, b.trace)
    assert not np.array_equal(together[0].params["W"], together[2].params["W"])  # init seed matters


def test_small_fits_learn_the_target() -> None:
    data = make_sequences(64, 9)
    add = train_additive_models([data], [1], TrainSettings(updates=600))[0]
    assert add.final_bce < 0.2  # near the target entropy 0.1985
    assert np.array_equal(writer_from_model(add).actions(data), data.winners)
    rec = train_recurrent_models([data], [1], TrainSettings(updates=120))[0]
    assert rec.trace[0] > 0.69 and rec.final_bce < rec.trace[0] - 0.1
    assert rec.final_loss > rec.final_bce  # the ℓ2 penalty is part of the training loss


def test_settings_are_validated() -> None:
    with pytest.raises(ConfigError):
        TrainSettings(l2_form="quarter")
    with pytest.raises(ConfigError):
        TrainSettings(dtype="float16")
    with pytest.raises(ConfigError):
        LearnedPairConfig(protocol="shuffle")
    assert TrainSettings().updates == 4800 and TrainSettings().restart_offsets == (0, 1009, 2017, 3023)
    assert LearnedPairConfig().is_paper and not TINY_CFG.is_paper
    assert LearnedPairConfig(settings=TrainSettings(dtype="float64")).is_paper


# ---------------------------------------------------------------------------------------------- writers


def test_empty_state_actions_are_coverage() -> None:
    assert _random_recurrent(1).empty_action() == 0
    assert _fitted_additive().empty_action() == 0
    assert AdditiveWriter(np.random.default_rng(1).normal(size=(4, 4))).empty_action() == 0


def test_additive_is_exactly_pair_invariant_and_recurrent_is_not() -> None:
    d = make_sequences(96, 21)
    add, rec = _fitted_additive(), _random_recurrent(4)
    perms = np.stack([np.random.default_rng(100 + i).permutation(32) for i in range(96)])
    moved = d.transport(perms)
    assert np.array_equal(add.scores(moved), add.scores(d))  # bit for bit
    assert np.array_equal(add.actions(d), d.winners)
    assert np.any(rec.actions(moved) != rec.actions(d))
    assert not np.array_equal(rec.scores(moved), rec.scores(d))


def test_per_record_protocol_matches_batch_bit_for_bit() -> None:
    d = make_sequences(12, 6)
    for writer in (_fitted_additive(), _random_recurrent(8)):
        scores = writer.scores(d)
        for i in range(d.n):
            state = writer.init_state()
            for t in range(d.n_slots):
                task = TaskInput("s", "fam", f"ctx{i}", t, f"x{t}")
                new = writer.update(state, task, ENDPOINT_KEYS[d.keys[i, t]], float(d.utilities[i, t]))
                assert new is not state
                state = new
            fut = FutureInput("s", "fam", f"ctx{i}", "f", 0, d.n_slots - 1)
            got = writer.act(state, fut, ENDPOINT_KEYS, np.random.default_rng(0))
            best = np.flatnonzero(scores[i] == scores[i].max())[0]
            assert got == ENDPOINT_KEYS[best]
        if isinstance(writer, RecurrentWriter):  # the state itself is the batch state, bit for bit
            assert np.array_equal(np.asarray(state[("fam", f"ctx{d.n - 1}")]), writer.final_states(d)[-1])
        with pytest.raises(AgentError):
            writer.update(writer.init_state(), TaskInput("s", "f", "c", 0, "x"), "unknown", 0.5)


@pytest.mark.parametrize("kind", ["additive", "recurrent"])
def test_learned_agents_pass_check_writer(kind: str) -> None:
    writer = _fitted_additive() if kind == "additive" else _random_recurrent(3)
    report = check_writer(writer.agent(), n_streams=4)
    assert report.passed, report.checks  # array path == per-record path; declared invariances hold exactly
    deps = report.depends_on()
    if kind == "additive":
        assert "pair" not in deps and "value" in deps
    else:
        assert "pair" in deps


def test_learned_agent_replays_in_the_engine() -> None:
    sub = make_bandit(n_streams=6, slots_per_block=8, n_future=4, rng=3)
    agent = _fitted_additive().agent()
    dec = replay(sub.history, sub.futures, sub.evaluator, agent, cells="pair", seed=1)
    ref = replay(sub.history, sub.futures, sub.evaluator, agent, cells="pair", seed=1, path="reference")
    assert dec.equals(ref)
    assert int((dec.actions[1] != dec.actions[0]).sum()) == 0  # pair zero law for the additive writer


# ---------------------------------------------------------------------------------------------- protocol


def test_endpoint_gate() -> None:
    a = np.array([0, 1, 2, 3])
    ok = endpoint_gate(a, a.copy(), 0, 0)
    assert ok.passed and ok.aligned_mismatch == 0.0 and ok.condition == "passed"
    bad = endpoint_gate(a, np.array([0, 1, 2, 0]), 0, 0)
    assert not bad.passed and bad.aligned_mismatch == 0.25
    assert not endpoint_gate(a, a, 0, 1).passed
    with pytest.raises(ConfigError):
        endpoint_gate(a, a[:3], 0, 0)


def test_fit_seeds_are_recorded_and_distinct() -> None:
    s1, s2 = FitSeeds.derive(20260756, 1), FitSeeds.derive(20260756, 2)
    assert s1 == FitSeeds.derive(20260756, 1) and s1 != s2
    vals = [getattr(s1, f) for f in ("additive_data", "additive_init", "recurrent_data", "recurrent_init",
                                     "evaluation_data", "evaluation_rows", "permutations")]
    assert len(set(vals)) == len(vals)


def test_tiny_run_protocol(tiny_result: LearnedPairResult) -> None:
    (fit,) = tiny_result.fits
    add, rec = fit.evaluations["additive"], fit.evaluations["recurrent"]
    # additive pair response is exactly zero, whatever the training reached
    assert add.a_cal == 0.0 and add.a_ho == 0.0 and not add.decoded_sensitive
    assert np.array_equal(add.pair_actions, add.reference_actions)
    # split sizes: 8 episodes × 4 permutations, 8 × 5
    assert (add.calibration_decisions, add.holdout_decisions) == (32, 40)
    assert rec.calibration_episodes.shape == (8,) and rec.holdout_episodes.shape == (8,)
    assert rec.a_cal == pytest.approx(rec.calibration_changed / 32)
    # decoder bookkeeping
    assert rec.decoded_sensitive == (rec.a_cal > 0)
    assert rec.b_cal == float(rec.decoded_sensitive) and add.b_cal == 1.0
    assert rec.b_ho == float((rec.a_ho > 0) == rec.decoded_sensitive)
    # restart selection = lowest final training loss, and the retained writer is that restart
    losses = [m.final_loss for m in fit.recurrent_restarts]
    assert fit.selected_restart == int(np.argmin(losses)) and len(losses) == 2
    assert np.array_equal(fit.recurrent.w, fit.recurrent_model.params["W"])
    # the gate is computed from the two aligned tables and empty actions
    assert fit.gate.aligned_mismatch == float(np.mean(add.aligned != rec.aligned))
    assert fit.gate.passed == (fit.gate.aligned_mismatch == 0 and add.empty_action == rec.empty_action)
    # endpoint contrasts when the empty action is coverage
    assert add.empty_action == rec.empty_action == 0
    assert add.a_empty == float(np.mean(add.aligned != 0))
    assert fit.seeds == FitSeeds.derive(TINY_CFG.seed, 1)


def test_failed_gate_is_recorded_not_replaced() -> None:
    cfg = LearnedPairConfig(n_fits=1, n_train=16, n_eval=16, n_rows=4, n_calibration_episodes=8,
                            settings=TrainSettings(updates=2, restart_offsets=(0,)))
    result = run_learned_pair(cfg)
    (fit,) = result.fits
    assert not fit.gate.passed and fit.gate.aligned_mismatch > 0
    assert result.gate_failures == (1,)
    assert "failed" in fit.gate.condition
    assert len(fit.recurrent_restarts) == 1 and fit.seeds == FitSeeds.derive(cfg.seed, 1)  # no refit
    assert set(fit.evaluations) == {"additive", "recurrent"}  # the readouts are still recorded


def test_derangement_map_protocol() -> None:
    cfg = LearnedPairConfig(n_fits=1, n_train=16, n_eval=16, n_rows=4, n_calibration_episodes=8,
                            protocol="derangement-maps", settings=TrainSettings(updates=5, restart_offsets=(0,)))
    fit = run_learned_pair(cfg).fits[0]
    add = fit.evaluations["additive"]
    assert add.a_cal == 0.0 and add.a_ho == 0.0  # mapped aligned vs mapped pair: sums unchanged
    assert add.reference_actions.shape == (16, 9)


def test_results_do_not_depend_on_worker_count(tiny_result: LearnedPairResult) -> None:
    two = run_learned_pair(TINY_CFG, n_jobs=2)
    a, b = tiny_result.fits[0], two.fits[0]
    for k in ("W", "P", "V", "Q"):
        assert np.array_equal(a.recurrent_model.params[k], b.recurrent_model.params[k])
    assert np.array_equal(a.evaluations["recurrent"].pair_actions, b.evaluations["recurrent"].pair_actions)


# ---------------------------------------------------------------------------------------------- reproduction


def test_reproductions_are_registered_and_rows_are_honest(tiny_result: LearnedPairResult) -> None:
    from replaylens.paper.experiments import learned_pair as lp

    assert "endpoint-separation" in REPRODUCTIONS and "learned-endpoint-fits" in REPRODUCTIONS
    intervals = lp.episode_intervals(tiny_result, n_resamples=256)
    b = intervals[(1, "additive", "holdout")]
    assert b.estimate == 0.0 and b.low == 0.0 and b.high == 0.0
    rows = lp.endpoint_separation_rows(tiny_result, intervals) + lp.endpoint_fit_rows(tiny_result)
    for r in rows:
        assert r.status in ("match", "differs", "n/a")
        if r.paper is not None and r.ours is not None and r.tolerance is not None:
            assert (r.status == "match") == (abs(r.ours - r.paper) <= r.tolerance + 1e-12)
    additive = [r for r in rows if r.row.startswith("Additive fit") and r.table == "tab:content-fit-pairs"]
    assert additive and all(r.status == "match" and r.tolerance == 0.0 for r in additive)
    assert all("REDUCED" in r.note for r in rows if r.table == "tab:content-fit-pairs")
    for part in (lp.endpoint_separation_rows(tiny_result, intervals), lp.endpoint_fit_rows(tiny_result)):
        gate_rows = [r for r in part if r.table == "endpoint gate"]  # both reproductions show the gate
        assert [r.ours for r in gate_rows] == [float(tiny_result.fits[0].gate.passed)]
