"""Agents on measured outcomes: count–sum ledger, persistent recurrent agent, UCB1 zero law, matrix, example."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from replaylens.agents import TaskInput
from replaylens.cli._main import cli
from replaylens.errors import ConfigError
from replaylens.paper.controllers import OCRR, AgentController, LedgerController, ocrr_agent, run_closed_loop
from replaylens.paper.data import DataError
from replaylens.paper.experiments import all_reproductions
from replaylens.paper.experiments import public_data as pd_
from replaylens.paper.persistent import (
    WARMUP,
    ChangedWorld,
    PersistentAgent,
    PersistentSettings,
    adaptation_trace,
    build_changed,
    changed_ocrr_agent,
    count_sum_agent,
    cross_fit,
    fit_persistent,
    fit_selected_only,
    hs_utility,
    mv_utility,
    probe_allocation,
    round_robin_actions,
)
from replaylens.paper.persistent._recurrent import _inputs, _loss_grad
from replaylens.paper.substrates.public import PublicWorld, build_public
from replaylens.readouts import a_rekey, direct_action_contrast
from replaylens.records import (
    Evaluator,
    FutureTask,
    FutureTasks,
    History,
    check_inputs,
    read_evaluator,
    read_futures,
    read_history,
)
from replaylens.replay import replay

SEED = pd_.SEED
FAST = PersistentSettings(epochs=40)


@pytest.fixture(scope="module")
def data_dir(public_data_dir: Path) -> Path:
    """The session's directory with both verified copies (tests/conftest.py fetches them)."""
    return public_data_dir


@pytest.fixture(scope="module")
def world(data_dir: Path) -> PublicWorld:
    return build_public(6, seed=SEED, data_dir=data_dir)


@pytest.fixture(scope="module")
def matrix(world: PublicWorld) -> dict[str, pd_.ClosedLoopResult]:
    return pd_.run_matrix(world)


# ------------------------------------------------------------------ count–sum ledger


def _tiny(records: list[tuple[str, str, str, float]], menu: tuple[str, ...] = ("coverage", "adaptive", "replicate",
                                                                              "mixed")) -> tuple:
    """One stream, records (family, context, key, u) in slot order, one future task per block."""
    h = History.from_columns(stream=["r00"] * len(records), family=[r[0] for r in records],
                             context=[r[1] for r in records], slot=list(range(len(records))),
                             task=[f"t{i}" for i in range(len(records))], key=[r[2] for r in records],
                             outcome=[r[3] for r in records])
    blocks = list(dict.fromkeys((r[0], r[1]) for r in records))
    fut = FutureTasks(tuple(FutureTask("r00", f, c, f"f{i}", menu, 0) for i, (f, c) in enumerate(blocks)))
    ev = Evaluator({("r00", f"f{i}"): {a: 0.1 * (j + 1) for j, a in enumerate(menu)} for i in range(len(blocks))})
    return h, fut, ev


def test_count_sum_reads_observed_means_with_lex_ties() -> None:
    ag = count_sum_agent()
    # adaptive mean 0.7 beats coverage 0.6 (sum larger for coverage); unobserved arms are excluded even if 0.5 would
    h, f, e = _tiny([("d", "x", "coverage", 0.6), ("d", "x", "coverage", 0.6), ("d", "x", "adaptive", 0.7)])
    dec = replay(h, f, e, ag, cells="", maps="", path="reference")
    assert dec.plan.labels[int(dec.actions[0, 0, 0, 0, 0])] == "adaptive"
    # exact tie of means (0.3 = 0.6/2 = 0.3/1) -> lexicographically largest label (mixed > coverage)
    h, f, e = _tiny([("d", "x", "coverage", 0.2), ("d", "x", "coverage", 0.4), ("d", "x", "mixed", 0.3)])
    for path in ("reference", "array"):
        dec = replay(h, f, e, ag, cells="", maps="", path=path)
        assert dec.plan.labels[int(dec.actions[0, 0, 0, 0, 0])] == "mixed"
    # all observed utilities low: still picks an observed arm, never an unobserved one
    h, f, e = _tiny([("d", "x", "adaptive", 0.01)])
    assert replay(h, f, e, ag, cells="", maps="", path="array").actions[0, 0, 0, 0, 0] == 1


