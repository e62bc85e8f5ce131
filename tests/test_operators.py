"""Operator families (partA §1): exact laws, both replay paths, decoders, blinding and draw laws.

The fixed-law checks run on a small synthetic world (3 streams, the OCRR closed-loop trace); the paper-scale
tables are the ``content-*`` / ``family-blind`` reproductions (experiments/operators.py).
"""

from __future__ import annotations

import numpy as np
import pytest

import replaylens as rl
from replaylens.paper import operators as O
from replaylens.bandit import make_bandit
from replaylens.errors import AgentError, ConfigError
from replaylens.maps import DERANGEMENTS_4, SlotSpec
from replaylens.paper.controllers import AgentController, ocrr_agent, run_closed_loop
from replaylens.paper.experiments.operators import OperatorSweep, stream_signature
from replaylens.paper.experiments.synthetic_suite import SIGMA
from replaylens.paper.substrates.synthetic import build_synthetic
from replaylens.readouts import gamma, pi_pair_minus_value
from replaylens.records import History
from replaylens.testing import check_writer

SEED = 20260822
SIGMA_B = SlotSpec(value_seed=20260901, time_seed=20260901, reorder_seed=20260901)
ALL_CELLS = "value,pair,key_slot,mask,reorder,rename"


@pytest.fixture(scope="module")
def world() -> tuple[rl.History, rl.FutureTasks, rl.Evaluator]:
    w = build_synthetic(3, seed=SEED)
    trace = run_closed_loop(w, AgentController(ocrr_agent("ocrr"), tuple(w.arms)), seed=SEED)
    return w.history(trace.adapt_actions), w.futures(), w.evaluator()


@pytest.fixture(scope="module")
def sweep(world: tuple[rl.History, rl.FutureTasks, rl.Evaluator]) -> OperatorSweep:
    return OperatorSweep(*world, cells="value,pair,key_slot", draws=(SIGMA, SIGMA_B))


def _one_per_law() -> list[O.Operator]:
    comp = O.composite_operators()
    return [
        comp[0], comp[3], comp[4], comp[6],                                  # value-order (scalar, vector), kv, ko
        *O.random_operators(1),                                              # affine commutative, recurrent
        *[op for op in O.readout_operators(1, dims=(6,)) if "orthogonal" in op.label],
        *O.nonlinear_operators(1, dims=(6,)),                                # nonlinear commutative, recurrent
        *O.blind_operators("A", dims=(6,)),                                  # the four blind laws
    ]


LAWS = _one_per_law()


def _pair_dist(op: O.Operator, h: History, labels: tuple[str, ...], strata: tuple[tuple[str, str], ...],
               spec: SlotSpec = SIGMA) -> np.ndarray:
    assert op.state is not None
    return O.pair_state_distance(op.state, h, labels=labels, maps=DERANGEMENTS_4, spec=spec, blocks=strata)


# ---------------------------------------------------------------- both paths


@pytest.mark.parametrize("op", LAWS, ids=lambda o: f"{o.family}[{o.label}]")
def test_array_path_equals_per_record_path_on_the_synthetic_trace(world, op: O.Operator) -> None:
    h, f, e = world
    kw = {"cells": ALL_CELLS, "maps": "1230+3210", "draws": [SIGMA], "seed": SEED}
    arr = rl.replay(h, f, e, op.agent, path="array", **kw)
    ref = rl.replay(h, f, e, op.agent, path="reference", **kw)
    assert arr.equals(ref)
    assert op.agent.task_invariant and op.agent.array is not None


def test_operator_sweep_gives_the_decisions_of_replay(world, sweep: OperatorSweep) -> None:
    h, f, e = world
    for op in (LAWS[1], LAWS[5], LAWS[-1]):
        direct = rl.replay(h, f, e, op.agent, cells="value,pair,key_slot", maps="derangements",
                           draws=[SIGMA, SIGMA_B], seed=SEED)
        got = sweep.replay(op.agent)
        assert got.equals(direct)
        np.testing.assert_array_equal(got.utility, direct.utility)


