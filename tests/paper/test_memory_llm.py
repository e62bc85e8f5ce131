"""Model-level memory audit: C1.6 serialization, journaled acquisition and resume, the scripted back-end's
tables, the compact export and its reproduction entries, and check-migration --policy through a fake server."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

import replaylens.paper.experiments.memory as em
from replaylens.cli._main import cli
from replaylens.errors import ConfigError
from replaylens.llm import AcquireSettings, Completion, FakeOpenAIServer, Request, ValidationReport
from replaylens.llm._serialize import canonical_json, item_key, sha256_text
from replaylens.memory.bounded import (
    Event,
    MemoryItem,
    MemoryTemplate,
    RetrievedMeanBackend,
    acquire_decisions,
    decide_direct,
    parse_memory_prompt,
    render_memory_prompt,
    repeat_corrected,
    write_events,
)
from replaylens.paper.experiments import public_data as pd_
from replaylens.paper.memory_audit import MemoryDecisions, MemoryDesign, build_memory_blocks
from replaylens.paper.memory_audit._design import development_conditions
from replaylens.rng import derive_rng

ROOT = Path(__file__).resolve().parents[2]

# `replaylens paper reproduce memory-development memory-test --json` before the back-end refactor
SCRIPTED_DEV = {"fifo": (0.677943265625, 0.6767991145833333, 0.41015625, 0.63671875),
                "event-time": (0.6760728671875, 0.6753288749999999, -0.00390625, 0.48046875),
                "reservoir": (0.6763454375, 0.6764634244791667, 0.00390625, 0.5390625),
                "binned-mean": (0.6770050546874999, 0.6772029531250001, 0.06640625, 0.5078125)}
SCRIPTED_TEST = {"FIFO": (0.669038890625, 0.6698256979166667, 0.6694322942708334, 0.33203125),
                 "audit": (0.6682723567708333, 0.6697363229166667, 0.6690043398437501, 0.0013020833333333333),
                 "endpoint": (0.6690068932291666, 0.6677746041666667, 0.6683907486979167, -0.005208333333333333),
                 "No memory": (0.6672471875, 0.6649152161458333, 0.6660812018229167, 0.0026041666666666665)}
SCRIPTED_CONTRASTS = {"FIFO": (-0.4279544270833327, -4.12564389648437, 3.2394440104166793),
                      "endpoint": (0.6135911458333284, -3.9762569173177247, 5.034562988281237),
                      "No memory": (2.923138020833313, -1.8151105468750304, 7.416263753255197)}


@pytest.fixture()
def public_env(public_data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("REPLAYLENS_DATA_DIR", str(public_data_dir))
    pd_.public_world.cache_clear()
    em._blocks.cache_clear()
    em._development.cache_clear()
    em._scripted_test.cache_clear()
    em._embedded.cache_clear()
    yield public_data_dir
    em._blocks.cache_clear()
    em._development.cache_clear()
    em._scripted_test.cache_clear()
    em._embedded.cache_clear()
    pd_.public_world.cache_clear()


def _small_design(public_data_dir: Path) -> MemoryDesign:
    mb = build_memory_blocks(2, seed=11, data_dir=public_data_dir)
    return MemoryDesign("development", mb, development_conditions(11), 11)


# ------------------------------------------------------------------------------------------ serialization

def test_prompt_bytes_are_stable() -> None:
    it = MemoryItem(task=(("Block", "b0"),), query=(0.5, -1.25), menu=(("A", "first"), ("B", None)),
                    retrieved=("[1] action=A n=2 u=0.500000".ljust(40), "EMPTY".ljust(40)))
    p = render_memory_prompt([it, it], MemoryTemplate())
    assert p.startswith("You will make 2 independent decisions. Each numbered item is a separate task with its own "
                        "retrieved memory")
    assert "=== Item 2 of 2 ===\nBlock: b0\nQuery descriptors: d1=0.500000 d2=-1.250000\n" in p
    assert "\nRecords:\n[1] action=A n=2 u=0.500000             \nEMPTY" in p
    assert p.count("Answer with exactly one action: A or B.\nAnswer:") == 2
    assert sha256_text(p) == "a42fc7be7485b16b3167e7cebd17d6c7b29bfe85c4a4a2f6e569c7725fb4299f"
    assert parse_memory_prompt(p) == [(("A", "B"), (it.retrieved[0], it.retrieved[1]))] * 2


def test_design_request_digest_is_stable(public_data_dir: Path) -> None:
    d = _small_design(public_data_dir)
    reqs = d.requests("")
    assert d.n_requests == len(reqs) == 2 * 44  # 4 × (6 + 2 + 2) + 2 + 2 per stream
    assert len({r.request_id for r in reqs}) == len(reqs)  # identical prompts are still separate fresh calls
    r0 = reqs[0]
    assert r0.n_items == 4 and r0.meta["condition"] == "fifo" and r0.meta["history"] == "aligned"
    assert r0.schema["properties"]["item_01"]["enum"] == ["coverage", "adaptive", "replicate", "mixed"]
    lines = r0.prompt.split("Records:\n")[1].split("\nAnswer with")[0].splitlines()
    assert len(lines) == 8 and all(len(ln) == 144 for ln in lines)
    # FIFO and event time store the same set under aligned ingestion: same prompt, different requests
    et = next(r for r in reqs if r.meta["condition"] == "event-time" and r.meta["history"] == "aligned")
    assert et.prompt == r0.prompt and et.request_id != r0.request_id
    assert d.requests_digest() == "6e1fde04af21f7176473ddf39b9cbdaeed0a506c0dba9f6d7ebede1f1052789c"
    assert sha256_text(r0.prompt) == "559e30458679f6b076cb086ea16b8918e1c9833a833214c767abb94c75215912"


# ------------------------------------------------------------------------------------------ acquisition

class _Stop(BaseException):
    pass


class _Counting(RetrievedMeanBackend):
    def __init__(self, stop_after: int | None = None) -> None:
        super().__init__(noise=0.2, seed=3)
        self.asked: list[str] = []
        self.stop_after = stop_after

    async def complete(self, request: Request, timeout: float) -> Completion:
        if self.stop_after is not None and len(self.asked) >= self.stop_after:
            raise _Stop
        self.asked.append(request.request_id)
        return await super().complete(request, timeout)


def test_interrupted_run_resumes_without_reasking(public_data_dir: Path, tmp_path: Path) -> None:
    d = _small_design(public_data_dir)
    first = _Counting(stop_after=30)
    reqs = d.requests(first.settings.digest())
    man = {"experiment": "test", "seed": 11, "settings": first.settings.to_dict(), "design": d.to_dict()}
    acq = AcquireSettings(concurrency=1, retries=0)
    with pytest.raises(_Stop):
        acquire_decisions(reqs, first, tmp_path / "run", man, acquire=acq)
    second = _Counting()
    got = acquire_decisions(reqs, second, tmp_path / "run", man, acquire=acq)
    assert got.report.ok, got.report.problems
    assert not set(first.asked) & set(second.asked)
    assert len(second.asked) == len(reqs) - 30
    third = _Counting()
    again = acquire_decisions(reqs, third, tmp_path / "run", man, acquire=acq)
    assert third.asked == [] and again.decisions == got.decisions
    # the journaled decisions equal the direct (unjournaled) ones
    assert decide_direct(reqs, RetrievedMeanBackend(noise=0.2, seed=3)) == {
        k: type(v)(v.actions, v.tokens, "original") for k, v in got.decisions.items()}
    dec = MemoryDecisions.from_requests(d, got.requests, got.decisions)
    assert dec.complete and dec.get("fifo", "aligned").shape == (2, 4, 6)


def test_scripted_backend_reproduces_the_scripted_tables(public_env: Path, tmp_path: Path) -> None:
    dev = em._development()
    for mem, vals in SCRIPTED_DEV.items():
        assert tuple(dev[mem][c] for c in ("U2", "U6", "T_in", "T_value")) == vals
    # the same numbers through the journaled run store, with the frozen selection written before the test
    a = em.run_memory_audit(RetrievedMeanBackend(noise=em.EPSILON), tmp_path / "run",
                            acquire=AcquireSettings(concurrency=16, retries=0))
    assert isinstance(a.dev_report, ValidationReport) and a.dev_report.ok and a.dev_report.n_planned == 704
    assert isinstance(a.test_report, ValidationReport) and a.test_report.ok and a.test_report.n_planned == 768
    assert a.development == dev
    assert a.selection == {"audit": "reservoir", "endpoint": "binned-mean"}
    freeze = json.loads((tmp_path / "run" / "dev_selection_freeze.json").read_text())
    assert freeze["selection"] == a.selection and freeze["development_analysis_sha256"] == a.selection_sha256
    assert a.test is not None and a.contrasts is not None
    for arm, vals in SCRIPTED_TEST.items():
        assert tuple(float(a.test[arm][c].mean()) for c in ("U_A", "U_R", "U_mix", "T_in")) == vals
    assert a.contrasts == SCRIPTED_CONTRASTS
    # export round trip: the tables come back with zero model calls
    out = em.export_memory_run(tmp_path / "run", tmp_path / "memory.json.gz")
    b = em.load_memory_export(out)
    assert b.development == a.development and b.selection == a.selection and b.contrasts == a.contrasts
    assert b.test is not None and all(np.array_equal(b.test[k][c], a.test[k][c]) for k in a.test for c in a.test[k])
    assert b.model == "scripted/retrieved-mean"
    # the embedded reproduction entries read an export when one is committed ...
    em.EMBEDDED_EXPORT, saved = out, em.EMBEDDED_EXPORT
    try:
        em._embedded.cache_clear()
        rows = em.memory_development_embedded() + em.memory_test_embedded()
        assert all(r.ours is not None for r in rows)
        u2 = next(r for r in rows if r.row == "FIFO" and r.column == "U2")
        assert u2.ours == SCRIPTED_DEV["fifo"][0] and u2.paper == 0.674 and "zero model calls" in u2.note
    finally:
        em.EMBEDDED_EXPORT = saved
        em._embedded.cache_clear()
    # ... and a tampered export is refused, naming the file and field
    doc = json.loads(gzip.decompress(out.read_bytes()))
    doc["freeze"]["selection"] = {"audit": "fifo", "endpoint": "fifo"}
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(gzip.compress(json.dumps(doc).encode()))
    with pytest.raises(ConfigError, match=r"freeze\.selection"):
        em.load_memory_export(bad)


def test_embedded_rows_are_na_without_an_export(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(em, "EMBEDDED_EXPORT", tmp_path / "absent.json.gz")
    em._embedded.cache_clear()
    try:
        rows = em.memory_development_embedded() + em.memory_test_embedded()
    finally:
        em._embedded.cache_clear()
    assert rows and all(r.ours is None and r.status == "n/a" for r in rows)
    assert all(em.EMBEDDED_COMMAND in r.note for r in rows)
    assert any(r.paper == 0.516 for r in rows)  # the paper's hosted-model values stay as the paper's


def test_test_histories_need_the_freeze(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="must be frozen before test histories"):
        em.read_freeze(tmp_path)


# ------------------------------------------------------------------------------------------ check-migration


def _events(n: int, seed: int) -> list[Event]:
    g = derive_rng(seed, "test-events")
    acts = ("coverage", "adaptive", "replicate", "mixed")
    return [Event((float(g.normal()), float(g.uniform(0.5, 1.5)), float(g.normal())), acts[t % 4],
                  round(float(g.uniform()), 6), float(t + 1), f"ev{seed}-{t:02d}") for t in range(n)]


class _MeanServer(FakeOpenAIServer):
    """The fake endpoint answering memory prompts with the Mean rule over the retrieved lines."""

    def answer(self, content: str, body: Mapping[str, Any], sha: str, occurrence: int) -> dict[str, str]:
        from replaylens.memory.bounded import retrieved_mean_policy

        return {item_key(i): retrieved_mean_policy(lines, menu)
                for i, (menu, lines) in enumerate(parse_memory_prompt(content))}


def test_repeat_corrected() -> None:
    assert repeat_corrected(["a", "a"], ["b", "b"]) == 1.0
    assert repeat_corrected(["a", "a"], ["a", "a"]) == 0.0
    assert repeat_corrected(["a", "b"], ["a", "b"]) == -0.5  # cross 0.5 minus within 1 (negatives kept)
    assert repeat_corrected(["a"], ["b"]) == 1.0


def test_check_migration_policy_through_the_fake_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ev = tmp_path / "events.jsonl"
    write_events({("s0", "b0"): _events(32, 1), ("s1", "b0"): _events(32, 2), ("s1", "b1"): _events(32, 3)}, ev)
    monkeypatch.chdir(ROOT)
    base = ["check-migration", "--memory", "docs.examples.deque_memory:make", "--events", str(ev), "--json"]
    res = CliRunner().invoke(cli, [*base, "--policy", "scripted/mean"])
    assert res.exit_code == 1, res.output  # reorder/merge are UNSAFE: exit 1
    scripted = {r["op"]: r["decision_audit"] for r in json.loads(res.output)}
    assert scripted["reindex"]["disagreement"] == 0.0 and scripted["relabel"]["disagreement"] == 0.0
    assert scripted["reorder"]["disagreement"] > 0 and scripted["reorder"]["repeat_corrected"]
    with _MeanServer(model="mem-model") as srv:
        args = [*base, "--policy", "openai/mem-model", "--base-url", srv.url, "--api-key-env", "",
                "--run-dir", str(tmp_path / "llm"), "--repeats", "2"]
        res = CliRunner().invoke(cli, args)
        assert res.exit_code == 1, res.output
        served = {r["op"]: r["decision_audit"] for r in json.loads(res.output)}
        n = srv.n_requests
        assert n == 3 * 5 * 2  # blocks × (aligned + 4 operations) × repeats, one block per request
        res = CliRunner().invoke(cli, args)  # rerun: resumes from the journal, zero new calls
        assert res.exit_code == 1 and srv.n_requests == n
    for op, d in served.items():
        assert d["disagreement"] == scripted[op]["disagreement"] and d["model"] == "mem-model"
        assert d["blocks_changed"] == scripted[op]["blocks_changed"]
    assert (tmp_path / "llm" / "manifest.json").exists()
    text = CliRunner().invoke(cli, [*base[:-1], "--policy", "openai/mem-model", "--base-url", "http://127.0.0.1:9/v1",
                                    "--api-key-env", ""])
    assert text.exit_code == 2 and "--run-dir" in text.output


def test_check_migration_bad_policy_exits_2(tmp_path: Path) -> None:
    ev = tmp_path / "events.jsonl"
    write_events({("s0", "b0"): _events(8, 1)}, ev)
    res = CliRunner().invoke(cli, ["check-migration", "--memory", "fifo", "--events", str(ev), "--policy", "median"])
    assert res.exit_code == 2 and "--policy" in res.output
    res = CliRunner().invoke(cli, ["check-migration", "--memory", "fifo", "--events", str(ev), "--policy",
                                   "scripted/sum"])
    assert res.exit_code == 2 and "scripted/mean" in res.output


def test_canonical_rows_are_json(public_data_dir: Path) -> None:
    d = _small_design(public_data_dir)
    assert json.loads(canonical_json(d.to_dict()))["conditions"][0]["memory"] == "fifo"


def test_documented_decision_example(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    doc = (ROOT / "docs" / "guide" / "memory.md").read_text(encoding="utf-8")
    res = CliRunner().invoke(cli, ["check-migration", "--memory", "docs.examples.deque_memory:make", "--events",
                                   "docs/examples/memory-events.jsonl", "--policy", "scripted/mean"])
    assert res.exit_code == 1, res.output  # the example shows UNSAFE operations
    shown = [ln for ln in doc.split("--policy scripted/mean\n", 1)[1].split("```", 1)[0].splitlines()
             if ln and ln != "..."]
    assert len(shown) == 4 and all(ln in res.output.splitlines() for ln in shown)


def test_memory_audit_cli_bad_input_exits_2(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["paper", "memory-audit", "--model", "scripted/sum",
                                   "--run-dir", str(tmp_path / "r")])
    assert res.exit_code == 2 and "scripted/mean" in res.output
    res = CliRunner().invoke(cli, ["paper", "memory-audit", "--model", "scripted/mean"])
    assert res.exit_code == 2 and "--run-dir" in res.output


def test_committed_embedded_memory_export_matches_the_current_design() -> None:
    if not em.EMBEDDED_EXPORT.is_file():
        pytest.skip("no committed embedded-model memory export")
    a = em.load_memory_export(em.EMBEDDED_EXPORT)  # rebuilds both designs from the seeds; refuses a mismatch
    assert "SmolLM2" in a.model
    assert a.dev_report["ok"] and a.test_report["ok"]
    assert (a.dev_report["expected_requests"], a.test_report["expected_requests"]) == (704, 768)
    assert a.dev_report["n_missing"] == a.test_report["n_missing"] == 0
    assert a.selection is not None and set(a.selection) == {"audit", "endpoint"}