def test_count_sum_paths_agree_and_pair_is_exactly_zero(world: PublicWorld, matrix: dict) -> None:
    h = world.history(matrix["OCRR"].adapt_actions)
    f, e = world.futures(), world.evaluator()
    kw = {"cells": "value,pair,key_slot,mask,reorder", "maps": "derangements", "draws": [pd_.STRUCTURAL_SIGMA]}
    arr = replay(h, f, e, count_sum_agent(), path="array", **kw)
    ref = replay(h, f, e, count_sum_agent(), path="reference", **kw)
    assert np.array_equal(arr.actions, ref.actions)
    c = arr.cell_index("pair")
    assert int((arr.actions[c] != arr.actions[0]).sum()) == 0
    # every block is non-empty and its winner unique in this trace -> A_rekey is exactly 1
    assert a_rekey(arr).estimate == 1.0
    # breast-cancer OCRR blocks hold a single label, so time and value cannot move the ledger there
    bc = np.isin(arr.stratum_idx, [0, 1])
    for cell in ("value", "key_slot"):
        ci = arr.cell_index(cell)
        assert not np.any(arr.actions[ci, 0, 0, 0, bc] != arr.actions[0, 0, 0, 0, bc])
    assert direct_action_contrast(arr, "value").estimate > 0  # wine blocks hold several labels


def test_ucb1_pair_transport_is_exactly_zero(world: PublicWorld, matrix: dict) -> None:
    h = world.history(matrix["Contextual UCB"].adapt_actions)
    dec = replay(h, world.futures(), world.evaluator(), ocrr_agent("ucb1"), cells="value,pair,key_slot",
                 maps="derangements", draws=[pd_.UCB1_SIGMA])
    u = dec.chosen_utility()
    assert int((dec.actions[dec.cell_index("pair")] != dec.actions[0]).sum()) == 0
    assert float(np.abs(u[dec.cell_index("pair")] - u[0]).max()) == 0.0
    assert a_rekey(dec).estimate == 1.0
    assert direct_action_contrast(dec, "key_slot").estimate > 0


def test_public_slot_laws_are_derangements(world: PublicWorld, matrix: dict) -> None:
    from replaylens.maps import stream_perm

    blocks = np.repeat(np.arange(4), 24)
    for role in ("value", "pair", "time"):
        p = stream_perm(pd_.PERSISTENT_SIGMA, role, "r00", blocks)
        assert not np.any(p == np.arange(96)) and np.array_equal(blocks[p], blocks)
    v, pr = (stream_perm(pd_.PERSISTENT_SIGMA, r, "r00", blocks) for r in ("value", "pair"))
    assert np.array_equal(v, pr)
    assert not np.array_equal(v, stream_perm(pd_.PERSISTENT_SIGMA, "time", "r00", blocks))


# ------------------------------------------------------------------ controller matrix


def test_matrix_conditions_and_costs(world: PublicWorld, matrix: dict) -> None:
    assert set(pd_.CONDITIONS) | set(pd_.SECONDARY) == set(matrix)
    mixed = world.arms.index("mixed")
    assert np.all(matrix["No update"].future_actions == mixed)
    assert matrix["Extra sampling"].cost == 72.0 and matrix["OCRR"].cost == 24.0
    ora = world.oracle_utility().mean()
    for res in matrix.values():
        assert res.future_utility.shape == (6, 4, 24)
        assert np.isclose(res.future_utility.mean() + (world.oracle_utility() - res.future_utility).mean(), ora)
    # OCRR starts from `replicate` and, at breast-cancer utility levels, never leaves it
    ocrr = matrix["OCRR"]
    assert np.all(ocrr.adapt_actions[:, :2] == world.arms.index("replicate"))
    # the future split is frozen: one action per (stream, stratum) for the ledger controllers
    assert np.all(ocrr.future_actions == ocrr.future_actions[:, :, :1])


