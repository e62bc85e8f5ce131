"""Joint history–menu challenge (issue 5, item 4): rule winners, PCG64 search, allocation, scripted run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from replaylens.agents import REFERENCE_RULES, FutureInput, ReferenceRule
from replaylens.paper.experiments import all_reproductions
from replaylens.paper.experiments import joint_challenge as jc
from replaylens.paper.joint import CELLS
from replaylens.paper.substrates.public import PublicWorld, build_public
from replaylens.rng import derive_rng

MENU = ("a0", "a1", "a2", "a3")
_FI = FutureInput("", "f", "c", "", 0, 0)


def _reference(acts: np.ndarray, micro: np.ndarray, rule: str) -> int:
    state = {("f", "c"): tuple((MENU[int(a)], float(u)) for a, u in zip(acts, micro, strict=True))}
    return MENU.index(ReferenceRule(rule).act(state, _FI, MENU, np.random.default_rng(0)))


@pytest.mark.parametrize("rule", REFERENCE_RULES)
def test_rule_winners_match_reference_rule(rule: str) -> None:
    g = derive_rng(7, "joint-test", rule)
    n, t = 300, 24
    acts = g.integers(0, 4, size=(n, t))
    acts[:50, :] = g.integers(0, 2, size=(50, t))  # unobserved keys
    micro = g.integers(0, 5, size=(n, t)).astype(np.float64)  # many exact ties
    if rule in ("count", "latest"):
        micro[::3] = np.nan  # utility-masked rows
    got = jc.rule_winners(acts, micro, rule)
    want = [_reference(acts[i], micro[i], rule) for i in range(n)]
    assert got.tolist() == want


def test_allocation_order_and_quotas() -> None:
    feas = np.ones((192, 10), dtype=bool)
    feas[100:, 4] = False  # g05 feasible in 100 blocks: allocated first
    feas[150:, 9] = False
    assign, order = jc.allocate_groups(feas)
    assert order[:2] == [4, 9]
    assert (assign >= 0).all()
    counts = np.bincount(assign, minlength=10)
    assert counts.tolist() == [20, 20] + [19] * 8
    assert np.flatnonzero(assign == 4).tolist() == list(range(19))  # first feasible blocks in block order
    assert np.flatnonzero(assign == 9).tolist() == list(range(19, 38))


@pytest.fixture(scope="module")
def world(public_data_dir: Path) -> PublicWorld:
    return build_public(6, seed=20260901, data_dir=public_data_dir)


@pytest.fixture(scope="module")
def histories(world: PublicWorld) -> jc.JointHistories:
    return jc.search_histories(world, budget=2_000)


def test_search_is_deterministic_and_designed(world: PublicWorld, histories: jc.JointHistories) -> None:
    again = jc.search_histories(world, budget=2_000)
    assert np.array_equal(again.feasible, histories.feasible)
    assert np.array_equal(again.schedules, histories.schedules)
    assert len(histories.histories) == 24
    for b, j in enumerate(histories.assignment):
        h = histories.histories[b]
        acts = np.array(h.actions)
        r, s = histories.blocks[b]
        assert np.array_equal(np.asarray(h.utilities), world.adapt_utility[r, s, np.arange(24), acts])
        counts = sorted(np.bincount(acts, minlength=4).tolist())
        if j < 0:
            continue
        g, r1, r2 = jc.GROUPS[int(j)]
        assert counts == ([5, 6, 6, 7] if g in jc.UNBALANCED else [6, 6, 6, 6])
        micro = np.round(np.asarray(h.utilities) * 1e6)
        assert _reference(acts, micro, r1) != _reference(acts, micro, r2)
    # a schedule found with a larger budget starts with the same chunks
    assert histories.first_try.max() < 2_000
    for j in range(10):
        ok = histories.feasible[:, j]
        assert (histories.first_try[ok, j] >= 0).all() and (histories.first_try[~ok, j] == -1).all()


def test_scripted_mean_challenge(world: PublicWorld, histories: jc.JointHistories, tmp_path: Path) -> None:
    ch = jc.run_challenge(world, histories=histories, run_dir=tmp_path / "run")
    assert ch.gate_ok and ch.n_requests == 6 * 2 * 5 * 4 * 2 and ch.n_attempts == ch.n_requests
    assert np.array_equal(ch.renaming_contrast("full"), np.ones((6, 2)))
    for form in ("full", "value", "pair", "key_slot"):
        for cell in CELLS:
            assert (ch.within(form, cell) == 0).all()
            assert (ch.agreement("mean", form, cell) == 1.0).all()
        assert (ch.t_gr(form, "10", form, "00") == 1.0).all()
        assert (ch.t_gr(form, "11", form, "00") == 0.0).all()
    assert (ch.t_gr("pair", "00", "full", "00") == 0.0).all()
    assert np.isnan(ch.agreement("mean", "masked")).all()
    # designed histories: the group's rules disagree on the Full form by construction
    for g, _, _ in jc.GROUPS:
        mine = np.array([x == g for x in histories.group_of()])
        assert np.array_equal(ch.eligible(g, "full"), mine)
    u, o = ch.utility("full", "00")
    assert u.shape == (6, 2) and ((o >= 0) & (o <= 1)).all()
    meta = ch.group_metadata()
    assert sum(m["B"] for m in meta.values()) == 24
    # resuming the finished run makes no model call and decodes the same decisions
    again = jc.run_challenge(world, histories=histories, run_dir=tmp_path / "run")
    assert again.n_attempts == ch.n_attempts and np.array_equal(again.Y, ch.Y)


def test_compact_export_round_trip_and_refusals(world: PublicWorld, histories: jc.JointHistories,
                                                tmp_path: Path) -> None:
    from replaylens.errors import ConfigError
    from replaylens.llm import ScriptedBackend

    be = ScriptedBackend("sum", noise=0.25, seed=7)
    ch = jc.run_challenge(world, histories=histories, run_dir=tmp_path / "run", backend=be)
    assert ch.agent == "sum"
    out = jc.export_challenge_run(tmp_path / "run", tmp_path / "export.json.gz")
    loaded, doc = jc.load_challenge_export(out, world, histories=histories)
    assert np.array_equal(loaded.Y, ch.Y) and loaded.gate_ok and (ch.Y >= 0).all()
    assert doc["validation"]["ok"] and len(doc["rows"]) == ch.Y.size
    assert np.array_equal(loaded.renaming_contrast("full"), ch.renaming_contrast("full"))
    # the same export bytes from the same run (deterministic; no wall-clock in the file name or payload order)
    again = jc.export_challenge_run(tmp_path / "run", tmp_path / "export2.json.gz")
    assert again.read_bytes() == out.read_bytes()
    # an export of another design is refused, naming the field
    import gzip
    import json

    bad = json.loads(gzip.decompress(out.read_bytes()))
    bad["design_sha256"] = "0" * 64
    (tmp_path / "bad.json.gz").write_bytes(gzip.compress(json.dumps(bad).encode()))
    with pytest.raises(ConfigError, match="design_sha256"):
        jc.load_challenge_export(tmp_path / "bad.json.gz", world, histories=histories)
    # the model-run profile: every value is ours (status n/a: the paper's hosted values are for reference only)
    off = jc.run_challenge(world, histories=histories, state_off=True, backend=be)
    rows = jc.embedded_profile_rows(loaded, doc, off)
    assert rows and all(r.status == "n/a" for r in rows)
    by = {(r.table, r.row, r.column): r.ours for r in rows}
    assert by[("joint model run (provenance)", "requests decided", "count")] == ch.n_requests
    assert by[("joint model run (provenance)", "input_tokens", "tokens")] == doc["usage"]["all"]["input_tokens"]
    for ns in ("Sem", "Opq"):
        shares = [v for (t, _, c), v in by.items() if t == "joint choice profile (model run)" and c == ns]
        assert len(shares) == 4 and abs(sum(x for x in shares if x is not None) - 1.0) < 1e-12
    assert by[("joint repeat noise (model run)", "Full", "within-cell disagreement")] == pytest.approx(
        float(np.mean([ch.within("full", c).mean() for c in CELLS])))
    assert ("joint empty-ledger comparator (model run)", "Rekey (hist. rekey)", "A (T_gr vs Full 00)") in by
    (tmp_path / "junk.json.gz").write_bytes(b"not gzip")
    with pytest.raises(ConfigError, match="not a ReplayLens export"):
        jc.load_challenge_export(tmp_path / "junk.json.gz", world, histories=histories)


def test_noisy_agent_exercises_repeat_correction(world: PublicWorld, histories: jc.JointHistories) -> None:
    ch = jc.run_challenge(world, histories=histories, noise=0.3)
    assert ch.within("full", "00").mean() > 0
    # pair keeps the Mean winner: the raw cross-call disagreement is all noise, the repeat-corrected T_gr ~ 0
    t = ch.t_gr("pair", "00", "full", "00")
    within = 0.5 * (ch.within("pair", "00") + ch.within("full", "00"))
    assert float((t + within).mean()) > 0.1 and abs(float(t.mean())) < 0.1
    assert 0 < float(ch.renaming_contrast().mean()) < 1
    lo, hi = ch.main_effects_intervals()[("semantic", "full", "rekey")]
    assert lo < ch.main_effects()[("semantic", "full", "rekey")] < hi  # noise gives a non-degenerate interval


def test_reproductions_registered() -> None:
    reps = all_reproductions()
    for name in ("joint-renaming", "joint-main-effects", "joint-reference-agreement", "joint-feasibility"):
        assert reps[name].issue == "5"


def test_state_off_comparator_is_byte_identical(world: PublicWorld, histories: jc.JointHistories) -> None:
    design = jc.challenge_design(histories, state_off=True)
    reqs = design.requests("x")
    assert len({r.request_id for r in reqs}) == len(reqs) == design.n_requests
    by_unit: dict[tuple[str, str], set[str]] = {}
    for r in reqs:
        by_unit.setdefault((r.meta["stream"], r.meta["namespace"]), set()).add(r.prompt)
    assert all(len(p) == 1 for p in by_unit.values())
    off = jc.run_challenge(world, histories=histories, state_off=True)
    assert off.gate_ok
    for form in jc.FORMS:
        for cell in CELLS:
            assert (off.t_gr(form, cell, "full", "00") == 0).all()
    # the designed (state-on) design is unchanged by the new flag
    assert jc.challenge_design(histories).requests("x")[0].request_id != reqs[0].request_id


def test_subgroup_agreement_intervals_and_csv_export(world: PublicWorld, histories: jc.JointHistories,
                                                     tmp_path: Path) -> None:
    import csv

    ch = jc.run_challenge(world, histories=histories)
    groups = np.array(histories.group_of(), dtype=object).reshape(6, -1)
    for g, r1, r2 in jc.GROUPS:
        for form in jc.FORMS:
            elig = ch.eligible(g, form).reshape(6, -1)
            for rule in REFERENCE_RULES:
                a, n = ch.group_agreement(g, rule, form)
                assert n.tolist() == elig.sum(axis=1).tolist() and (elig <= (groups == g)).all()
                assert np.isnan(a[n == 0]).all()
                pooled, nb, ns = ch.group_agreement_pooled(g, rule, form)
                assert nb == int(elig.sum()) and ns == int((n > 0).sum())
                if nb == 0 or (form == "masked" and rule in ("mean", "sum", "best")):
                    assert np.isnan(pooled).all()
                    continue
                # direct recomputation: average over the stream's eligible blocks and repeats, then over streams
                f = jc.FORMS.index(form)
                for k in range(2):
                    per = [np.mean([ch.Y[s, k, f, 0, r, b] == ch.P[rule][s, k, f, 0, b]
                                    for b in np.flatnonzero(elig[s]) for r in range(2)])
                           for s in range(6) if elig[s].any()]
                    assert np.allclose(a[n > 0, k], per) and pooled[k] == pytest.approx(np.mean(per))
                if rule == "mean":
                    assert (pooled == 1.0).all()
                elif "mean" in (r1, r2) and rule in (r1, r2):
                    assert (pooled == 0.0).all()  # the Mean agent never picks the disagreeing partner's winner
    assert {g for g, _, _ in jc.GROUPS if ch.eligible(g, "masked").any()} <= {"g08"}
    # main-effects intervals: same keys, contain the estimate, degenerate where structural, reproducible
    eff, ci = ch.main_effects(), ch.main_effects_intervals()
    assert list(ci) == list(eff) and ci == ch.main_effects_intervals()
    for key, (lo, hi) in ci.items():
        assert lo <= eff[key] + 1e-12 and eff[key] <= hi + 1e-12
        if key[1] != "masked" and key[2] != "full":
            assert lo == hi == eff[key]
    # CSV export re-reads to the in-memory values
    paths = jc.export_joint_csv(ch, tmp_path / "csv")
    assert [p.name for p in paths] == ["joint_tgr_per_stream.csv", "joint_group_agreement_per_stream.csv",
                                       "joint_group_agreement.csv"]
    with paths[0].open(newline="") as fh:
        tgr = list(csv.DictReader(fh))
    assert len(tgr) == 6 * 2 * len(jc.FORMS) * len(CELLS)
    streams = ch.design.streams
    for row in tgr:
        i, k = streams.index(row["stream"]), ch.namespaces.index(row["namespace"])
        form, cell = row["form"], row["cell"]
        assert row["stratum"] == ch.omega[i]
        assert float(row["t_gr_vs_full_same_cell"]) == ch.t_gr(form, cell, "full", cell)[i, k]
        assert float(row["t_gr_vs_form_00"]) == ch.t_gr(form, cell, form, "00")[i, k]
        assert float(row["within"]) == ch.within(form, cell)[i, k]
    means: dict[tuple[str, str, str], list[float]] = {}
    for row in tgr:
        if row["cell"] == "10":
            means.setdefault((row["namespace"], row["form"], "rekey"), []).append(float(row["t_gr_vs_form_00"]))
    for key, vals in means.items():
        assert np.mean(vals) == pytest.approx(eff[key])
    with paths[1].open(newline="") as fh:
        per_rows = list(csv.DictReader(fh))
    with paths[2].open(newline="") as fh:
        pooled_rows = list(csv.DictReader(fh))
    assert pooled_rows and per_rows
    for row in per_rows:
        a, n = ch.group_agreement(row["group"], row["rule"], row["form"])
        i, k = streams.index(row["stream"]), ch.namespaces.index(row["namespace"])
        assert int(row["eligible_blocks"]) == n[i] > 0 and float(row["agreement"]) == a[i, k]
    for row in pooled_rows:
        pooled, nb, ns = ch.group_agreement_pooled(row["group"], row["rule"], row["form"])
        k = ch.namespaces.index(row["namespace"])
        assert (int(row["eligible_blocks"]), int(row["eligible_streams"])) == (nb, ns)
        assert float(row["agreement"]) == pooled[k]
        sub = [float(r["agreement"]) for r in per_rows if (r["group"], r["rule"], r["form"], r["namespace"])
               == (row["group"], row["rule"], row["form"], row["namespace"])]
        assert len(sub) == ns and np.mean(sub) == pytest.approx(float(row["agreement"]))
    assert {r["form"] for r in pooled_rows if r["group"] != "g08"} <= {"full", "value", "pair", "key_slot"}



def test_embedded_reproduction_without_an_export_says_how_to_make_it(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    monkeypatch.setattr(jc, "EMBEDDED_EXPORT", tmp_path / "absent.json.gz")
    rows = jc.joint_embedded()
    assert len(rows) == 1 and rows[0].status == "n/a" and rows[0].ours is None
    assert "replaylens paper joint --model local/embedded" in rows[0].note


@pytest.mark.slow
def test_committed_embedded_exports_match_the_current_design(public_data_dir: Path) -> None:
    from replaylens.paper.experiments.public_data import N_STREAMS, SEED

    paths = [p for p in (jc.EMBEDDED_EXPORT, jc.EMBEDDED_OFF_EXPORT) if p.exists()]
    if not paths:
        pytest.skip("no committed embedded-model export")
    world = build_public(N_STREAMS, seed=SEED, data_dir=public_data_dir)
    for p in paths:
        ch, doc = jc.load_challenge_export(p, world)  # refuses an export of another design
        assert ch.gate_ok and doc["validation"]["ok"] and (ch.Y >= 0).all()
        assert len(doc["rows"]) == 3840 * 4