def test_declared_invariances_hold_exactly_on_the_bandit() -> None:
    strata = make_bandit(n_streams=8, slots_per_block=16, n_future=6, rng=11).futures.strata
    comp, blind = O.composite_operators(), O.blind_operators("A", dims=(6,), strata=strata)
    ops = [comp[0], comp[4], *O.random_operators(1), blind[1], blind[3]]
    for op in ops:
        rep = check_writer(op.agent)
        assert rep.passed, (op.family, [c.detail for c in rep.checks], rep.depends_on())
        if op.target == "pair-displacing":
            assert "pair" in rep.depends_on()


# ---------------------------------------------------------------- exact invariants (partA §5)


def test_commutative_laws_pair_state_and_pair_actions_are_exactly_zero(world, sweep: OperatorSweep) -> None:
    h, f, _e = world
    for op in LAWS:
        d = _pair_dist(op, h, f.labels, f.strata)
        dec = sweep.replay(op.agent)
        pair_changes = dec.actions[dec.cell_index("pair")] != dec.actions[0]
        if op.target == "pair-preserving" or op.family == "key-value":
            assert d.max() == 0.0, op.family                     # bit-identical terminal states
            assert not pair_changes.any(), op.family             # every map, both draws
            for y in ("U", "O"):                                 # Π^{P−V} = Γ^value replicate by replicate
                np.testing.assert_allclose(pi_pair_minus_value(dec, y).values, gamma(dec, y, "value").values,
                                           rtol=0, atol=1e-12)
        elif op.target == "pair-displacing":
            assert d.max() > 1e-3, op.family


def test_label_free_value_order_has_no_rekey_and_equal_value_and_pair(sweep: OperatorSweep) -> None:
    for op in O.composite_operators()[:4]:
        dec = sweep.replay(op.agent)
        for draw in (0, 1):
            sig = stream_signature(dec, draw)
            assert sig.a_rekey.max() == 0.0
            assert sig.d_value is not None and sig.d_pair is not None
            np.testing.assert_array_equal(sig.d_value, sig.d_pair)
    scal, vec = O.composite_operators()[0], O.composite_operators()[1]   # same d: sign readouts agree
    assert sweep.replay(scal.agent).equals(sweep.replay(vec.agent))


def test_canonical_structural_zeros_decoder_and_scaling(sweep: OperatorSweep) -> None:
    decs = {(op.family, op.label): sweep.replay(op.agent) for op in O.canonical_operators()}
    for (fam, _lab), dec in decs.items():
        sig = stream_signature(dec).pooled()
        if fam == "invariant":
            assert sig.as_tuple() == (0.0, 0.0, 0.0)
        if fam == "key-only":
            assert sig.d_value == 0.0 and sig.d_pair == 0.0 and sig.a_rekey > 0
        if fam == "commutative":
            assert sig.d_pair == 0.0
        assert O.decode_family(sig) == fam
    for fam in ("invariant", "key-only", "commutative"):      # α-scaling: identical action tables
        a = [decs[(fam, f"α={x:g}")].actions for x in (0.5, 1.0, 2.0)]
        assert np.array_equal(a[0], a[1]) and np.array_equal(a[0], a[2])
    assert np.array_equal(decs[("order-sensitive", "d=0.05")].actions, decs[("order-sensitive", "d=0.20")].actions)