def test_breast_cancer_ocrr_arm_is_set_by_the_block_order(world: PublicWorld, matrix: dict,
                                                          data_dir: Path) -> None:
    """Issue 14 (d): the breast-cancer OCRR arm is decided before any breast-cancer outcome is seen.

    Breast cancer first (committed order): the empty state ties every arm at 0.5 + 0.28 = 0.78 and the
    lexicographically-largest rule picks `replicate`; its breast-cancer utilities keep its score above 0.78, so it
    is never left.  Red wine first: the first breast-cancer decision reads the global arm means carried from the
    wine blocks (paper l.1093), the arm with the largest one is taken and again never left."""
    ctl = LedgerController(OCRR)
    empty = ctl.init_state()
    assert np.allclose(ctl.scores(empty, "breast-cancer", "iid", world.arms), 0.78)
    bc = [s for s, st in enumerate(world.strata) if st[0] == "breast-cancer"]
    assert bc == [0, 1] and np.all(matrix["OCRR"].adapt_actions[:, bc] == world.arms.index("replicate"))
    wine_first = build_public(6, seed=SEED, data_dir=data_dir, datasets=("wine-red", "breast-cancer"))
    cw = pd_.ClosedLoopWorld(wine_first)
    res = run_closed_loop(cw, AgentController(ocrr_agent("ocrr"), wine_first.arms, cost=24.0), seed=SEED)
    assert np.array_equal(wine_first.adapt_utility[:, 2:], world.adapt_utility[:, :2])  # same task tables
    for r in range(wine_first.n_streams):
        state = ctl.init_state()
        for s in range(2):  # replay the wine blocks into the ledger
            for t in range(res.adapt_actions.shape[2]):
                state = ctl.update(state, TaskInput(f"r{r:02d}", *wine_first.strata[s], t, f"t{t}"),
                                   wine_first.arms[int(res.adapt_actions[r, s, t])], float(res.adapt_utility[r, s, t]))
        sc = ctl.scores(state, "breast-cancer", "iid", wine_first.arms)
        first = max(wine_first.arms[i] for i in np.flatnonzero(sc == sc.max()))
        assert np.all(res.adapt_actions[r, 2:] == wine_first.arms.index(first))  # single label, both BC blocks


# ------------------------------------------------------------------ persistent recurrent agent


@pytest.mark.parametrize("objective", ["paper", "mean"])
def test_loss_gradient_matches_finite_differences(objective: str) -> None:
    rng = np.random.default_rng(3)
    acts = round_robin_actions(2, 4, 6)
    x = _inputs(acts, rng.random((2, 4, 6)), 4, 4)
    target = rng.random((8, 4))
    p = {"wh": rng.normal(0, 0.3, (5, 5)), "wu": rng.normal(0, 0.3, (5, 9)), "bh": rng.normal(0, 0.1, 5),
         "wo": rng.normal(0, 0.3, (4, 5)), "bo": rng.normal(0, 0.1, 4)}
    loss, g = _loss_grad(p, x, target, 1e-2, objective)
    pred = 1.0 / (1.0 + np.exp(-(_final_state(p, x) @ p["wo"].T + p["bo"])))
    wsq = sum(float(np.sum(p[w] ** 2)) for w in ("wh", "wu", "wo"))
    expect = (0.5 * np.sum((pred - target) ** 2) / 8 + 0.5e-2 * wsq if objective == "paper"
              else np.mean((pred - target) ** 2) + 1e-2 * wsq)  # paper: per-block Σ_arms ½err², mean over 8 blocks
    assert np.isclose(loss, expect, rtol=1e-12)
    for k, idx in (("wh", (1, 2)), ("wu", (3, 8)), ("wu", (0, 5)), ("bh", (2,)), ("wo", (3, 4)), ("bo", (1,))):
        eps = 1e-6
        pp = {a: b.copy() for a, b in p.items()}
        pm = {a: b.copy() for a, b in p.items()}
        pp[k][idx] += eps
        pm[k][idx] -= eps
        up, dn = _loss_grad(pp, x, target, 1e-2, objective)[0], _loss_grad(pm, x, target, 1e-2, objective)[0]
        num = (up - dn) / (2 * eps)
        assert np.isclose(g[k][idx], num, rtol=1e-5, atol=1e-9), k


def _final_state(p: dict, x: np.ndarray) -> np.ndarray:
    h = np.zeros((x.shape[0], p["wh"].shape[0]))
    for t in range(x.shape[1]):
        h = np.tanh(h @ p["wh"].T + x[:, t] @ p["wu"].T + p["bh"])
    return h


