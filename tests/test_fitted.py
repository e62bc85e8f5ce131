"""Continuous and fitted associative controls: gradients, exact paths, exact structural laws, fits."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import replaylens as rl
from replaylens.agents import Namespace, TaskInput
from replaylens.bandit import make_bandit
from replaylens.errors import AgentError, ConfigError
from replaylens.maps import DERANGEMENTS_4, SlotSpec
from replaylens.paper.controllers import AgentController, ocrr_agent, run_closed_loop
from replaylens.paper.experiments import all_reproductions
from replaylens.paper.fitted import (
    ARMS,
    FitSettings,
    FixedFeatures,
    StreamFeatures,
    TrainingBlocks,
    VectorWriter,
    additive_nuisance_agent,
    associative_agent,
    associative_loss_grad,
    cross_namespace_agent,
    dense_agent,
    fit_additive,
    fit_associative,
    fit_recurrent,
    haar_orthogonal,
    init_params,
    observations,
    online_commutative_agent,
    recurrent_agent,
    recurrent_loss_grad,
)
from replaylens.paper.substrates.synthetic import build_synthetic
from replaylens.readouts import gamma, pi_pair_minus_value
from replaylens.testing import check_writer

Params = dict[str, np.ndarray]


def _blocks(seed: int = 0, e: int = 6, t: int = 10, targets: bool = True) -> TrainingBlocks:
    rng = np.random.default_rng(seed)
    return TrainingBlocks(rng.integers(0, 4, (e, t)), np.round(rng.uniform(size=(e, t)), 6), 4,
                          np.round(rng.uniform(size=(e, 4)), 6) if targets else None)


def _fd_error(loss_grad: Callable[[Params], tuple[np.ndarray, Params]], params: Params) -> float:
    """Worst relative error of the analytic gradient against central finite differences (every entry)."""
    _, grad = loss_grad(params)
    worst = 0.0
    h = 1e-6
    for name, value in params.items():
        for idx in np.ndindex(value.shape):
            up = {k: v.copy() for k, v in params.items()}
            dn = {k: v.copy() for k, v in params.items()}
            up[name][idx] += h
            dn[name][idx] -= h
            num = (loss_grad(up)[0].sum() - loss_grad(dn)[0].sum()) / (2 * h)
            worst = max(worst, abs(num - grad[name][idx]) / max(1e-7, abs(num) + abs(grad[name][idx])))
    return worst


# ---------------------------------------------------------------- gradients and objectives


@pytest.mark.parametrize("objective", ["loo", "prefix", "privileged"])
def test_associative_gradient_matches_finite_differences(objective: str) -> None:
    obs = observations(_blocks(), objective)
    params = init_params("associative", [3, 4], 4, FitSettings(init_scale=0.5, dim=3))
    assert _fd_error(lambda p: associative_loss_grad(p, obs, 1e-2), params) < 1e-6


def test_additive_gradient_matches_finite_differences() -> None:
    obs = observations(_blocks(), "additive-loo")
    params = init_params("additive", [5], 4, FitSettings(init_scale=0.5, dim=3))
    assert params["Q"].shape == (1, 4, 4)
    assert _fd_error(lambda p: associative_loss_grad(p, obs, 1e-2, additive=True), params) < 1e-6


def test_recurrent_gradient_matches_finite_differences() -> None:
    params = init_params("recurrent", [6, 7], 4, FitSettings(init_scale=0.4, dim=3))
    assert _fd_error(lambda p: recurrent_loss_grad(p, _blocks(), 1e-2), params) < 1e-6


def test_observations_follow_the_paper_definitions() -> None:
    b = _blocks(1, e=3, t=7)
    c = b.outcomes - 0.5
    loo, pre, priv = (observations(b, o) for o in ("loo", "prefix", "privileged"))
    for e in range(3):
        for i in range(7):
            others = [j for j in range(7) if j != i]
            want = np.zeros(4)
            for j in others:
                want[b.labels[e, j]] += c[e, j]
            np.testing.assert_allclose(loo.X[e * 7 + i], want, atol=1e-15)  # h_{e,-i} weights
            before = np.zeros(4)
            for j in range(i):
                before[b.labels[e, j]] += c[e, j]
            np.testing.assert_allclose(pre.X[e * 7 + i], before, atol=1e-15)  # h_{e,<i} weights
            assert loo.a[e * 7 + i] == b.labels[e, i] and loo.y[e * 7 + i] == b.outcomes[e, i]
    assert priv.X.shape == (12, 4) and np.array_equal(priv.y, b.targets.reshape(-1))  # type: ignore[union-attr]
    assert loo.weight == pytest.approx(1 / 3)
    with pytest.raises(ConfigError):
        observations(_blocks(targets=False), "privileged")


def test_arm_sorted_and_label_permutation_keep_the_right_invariants() -> None:
    b = _blocks(2, e=5, t=12)
    s = b.arm_sorted()
    assert (np.diff(s.labels, axis=1) >= 0).all()
    for e in range(5):  # stable: within a label the chronological order of outcomes is kept
        for a in range(4):
            assert np.array_equal(s.outcomes[e][s.labels[e] == a], b.outcomes[e][b.labels[e] == a])
    p = b.permute_labels(np.random.default_rng(0))
    assert np.array_equal(p.outcomes, b.outcomes)
    assert np.array_equal(np.sort(p.labels, axis=1), np.sort(b.labels, axis=1))
    assert not np.array_equal(p.labels, b.labels)


def test_fits_lower_the_loss_are_deterministic_and_batch_independent() -> None:
    b = _blocks(3, e=12, t=16)
    st = FitSettings(updates=150)
    both = fit_associative(b, "loo", [11, 12], st)
    alone = fit_associative(b, "loo", [12], st)
    assert np.array_equal(both[1].params["P"], alone[0].params["P"])
    assert np.array_equal(both[1].params["Q"], alone[0].params["Q"])
    assert all(f.loss < f.initial_loss for f in both)
    again = fit_associative(b, "loo", [11], st)
    assert np.array_equal(again[0].params["P"], both[0].params["P"])
    # one training set per model (label-null batches): equals fitting each alone
    shuffled = [b.permute_labels(np.random.default_rng(k)) for k in range(2)]
    per = fit_associative(shuffled, "loo", [11, 11], st)
    assert np.array_equal(per[1].params["Q"], fit_associative(shuffled[1], "loo", [11], st)[0].params["Q"])
    rec = fit_recurrent(b, [5], FitSettings(updates=60))[0]
    assert rec.loss < rec.initial_loss and rec.params["A"].shape == (8, 8)
    add = fit_additive(b, [5], FitSettings(updates=60))[0]
    assert add.loss < add.initial_loss and add.params["Q"].shape == (4, 9)


# ---------------------------------------------------------------- writers: exact paths and exact laws


def _random_agents() -> list[rl.Agent]:
    g = np.random.default_rng(42)
    return [
        dense_agent(1),
        cross_namespace_agent(2),
        online_commutative_agent(3),
        associative_agent(g.normal(size=(4, 8)), g.normal(size=(4, 8))),
        additive_nuisance_agent(g.normal(size=(4, 8)), g.normal(size=(4, 9))),
        recurrent_agent(0.5 * g.normal(size=(8, 8)), g.normal(size=(4, 8)), g.normal(size=(4, 8)),
                        g.normal(size=(4, 8))),
    ]


@pytest.fixture(scope="module")
def bandit() -> rl.substrates.BanditSubstrate:
    return make_bandit(n_streams=5, slots_per_block=14, n_future=4, rng=7)


def test_array_path_equals_per_record_path(bandit: rl.substrates.BanditSubstrate) -> None:
    h, f, e = bandit.history, bandit.futures, bandit.evaluator
    cells = "value,pair,key_slot,mask,reorder,rename"
    for agent in _random_agents():
        arr = rl.replay(h, f, e, agent, cells=cells, path="array", seed=3)
        ref = rl.replay(h, f, e, agent, cells=cells, path="reference", seed=3)
        assert np.array_equal(arr.actions, ref.actions), agent.name
        assert (arr.actions[0, 1:] != arr.actions[0, :1]).any(), agent.name  # rekey moves decisions


def test_commutative_writers_obey_the_pair_zero_law_exactly(bandit: rl.substrates.BanditSubstrate) -> None:
    h, f, e = bandit.history, bandit.futures, bandit.evaluator
    agents = {a.name: a for a in _random_agents()}
    for name in ("online-commutative", "fitted-associative", "additive-nuisance"):
        dec = rl.replay(h, f, e, agents[name], cells="value,pair,key_slot", seed=11)
        pair, aligned = dec.cell_index("pair"), dec.cell_index("aligned")
        assert np.array_equal(dec.actions[pair], dec.actions[aligned]), name
        for y in "UAO":
            assert np.array_equal(pi_pair_minus_value(dec, y).values, gamma(dec, y, "value").values)
    # the order-sensitive writers do respond to pair transport here (the law is not vacuous)
    for agent in (dense_agent(1, decay=0.3), agents["learned-recurrent"]):
        dec = rl.replay(h, f, e, agent, cells="pair", seed=11)
        assert (dec.actions[1] != dec.actions[0]).any(), agent.name


def _terminal_states(writer: VectorWriter, history: rl.History) -> dict[tuple[str, tuple[str, str]], np.ndarray]:
    out = {}
    for s in history.streams:
        state = writer.init_state()
        for r in history.records(s):
            task = TaskInput(r.stream, r.family, r.context, r.slot, r.task)
            state = writer.update(state, task, writer.namespace.kappa(r.key), r.outcome)
        out.update({(s, b): v for b, v in state.items()})
    return out


def test_pair_transport_leaves_the_commutative_state_bit_for_bit_unchanged(
        bandit: rl.substrates.BanditSubstrate) -> None:
    g = np.random.default_rng(5)
    writer = VectorWriter(FixedFeatures(ARMS, g.normal(size=(4, 8)), g.normal(size=(4, 8))))
    nuisance = VectorWriter(FixedFeatures(ARMS, g.normal(size=(4, 8)), g.normal(size=(4, 9))), additive=True)
    labels = bandit.futures.labels
    for d in range(3):
        spec = SlotSpec.from_seed(100 + d)
        base = rl.apply_cell(bandit.history, "aligned", labels=labels, rho=DERANGEMENTS_4[d], spec=spec)
        pair = rl.apply_cell(bandit.history, "pair", labels=labels, rho=DERANGEMENTS_4[d], spec=spec)
        a, b = _terminal_states(writer, base), _terminal_states(writer, pair)
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
        for cell in ("value", "key_slot", "pair"):  # the additive nuisance state is preserved by every cell
            other = rl.apply_cell(bandit.history, cell, labels=labels, rho=DERANGEMENTS_4[d], spec=spec)
            x, y = _terminal_states(nuisance, base), _terminal_states(nuisance, other)
            assert all(np.array_equal(x[k], y[k]) for k in x)
        # the order-sensitive dense writer's state does move under pair transport
        dense = VectorWriter(StreamFeatures(ARMS, 1, "dense", 8), decay=0.985)
        da, db = _terminal_states(dense, base), _terminal_states(dense, pair)
        assert any(not np.array_equal(da[k], db[k]) for k in da)


def test_additive_nuisance_has_exactly_zero_interactions(bandit: rl.substrates.BanditSubstrate) -> None:
    g = np.random.default_rng(9)
    for _ in range(3):  # whatever the parameters
        agent = additive_nuisance_agent(g.normal(size=(4, 8)), g.normal(size=(4, 9)))
        dec = rl.replay(bandit.history, bandit.futures, bandit.evaluator, agent, cells="value,pair,key_slot,reorder",
                        seed=4)
        assert all(np.array_equal(dec.actions[c], dec.actions[0]) for c in range(dec.actions.shape[0]))
        for cell in ("value", "key_slot", "pair"):
            for y in "UAO":
                assert np.abs(gamma(dec, y, cell).by_map).max() == 0.0


def test_masked_outcomes_add_nothing_to_the_associative_state() -> None:
    g = np.random.default_rng(1)
    w = VectorWriter(FixedFeatures(ARMS, g.normal(size=(4, 8)), g.normal(size=(4, 8))))
    task = TaskInput("s", "f", "c", 0, "t0")
    s0 = w.init_state()
    s1 = w.update(s0, task, "adaptive", 0.7)
    before = s1[("f", "c")].copy()
    s2 = w.update(s1, task, "mixed", float("nan"))
    assert np.array_equal(s1[("f", "c")], s2[("f", "c")])
    assert s0 == {} and np.array_equal(s1[("f", "c")], before)  # update never mutates its input


def test_cross_namespace_keys_are_disjoint_and_equivalent_to_shared_keys(
        bandit: rl.substrates.BanditSubstrate) -> None:
    feats = StreamFeatures(ARMS, 8, "x", 16, binding=True)
    split = VectorWriter(feats, decay=0.985, namespace=Namespace("P_", "A_"), name="split").agent()
    shared = VectorWriter(feats, decay=0.985, name="shared").agent()
    h, f, e = bandit.history, bandit.futures, bandit.evaluator
    a = rl.replay(h, f, e, split, cells="value,pair", path="reference", seed=2)
    b = rl.replay(h, f, e, shared, cells="value,pair", path="reference", seed=2)
    assert np.array_equal(a.actions, b.actions)
    task = TaskInput("s00", "f", "c", 0, "t")
    with pytest.raises(AgentError):
        split.writer.update(split.writer.init_state(), task, "coverage", 0.5)   # an action-side key
    with pytest.raises(AgentError):
        split.writer.update(split.writer.init_state(), task, "A_coverage", 0.5)
    fut = rl.FutureInput("s00", "f", "c", "x", 0, 0)
    with pytest.raises(AgentError):
        split.policy.act({}, fut, ("P_coverage", "P_mixed"), np.random.default_rng(0))


def test_features_are_seeded_per_stream_unit_and_orthogonally_bound() -> None:
    f1 = StreamFeatures(ARMS, 3, "dense", 32)
    f2 = StreamFeatures(ARMS, 3, "dense", 32)
    assert np.array_equal(f1.table("r00"), f2.table("r00"))
    assert not np.array_equal(f1.table("r00"), f1.table("r01"))
    np.testing.assert_allclose(np.linalg.norm(f1.table("r05"), axis=1), 1.0)
    b = haar_orthogonal(np.random.default_rng(0), 12)
    np.testing.assert_allclose(b @ b.T, np.eye(12), atol=1e-12)
    bound = StreamFeatures(ARMS, 3, "x", 12, binding=True).table("r00")
    np.testing.assert_allclose(np.linalg.norm(bound, axis=1), 1.0)


def test_declared_invariances_are_verified_by_check_writer() -> None:
    g = np.random.default_rng(3)
    for agent in (associative_agent(g.normal(size=(4, 8)), g.normal(size=(4, 8))),
                  additive_nuisance_agent(g.normal(size=(4, 8)), g.normal(size=(4, 9)))):
        report = check_writer(agent, n_streams=4)
        assert report.passed, report
        declared = {r.relation for r in report.relations if r.declared_invariant}
        assert set(agent.invariant_to) <= declared and "pair" in declared
        assert "rekey" in report.depends_on()  # label-specific features: rekeying moves decisions


# ---------------------------------------------------------------- end to end on a small synthetic world


def test_fit_freeze_replay_on_disjoint_synthetic_streams() -> None:
    world = build_synthetic(6, seed=20260822)
    arms = tuple(world.arms)
    tr = run_closed_loop(world, AgentController(ocrr_agent("ocrr"), arms), seed=1)
    train = TrainingBlocks(tr.adapt_actions[:3].reshape(-1, 48), tr.adapt_utility[:3].reshape(-1, 48), 4)
    fit = fit_associative(train, "loo", [20260822], FitSettings(updates=300))[0]
    agent = fit.agent()
    h = world.history(tr.adapt_actions)
    dec = rl.replay(h, world.futures(), world.evaluator(), agent, cells="value,pair,key_slot", maps="derangements",
                    draws=[SlotSpec(20260824, 20260822, 20260825)], seed=1)
    assert dec.actions.shape == (4, 10, 1, 1, 6 * 288)
    assert np.array_equal(dec.actions[2], dec.actions[0])  # pair = aligned for every map
    from replaylens.paper.experiments.fitted_controls import interaction, pair_mismatches

    assert pair_mismatches(dec) == 0
    got = interaction(dec, "value", "U", "test")
    assert got.low <= got.estimate <= got.high
    assert np.array_equal(got.values, interaction(dec, "pair-value", "U", "test").values)


def test_reproductions_are_registered() -> None:
    names = set(all_reproductions())
    for name in ("dense-associative-interactions", "cross-namespace-uncertainty", "online-commutative-namespace",
                 "learned-associative-interactions", "selected-only-associative-interactions",
                 "selected-only-fit-objective", "selected-only-fit-stability", "permutation-draw-sensitivity",
                 "learned-recurrent-check", "additive-nuisance", "policy-disjoint-associative-interactions",
                 "policy-reverse-associative-interactions", "independent-gate-interactions", "training-label-null",
                 "fitted-transport-summary"):
        assert name in names