def test_order_sensitive_small_d_picks_the_last_label_and_survival_contributes_zero(world) -> None:
    h, f, e = world
    dec = rl.replay(h, f, e, rl.order_sensitive_agent(0.2), cells="", maps="")
    code = {lab: i for i, lab in enumerate(dec.plan.labels)}
    last = {(r.stream, r.block): code[r.key] for r in h.records()}
    survival = [i for i, s in enumerate(dec.plan.strata) if s[0] == "survival"]
    for i in range(dec.n_tasks):
        st = dec.plan.strata[int(dec.stratum_idx[i])]
        key = (dec.plan.streams[int(dec.stream_idx[i])], st)
        expected = last[key] if key in last else code["coverage"]    # survival reads the zero state: a tie
        assert int(dec.actions[0, 0, 0, 0, i]) == expected
    for op in LAWS:                                                   # zero state in every cell and map
        d = rl.replay(h, f, e, op.agent, cells="value,pair,key_slot", maps="derangements", draws=[SIGMA])
        sel = np.isin(d.stratum_idx, survival)
        assert (d.actions[..., sel] == d.actions[0, 0, 0, 0, sel]).all()


def test_readout_basis_does_not_change_the_state(world) -> None:
    h, f, _e = world
    ops = [op for op in O.readout_operators(1, dims=(6,)) if op.family == "readout-recurrent"]
    assert [op.label.split()[-1] for op in ops] == list(O.READOUT_BASES)
    dists = [_pair_dist(op, h, f.labels, f.strata) for op in ops]
    assert dists[0].max() > 0
    for d in dists[1:]:
        np.testing.assert_array_equal(d, dists[0])


def test_rekey_is_identical_across_slot_draws(sweep: OperatorSweep) -> None:
    for op in O.nonlinear_operators(1, dims=(6,)):
        dec = sweep.replay(op.agent)
        np.testing.assert_array_equal(stream_signature(dec, 0).a_rekey, stream_signature(dec, 1).a_rekey)


def test_summed_laws_are_order_free_bit_for_bit() -> None:
    op = O.blind_operators("A", dims=(6,))[1]            # second-order statistic ψψᵀ
    assert op.state is not None and op.state.law.summed
    rng = np.random.default_rng(3)
    recs = [(("s", "c"), O.ARMS[int(k)], float(u)) for k, u in zip(rng.integers(0, 4, 40), rng.random(40),
                                                                  strict=True)]
    states = []
    for order in (np.arange(40), rng.permutation(40), rng.permutation(40)):
        s = op.state.init_state()
        for i in order:
            blk, key, u = recs[int(i)]
            s = op.state.update(s, rl.TaskInput("r", blk[0], blk[1], int(i), f"t{i}"), key, u)
        states.append(s[("s", "c")][0])
    assert states[0] == states[1] == states[2]
    # a recurrent law is not
    rec = O.blind_operators("A", dims=(6,))[2].state
    assert rec is not None and not rec.law.summed


# ---------------------------------------------------------------- laws, readouts and draw laws


def test_law_formulas() -> None:
    lab, c, pos = np.array([2, 0]), np.array([0.25, -0.5]), np.array([0, 7])
    kv = O.KeyValueLaw(0.5, 0.75)
    np.testing.assert_array_equal(kv.increment(lab, c, pos), [[0, 0, 0.5 + 0.75 * 0.25, 0], [0.5 - 0.375, 0, 0, 0]])
    ko = O.KeyOrderLaw(0.6, 0.25, 1.0)
    g = np.ones((2, 4))
    np.testing.assert_allclose(ko.step(g, lab, c, pos), [[0.6, 0.6, 0.6 + 0.5, 0.6], [0.6 - 0.25, 0.6, 0.6, 0.6]])
    vo = O.ValueOrderLaw(0.1, 1.0, np.array(O.VALUE_DIRECTION))
    np.testing.assert_allclose(vo.step(np.zeros((2, 4)), lab, c, pos)[0], 0.25 * np.array(O.VALUE_DIRECTION))
    b, v = np.arange(8.0).reshape(4, 2) / 10, np.ones((4, 2))
    np.testing.assert_allclose(O.psi(b, v, lab, c)[1], np.sin((b[0] - 0.5) + 0.15 * (b[0] - 0.5) ** 2))
    w = np.stack([np.eye(2) * (k + 1) for k in range(5)])
    pm = O.PositionMixedLaw(b, v, w)                       # j mod 5: position 7 uses W_2
    np.testing.assert_allclose(pm.increment(lab, c, pos)[1], 3 * O.psi(b, v, lab, c)[1])
    np.testing.assert_allclose(O.linear(np.array([[1.0, 2.0]]), np.array([[3.0, 4.0], [5.0, 6.0]])), [[11, 17]])
    assert O.centered(np.array([np.nan]))[0] == 0.0       # masked outcomes contribute c = 0
    sr = O.sign_readout(4)
    assert [O.StateOperator(vo, sr, "x").act({("a", "b"): ((z,), 1)}, rl.FutureInput("r", "a", "b", "t", 0, 0),
                                             O.ARMS, np.random.default_rng(0)) for z in (0.3, -0.3, 0.0)] \
        == ["coverage", "mixed", "coverage"]