def test_fit_is_deterministic_and_reduces_the_loss(world: PublicWorld) -> None:
    kw = {"arms": world.arms, "strata": world.strata, "seed": 20260861, "settings": FAST}
    a = fit_persistent(world.adapt_utility[:3], world.future_utility[:3], **kw)
    b = fit_persistent(world.adapt_utility[:3], world.future_utility[:3], **kw)
    assert a.params.fingerprint == b.params.fingerprint
    assert a.final_loss < a.initial_loss
    c = fit_persistent(world.adapt_utility[:3], world.future_utility[:3], **{**kw, "seed": 20260862})
    assert c.params.fingerprint != a.params.fingerprint


@pytest.fixture(scope="module")
def folds(world: PublicWorld) -> tuple:
    return cross_fit(world.adapt_utility, world.future_utility, arms=world.arms, strata=world.strata,
                     settings=FAST)


def test_cross_fit_folds_and_traces(world: PublicWorld, folds: tuple) -> None:
    assert [f.name for f in folds] == ["I", "II"]
    assert folds[0].train_rows == (0, 1, 2) and folds[0].eval_rows == (3, 4, 5)
    assert folds[1].train_rows == folds[0].eval_rows and folds[1].eval_rows == folds[0].train_rows
    for f in folds:
        assert len(f.fits) == 3
        for acts, fut, fit in zip(f.adapt_actions, f.future_actions, f.fits, strict=True):
            assert acts.shape == (3, 4, 24) and fut.shape == (3, 4)
            assert np.all(acts[:, :, : len(WARMUP)] == np.asarray(WARMUP))
            # frozen parameters: re-running the trace gives the same actions
            again, fut2 = adaptation_trace(fit.params, world.adapt_utility[list(f.eval_rows)])
            assert np.array_equal(again, acts) and np.array_equal(fut2, fut)


def test_persistent_paths_agree_and_aligned_replay_reproduces_the_closed_loop(world: PublicWorld,
                                                                              folds: tuple) -> None:
    f = folds[0]
    sub = world.select(f.eval_rows)
    ag = PersistentAgent(f.fits[0].params).agent()
    h = sub.history(f.adapt_actions[0])
    kw = {"cells": "value,pair,key_slot,mask,reorder,rename", "maps": "derangements", "draws": [pd_.PERSISTENT_SIGMA]}
    arr = replay(h, sub.futures(), sub.evaluator(), ag, path="array", **kw)
    ref = replay(h, sub.futures(), sub.evaluator(), ag, path="reference", **kw)
    assert np.array_equal(arr.actions, ref.actions)
    fut = f.future_actions[0]  # arm indices = label codes (the menu is the canonical arm order)
    assert arr.plan.labels == world.arms
    assert np.array_equal(arr.actions[0, 0, 0, 0].reshape(3, 4, 24), np.repeat(fut[..., None], 24, axis=2))


def test_run_persistent_and_resolution(world: PublicWorld) -> None:
    pr = pd_.run_persistent(world, settings=FAST)
    assert len(pr.decisions) == 2 and all(len(d) == 3 for d in pr.decisions)
    du, sw, st = pd_._measured_items(pr, "rekey")
    assert du.shape == sw.shape == st.shape == (3 * 2 * 3 * 96 * 9,)
    assert set(np.unique(st)) == set(range(6))
    res = pd_.resolution_rows(du, sw, st)
    if res["N_S"]:
        assert np.isclose(res["Harm"] + res["Tie"] + res["Gain"], 1.0)
    # an unswitched item has ΔU = 0 (same action on the same task)
    assert np.all(du[~sw] == 0.0)


def test_resolution_rows_hand_example() -> None:
    du = np.array([0.0, -0.2, 0.0, 0.4, 0.0, 0.0])
    sw = np.array([False, True, True, True, False, False])
    st = np.array([0, 0, 0, 0, 1, 1])
    r = pd_.resolution_rows(du, sw, st)
    assert r["N_S"] == 1.0
    assert np.isclose(r["ΔU"], (0.2 / 4 + 0.0) / 2)
    assert np.isclose(r["|ΔU|"], (0.6 / 4) / 2)
    assert np.isclose(r["|ΔU| | S"], 0.6 / 3)
    assert np.isclose(r["Harm"], 1 / 3) and np.isclose(r["Tie"], 1 / 3) and np.isclose(r["Gain"], 1 / 3)


def test_best_second_gap_counts_ties_as_zero() -> None:
    u = np.array([[[[0.5, 0.7, 0.6, 0.1]], [[0.3, 0.3, 0.2, 0.1]]]])  # 1 stream, 2 strata, 1 task
    assert np.allclose(pd_.best_second_gap(u), [(0.1 + 0.0) / 2])


