"""Agents: array path == per-record reference path (the oracle), the exact known-writer laws of
core.md §4.1–4.3 / §13 on the bandit substrate, reference-rule semantics and tie rules (§2.3)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from replaylens.agents import (
    AGENTS,
    ReferenceRule,
    TieRule,
    choose,
    choose_batch,
    commutative_agent,
    invariant_agent,
    key_only_agent,
    load_agent,
    order_sensitive_agent,
    relation_agent,
)
from replaylens.bandit import BANDIT_ARMS, make_bandit
from replaylens.maps import stream_perm
from replaylens.readouts import a_rekey, mean_utility, oracle_agreement
from replaylens.records import (
    evaluator_from_rows,
    futures_from_tasks,
    history_from_records,
)
from replaylens.replay import replay, support_lookup


@pytest.fixture(scope="module")
def bandit():
    return make_bandit(n_streams=6, slots_per_block=12, n_future=6)


def _run(sub, agent, **kw):
    return replay(sub.history, sub.futures, sub.evaluator, agent, **kw)


# --------------------------------------------------------------------------- path agreement


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(AGENTS))
def test_array_path_equals_reference_path(bandit, name: str) -> None:
    kw = {"cells": "all", "draws": 2, "repeats": 2, "seed": 7}
    a = _run(bandit, load_agent(name), path="array", **kw)
    r = _run(bandit, load_agent(name), path="reference", **kw)
    assert a.path == "array" and r.path == "reference"
    assert a.actions.shape == (7, 10, 2, 2, len(bandit.futures))
    assert np.array_equal(a.actions, r.actions)
    assert np.array_equal(a.oracle, r.oracle)


def test_support_lookup_paths_agree(bandit) -> None:
    look = support_lookup(relation_agent(), bandit.history, bandit.futures, bandit.evaluator)
    kw = {"cells": "value,pair,rename", "seed": 2}
    assert np.array_equal(_run(bandit, look, path="array", **kw).actions,
                          _run(bandit, look, path="reference", **kw).actions)


_OUTCOMES = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0, 0.333333, 0.6666667, math.nan)


@hs.composite
def _audit_inputs(draw):
    """Random small audits: 1–3 streams, interleaved blocks, NaN and tied outcomes, partial menus in
    random orders, strata without a block and ``feeds`` overrides."""
    labels = ["A", "B", "C", "D"][: draw(hs.integers(2, 4))]
    hist, futs, ev = [], [], []
    for r in range(draw(hs.integers(1, 3))):
        s = f"s{r}"
        n_blocks = draw(hs.integers(1, 3))
        n_rec = draw(hs.integers(1, 9))
        slots = draw(hs.lists(hs.integers(0, 60), min_size=n_rec, max_size=n_rec, unique=True))
        blocks = draw(hs.lists(hs.integers(0, n_blocks - 1), min_size=n_rec, max_size=n_rec))
        keys = draw(hs.lists(hs.sampled_from(labels), min_size=n_rec, max_size=n_rec))
        outs = draw(hs.lists(hs.sampled_from(_OUTCOMES), min_size=n_rec, max_size=n_rec))
        for sl, b, k, u in zip(slots, blocks, keys, outs, strict=True):
            hist.append({"stream": s, "family": "f", "context": f"c{b}", "slot": sl, "task": f"{s}-t{sl}",
                         "key": k, "outcome": None if math.isnan(u) else u})
        present = sorted({f"c{b}" for b in blocks})
        strata = draw(hs.lists(hs.sampled_from([*(f"c{b}" for b in range(n_blocks)), "held"]), min_size=1,
                               max_size=4, unique=True))
        feeds = draw(hs.one_of(hs.none(), hs.sampled_from(present)))
        j = 0
        for ctx in strata:
            for _ in range(draw(hs.integers(1, 2))):
                menu = list(draw(hs.permutations(labels)))
                if j > 0:  # the stream's first menu is complete (every history key is a menu action)
                    menu = menu[: draw(hs.integers(1, len(labels)))]
                row = {"stream": s, "family": "f", "context": ctx, "task": f"{s}-x{j}", "menu": menu}
                if ctx == "held" and feeds is not None:
                    row |= {"feeds_family": "f", "feeds_context": feeds}
                futs.append(row)
                for a in menu:
                    ev.append({"stream": s, "task": f"{s}-x{j}", "key": a,
                               "utility": draw(hs.sampled_from((0.0, 0.5, 1.0)))})
                j += 1
    return history_from_records(hist), futures_from_tasks(futs), evaluator_from_rows(ev)


@pytest.mark.parametrize("name", ["mean", "count", "latest", "best", "sum", "commutative", "order-sensitive",
                                  "invariant", "key-only", "relation"])
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inputs=_audit_inputs(), seed=hs.integers(0, 50))
def test_paths_agree_on_random_histories(name: str, inputs, seed: int) -> None:
    h, f, e = inputs
    kw = {"cells": "all", "draws": 2, "seed": seed}
    a = replay(h, f, e, load_agent(name), path="array", **kw)
    r = replay(h, f, e, load_agent(name), path="reference", **kw)
    assert np.array_equal(a.actions, r.actions)


@pytest.mark.parametrize("name", ["mean", "count", "latest", "best", "sum"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inputs=_audit_inputs(), seed=hs.integers(0, 50))
def test_reference_rules_past_the_rank_limit_agree_on_both_paths(name: str, inputs, seed: int) -> None:
    """Past ``_RANK_LABELS`` labels the array path compares both keys per menu item instead of ranking labels."""
    from replaylens.agents import _reference

    h, f, e = inputs
    kw = {"cells": "all", "draws": 2, "seed": seed}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_reference, "_RANK_LABELS", 0)
        a = replay(h, f, e, load_agent(name), path="array", **kw)
    r = replay(h, f, e, load_agent(name), path="reference", **kw)
    assert np.array_equal(a.actions, r.actions)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inputs=_audit_inputs(), seed=hs.integers(0, 50), decay=hs.sampled_from([0.3, 0.9]))
def test_all_keys_writer_with_decay_agrees_on_both_paths(inputs, seed: int, decay: float) -> None:
    """One accumulator for every label, decayed per record (no built-in writer combines the two)."""
    h, f, e = inputs
    from replaylens.agents import BlockLinearWriter

    agent = BlockLinearWriter(lambda u: 1.0 + 0.01 * np.where(np.isnan(u), 0.0, u - 0.5), decay=decay,
                              all_keys=True, name="all-keys-decay").agent()
    kw = {"cells": "all", "draws": 2, "seed": seed}
    a = replay(h, f, e, agent, path="array", **kw)
    r = replay(h, f, e, agent, path="reference", **kw)
    assert np.array_equal(a.actions, r.actions)


# --------------------------------------------------------------------------- exact laws on the bandit


def test_invariant_agent_has_zero_response_everywhere(bandit) -> None:
    dec = _run(bandit, invariant_agent(), cells="all", maps="all", draws=2)
    assert len(dec.plan.maps) == 24
    assert np.array_equal(dec.actions, np.broadcast_to(dec.actions[0, 0, 0, 0], dec.actions.shape))


@pytest.mark.parametrize("factory", [commutative_agent, key_only_agent, relation_agent, invariant_agent])
def test_pair_zero_law(bandit, factory) -> None:
    dec = _run(bandit, factory(), cells="pair,value,key_slot", maps="all", draws=3, seed=13)
    pair = dec.actions[dec.cell_index("pair")]
    assert int((pair != dec.actions[0]).sum()) == 0
    if factory in (commutative_agent, relation_agent):  # not vacuous: key-slot moves these writers
        assert (dec.actions[dec.cell_index("key_slot")] != dec.actions[0]).any()
    if factory is key_only_agent:  # key-slot keeps the per-block key multiset: a count writer cannot see it
        assert np.array_equal(dec.actions[dec.cell_index("key_slot")], dec.actions[0])
    if factory is not invariant_agent:  # producer rekey does move every label-reading writer
        assert (dec.actions[0] != dec.actions[0, :1]).any()


def test_key_only_value_cell_equals_aligned(bandit) -> None:
    dec = _run(bandit, key_only_agent(), cells="value,mask", maps="derangements", draws=3)
    for cell in ("value", "mask"):  # both keep the key sequence
        assert np.array_equal(dec.actions[dec.cell_index(cell)], dec.actions[0])


def test_commutative_value_cell_moves_actions(bandit) -> None:
    dec = _run(bandit, commutative_agent(), cells="value", maps="derangements", draws=2)
    assert (dec.actions[dec.cell_index("value")] != dec.actions[0]).any()


@pytest.mark.parametrize("factory", [invariant_agent, key_only_agent, commutative_agent])
def test_alpha_scaling(bandit, factory) -> None:
    tables = [_run(bandit, factory(alpha), cells="all", maps="derangements", draws=2).actions
              for alpha in (0.5, 1.0, 2.0)]
    assert np.array_equal(tables[0], tables[1])
    assert np.array_equal(tables[0], tables[2])


def _tie_inputs():
    """Key A: one record with c = +0.2; key B: two records with c = +0.1 each — an exact tie."""
    h = history_from_records([
        {"stream": "s", "family": "f", "context": "c", "slot": i, "task": f"t{i}", "key": k, "outcome": u}
        for i, (k, u) in enumerate([("A", 0.7), ("B", 0.6), ("B", 0.6)])])
    f = futures_from_tasks([{"stream": "s", "family": "f", "context": "c", "task": "x", "menu": ["A", "B"]}])
    e = evaluator_from_rows([{"stream": "s", "task": "x", "key": a, "utility": 0.5} for a in "AB"])
    return h, f, e


def test_alpha_scaling_on_exact_tie() -> None:
    """Regression: per-record rounding to 2^-32 broke this exact tie towards B at α = 1 only."""
    h, f, e = _tie_inputs()
    for path in ("array", "reference"):
        got = [replay(h, f, e, commutative_agent(alpha), cells="", maps="", path=path).actions.ravel().tolist()
               for alpha in (0.5, 1.0, 2.0)]
        assert got == [[0], [0], [0]]  # an exact tie stays a tie: first canonical (A) for every α


@pytest.mark.parametrize("d", [0.1, 0.2])
def test_order_sensitive_picks_last_label_of_block(bandit, d: float) -> None:
    dec = _run(bandit, order_sensitive_agent(d), cells="pair,key_slot", maps="derangements", draws=2, seed=3)
    h, plan = bandit.history, dec.plan
    code = {lab: i for i, lab in enumerate(plan.labels)}
    maps = np.stack([m.array for m in plan.maps])
    n_checked = 0
    for i in range(dec.n_tasks):
        stream = plan.streams[int(dec.stream_idx[i])]
        stratum = plan.strata[int(dec.stratum_idx[i])]
        sl = h.stream_slice(stream)
        fam, ctx = h.family[sl], h.context[sl]
        keys = np.array([code[k] for k in h.key[sl].tolist()])
        in_block = np.flatnonzero((fam == stratum[0]) & (ctx == stratum[1]))
        if in_block.size == 0:  # a stratum without a block reads the zero state: first menu label
            assert (dec.actions[..., i] == code["coverage"]).all()
            continue
        blocks = np.unique(np.stack([fam, ctx], 1), axis=0, return_inverse=True)[1].reshape(-1)
        for d_i, spec in enumerate(plan.draws):
            for cell, role in (("aligned", None), ("pair", "pair"), ("key_slot", "time")):
                src = np.arange(keys.size) if role is None else stream_perm(spec, role, stream, blocks)
                last = keys[src[in_block[-1]]]
                got = dec.actions[dec.cell_index(cell), :, d_i, 0, i]
                assert np.array_equal(got, maps[:, last]), (stream, stratum, cell)
                n_checked += 1
    assert n_checked > 0


@pytest.mark.parametrize("name", ["mean", "sum", "count", "latest", "best", "commutative", "key-only",
                                  "order-sensitive"])
def test_label_equivariance_calibration(bandit, name: str) -> None:
    dec = _run(bandit, load_agent(name), cells="rename", maps="all")
    assert len(dec.plan.maps) == 24
    ren = dec.actions[dec.cell_index("rename")]
    assert np.array_equal(ren, np.broadcast_to(dec.actions[0, 0], ren.shape))
    # history-only rekey of the same maps is not neutral for these writers
    if name != "key-only":
        assert (dec.actions[0] != dec.actions[0, :1]).any()


def test_support_lookup_matches_endpoint_and_has_no_response(bandit) -> None:
    src = relation_agent()
    look = support_lookup(src, bandit.history, bandit.futures, bandit.evaluator)
    kw = {"cells": "value,pair,key_slot,mask,reorder", "maps": "derangements", "draws": 2}
    ds = _run(bandit, src, **kw)
    dl = _run(bandit, look, **kw)
    assert np.array_equal(dl.actions[0, 0], ds.actions[0, 0])     # the same endpoint
    assert np.array_equal(dl.actions, np.broadcast_to(ds.actions[0, 0, 0, 0], dl.actions.shape))
    assert a_rekey(dl).estimate == 0.0
    assert a_rekey(ds).estimate > 0.0                              # the source writer does respond
    for f in (mean_utility, oracle_agreement):
        assert np.array_equal(f(dl).values, f(ds).values)


# --------------------------------------------------------------------------- reference rules


def _one_block(records: list[tuple[str, float]], menu: list[str]):
    h = history_from_records([
        {"stream": "s", "family": "f", "context": "c", "slot": i, "task": f"t{i}", "key": k,
         "outcome": None if math.isnan(u) else u} for i, (k, u) in enumerate(records)])
    f = futures_from_tasks([{"stream": "s", "family": "f", "context": "c", "task": "x", "menu": menu},
                                {"stream": "s", "family": "f", "context": "other", "task": "y", "menu": menu}])
    e = evaluator_from_rows([{"stream": "s", "task": t, "key": a, "utility": 0.5} for t in "xy" for a in menu])
    return h, f, e


@pytest.mark.parametrize(("records", "expected"), [
    # (rule → label) for a block ledger and the menu A, B, C
    ([("A", 0.2), ("B", 0.6), ("B", 0.1), ("C", 0.5)],
     {"mean": "C", "sum": "B", "count": "B", "latest": "C", "best": "B"}),
    ([("B", 0.5), ("A", 0.5)],                                  # exact ties → first appearance
     {"mean": "B", "sum": "B", "count": "B", "latest": "A", "best": "B"}),
    ([("C", math.nan), ("B", math.nan), ("B", math.nan)],       # no visible outcome → first observed key
     {"mean": "C", "sum": "C", "count": "B", "latest": "B", "best": "C"}),
    ([("C", math.nan), ("B", 0.0)],                             # only B is defined for mean/sum/best
     {"mean": "B", "sum": "B", "count": "C", "latest": "B", "best": "B"}),
    ([("A", 0.1000004), ("B", 0.1)],                            # micro-unit rounding makes these equal
     {"mean": "A", "sum": "A", "count": "A", "latest": "B", "best": "A"}),
])
@pytest.mark.parametrize("path", ["array", "reference"])
def test_reference_rules(records, expected: dict[str, str], path: str) -> None:
    h, f, e = _one_block(records, ["A", "B", "C"])
    for rule, label in expected.items():
        dec = replay(h, f, e, load_agent(rule), cells="", maps="", path=path)
        x, y = dec.actions[0, 0, 0, 0].tolist()
        assert dec.plan.labels[x] == label, rule
        assert dec.plan.labels[y] == "A", rule        # empty ledger (no block): first menu action


def test_reference_rule_rejects_unknown_name() -> None:
    with pytest.raises(ValueError, match="unknown reference rule"):
        ReferenceRule("median")


# --------------------------------------------------------------------------- tie rules


def test_empty_relation_writer_picks_first_menu_item(bandit) -> None:
    ag = relation_agent()
    from replaylens.agents import FutureInput

    x = FutureInput("s", "bandit", "shifted", "x", 0, -1)
    assert ag.policy.act(ag.writer.init_state(), x, BANDIT_ARMS, np.random.default_rng(0)) == "coverage"
    dec = _run(bandit, ag, cells="all")
    shifted = np.array([bandit.futures.strata[int(r)] == ("bandit", "shifted") for r in dec.stratum_idx])
    assert shifted.any()
    assert (dec.actions[..., shifted] == dec.plan.labels.index("coverage")).all()


def test_tie_rules_on_four_arms() -> None:
    arms = BANDIT_ARMS
    assert choose([0, 0, 0, 0], arms, TieRule.LEX_LARGEST) == "replicate"
    assert choose([0, 0, 0, 0], arms, TieRule.FIRST_CANONICAL) == "coverage"
    assert choose([1, 0, 0, 1], arms, TieRule.LEX_LARGEST) == "mixed"
    assert choose([1, 1, 0, 0], arms, TieRule.LEX_LARGEST) == "coverage"
    assert choose([0, 1, 0, 0], arms, TieRule.LEX_LARGEST) == "adaptive"   # no tie: the maximum
    assert choose([0, 0, 0, 0], arms, TieRule.FIRST_APPEARANCE, [3, 2, 1, 5]) == "replicate"
    assert choose([1, 1, 0, 1], arms, TieRule.FIRST_APPEARANCE, [3, 2, 0, 2]) == "adaptive"
    assert choose([1, 1, 0, 1], arms, TieRule.FIRST_APPEARANCE) == "coverage"
    assert choose([0.1 + 0.2, 0.3, 0, 0], arms, TieRule.FIRST_CANONICAL) == "coverage"  # compared exactly


@pytest.mark.parametrize("rule", list(TieRule))
def test_choose_batch_equals_choose(rule: TieRule) -> None:
    g = np.random.default_rng(42)
    labels = ("delta", "alpha", "zeta", "beta", "eta", "gamma")
    q_n, m_n = 400, 5
    menu = np.full((q_n, m_n), -1, dtype=np.int64)
    scores = g.integers(0, 3, (q_n, m_n)).astype(np.float64)
    first = g.integers(0, 4, (q_n, m_n)).astype(np.float64)
    for q in range(q_n):
        k = int(g.integers(1, m_n + 1))
        menu[q, :k] = g.choice(len(labels), k, replace=False)
    got = choose_batch(scores, menu, rule, labels, first)
    for q in range(q_n):
        k = int((menu[q] >= 0).sum())
        want = choose(scores[q, :k], [labels[i] for i in menu[q, :k]], rule, first[q, :k])
        assert labels[int(got[q])] == want, q


@settings(max_examples=40, deadline=None)
@given(seed=hs.integers(0, 2**32), h=hs.integers(1, 6), t_n=hs.integers(0, 12), b=hs.integers(1, 3),
       n=hs.integers(1, 4), k=hs.integers(1, 3))
def test_decaying_states_equal_a_position_by_position_update(seed: int, h: int, t_n: int, b: int, n: int,
                                                             k: int) -> None:
    """The order-sensitive array state (each history's current block worked on apart from the others) equals
    updating every (history, block) state in place position by position, bit for bit, with invalid positions
    anywhere (their block and key codes arbitrary)."""
    from replaylens.agents import RecordBatch
    from replaylens.agents._known import BlockLinearWriter

    g = np.random.default_rng(seed)
    valid = g.random((h, t_n)) < 0.8
    keys = np.where(valid, g.integers(0, n, (h, t_n)), -1)
    blocks = np.where(valid, g.integers(0, b, (h, t_n)), g.integers(-1, b, (h, t_n)))
    outcomes = g.choice([0.0, 0.1, 0.5, 0.9, 1.0, np.nan], size=(h, t_n))
    cuts = np.sort(g.integers(0, t_n + 1, (h, k)), axis=1)
    rec = RecordBatch(keys=keys, outcomes=outcomes, blocks=blocks, tasks=np.zeros((h, t_n), dtype=np.int64),
                      valid=valid, cuts=cuts, labels=tuple("ABCD"[:n]), block_names=tuple(("f", f"c{i}")
                                                                                          for i in range(b)),
                      task_names=())
    w = BlockLinearWriter(lambda u: 1.0 + 0.01 * np.where(np.isnan(u), 0.0, u - 0.5), decay=0.3)
    inc = w.term(outcomes)
    want = np.zeros((h, k, b, n))
    for r in range(h):
        s = np.zeros((b, n))
        for t in range(t_n + 1):
            for c in np.flatnonzero(cuts[r] == t):
                want[r, c] = s
            if t < t_n and valid[r, t]:
                s[blocks[r, t]] = np.float64(0.3) * s[blocks[r, t]]
                s[blocks[r, t], keys[r, t]] = s[blocks[r, t], keys[r, t]] + inc[r, t]
    assert np.array_equal(w.states_batch(rec), want)


@settings(max_examples=60, deadline=None)
@given(seed=hs.integers(0, 2**32), q_n=hs.integers(1, 30), m_n=hs.sampled_from([1, 2, 4, 5, 16, 17]))
def test_choose_batch_first_canonical_equals_the_argmax_of_the_row_maxima(seed: int, q_n: int, m_n: int) -> None:
    """The column-by-column first maximum gives argmax(row == row max)'s position, with ties, padding, ±inf
    and NaN scores (a row without a maximum reads position 0)."""
    g = np.random.default_rng(seed)
    scores = g.choice([0.0, 1.0, 2.0, -np.inf, np.inf, np.nan], size=(q_n, m_n))
    menu = np.where(g.random((q_n, m_n)) < 0.8, g.integers(0, 40, (q_n, m_n)), -1)
    s = np.where(menu >= 0, scores, -np.inf)
    want = menu[np.arange(q_n), np.argmax(s == s.max(axis=1, keepdims=True), axis=1)]
    assert choose_batch(scores, menu, TieRule.FIRST_CANONICAL, tuple(map(str, range(40)))).tolist() == want.tolist()


@settings(max_examples=40, deadline=None)
@given(seed=hs.integers(0, 2**32), h=hs.integers(1, 5), t_n=hs.integers(0, 10), b=hs.integers(1, 3),
       n=hs.integers(1, 4), k=hs.integers(1, 3), masked=hs.booleans())
def test_block_key_sums_equal_the_visible_records_sums(seed: int, h: int, t_n: int, b: int, n: int, k: int,
                                                       masked: bool) -> None:
    """The dense block_key_sums (one bincount over every position) equals summing the visible records that
    record_cells lists (valid, before the last cut, inside ``mask``), bit for bit."""
    from replaylens.agents import RecordBatch
    from replaylens.agents._known import block_key_sums, cell_sums, record_cells

    g = np.random.default_rng(seed)
    valid = g.random((h, t_n)) < 0.8
    rec = RecordBatch(keys=np.where(valid, g.integers(0, n, (h, t_n)), -1),
                      outcomes=np.zeros((h, t_n)), blocks=g.integers(0, b, (h, t_n)),
                      tasks=np.zeros((h, t_n), dtype=np.int64), valid=valid,
                      cuts=np.sort(g.integers(0, t_n + 1, (h, k)), axis=1), labels=tuple("ABCD"[:n]),
                      block_names=tuple(("f", f"c{i}") for i in range(b)), task_names=())
    values = g.choice([0.1, 0.25, -3.0, 1e6, np.nan], size=(h, t_n))
    mask = g.random((h, t_n)) < 0.6 if masked else None
    cells = record_cells(rec, mask)
    want = cell_sums(cells, values[cells.hi, cells.ti])
    got = block_key_sums(rec, values, mask)
    assert got.shape == want.shape and np.array_equal(got, want, equal_nan=True)