def test_coefficient_draws_are_seeded_stable_and_scaled() -> None:
    a, b = O.random_operators(2), O.random_operators(12)
    for x, y in ((a[0], b[0]), (a[1], b[1]), (a[2], b[12])):      # a writer does not depend on the others
        assert x.state is not None and y.state is not None
        np.testing.assert_array_equal(x.state.law.b, y.state.law.b)  # type: ignore[attr-defined]
    rec = b[12].state
    assert rec is not None
    assert np.isclose(np.max(np.abs(np.linalg.eigvals(rec.law.a))), 0.62)  # type: ignore[attr-defined]
    nl = O.nonlinear_operators(1, dims=(8,))[1].state
    assert nl is not None
    assert np.isclose(np.max(np.abs(np.linalg.eigvals(nl.law.a))), 0.42)  # type: ignore[attr-defined]
    assert np.isclose(np.linalg.norm(nl.law.bmat, 2), 1.0)  # type: ignore[attr-defined]
    for s in O.STRATA:
        q = nl.readout.matrix(s)
        assert q.shape == (4, 8)
        np.testing.assert_allclose(np.linalg.norm(q, axis=1), 1.0)
    hr = O.haar_rows(np.random.default_rng(1), 4, 6)
    np.testing.assert_allclose(hr @ hr.T, np.eye(4), atol=1e-12)
    # draws A and B of the blind challenge are different writers
    wa, wb = O.blind_operators("A")[0].state, O.blind_operators("B")[0].state
    assert wa is not None and wb is not None
    assert not np.array_equal(wa.law.b, wb.law.b)  # type: ignore[attr-defined]
    assert [op.state.law.b.shape[1] for op in O.blind_operators("A")[:8]] == list(O.BLIND_DIMS)  # type: ignore


def test_family_sizes_and_targets() -> None:
    assert len(O.canonical_operators()) == 12 and len(O.composite_operators()) == 8
    assert len(O.random_operators()) == 24 and len(O.nonlinear_operators()) == 24
    assert len(O.readout_operators()) == 72
    blind = O.blind_operators("A")
    assert len(blind) == 32
    assert sum(op.target == "pair-preserving" for op in blind) == 16


def test_operator_rejects_unknown_labels() -> None:
    op = O.random_operators(1)[0].agent
    with pytest.raises(AgentError):
        op.writer.update({}, rl.TaskInput("r", "f", "c", 0, "t"), "elsewhere", 0.5)
    with pytest.raises(AgentError, match="no matrix"):
        O.Readout({("a", "b"): np.eye(4)}).matrix(("x", "y"))


# ---------------------------------------------------------------- decoders, blinding, thresholds