# ------------------------------------------------------------------ example, registration, missing data


def test_write_example_is_auditable_and_measured(world: PublicWorld, data_dir: Path, tmp_path: Path) -> None:
    paths = pd_.write_example(tmp_path / "ex", n_streams=2, data_dir=data_dir)
    h, f, e = read_history(paths["history"]), read_futures(paths["future"]), read_evaluator(paths["utilities"])
    check_inputs(h, f, e)
    assert len(h) == 2 * 4 * 24 and len(f) == 2 * 4 * 24
    # outcomes are the measured adaptation utilities of the logged arm (the same tables as the larger world)
    small = world.select([0, 1])
    key_idx = np.array([small.arms.index(k) for k in h.key]).reshape(2, 4, 24)
    assert np.allclose(np.asarray(h.outcome).reshape(2, 4, 24), small.selected_outcomes(key_idx))
    meta = json.loads(paths["manifest"].read_text())
    assert meta["n_streams"] == 2 and meta["agent"] == "ocrr"
    dec = replay(h, f, e, ocrr_agent("ocrr"), cells="pair", maps="")
    assert dec.actions.shape[-1] == 2 * 4 * 24


def test_reproductions_are_registered() -> None:
    regs = all_reproductions()
    for name in ("public-data-strata", "public-data-pooled", "public-data-conditions", "public-persistent-agent-folds",
                 "public-ucb1-replay", "public-structural-replay", "map-family-sensitivity", "utility-resolution",
                 "changed-substrate-endpoint", "changed-substrate-selected-only", "changed-substrate-placebo"):
        assert regs[name].issue == "4"


def test_missing_data_is_a_clear_data_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataError, match="replaylens paper data fetch"):
        pd_.write_example(tmp_path / "ex", data_dir=empty)
    monkeypatch.setenv("REPLAYLENS_DATA_DIR", str(empty))
    pd_.public_world.cache_clear()
    try:
        res = CliRunner().invoke(cli, ["paper", "reproduce", "public-data-strata"])
    finally:
        pd_.public_world.cache_clear()
    assert res.exit_code == 2
    assert "replaylens paper data fetch" in res.output and "Traceback" not in res.output


# ------------------------------------------------------------------ changed substrate


def test_probe_allocators() -> None:
    n, budget = 5, 12
    sig = np.array([[0.1, 0.9, 0.3, 0.2, 0.0]])
    zero = np.zeros((1, n, budget))
    uni = np.array([[0.0, 0.0, 0.0, 0.0, 1.0]])
    c, s = probe_allocation("coverage", sig, zero, uni, budget=budget)
    assert c.tolist() == [[3, 3, 2, 2, 2]]
    c, s = probe_allocation("replicate", sig, zero, uni, budget=budget)
    assert c.tolist() == [[12, 0, 0, 0, 0]] and np.isclose(s[0, 0], 1.2)
    # adaptive: candidate 0 first (no history); its score 0.1 + 0.30 = 0.4 loses to the unvisited 0.5 + 0.08·U, so
    # candidate 4 (largest U) comes next, then the lowest-index unvisited candidate 1, whose 0.9 + 0.30/√n wins after
    c, _ = probe_allocation("adaptive", sig, zero, uni, budget=budget)
    assert c.tolist() == [[1, 10, 0, 0, 1]]
    # mixed: coverage for the first ⌊n/2⌋ = 2 probes (0 and 1), then adaptive: 0.9 + 0.30 beats every unvisited score
    c, _ = probe_allocation("mixed", sig, zero, uni, budget=4)
    assert c.tolist() == [[1, 3, 0, 0, 0]]
    c, _ = probe_allocation("mixed", sig * 0.0, zero, uni, budget=3)  # all signals 0: unvisited 4 (0.58) > 0.30
    assert c.tolist() == [[1, 1, 0, 0, 1]]
    with pytest.raises(ConfigError):
        probe_allocation("nope", sig, zero, uni)


