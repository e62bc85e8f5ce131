"""Store verdicts that repeat (issue 47, points 4 and 5): deterministic Chroma builds, both sides' noise measured, a
permutation test against the rebuilds (INCONCLUSIVE when the noise is too large), the control's verdict equal in
the console, summary.json and --expect-safe, a control in a retrieval agent's audit, and exact ties on real
wordllama vectors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from _retrievalcases import example, need, store_inputs
from click.testing import CliRunner

from replaylens.memory.retrieval import StoreSpec, check_store_migrations, make_agent, plan_migrations
from replaylens.memory.retrieval._control import disagreements, noise_test

NOISY = str(Path(__file__).parent / "_noisystore.py") + ":make"


def _cli(args: list[str]) -> tuple[int, str]:
    from replaylens.cli import _main

    r = CliRunner().invoke(_main.cli, args)
    return r.exit_code, r.output


def test_noise_test_rejects_a_real_change_and_not_a_rebuild() -> None:
    """The permutation test on synthetic builds: two sides that always differ reject; sides drawn alike do not."""
    rng = np.random.default_rng(5)
    diff = [disagreements([("a",) * 6] * 5 + [("b",) * 6] * 5) for _ in range(4)]
    t = noise_test(diff, 5, seed=0, name="x", level=0.95)
    assert t.rejects and t.p_value < 0.01 and t.statistic > 0
    same = [disagreements([tuple(rng.choice(["a", "b"], 6)) for _ in range(10)]) for _ in range(4)]
    t2 = noise_test(same, 5, seed=0, name="x", level=0.95)
    assert 0 < t2.p_value <= 1 and t2.min_p < 0.05
    # an integer statistic: no float leftover decides
    assert isinstance(t2.statistic, int)


def test_noise_test_holds_its_level_under_the_null() -> None:
    """Builds of both sides drawn from one distribution (each query answers one of three ways, at per-query
    rates): the permutation test rejects at 5 % in about 5 % of 300 seeded checks (binomial 99 % bound: <= 10 %)."""
    rejected = 0
    for rep in range(300):
        rng = np.random.default_rng([47, rep])
        mats = []
        for _ in range(3):  # streams
            p = rng.dirichlet([1, 1, 1], size=12)  # 12 queries
            builds = [tuple(int(rng.choice(3, p=p[q])) for q in range(12)) for _ in range(10)]
            mats.append(disagreements(builds))
        rejected += noise_test(mats, 5, seed=rep, name="null", level=0.95, draws=999).rejects
    assert rejected <= 30, rejected


@pytest.mark.slow
def test_repeated_chroma_checks_give_identical_verdicts() -> None:
    """Chroma with the adapter's default (one record per add call) builds the same index every time: three identical
    checks give identical verdict lines, the control is SAFE and every migration a census."""
    need("chroma")
    streams = store_inputs("tool-use", 3)
    base = StoreSpec("chroma")
    runs = []
    for _ in range(3):
        res = check_store_migrations(streams, base, plan_migrations(base, ["backend", "reorder"],
                                                                    migrate_to=["exact"]), k=5)
        runs.append([r.verdict() for r in res])
        assert res[0].status == "SAFE" and all(r.test is None for r in res)
    assert runs[0] == runs[1] == runs[2]


@pytest.mark.slow
def test_noisy_chroma_to_exact_with_changed_retrievals_is_not_safe() -> None:
    """Chroma at 256 records per add call is nondeterministic; its swap to the exact store changes retrievals, and
    the verdict must say so (UNSAFE or INCONCLUSIVE), never SAFE "beyond the control"."""
    need("chroma")
    base = StoreSpec("chroma", {"add_batch": 256})
    res = check_store_migrations(store_inputs("tool-use"), base,
                                 plan_migrations(base, ["backend"], migrate_to=["exact"]), k=3)
    ctl, swap = res
    assert ctl.status == "UNSAFE" and ctl.reference_noisy > 0
    assert swap.readout is not None and swap.readout.counts["retrieval_changed"] > 0
    assert swap.status != "SAFE" and not swap.safe
    assert swap.test is not None and swap.reference_builds == swap.target_builds == 5
    assert swap.target_noisy == 0  # the exact store's own rebuilds repeat themselves


@pytest.mark.slow
def test_control_verdict_equals_summary_and_expect_safe(tmp_path: Path) -> None:
    need("chroma")
    common = ["check-migration", "--store", "chroma", "--example", "tool-use", "--ops", "reorder", "-k", "5"]
    code, out = _cli([*common, "--store-params", '{"add_batch": 256}', "--out", str(tmp_path / "noisy"),
                      "--expect-safe", "rebuild"])
    s = json.loads((tmp_path / "noisy" / "summary.json").read_text())
    ctl = s["migrations"][0]
    printed = next(line for line in out.splitlines() if line.startswith("rebuild (control):"))
    assert printed.startswith("rebuild (control): UNSAFE")
    assert ctl["status"] == "UNSAFE" and ctl["safe"] is False and ctl["verdict"] == printed
    assert s["statuses"]["rebuild"] == "UNSAFE"
    assert code == 1 and "expectation failed: rebuild" in out
    code, out = _cli([*common, "--out", str(tmp_path / "det"), "--expect-safe", "rebuild"])
    s = json.loads((tmp_path / "det" / "summary.json").read_text())
    assert code == 0, out
    assert s["migrations"][0]["status"] == "SAFE" and s["migrations"][0]["safe"] is True
    assert "rebuild (control): SAFE" in out


def test_inconclusive_exits_0_unless_on_inconclusive_fail(tmp_path: Path) -> None:
    """A store that swaps its top two at random from build to build, and a migration that changes nothing else
    (relabel on distinct texts): INCONCLUSIVE; --expect-safe exits 0, with --on-inconclusive fail 1."""
    common = ["check-migration", "--store", NOISY, "--example", "experiments", "--ops", "relabel", "-k", "3",
              "--expect-safe", "relabel", "--json"]
    code, out = _cli(common)
    rows = json.loads(out[out.index("["):])
    relabel = next(r for r in rows if r["migration"] == "relabel")
    assert rows[0]["status"] == "UNSAFE"  # the control: this store is noisy
    assert relabel["status"] == "INCONCLUSIVE" and relabel["verdict"].startswith("relabel: INCONCLUSIVE")
    assert relabel["test"]["p_value"] > 0.05 and relabel["judged_by"] == "permutation"
    assert code == 0
    code, out = _cli([*common, "--on-inconclusive", "fail"])
    assert code == 1 and "expectation failed: relabel" in out


@pytest.mark.slow
def test_retrieval_agent_audit_on_chroma_carries_a_control() -> None:
    need("chroma")
    from replaylens.report import audit

    h, f, ev = example("tool-use", n_streams=2)
    noisy_run = audit(h, f, ev, make_agent("chroma", k=5, params={"add_batch": 256}), cells="reorder",
                      n_resamples=200)
    noisy = noisy_run.summary()["retrieval"]
    # the decision-level verdict reads the control: store noise is never called UNSAFE (issue 47)
    row = next(e for e in noisy_run.verdict()["expectations"] if e["cell"] == "reorder")
    assert row["status"] == ("INCONCLUSIVE" if row["n_changed"] else "SAFE"), row["line"]
    if row["n_changed"]:
        assert "store is nondeterministic" in row["line"]
    ctl = noisy["rebuild (control)"]
    assert ctl["status"] == "UNSAFE" and ctl["noisy_queries"] > 0 and ctl["rebuilds"] == 4
    assert ctl["verdict"].startswith("same-order rebuild (control): UNSAFE")
    cell = noisy["reorder"]
    assert cell["noise_test"] is not None and cell["noisy_queries"] > 0
    assert cell["retrieval_changed_beyond_control"] <= cell["counts"]["retrieval_changed"]
    det = audit(h, f, ev, make_agent("chroma", k=5), cells="reorder", n_resamples=200).summary()["retrieval"]
    assert det["rebuild (control)"]["status"] == "SAFE" and det["rebuild (control)"]["noisy_queries"] == 0
    assert det["reorder"]["noise_test"] is None


def test_exact_store_ties_on_equal_wordllama_vectors() -> None:
    """Equal texts embedded by wordllama give equal vectors; at row 128 the float64 matrix product scores one of
    them an ulp higher (1.0000000434708984 vs …982). Scores are ranked after rounding (TIE_DECIMALS), so the
    documented rule holds: the first-inserted of equal vectors ranks first, at k = 1 and 2, one by one and batched."""
    try:
        import wordllama  # noqa: F401
    except ImportError as exc:
        from conftest import require

        require("stores", f"wordllama: {exc}")
    from replaylens.memory.stores import StoreItem, make_embedder, make_store, query_many

    emb = make_embedder("wordllama")
    words = ["retry", "upload", "job", "timeout", "cache", "parser", "flaky", "build", "deploy", "rollback",
             "index", "query", "vector", "store", "shard", "merge", "fix", "test", "lint", "docs"]
    failures = []
    for seed in (0, 3):
        rng = np.random.default_rng(seed)
        items = [StoreItem(f"r{i}", " ".join(rng.choice(words, 6))) for i in range(50)]
        groups = []
        for g in range(40):
            t = f"dup {g} " + " ".join(rng.choice(words, 5))
            items.insert(int(rng.integers(0, len(items) // 2)), StoreItem(f"g{g}-first", t))
            items.insert(int(rng.integers(len(items) // 2, len(items))), StoreItem(f"g{g}-last", t))
            groups.append(t)
        store = make_store("exact", emb)
        for it in items:
            store.add([it])
        batched = query_many(store, groups, 2)
        for g, t in enumerate(groups):
            for k in (1, 2):
                if store.query(t, k)[0].id != f"g{g}-first":
                    failures.append((seed, g, k))
            if batched[g][0].id != f"g{g}-first" or batched[g][1].id != f"g{g}-last":
                failures.append((seed, g, "batched"))
    assert failures == []
