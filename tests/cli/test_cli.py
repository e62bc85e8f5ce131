"""End-to-end tests of the ``replaylens`` command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from replaylens.cli._main import cli
from replaylens.replay import DECISION_COLUMNS
from replaylens.report import load_results

pytestmark = pytest.mark.slow  # end-to-end runs: left out of the fast subset (README)

FAST = ["--resamples", "500", "--streams", "4", "--scripted"]


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo") / "run"
    res = CliRunner().invoke(cli, ["demo", "--out", str(out), *FAST])
    assert res.exit_code == 0, res.output
    return out


def test_demo_writes_every_artifact(demo_dir: Path) -> None:
    for name in ("report.md", "summary.json", "decisions.parquet", "manifest.json", "forest.png"):
        assert (demo_dir / name).stat().st_size > 0
    files = load_results(demo_dir)
    assert list(files.decisions.columns) == list(DECISION_COLUMNS)
    s = files.summary
    assert {r["cell"] for r in s["rows"]} == {"value", "pair", "key_slot", "mask", "reorder", "rename", "rekey"}
    # Mean rule: moving scores changes decisions, consistent renaming never does (label-equivariant).
    rows = {r["cell"]: r for r in s["rows"]}
    assert rows["value"]["action"] > 0
    assert rows["rename"]["n_changed"] == 0
    assert "no change detected" in rows["rename"]["verdict"]
    man = files.manifest
    assert {f["role"] for f in man["inputs"]} == {"history", "futures", "utilities"}
    assert all(len(f["sha256"]) == 64 for f in man["inputs"])
    # the decision table agrees with the summary: rename rows equal aligned-id rows
    d = files.decisions.astype({"stream": str, "cell": str, "map": str})
    al = d[(d.cell == "aligned") & (d["map"] == "id")][["stream", "task", "action"]]
    rn = d[d.cell == "rename"][["stream", "task", "map", "action"]]
    both = rn.merge(al, on=["stream", "task"], suffixes=("_rename", "_aligned"), validate="many_to_one")
    assert len(both) == len(rn) == 10 * len(al)
    assert (both.action_rename == both.action_aligned).all()


def test_demo_is_deterministic(tmp_path: Path, demo_dir: Path) -> None:
    out = tmp_path / "again"
    res = CliRunner().invoke(cli, ["demo", "--out", str(out), *FAST])
    assert res.exit_code == 0
    assert (out / "summary.json").read_bytes() == (demo_dir / "summary.json").read_bytes()
    pd.testing.assert_frame_equal(pd.read_parquet(out / "decisions.parquet"),
                                  pd.read_parquet(demo_dir / "decisions.parquet"))


def _inputs(demo_dir: Path) -> list[str]:
    i = demo_dir / "inputs"
    return ["--history", str(i / "history.jsonl"), "--future", str(i / "future.jsonl"),
            "--utilities", str(i / "utilities.jsonl")]


def test_bad_history_exits_2_with_one_line_and_no_output(tmp_path: Path, demo_dir: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("stream,family,context,slot,task,key,outcome\ns00,bandit,easy,0,t,coverage,0.5\n"
                   "s00,bandit,easy,1,t,coverage,abc\n")
    args = _inputs(demo_dir)
    args[1] = str(bad)
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, ["audit", *args, "--agent", "mean", "--out", str(out)])
    assert res.exit_code == 2
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1
    assert f"{bad}:3: field 'outcome'" in lines[0]
    assert not out.exists()


def test_lone_surrogate_in_history_exits_2_with_one_line(tmp_path: Path, demo_dir: Path) -> None:
    """A JSON escape spelling a lone surrogate in a task id (json.loads accepts it) is one line, not a traceback
    from the content hash."""
    src = (demo_dir / "inputs" / "history.jsonl").read_text(encoding="utf-8").splitlines()
    row = json.loads(src[1])
    row["task"] = row["task"] + "\ud800"
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([src[0], json.dumps(row), *src[2:]]) + "\n", encoding="utf-8")
    args = _inputs(demo_dir)
    args[1] = str(bad)
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, ["audit", *args, "--agent", "mean", "--out", str(out)])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and f"{bad}:2: field 'task'" in lines[0] and "lone surrogate" in lines[0]
    assert not (out / "summary.json").exists()


@pytest.mark.parametrize(("extra", "needle"), [
    (["--agent", "no-such-agent"], "unknown agent"),
    (["--agent", "mean", "--maps", "QQQQ"], "cannot parse label map"),
    (["--agent", "mean", "--cells", "value,bogus"], "unknown cell"),
    (["--agent", "nomodule_xyz:factory"], "cannot import agent module"),
])
def test_bad_options_exit_2(tmp_path: Path, demo_dir: Path, extra: list[str], needle: str) -> None:
    out = tmp_path / "o"
    res = CliRunner().invoke(cli, ["audit", *_inputs(demo_dir), *extra, "--out", str(out)])
    assert res.exit_code == 2, res.output
    assert needle in res.stderr
    assert "Traceback" not in res.output + res.stderr
    assert not (out / "summary.json").exists()


def test_audit_with_user_factory_and_resume(tmp_path: Path, demo_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mod = tmp_path / "my_agents.py"
    mod.write_text(
        "import replaylens as rl\n"
        "def make(alpha=1.0):\n"
        "    return rl.commutative_agent(alpha)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "run"
    args = ["audit", *_inputs(demo_dir), "--agent", "my_agents:make", "--agent-param", "alpha=2",
            "--resamples", "300", "--out", str(out)]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    first = (out / "summary.json").read_bytes()
    assert "reordering intact records (pair): no change detected" in res.output  # commutative: pair zero law
    # simulate a crash after the replay finished but before the results were written
    for name in ("summary.json", "report.md", "decisions.parquet", "manifest.json", "forest.png"):
        (out / name).unlink()
    import replaylens.agents._known as known

    def boom(*_a: object, **_k: object) -> None:
        raise AssertionError("the agent must not be called again: the journal has every shard")

    monkeypatch.setattr(known.BlockLinearWriter, "act_batch", boom)
    res2 = CliRunner().invoke(cli, args)
    assert res2.exit_code == 0, res2.output
    assert (out / "summary.json").read_bytes() == first


def test_another_run_is_kept_beside_the_first(tmp_path: Path, demo_dir: Path) -> None:
    out = tmp_path / "run"
    base = ["audit", *_inputs(demo_dir), "--agent", "mean", "--resamples", "200", "--out", str(out)]
    assert CliRunner().invoke(cli, base).exit_code == 0
    res = CliRunner().invoke(cli, [*base, "--seed", "7"])
    assert res.exit_code == 0, res.output   # issue 48: a new run, the first one kept
    assert "replaylens: new run" in res.stderr and len(list((out / "runs").iterdir())) == 2


def test_validate(tmp_path: Path, demo_dir: Path) -> None:
    res = CliRunner().invoke(cli, ["validate", *_inputs(demo_dir)])
    assert res.exit_code == 0 and res.output.startswith("ok:")
    bad = tmp_path / "h.jsonl"
    bad.write_bytes(b'{"stream": "s", "family": "f", "context": "c", "slot": 0, "task": "t", "key": "A", '
                    b'"outcome": 0.5}\n{"stream": "s\xff"}\n')
    res = CliRunner().invoke(cli, ["validate", "--history", str(bad)])
    assert res.exit_code == 2
    assert f"{bad}:2" in res.stderr and "UTF-8" in res.stderr


def test_reproduce_list_and_json() -> None:
    res = CliRunner().invoke(cli, ["paper", "reproduce", "--list"])
    assert res.exit_code == 0 and "exact-zeros" in res.output
    res = CliRunner().invoke(cli, ["paper", "reproduce", "exact-zeros", "--json"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in res.output.splitlines() if line.startswith("{")]
    assert rows
    for r in rows:
        assert {"table", "row", "column", "paper", "ours", "tolerance", "status"} <= set(r)
        assert r["status"] in ("match", "design"), r  # exact zeros of our own writers are design rows (issue 28)
    res = CliRunner().invoke(cli, ["paper", "reproduce", "no-such-table"])
    assert res.exit_code == 2
    from replaylens.paper.experiments import all_reproductions

    res = CliRunner().invoke(cli, ["paper", "reproduce", "--list", "--issue", "3"])
    listed = {line.split()[0] for line in res.output.splitlines() if line.strip()}
    assert res.exit_code == 0 and listed == {k for k, r in all_reproductions().items() if r.issue == "3"}
    res = CliRunner().invoke(cli, ["paper", "reproduce", "--list", "--issue", "no-such-issue"])
    assert res.exit_code == 2 and "no reproduction belongs" in res.output


def test_check_writer_passes_and_catches_a_false_declaration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    res = CliRunner().invoke(cli, ["check-writer", "count"])
    assert res.exit_code == 0, res.output
    assert "check-writer: passed" in res.output
    mod = tmp_path / "liar_agents.py"
    mod.write_text(
        "import dataclasses, replaylens as rl\n"
        "def make():\n"
        "    a = rl.order_sensitive_agent(0.2)\n"
        "    return dataclasses.replace(a, invariant_to=('pair',))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    res = CliRunner().invoke(cli, ["check-writer", "liar_agents:make"])
    assert res.exit_code == 1
    assert "VIOLATED" in res.output


def test_python_dash_m_entry_point() -> None:
    res = subprocess.run([sys.executable, "-m", "replaylens", "--help"], capture_output=True, text=True, check=False)
    assert res.returncode == 0
    for cmd in ("audit", "demo", "check-writer", "paper", "validate"):
        assert cmd in res.stdout


def test_reproduce_markdown_is_generated_from_the_json_rows(tmp_path: Path) -> None:
    md = tmp_path / "repro.md"
    res = CliRunner().invoke(cli, ["paper", "reproduce", "exact-zeros", "--json", "--markdown", str(md)])
    assert res.exit_code == 0
    rows = [json.loads(line) for line in res.output.splitlines() if line.startswith("{")]
    text = md.read_text()
    from collections import Counter

    from replaylens.paper.reproduce import STATUSES

    n = Counter(r["status"] for r in rows)
    assert n["design"] > 0  # exact zeros of our own writers are design rows (issue 28)
    plural = {"differs": "differ", "agrees": "agree", "disagrees": "disagree"}   # the header's wording
    counts = ", ".join(f"{n.get(s, 0)} {plural.get(s, s)}" for s in STATUSES)
    assert f"**{len(rows)} rows: {counts}.**" in text
    for r in rows:
        assert f"| {r['table']} | {r['row']} | {r['column']} |" in text


def test_audit_agent_llm_with_a_scripted_model(tmp_path: Path, demo_dir: Path) -> None:
    out = tmp_path / "llm-run"
    args = ["audit", *_inputs(demo_dir), "--agent", "llm", "--model", "scripted/mean", "--repeats", "2",
            "--cells", "value,pair", "--maps", "1032", "--resamples", "200", "--out", str(out)]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    s = json.loads((out / "summary.json").read_text())
    rows = {r["cell"]: r for r in s["rows"]}
    assert rows["value"]["action_readout"].startswith("T_gr")
    assert rows["pair"]["n_changed"] == 0  # the Mean rule ignores where intact pairs sit
    (log,) = (out / "llm").glob("*/attempts.jsonl")   # one request journal per model setup (issue 48)
    attempts = log.read_text().splitlines()
    assert len(attempts) >= 2 * 4 * 3 * 4  # every decision is a journaled request (streams x strata x tasks)
    # a rerun resumes from the journals: no new attempts
    assert CliRunner().invoke(cli, args).exit_code == 0
    assert log.read_text().splitlines() == attempts
    bad = CliRunner().invoke(cli, ["audit", *_inputs(demo_dir), "--agent", "mean", "--model", "scripted/mean",
                                   "--out", str(tmp_path / "x")])
    assert bad.exit_code == 2 and "--model is only used with --agent llm" in bad.stderr


def test_data_example_then_audit_on_measured_outcomes(tmp_path: Path, public_data_dir: Path) -> None:
    ex = tmp_path / "example"
    res = CliRunner().invoke(cli, ["paper", "data", "example", "--out", str(ex), "--streams", "3", "--data-dir",
                                   str(public_data_dir)])
    assert res.exit_code == 0, res.output
    out = tmp_path / "audit"
    res = CliRunner().invoke(cli, [
        "audit", "--history", str(ex / "history.jsonl"), "--future", str(ex / "future.jsonl"),
        "--utilities", str(ex / "utilities.jsonl"), "--agent", "replaylens.paper.controllers:ocrr_agent",
        "--cells", "value,pair", "--resamples", "200", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "reordering intact records (pair)" in res.output
    res = CliRunner().invoke(cli, ["paper", "data", "example", "--out", str(tmp_path / "e2"), "--data-dir",
                                   str(tmp_path / "empty")])
    assert res.exit_code == 2 and "replaylens paper data fetch" in res.stderr


def test_reanalyze_and_llm_validate_commands(tmp_path: Path) -> None:
    from replaylens.paper.tools import DebugRun, build_suite

    run = DebugRun(tmp_path / "run", build_suite(11, families=("sign",), instances=(2,)), seed=3)
    run.freeze_manifest()
    run.acquire()
    run.seal()
    run.score()
    export = run.export(tmp_path / "export.json")
    res = CliRunner().invoke(cli, ["paper", "reanalyze", str(export), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["n_trajectories"] == 1 * 4 * 2
    res = CliRunner().invoke(cli, ["paper", "reanalyze", str(tmp_path / "nope.json")])
    assert res.exit_code == 2
    res = CliRunner().invoke(cli, ["llm", "validate", str(tmp_path)])
    assert res.exit_code == 2
    assert "is not a ReplayLens LLM run directory" in res.stderr


def test_reproduce_markdown_update_equals_a_full_render() -> None:
    from replaylens.paper.reproduce import render_reproduction_markdown, update_reproduction_markdown

    def rows(name: str, status: str, n: int) -> list[dict[str, object]]:
        return [{"reproduction": name, "table": "t", "row": f"r{i}", "column": "c", "paper": 0.5, "ours": 0.25 * i,
                 "tolerance": 0.01, "status": status, "note": f"note of {name}"} for i in range(n)]

    titles = {"a": "first", "b": "second", "c": "third"}
    old = render_reproduction_markdown(rows("a", "match", 2) + rows("b", "n/a", 3) + rows("c", "differs", 1), titles)
    new_b = rows("b", "match", 4)
    want = render_reproduction_markdown(rows("a", "match", 2) + new_b + rows("c", "differs", 1), titles)
    assert update_reproduction_markdown(old, new_b, titles, ["a", "b", "c"]) == want
    assert ("**7 rows: 6 match, 0 sign-level, 1 differ, 0 agree, 0 disagree, 0 derived, 0 design, 0 design failed, "
            "0 sensitivity, 0 self-check, 0 self-check failed, 0 n/a.**") in want
    assert "**Value rows** (a measured value compared with one the paper printed" in want   # issue 50: apart
    # a section missing from the file is inserted at its place in the full order
    no_b = render_reproduction_markdown(rows("a", "match", 2) + rows("c", "differs", 1), titles)
    assert update_reproduction_markdown(no_b, new_b, titles, ["a", "b", "c"]) == want
    # the file's section order wins over the registry's (another import order must not reshuffle the docs)
    assert update_reproduction_markdown(old, new_b, titles, ["c", "b", "a"]) == want


def test_reproduce_markdown_updates_one_section_of_the_committed_docs(tmp_path: Path) -> None:
    # docs/paper/reproduction.md is generated; re-running one deterministic entry into a copy changes nothing
    docs = Path(__file__).resolve().parents[2] / "docs" / "paper" / "reproduction.md"
    copy = tmp_path / "reproduction.md"
    copy.write_bytes(docs.read_bytes())
    res = CliRunner().invoke(cli, ["paper", "reproduce", "exact-zeros", "--markdown", str(copy)])
    assert res.exit_code == 0, res.output
    assert copy.read_text(encoding="utf-8") == docs.read_text(encoding="utf-8")