def test_hs_and_mv_utilities() -> None:
    z = np.array([[2.0, 1.0, 0.0, -1.0, -2.0, 0.5]])
    counts = np.array([[0, 2, 1, 0, 0, 0]])
    sums = np.array([[0.0, 2.0, 3.0, 0.0, 0.0, 0.0]])  # means: candidate 2 (3.0) > candidate 1 (1.0); fill with 0
    u, best = hs_utility(z, counts, sums)
    sel = (0.0 + 1.0 + 2.0) / 3
    assert np.isclose(u[0], np.clip(0.5 + 0.22 * (sel - z.mean()) / (z.std() + 1e-6), 0, 1))
    assert np.isclose(best[0], np.clip(0.5 + 0.22 * ((2 + 1 + 0.5) / 3 - z.mean()) / (z.std() + 1e-6), 0, 1))
    p = np.array([[0.2, 0.7]])
    assert np.isclose(mv_utility(p, np.array([[1, 0]]), np.array([[0.2, 0.0]]))[0], np.exp(-(0.2**2) / 0.45))


@pytest.fixture(scope="module")
def changed() -> ChangedWorld:
    return build_changed(4, seed=pd_.CHANGED_SEED)


def test_changed_world_tables(changed: ChangedWorld) -> None:
    assert changed.adapt_utility.shape == (4, 4, 48, 4) and changed.dev_utility.shape == (4, 4, 24, 4)
    small = build_changed(2, seed=pd_.CHANGED_SEED)
    assert np.array_equal(small.future_utility, changed.future_utility[:2])  # per-task generators
    assert np.all(changed.future_oracle_utility[:, 2:] == 1.0)
    assert np.all(changed.future_oracle_utility[:, :2] >= changed.future_utility[:, :2].max(axis=-1) - 1e-12)
    # replicate probes candidate 0 only: in hypothesis screening its selected set is {0, 1, 2} whatever the noise
    assert np.all(changed.future_utility[:, :2, :, 2] <= changed.future_oracle_utility[:, :2])


def test_changed_hs_offset_readings(changed: ChangedWorld) -> None:
    """The two readings of the HS future offset (issue 14 (b)): only HS future tables differ; "task" (the default)
    adds one constant per future task, which cancels in U_HS (the oracle utility is that of the offset-free latent
    values); "candidate" adds linspace(-0.18, 0.18, 12) to the candidates."""
    from replaylens.rng import derive_rng

    cand = build_changed(4, seed=pd_.CHANGED_SEED, hs_offset="candidate")
    task = changed
    assert pd_.CHANGED_HS_OFFSET == "task"
    assert np.array_equal(task.future_utility, build_changed(4, seed=pd_.CHANGED_SEED, hs_offset="task").future_utility)
    assert np.array_equal(task.dev_utility, cand.dev_utility)
    assert np.array_equal(task.adapt_utility, cand.adapt_utility)
    assert np.array_equal(task.future_utility[:, 2:], cand.future_utility[:, 2:])
    assert not np.array_equal(task.future_utility[:, :2], cand.future_utility[:, :2])
    for r, q in ((0, 0), (3, 47), (1, 20)):
        z = derive_rng(pd_.CHANGED_SEED, "changed", "hypothesis", "low", r, "future", q).normal(0.0, 0.78, 12)
        best = np.clip(0.5 + 0.22 * (np.sort(z)[-3:].mean() - z.mean()) / (z.std() + 1e-6), 0.0, 1.0)
        assert task.future_oracle_utility[r, 0, q] == pytest.approx(best, abs=1e-6)
        zc = z + np.linspace(-0.18, 0.18, 12)
        best_c = np.clip(0.5 + 0.22 * (np.sort(zc)[-3:].mean() - zc.mean()) / (zc.std() + 1e-6), 0.0, 1.0)
        assert cand.future_oracle_utility[r, 0, q] == pytest.approx(best_c, abs=1e-6)
    with pytest.raises(ConfigError, match="hs_offset"):
        build_changed(1, seed=pd_.CHANGED_SEED, hs_offset="drift")


