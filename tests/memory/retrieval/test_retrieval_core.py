"""Retrieval-memory agents and store audits on the exact reference store (no optional package needed)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from _retrievalcases import example, store_inputs
from click.testing import CliRunner

from replaylens.agents import Agent
from replaylens.cli import _main
from replaylens.errors import ConfigError, LawViolation
from replaylens.memory.retrieval import (
    CATEGORIES,
    EXAMPLES,
    MemoryItem,
    StoreSpec,
    build_example,
    check_store_migrations,
    decide,
    example_path,
    make_agent,
    plan_migrations,
)
from replaylens.memory.retrieval._migrations import Ingestion, check_preserved, ingest_plan
from replaylens.records import write_evaluator, write_futures, write_history
from replaylens.replay import replay
from replaylens.report import audit


def _item(i: str, action: str, outcome: float) -> MemoryItem:
    return MemoryItem(i, f"text {i}", action, outcome)


def test_decide_best_outcome_per_action_ties_to_rank_nan_ignored() -> None:
    menu = ("a", "b", "c")
    assert decide([_item("1", "a", 0.2), _item("2", "b", 0.9), _item("3", "a", 0.5)], menu) == "b"
    # equal best outcomes: the action whose best record ranks first
    assert decide([_item("1", "c", 0.7), _item("2", "a", 0.7)], menu) == "c"
    assert decide([_item("1", "a", 0.7), _item("2", "c", 0.7)], menu) == "a"
    # a masked outcome and an off-menu action are ignored; nothing usable: the first menu action
    assert decide([_item("1", "b", math.nan), _item("2", "z", 1.0), _item("3", "c", 0.1)], menu) == "c"
    assert decide([_item("1", "b", math.nan)], menu) == "a"
    assert decide([], menu) == "a"


@pytest.mark.parametrize("name", EXAMPLES)
def test_shipped_examples_are_what_the_generator_builds(name: str) -> None:
    for fname, rows in build_example(name).items():
        shipped = [json.loads(line) for line in example_path(fname, name).read_text().splitlines()]
        assert shipped == rows, f"{name}/{fname} differs from build_example({name!r})"


def test_the_tool_use_generator_scales_by_named_streams() -> None:
    """More streams add assistants without moving the shipped ones (each draws from its own named generator)."""
    small, big = build_example("tool-use"), build_example("tool-use", streams=10, records=90)
    for fname, rows in small.items():
        assert big[fname][:len(rows)] == rows
    assert len({r["stream"] for r in big["history.jsonl"]}) == 10 and len(big["history.jsonl"]) == 900
    with pytest.raises(ConfigError, match="fixed size"):
        build_example("experiments", streams=3)
    with pytest.raises(ConfigError, match="streams >= 1"):
        build_example("tool-use", records=0)


def test_tool_use_example_has_exact_duplicates_and_experiments_none() -> None:
    h, _, _ = example("tool-use")
    texts = [r.metadata["text"] for r in h.records() if r.metadata]
    assert len(set(texts)) < len(texts)
    h2, _, _ = example("experiments")
    for s in h2.streams:
        t2 = [r.metadata["text"] for r in h2.records(s) if r.metadata]
        assert len(set(t2)) == len(t2) == 300


def test_same_order_rebuild_on_exact_index_is_safe_and_lossless_migrations_too() -> None:
    base = StoreSpec("exact")
    migs = plan_migrations(base, ["relabel", "batch", "duplicate"])
    res = {r.name: r for r in check_store_migrations(store_inputs(), base, migs, k=5)}
    assert res["rebuild"].safe and res["rebuild"].noisy_queries == 0
    assert res["rebuild"].readout is not None and res["rebuild"].readout.counts["retrieval_changed"] == 0
    # the exact store is batch-independent, upserts a re-added id and is id-agnostic up to the relabel
    for name in ("relabel", "batch", "duplicate"):
        assert res[name].safe, res[name].verdict()
        assert "SAFE" in res[name].verdict()


def test_reorder_on_exact_is_unsafe_and_every_change_is_a_tie() -> None:
    base = StoreSpec("exact")
    (ctl, rr) = check_store_migrations(store_inputs(n_streams=3), base, plan_migrations(base, ["reorder"]), k=5)
    assert ctl.safe
    assert not rr.safe and rr.changed_beyond_control > 0
    # the exact store sorts stably on insertion: a reorder can move only records of equal similarity
    assert rr.tie_driven == rr.changed_beyond_control
    assert rr.example is not None and rr.example["tie_explanation"].startswith("ties: ")
    befores = {x["id"]: x["exact_similarity"] for x in rr.example["before"]}
    assert all(x["exact_similarity"] == pytest.approx(befores.get(x["id"], x["exact_similarity"]))
               for x in rr.example["after"])
    d = rr.to_dict()
    assert set(d["readout"]["crosstab"]) == set(CATEGORIES)
    assert sum(d["readout"]["crosstab"].values()) == d["n_queries"]


def test_a_migration_that_breaks_its_law_raises() -> None:
    base = StoreSpec("exact")
    items = store_inputs(n_streams=1)[0].items
    (reorder,) = [m for m in plan_migrations(base, ["reorder"]) if m.kind == "reorder"]
    ref = Ingestion(base, items)
    check_preserved(reorder, ref, ingest_plan(reorder, items, seed=0, stream="s"), stream="s")
    dropped = Ingestion(base, items[1:])  # a lost record: the multiset law must catch it
    with pytest.raises(LawViolation, match="record_multiset"):
        check_preserved(reorder, ref, dropped, stream="s")
    (rebuild,) = [m for m in plan_migrations(base, []) if m.kind == "rebuild"]
    with pytest.raises(LawViolation, match="record_sequence"):
        check_preserved(rebuild, ref, ingest_plan(reorder, items, seed=0, stream="s"), stream="s")


class _ActOnly:
    """The retrieval policy without its prefix batch form: every decision through ``act``."""

    def __init__(self, inner: object) -> None:
        self.inner = inner

    def act(self, *a: object) -> str:
        return self.inner.act(*a)  # type: ignore[attr-defined]


def test_prefix_batch_decisions_equal_per_decision_act() -> None:
    h, f, ev = example("tool-use", n_streams=2)
    agent = make_agent("exact", k=5)
    fast = replay(h, f, ev, agent, cells="value,pair,reorder", path="reference")
    plain = Agent("act-only", agent.writer, _ActOnly(agent.policy))
    slow = replay(h, f, ev, plain, cells="value,pair,reorder", path="reference")
    assert fast.equals(slow)


def test_audit_two_level_readouts_in_summary_console_and_report(tmp_path: Path) -> None:
    h, f, ev = example("tool-use", n_streams=3)
    res = audit(h, f, ev, make_agent("exact", k=5), cells="value,pair,reorder,rename", n_resamples=500)
    ret = res.summary()["retrieval"]
    # rename is the identity at ρ = id: not read; the same-order rebuild control comes with the cells
    assert set(ret) == {"value", "pair", "reorder", "rebuild (control)"}
    assert ret["rebuild (control)"]["status"] == "SAFE" and ret["rebuild (control)"]["noisy_queries"] == 0
    for cell, t in ret.items():
        if cell == "rebuild (control)":
            continue
        row = res.row(cell)
        assert t["n_queries"] == row.n_decisions
        assert t["counts"]["decision_changed"] == row.n_changed  # the replay's own decisions
        assert sum(t["crosstab"].values()) == t["n_queries"]
    # value and pair move outcomes/actions over fixed tasks: identical retrieval, decisions change
    for cell in ("value", "pair"):
        assert ret[cell]["counts"]["retrieval_changed"] == 0
        assert ret[cell]["crosstab"]["decision changed with identical retrieval"] == ret[cell]["counts"][
            "decision_changed"] > 0
    assert ret["reorder"]["counts"]["retrieval_changed"] > 0  # ingestion order moves tied records
    # the same through the CLI: console lines, summary.json and report.html
    files = {"history": write_history(h, tmp_path / "h.jsonl"), "future": write_futures(f, tmp_path / "f.jsonl"),
             "utilities": write_evaluator(ev, tmp_path / "u.jsonl")}
    r = CliRunner().invoke(_main.cli, ["audit", *(x for k, p in files.items() for x in (f"--{k}", str(p))),
                                       "--agent", "replaylens.memory.retrieval:make_agent", "--agent-param", "k=5",
                                       "--cells", "value,pair,reorder,rename", "--resamples", "500",
                                       "--out", str(tmp_path / "out")])  # not --quiet: only verdict lines
    assert r.exit_code == 0, r.output
    assert "retrieval/decision same-order rebuild (control): SAFE" in r.output
    assert "retrieval/decision pair: retrieval changed for 0/36 queries" in r.output
    assert "decision changed with identical retrieval: " in r.output
    saved = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert saved["retrieval"]["pair"]["crosstab"] == ret["pair"]["crosstab"]
    html = (tmp_path / "out" / "report.html").read_text()
    assert 'id="crosstab-table"' in html and "decision changed with identical retrieval" in html
    assert 'id="xt-pair"' in html and 'id="xt-reorder"' in html


def test_cli_check_migration_store_expect_safe_and_help(tmp_path: Path) -> None:
    runner = CliRunner()
    h = runner.invoke(_main.cli, ["check-migration", "--help"])
    assert h.exit_code == 0
    for b in ("exact", "chroma", "qdrant", "langgraph", "faiss", "hnswlib", "mem0"):
        assert b in h.output
    base = ["check-migration", "--store", "exact", "--example", "tool-use", "-k", "5"]
    bad = runner.invoke(_main.cli, [*base, "--ops", "reorder,relabel", "--expect-safe", "reorder",
                                    "--out", str(tmp_path / "o")])
    assert bad.exit_code == 1, bad.output
    assert "reorder: UNSAFE" in bad.output and "ties: " in bad.output
    assert "expectation failed: reorder" in bad.output
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert [m["migration"] for m in summary["migrations"]] == ["rebuild", "reorder", "relabel"]
    assert "crosstab-table" in (tmp_path / "o" / "report.html").read_text()
    ok = runner.invoke(_main.cli, [*base, "--ops", "relabel", "--expect-safe", "relabel,rebuild"])
    assert ok.exit_code == 0, ok.output
    assert "relabel: SAFE" in ok.output


def test_cli_store_errors_are_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    r = runner.invoke(_main.cli, ["check-migration", "--store", "exact"])
    assert r.exit_code == 2 and "--events HISTORY_FILE or --example" in r.output
    r = runner.invoke(_main.cli, ["check-migration", "--store", "exact", "--example", "tool-use", "--ops", "reorder",
                                  "--expect-safe", "backend"])
    assert r.exit_code == 2 and "not a checked migration" in r.output
    r = runner.invoke(_main.cli, ["check-migration", "--store", "exact", "--example", "tool-use",
                                  "--store-params", "{oops"])
    assert r.exit_code == 2 and "--store-params must be a JSON object" in r.output
    r = runner.invoke(_main.cli, ["check-migration", "--memory", "fifo"])
    assert r.exit_code == 2 and "needs --memory and --events" in r.output


def test_cli_store_check_on_the_users_own_files_and_store_factory(tmp_path: Path) -> None:
    h, f, _ = example("tool-use", n_streams=2)
    hp, fp = write_history(h, tmp_path / "history.jsonl"), write_futures(f, tmp_path / "future.jsonl")
    # the user's own store: a file.py:factory called as factory(embedder, path=..., params=...)
    (tmp_path / "mystore.py").write_text(
        "from replaylens.memory.stores import ExactStore\n\n"
        "def make(embedder, *, path, params):\n"
        "    return ExactStore(embedder, path=None, params=params)\n")
    runner = CliRunner()
    args = ["check-migration", "--events", str(hp), "--queries", str(fp), "-k", "5", "--ops", "reorder,relabel",
            "--json"]
    mine = runner.invoke(_main.cli, [*args, "--store", f"{tmp_path / 'mystore.py'}:make"])
    ref = runner.invoke(_main.cli, [*args, "--store", "exact"])
    assert mine.exit_code == ref.exit_code == 0, mine.output + ref.output
    a, b = json.loads(mine.output), json.loads(ref.output)
    assert [r["verdict"] for r in a] == [r["verdict"] for r in b]
    assert a[1]["n_queries"] == len(f) and not a[1]["safe"] and a[2]["safe"]


@pytest.mark.slow
def test_deciding_through_a_model_reads_the_retrieved_records(tmp_path: Path) -> None:
    from replaylens.memory.bounded import retrieved_mean_policy
    from replaylens.memory.retrieval import text_of
    from replaylens.memory.retrieval._model import record_line

    h, f, ev = example("tool-use", n_streams=2)
    direct = replay(h, f, ev, make_agent("exact", k=5, model="scripted/mean"), cells="value,pair")
    journaled = make_agent("exact", k=5, model="scripted/mean", run_dir=str(tmp_path / "run"))
    logged = replay(h, f, ev, journaled, cells="value,pair")
    assert logged.equals(direct)
    assert any((tmp_path / "run").iterdir())
    again = replay(h, f, ev, make_agent("exact", k=5, model="scripted/mean", run_dir=str(tmp_path / "run")),
                   cells="value,pair")
    assert again.equals(direct)  # resumed from the journal
    # the aligned decisions are the Mean rule over the prompt's record lines, computed here independently
    pol = journaled.policy
    for i, t in enumerate(f):
        state: tuple[MemoryItem, ...] = ()
        for r in h.records(t.stream):
            state = pol.update(state, r, r.key, r.outcome)
        (got,) = pol.retrieve_many(state, [text_of(t.task, t.metadata)])
        by_id = {it.id: it for it in state}
        lines = [record_line(by_id[x]) for x in got.ids]
        want = retrieved_mean_policy(lines, t.menu)
        assert direct.plan.labels[int(direct.actions[0, 0, 0, 0, i])] == want


def test_old_import_paths_still_work_and_say_where_things_moved(tmp_path: Path) -> None:
    """A user's store written against ``replaylens.stores`` (before the memory family) and the agent spec
    ``replaylens.retrieval:make_agent`` keep working; the console script says once, in one line, where each moved."""
    import subprocess
    import sys

    h, f, ev = example("tool-use", n_streams=2)
    files = {"history": write_history(h, tmp_path / "h.jsonl"), "future": write_futures(f, tmp_path / "f.jsonl"),
             "utilities": write_evaluator(ev, tmp_path / "u.jsonl")}
    (tmp_path / "oldstore.py").write_text(
        "from replaylens.stores import ExactStore\n\n"
        "def make(embedder, *, path, params):\n"
        "    return ExactStore(embedder, path=None, params=params)\n")
    exe = Path(sys.executable).with_name("replaylens")
    mig = subprocess.run([str(exe), "check-migration", "--events", str(files["history"]), "--queries",
                          str(files["future"]), "-k", "5", "--ops", "relabel", "--store",
                          f"{tmp_path / 'oldstore.py'}:make"], capture_output=True, text=True, timeout=300)
    assert mig.returncode == 0, mig.stderr
    assert mig.stderr.splitlines() == [
        "replaylens: warning: replaylens.stores.ExactStore moved to replaylens.memory.stores.ExactStore"]
    aud = subprocess.run([str(exe), "audit", *(x for k, p in files.items() for x in (f"--{k}", str(p))),
                          "--agent", "replaylens.retrieval:make_agent", "--cells", "pair", "--resamples", "200",
                          "--quiet", "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=300)
    assert aud.returncode == 0, aud.stderr
    assert aud.stderr.count("replaylens.retrieval.make_agent moved to replaylens.memory.retrieval.make_agent") == 1
    assert "Traceback" not in aud.stderr
