"""Store audits against the real packages (the ``stores`` extra): the backend swap that ties break, the hnswlib
``ef`` dependence, embedder migrations and a retrieval agent on a real backend."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _retrievalcases import example, need, store_inputs
from click.testing import CliRunner

from replaylens.cli import _main
from replaylens.memory.retrieval import StoreSpec, check_store_migrations, make_agent, plan_migrations
from replaylens.report import audit


@pytest.mark.slow
def test_chroma_to_qdrant_swap_is_unsafe_because_of_ties() -> None:
    need("chroma")
    need("qdrant")
    base = StoreSpec("chroma")
    migs = plan_migrations(base, ["backend"], migrate_to=["qdrant"])
    ctl, swap = check_store_migrations(store_inputs("tool-use"), base, migs, k=5)
    assert swap.name == "backend:qdrant"
    assert not swap.safe and swap.changed_beyond_control > 0
    # ties drive it: every change beyond the control moves only records of identical similarity
    assert swap.tie_driven == swap.changed_beyond_control
    ex = swap.example
    assert ex is not None and ex["tie_explanation"] is not None
    assert "the first-inserted" in ex["tie_explanation"] and "qdrant returns" in ex["tie_explanation"]
    assert "the last-inserted" in ex["tie_explanation"]
    ids_b, ids_a = [x["id"] for x in ex["before"]], [x["id"] for x in ex["after"]]
    assert ids_b != ids_a and [x["exact_similarity"] for x in ex["before"]] == [
        x["exact_similarity"] for x in ex["after"]]
    # store noise (Chroma's own rebuild changes) is counted apart, never as a migration effect
    assert swap.changed_beyond_control + swap.changed_on_noisy <= swap.n_queries
    assert swap.noisy_queries == ctl.noisy_queries


@pytest.mark.slow
def test_hnswlib_reingest_unsafe_at_ef_10_and_its_response_falls_at_ef_200() -> None:
    need("hnswlib")
    streams = store_inputs("experiments")
    out = {}
    for ef in (10, 200):
        base = StoreSpec("hnswlib", {"ef": ef})
        res = {r.name: r for r in check_store_migrations(
            streams, base, plan_migrations(base, ["reorder", "reindex"], reindex_params={"seed": 1}), k=5)}
        assert res["rebuild"].safe  # single-threaded hnswlib builds are deterministic
        out[ef] = res
    assert not out[10]["reorder"].safe
    assert out[200]["reorder"].readout is not None and out[10]["reorder"].readout is not None
    share = {ef: out[ef]["reorder"].readout.estimate["retrieval_changed"] for ef in (10, 200)}
    assert share[200] < share[10]
    # a reindex (another graph seed, same order) is UNSAFE at ef 10 and SAFE at ef 200
    assert not out[10]["reindex"].safe and out[200]["reindex"].safe
    ex = out[10]["reindex"].example
    assert ex is not None and ex["explanation"].startswith("approximate search")


@pytest.mark.slow
def test_embedder_change_and_half_reembedded_index() -> None:
    need("exact")
    try:
        import wordllama  # noqa: F401
    except ImportError as exc:
        from conftest import require

        require("stores", f"wordllama: {exc}")
    base = StoreSpec("exact", embedder="hashing:256")
    migs = plan_migrations(base, ["embedder", "half-embedder"], embedder_to="wordllama:256")
    res = {r.migration.kind: r for r in check_store_migrations(store_inputs("tool-use", 2), base, migs, k=5)}
    for kind in ("embedder", "half-embedder"):
        r = res[kind]
        assert r.skipped is None and not r.safe
        assert r.example is not None and r.example["explanation"].startswith("the embedder changed")
    # a dimension mismatch cannot be half-migrated: reported n/a, not faked
    migs = plan_migrations(base, ["half-embedder"], embedder_to="hashing:128")
    (_, half) = check_store_migrations(store_inputs("tool-use", 1), base, migs, k=5)
    assert half.skipped is not None and "dimensions differ" in half.verdict()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["faiss", "langgraph"])
def test_retrieval_agent_on_an_exact_real_backend_decides_as_the_exact_store(backend: str) -> None:
    need(backend)
    h, f, ev = example("experiments", n_streams=2)  # distinct texts: an exact backend has nothing to break
    cells = "value,pair"
    ref = audit(h, f, ev, make_agent("exact", k=5), cells=cells, n_resamples=200)
    got = audit(h, f, ev, make_agent(backend, k=5), cells=cells, n_resamples=200)
    assert got.decisions.equals(ref.decisions)
    assert got.summary()["retrieval"] == ref.summary()["retrieval"]


@pytest.mark.slow
def test_demo_stores_writes_the_audit_and_three_checks(tmp_path: Path) -> None:
    for b in ("chroma", "qdrant", "hnswlib"):
        need(b)
    r = CliRunner().invoke(_main.cli, ["demo", "--stores", "--out", str(tmp_path), "--resamples", "300"])
    assert r.exit_code == 0, r.output
    assert "retrieval/decision pair:" in r.output
    audit_summary = json.loads((tmp_path / "audit" / "summary.json").read_text())
    assert set(audit_summary["retrieval"]) == {"value", "pair", "reorder", "mask", "rebuild (control)"}
    assert audit_summary["retrieval"]["rebuild (control)"]["status"] == "SAFE"  # the exact store
    verdicts = {name: json.loads((tmp_path / name / "summary.json").read_text())["migrations"]
                for name in ("chroma-to-qdrant", "hnswlib-ef10", "hnswlib-ef200")}
    swap = next(m for m in verdicts["chroma-to-qdrant"] if m["migration"] == "backend:qdrant")
    assert not swap["safe"] and swap["example"]["tie_explanation"]
    safe = {n: {m["migration"]: m["safe"] for m in v} for n, v in verdicts.items()}
    assert safe["hnswlib-ef10"]["reindex"] is False and safe["hnswlib-ef200"]["reindex"] is True
    assert "crosstab-table" in (tmp_path / "chroma-to-qdrant" / "report.html").read_text()