def test_changed_ocrr_paths_quarantine_and_closed_loop(changed: ChangedWorld) -> None:
    from replaylens.paper.controllers import AgentController, run_closed_loop

    ag = changed_ocrr_agent()
    res = run_closed_loop(changed, AgentController(ag, changed.arms), seed=1)
    h, f, e = changed.history(res.adapt_actions), changed.futures(), changed.evaluator()
    kw = {"cells": "value,pair,key_slot,mask", "maps": "derangements", "draws": [pd_.SELECTED_SIGMA]}
    arr = replay(h, f, e, ag, path="array", **kw)
    ref = replay(h, f, e, ag, path="reference", **kw)
    assert np.array_equal(arr.actions, ref.actions)
    assert np.array_equal(arr.actions[0, 0, 0, 0].reshape(res.future_actions.shape), res.future_actions)
    # quarantine: six poor `replicate` outcomes exclude it for the next six decisions of the same key
    from replaylens.agents import FutureInput, TaskInput

    w = ag.writer
    s = w.init_state()
    for t in range(6):
        s = w.update(s, TaskInput("r00", "hypothesis", "low", t, f"t{t}"), "replicate", 0.30)
    menu = changed.arms
    assert ag.policy.act(s, FutureInput("r00", "hypothesis", "low", "f", 0, 5), menu, np.random.default_rng(0)) \
        != "replicate"
    sc = w.scores(s, "hypothesis", "low", menu)
    assert sc[menu.index("replicate")] == -np.inf
    for t in range(6, 12):  # six more decisions in the key (other arms) lift it
        s = w.update(s, TaskInput("r00", "hypothesis", "low", t, f"t{t}"), "coverage", 0.9)
    assert np.isfinite(w.scores(s, "hypothesis", "low", menu)[menu.index("replicate")])
    # an empty state picks `replicate` (lexicographically largest among equal scores)
    assert ag.policy.act(w.init_state(), FutureInput("r00", "hypothesis", "low", "f", 0, 0), menu,
                         np.random.default_rng(0)) == "replicate"


def test_selected_only_writer_fit_paths_and_pair_zero(changed: ChangedWorld) -> None:
    from replaylens.paper.controllers import AgentController, run_closed_loop
    from replaylens.paper.persistent._changed_agents import _so_loss_grad

    res = run_closed_loop(changed, AgentController(changed_ocrr_agent(), changed.arms), seed=1)
    acts, y = res.adapt_actions[:2].reshape(-1, 48), res.adapt_utility[:2].reshape(-1, 48)
    fit = fit_selected_only(acts, y, arms=changed.arms, seed=0, steps=60)
    first = fit_selected_only(acts, y, arms=changed.arms, seed=0, steps=0)
    assert fit.final_loss < first.final_loss
    # gradient check of the leave-one-out loss
    rng = np.random.default_rng(0)
    p, q = rng.normal(0, 0.3, (4, 3)), rng.normal(0, 0.3, (4, 3))
    a, c = acts.reshape(-1), y.reshape(-1) - 0.5
    e = np.repeat(np.arange(acts.shape[0]), 48)
    csum = np.zeros((acts.shape[0], 4))
    np.add.at(csum, (e, a), c)
    args = (csum[e], np.eye(4)[a], a, c, y.reshape(-1), acts.shape[0], 1e-3)
    _, gp, gq = _so_loss_grad(p, q, *args)
    for mat, grad in ((p, gp), (q, gq)):
        for idx in ((0, 1), (3, 2)):
            old = mat[idx]
            mat[idx] = old + 1e-6
            up = _so_loss_grad(p, q, *args)[0]
            mat[idx] = old - 1e-6
            dn = _so_loss_grad(p, q, *args)[0]
            mat[idx] = old
            assert np.isclose(grad[idx], (up - dn) / 2e-6, rtol=1e-5, atol=1e-10)
    sub = changed.select([2, 3])
    h = sub.history(res.adapt_actions[2:])
    ag = fit.writer.agent()
    kw = {"cells": "value,pair,key_slot,reorder", "maps": "derangements", "draws": [pd_.SELECTED_SIGMA]}
    arr = replay(h, sub.futures(), sub.evaluator(), ag, path="array", **kw)
    ref = replay(h, sub.futures(), sub.evaluator(), ag, path="reference", **kw)
    assert np.array_equal(arr.actions, ref.actions)
    for cell in ("pair", "reorder"):
        assert int((arr.actions[arr.cell_index(cell)] != arr.actions[0]).sum()) == 0


def test_placebo_draws_are_uniform_permutations() -> None:
    from replaylens.maps import SlotLaw

    draws = pd_.placebo_draws()
    assert len(draws) == 5 and len({d.time_seed for d in draws}) == 5
    assert all(d.time_law is SlotLaw.PERMUTATION for d in draws)
    assert pd_.sensitivity_draws()[0].value_seed == 20260824
