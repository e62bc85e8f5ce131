"""Bounded memories, migration checks, the check-migration CLI and the worked examples in docs/."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from replaylens.cli._main import cli
from replaylens.memory.bounded import (
    LINE_WIDTH,
    BinnedMeanMemory,
    Event,
    EventTimeMemory,
    FIFOMemory,
    NoMemory,
    ReservoirMemory,
    apply_migration,
    check_migration,
    identifier_priority,
    make_memory,
    retrieved_mean_policy,
    write_events,
)
from replaylens.paper.memory_audit import build_memory_blocks
from replaylens.rng import derive_rng

ROOT = Path(__file__).resolve().parents[3]


def _events(n: int = 32, seed: int = 0) -> list[Event]:
    g = derive_rng(seed, "test-events")
    acts = ("coverage", "adaptive", "replicate", "mixed")
    return [Event((float(g.normal()), float(g.uniform(0.5, 1.5)), float(g.normal())), acts[t % 4],
                  round(float(g.uniform()), 6), float(t + 1), f"ev-{t:02d}") for t in range(n)]


def test_fifo_keeps_last_16_and_event_time_keeps_latest() -> None:
    ev = _events()
    fifo, et = FIFOMemory(), EventTimeMemory()
    for e in ev:
        fifo.ingest(e)
        et.ingest(e)
    assert [s["event_time"] for s in fifo.export()] == [str(t) for t in range(17, 33)]
    assert sorted(s["event_time"] for s in et.export()) == sorted(str(t) for t in range(17, 33))
    # aligned ingestion: FIFO and event time store the same set
    assert sorted(map(str, fifo.export())) == sorted(map(str, et.export()))
    et2 = EventTimeMemory()
    for e in reversed(ev):
        et2.ingest(e)
    assert et2.export() == et.export()


def test_reservoir_keeps_smallest_identifier_priorities() -> None:
    ev = _events()
    res = ReservoirMemory()
    for e in ev:
        res.ingest(e)
    kept = {s["event_time"] for s in res.export()}
    expect = sorted(ev, key=lambda e: identifier_priority(e.id))[:16]
    assert kept == {str(int(e.time)) for e in expect}


def test_binned_means_are_exact_and_order_invariant() -> None:
    ev = _events(64, seed=3)
    a, b = BinnedMeanMemory(), BinnedMeanMemory()
    for e in ev:
        a.ingest(e)
    for e in apply_migration("reorder", ev, seed=9, stream="s", block="b"):
        b.ingest(e)
    assert a.export() == b.export()
    assert len(a.export()) <= 16
    for slot in a.export():
        members = [e for e in ev if e.action == slot["action"]]
        assert slot["count"] <= len(members)
    tot = sum(s["count"] for s in a.export())
    assert tot == 64


def test_retrieval_lines_are_fixed_width_and_padded() -> None:
    mem = FIFOMemory()
    for e in _events(5):
        mem.ingest(e)
    lines = mem.retrieve((0.0, 1.0, 0.0))
    assert len(lines) == 8 and all(len(ln) == LINE_WIDTH for ln in lines)
    assert lines[5].strip() == "EMPTY" and lines[0].startswith("[1] action=")
    assert NoMemory().retrieve((0.0, 1.0, 0.0)) == ["EMPTY".ljust(LINE_WIDTH)] * 8


def test_policy_reads_retrieved_lines() -> None:
    lines = ["[1] action=adaptive n=2 u=0.500000 d1=0 t=3", "[2] action=mixed n=1 u=0.900000 d1=0 t=1"]
    assert retrieved_mean_policy(lines, ["coverage", "adaptive", "mixed"]) == "mixed"
    assert retrieved_mean_policy([], ["coverage", "mixed"]) == "coverage"


@pytest.mark.parametrize(("name", "reorder_changes"), [("fifo", True), ("event-time", False), ("reservoir", False),
                                                       ("binned-mean", False)])
def test_reorder_artifacts_on_public_blocks(public_data_dir: Path, name: str, reorder_changes: bool) -> None:
    mb = build_memory_blocks(3, seed=11, data_dir=public_data_dir)
    rep = check_migration(lambda: make_memory(name), mb.events, queries=mb.queries, ops=["reorder"], seed=1)[0]
    assert rep.n_blocks == 12
    if reorder_changes:
        assert rep.stored_changed == rep.retrieved_changed == 12
    else:
        assert rep.safe
    # the balanced forced schedule: each action exactly 8 times in every block
    for evs in mb.events.values():
        assert sorted({a: sum(e.action == a for e in evs) for a in mb.arms}.values()) == [8, 8, 8, 8]
        assert [e.time for e in evs] == [float(t) for t in range(1, 33)]


def test_reindex_breaks_the_reservoir_only() -> None:
    blocks = {("s", "b"): _events(40)}
    res = check_migration(ReservoirMemory, blocks, ops=["reindex"])[0]
    fifo = check_migration(FIFOMemory, blocks, ops=["reindex"])[0]
    assert not res.safe and fifo.safe


def test_check_migration_cli_on_the_worked_examples(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ev = tmp_path / "events.jsonl"
    write_events({("s0", "b0"): _events(32, 1), ("s1", "b0"): _events(32, 2)}, ev)
    monkeypatch.chdir(ROOT)
    res = CliRunner().invoke(cli, ["check-migration", "--memory", "docs.examples.deque_memory:make",
                                   "--events", str(ev), "--json"])
    assert res.exit_code == 1, res.output  # UNSAFE (reorder, merge) is a failed expectation: exit 1
    rep = {r["op"]: r for r in json.loads(res.output)}
    assert not rep["reorder"]["safe"] and not rep["merge"]["safe"]
    assert rep["reindex"]["safe"] and rep["relabel"]["safe"]
    assert rep["reorder"]["examples"][0]["diff"].startswith("--- aligned")
    res = CliRunner().invoke(cli, ["check-migration", "--memory", "docs/examples/best_per_action_memory.py:make",
                                   "--events", str(ev), "--policy", "mean"])
    assert res.exit_code == 0, res.output
    assert res.output.count("SAFE —") == 4 and "decisions change in 0/2 blocks" in res.output


def test_check_migration_bad_input_exits_2(tmp_path: Path) -> None:
    ev = tmp_path / "events.jsonl"
    ev.write_text('{"stream": "s", "block": "b", "event_time": 1, "event_id": "e1", "action": "A", "utility": 0.5, '
                  '"descriptors": [0.1]}\n{"stream": "s", "block": "b", "event_time": 2, "event_id": "e2", '
                  '"action": "A", "utility": 0.5, "descriptors": "oops"}\n')
    res = CliRunner().invoke(cli, ["check-migration", "--memory", "fifo", "--events", str(ev)])
    assert res.exit_code == 2
    assert f"{ev}:2: field 'descriptors'" in res.stderr
    res = CliRunner().invoke(cli, ["check-migration", "--memory", "nosuchmod:make", "--events", str(ev)])
    assert res.exit_code == 2 and "cannot import memory module" in res.stderr
    res = CliRunner().invoke(cli, ["check-migration", "--memory", "json:dumps", "--events", str(ev)])
    assert res.exit_code == 2