def test_family_decoder_and_pair_decoder() -> None:
    S = O.Signature
    assert O.decode_family(S(0, 0, 0)) == "invariant"
    assert O.decode_family(S(0.6, 1e-7, 0)) == "key-only"
    assert O.decode_family(S(0.6, 0.1, 0)) == "commutative"
    assert O.decode_family(S(0.0, 0.1, 0)) == "commutative"
    assert O.decode_family(S(0.6, 0.0, 2e-6)) == "order-sensitive"
    dec = O.PairDecoder()
    assert dec.threshold == O.PAIR_THRESHOLD == 0.05
    assert dec(S(0, 0, 0.05)) == "pair-displacing" and dec(S(0, 0, 0.047)) == "pair-preserving"
    with pytest.raises(ConfigError):
        O.PairDecoder(0.0)


def test_threshold_sensitivity_is_a_pure_rethresholding() -> None:
    # the paper's draw A: 16 zeros and 16 displacing signatures with k = 16, 15, 13, 13, 11, 9 above each threshold
    disp = [0.03, 0.06, 0.06, 0.11, 0.11, 0.14, 0.14, *([0.2] * 9)]
    x = [0.0] * 16 + disp
    y = [False] * 16 + [True] * 16
    rows = O.threshold_sensitivity(x, y)
    assert [r.threshold for r in rows] == list(O.THRESHOLD_GRID)
    assert [r.true_positives for r in rows] == [16, 15, 13, 13, 11, 9]
    assert all(r.specificity == 1.0 for r in rows)
    assert [round(r.accuracy, 3) for r in rows] == [1.0, 0.969, 0.906, 0.906, 0.844, 0.781]
    with pytest.raises(ConfigError):
        O.threshold_sensitivity([0.1], [True, False])


def test_blind_set_hides_labels_until_predictions_are_recorded() -> None:
    ops = O.canonical_operators()
    bs = O.BlindSet([(op.family, op.agent) for op in ops], seed=7, prefix="W")
    assert bs.ids == tuple(f"W{i:02d}" for i in range(12))
    ag = bs.agent(bs.ids[0])
    assert ag.name == bs.ids[0] and dict(ag.spec) == {"name": bs.ids[0]} and ag.invariant_to == ()
    with pytest.raises(ConfigError):
        bs.open()
    with pytest.raises(ConfigError):
        bs.record({bs.ids[0]: "invariant"})
    bs.record(dict.fromkeys(bs.ids, "invariant"))
    hidden = bs.open()
    assert sorted(hidden.values()) == sorted(op.family for op in ops)
    again = O.BlindSet([(op.family, op.agent) for op in ops], seed=7, prefix="W")
    again.record(dict.fromkeys(again.ids, "x"))
    assert again.open() == hidden                       # the assignment is a function of the recorded seed
    other = O.BlindSet([(op.family, op.agent) for op in ops], seed=8, prefix="W")
    other.record(dict.fromkeys(other.ids, "x"))
    assert other.open() != hidden


def test_blind_challenge_freezes_the_decoder_first_and_opens_last(world) -> None:
    h, f, e = world
    ch = O.blind_challenge(O.PairDecoder(), "A", dims=(6,))
    assert ch.protocol[0].startswith("decoder frozen") and "0.050" in ch.protocol[0]
    with pytest.raises(ConfigError):
        ch.open()

    def signature(agent: rl.Agent) -> O.Signature:
        dec = rl.replay(h, f, e, agent, cells="pair", maps="derangements", draws=[SIGMA], seed=SEED)
        return stream_signature(dec).pooled()

    sigs = ch.run(signature)
    opened = ch.open()
    assert ch.protocol[-2:] == ["predictions recorded", "hidden assignments opened"]
    for oid, op in opened.items():
        if op.target == "pair-preserving":
            assert sigs[oid].d_pair == 0.0 and ch.blind.predictions[oid] == "pair-preserving"


def test_reproductions_are_registered() -> None:
    from replaylens.paper.experiments import all_reproductions

    names = set(all_reproductions())
    assert {"content-calibration", "content-composite", "random-operators", "readout-invariance",
            "content-nonlinear", "family-blind"} <= names
