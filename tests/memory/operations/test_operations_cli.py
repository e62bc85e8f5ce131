"""``replaylens check-operation``: exit codes (0, 1 for a failed declared expectation, 2 bad input, 3 an operation
that raises), JSON and manifest output, the --demo example, and the shipped example files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from replaylens.cli._main import cli
from replaylens.memory.operations import build_operation_example
from replaylens.records import read_evaluator, read_futures, read_history

EX = Path(__file__).resolve().parents[3] / "docs" / "examples" / "operations"
FILES = ["--history", str(EX / "history.jsonl"), "--future", str(EX / "future.jsonl"),
         "--utilities", str(EX / "utilities.jsonl")]


def _run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, ["check-operation", *args])
    return res.exit_code, res.output


def test_shipped_files_are_the_generated_example() -> None:
    ex = build_operation_example()
    assert read_history(EX / "history.jsonl").equals(ex.history)
    assert read_futures(EX / "future.jsonl").fingerprint() == ex.futures.fingerprint()
    assert read_evaluator(EX / "utilities.jsonl").fingerprint() == ex.evaluator.fingerprint()


def test_demo_prints_the_example_verdicts() -> None:
    code, out = _run("--demo")
    assert code == 0, out
    assert out.startswith("merge-text: UNSAFE for mean, SAFE for latest")
    assert "keep-latest: UNSAFE for mean, SAFE for latest" in out
    assert "relation key_outcome_binding: BROKEN in 8/8 streams" in out


def test_demo_operations_is_the_same_example_written_to_out(tmp_path: Path) -> None:
    """``replaylens demo --operations`` runs ``check-operation --demo`` and writes OUT (exit 0: nothing declared)."""
    res = CliRunner().invoke(cli, ["demo", "--operations", "--out", str(tmp_path / "d")])
    assert res.exit_code == 0, res.output
    code, direct = _run("--demo")
    assert code == 0 and res.output.startswith(direct.rstrip("\n")) and "wrote" in res.output.splitlines()[-1]
    rows = json.loads((tmp_path / "d" / "operations.json").read_text())
    assert [(r["op"], [d["status"] for d in r["decisions"]]) for r in rows] == [
        ("merge-text", ["UNSAFE", "SAFE"]), ("keep-latest", ["UNSAFE", "SAFE"])]
    assert json.loads((tmp_path / "d" / "manifest.json").read_text())["arguments"]["demo"] is True
    both = CliRunner().invoke(cli, ["demo", "--operations", "--stores", "--out", str(tmp_path / "e")])
    assert both.exit_code == 2 and "give one" in both.output


def test_several_operations_with_a_stochastic_agent_are_one_family(tmp_path: Path) -> None:
    agent = tmp_path / "noisy2.py"
    agent.write_text(
        "from replaylens.agents import from_callables, reference_agent\n"
        "def make():\n"
        "    m = reference_agent('mean')\n"
        "    def act(s, t, menu, rng):\n"
        "        return menu[int(rng.integers(len(menu)))] if rng.random() < 0.2 else m.policy.act(s, t, menu, rng)\n"
        "    return from_callables(m.writer.init_state, m.writer.update, act, name='noisy2', stochastic=True)\n")
    code, out = _run(*FILES, "--op", "merge-text,keep-latest,dedup", "--agent", f"{agent}:make", "--json")
    assert code == 0, out
    rows = json.loads(out)
    fam = [d for r in rows for d in r["decisions"]]
    assert len(fam) == 3 and {d["family"] for d in fam} == {3} and all("Holm over 3 T_gr rows" in d["line"]
                                                                          for d in fam)


def test_expect_safe_and_canaries_gate_the_exit_code() -> None:
    code, out = _run(*FILES, "--op", "keep-latest", "--agent", "latest", "--expect-safe", "keep-latest",
                     "--canary", "a00-039")
    assert code == 0, out
    code, out = _run(*FILES, "--op", "keep-latest", "--agent", "mean", "--expect-safe", "all")
    assert code == 1 and "expectation failed: keep-latest declared safe, but UNSAFE for agent mean" in out
    code, out = _run(*FILES, "--op", f"{EX / 'merge_duplicates.py'}:make", "--canary", "a00-039")
    assert code == 1 and "canaries: 0 of 1 canaries survive intact" in out
    code, out = _run(*FILES, "--op", "keep-latest", "--expect-property", "monotone")
    assert code == 1 and "monotone (declared): FAILED" in out


def test_inconclusive_exits_0_unless_asked_to_fail(tmp_path: Path) -> None:
    agent = tmp_path / "noisy.py"
    agent.write_text(
        "from replaylens.agents import from_callables, reference_agent\n"
        "def make():\n"
        "    m = reference_agent('mean')\n"
        "    def act(s, t, menu, rng):\n"
        "        return menu[int(rng.integers(len(menu)))] if rng.random() < 0.3 else m.policy.act(s, t, menu, rng)\n"
        "    return from_callables(m.writer.init_state, m.writer.update, act, name='noisy', stochastic=True)\n")
    args = [*FILES, "--op", "merge-text", "--agent", f"{agent}:make", "--repeats", "1", "--expect-safe", "merge-text"]
    code, out = _run(*args)
    assert code == 0 and "INCONCLUSIVE for noisy" in out, out
    code, out = _run(*args, "--on-inconclusive", "fail")
    assert code == 1 and "declared safe, but INCONCLUSIVE for agent noisy" in out


def test_operation_that_raises_exits_3_naming_its_line(tmp_path: Path) -> None:
    op = tmp_path / "broken_op.py"
    op.write_text("def make():\n    def op(records):\n        raise RuntimeError('summary model offline')\n"
                  "    return op\n")
    code, out = _run(*FILES, "--op", f"{op}:make")
    assert code == 3
    assert "raised [RuntimeError: summary model offline at" in out and "broken_op.py:3" in out
    assert "stream a00" in out


@pytest.mark.parametrize(("args", "msg"), [
    (["--op", "keep-latest"], "needs --history"),
    (["--op", "shred", "--history", str(EX / "history.jsonl")], "unknown operation 'shred'"),
    (["--op", "keep-latest", "--history", str(EX / "history.jsonl"), "--agent", "mean"],
     "--agent needs --future and --utilities"),
    (["--op", "keep-latest", *FILES, "--agent", "mean", "--expect-safe", "dedup"], "--expect-safe dedup names no"),
    (["--op", "keep-latest", *FILES, "--canary", "zz-1"], "--canary zz-1 marks no record"),
])
def test_bad_input_exits_2_with_one_line(args: list[str], msg: str) -> None:
    code, out = _run(*args)
    assert code == 2 and msg in out and out.count("\n") == 1, out


def test_bad_history_line_names_file_line_field(tmp_path: Path) -> None:
    h = tmp_path / "h.jsonl"
    lines = (EX / "history.jsonl").read_text().splitlines()[:3]
    lines[2] = lines[2].replace('"outcome": ', '"outcome": 7, "x": ')
    h.write_text("\n".join(lines) + "\n")
    code, out = _run("--op", "dedup", "--history", str(h))
    assert code == 2 and f"{h}:3: field" in out


def test_json_and_manifest(tmp_path: Path) -> None:
    code, out = _run(*FILES, "--op", "dedup,forget-count:5", "--agent", "latest", "--json", "--out", str(tmp_path))
    assert code == 0, out
    rows = json.loads(out)
    assert [r["op"] for r in rows] == ["dedup", "forget-count:5"]
    assert rows[0]["status"] == "SAFE" and rows[0]["broken"] == []
    assert rows[1]["decisions"][0]["status"] == "SAFE"   # latest keeps its choice when older records go
    assert json.loads((tmp_path / "operations.json").read_text()) == rows
    man = json.loads((tmp_path / "manifest.json").read_text())
    assert {"chromadb", "qdrant-client", "faiss-cpu", "hnswlib", "wordllama", "lancedb"} <= set(man["packages"])


def test_store_option_adds_the_retrieval_level_response() -> None:
    code, out = _run("--history", str(EX / "history.jsonl"), "--future", str(EX / "future.jsonl"), "--op",
                     "keep-latest", "--store", "exact", "-k", "3", "--json")
    assert code == 0, out
    r = json.loads(out)[0]["retrieval"]
    assert r["backend"] == "exact" and r["k"] == 3 and r["queries"] == 192 and 0 < r["changed"] <= 192
    code, out = _run("--history", str(EX / "history.jsonl"), "--op", "dedup", "--store", "exact")
    assert code == 2 and "--store needs --future" in out
    code, out = _run("--history", str(EX / "history.jsonl"), "--future", str(EX / "future.jsonl"), "--op", "dedup",
                     "--store", "exact", "--store-params", "[1]")
    assert code == 2 and "--store-params must be a JSON object" in out


def test_canary_where_predicate_from_a_file(tmp_path: Path) -> None:
    pred = tmp_path / "canary.py"
    pred.write_text("def last(record):\n    return record.slot == 39\n\ndef boom(record):\n    raise KeyError('x')\n")
    code, out = _run("--history", str(EX / "history.jsonl"), "--op", "keep-latest", "--canary-where", f"{pred}:last")
    assert code == 0 and "canaries (declared): ok — 8 of 8 canaries survive intact" in out, out
    code, out = _run("--history", str(EX / "history.jsonl"), "--op", "forget-count:1", "--canary-where",
                     f"{pred}:last", "--canary", "a00-000")
    assert code == 1 and "8 of 9 canaries survive intact" in out and "a00-000 (stream a00, slot 0" in out
    code, out = _run("--history", str(EX / "history.jsonl"), "--op", "dedup", "--canary-where", f"{pred}:boom")
    assert code == 3 and "the canary predicate" in out and "canary.py:5" in out
