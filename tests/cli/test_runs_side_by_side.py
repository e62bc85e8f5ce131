"""Issue 48, point 1: runs never collide.  Every audit into OUT that is not a resume is a run of its own under
OUT/runs/ (the latest linked as OUT/summary.json, ...); an edited or switched agent is a new run with one line
saying why; the same command resumes its kept run exactly; the inputs may come from the config alone."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from replaylens.bandit import make_bandit
from replaylens.cli._main import cli
from replaylens.records import write_evaluator, write_futures, write_history

FAST = ["--maps", "1032", "--resamples", "200", "--cells", "value,pair", "--quiet"]

AGENT = """\
import os
from replaylens.agents import from_callables

def make():
    def update(s, task, key, outcome):
        return {**s, key: s.get(key, 0.0) + outcome}
    def act(s, task, menu):
        if task.stream == os.environ.get("CRASH_STREAM"):
            raise RuntimeError("crash asked for")
        {EDIT}
        return max(menu, key=lambda a: (s.get(a, 0.0), a))
    return from_callables(dict, update, act, name="summer")
"""


@pytest.fixture()
def inputs(tmp_path: Path) -> list[str]:
    sub = make_bandit(n_streams=8, slots_per_block=8, n_future=2, rng=5)
    h = write_history(sub.history, tmp_path / "history.jsonl")
    f = write_futures(sub.futures, tmp_path / "future.jsonl")
    u = write_evaluator(sub.evaluator, tmp_path / "utilities.jsonl")
    return ["--history", str(h), "--future", str(f), "--utilities", str(u)]


def _agent(tmp_path: Path, edit: str = "pass") -> str:
    p = tmp_path / "myagent.py"
    p.write_text(AGENT.replace("{EDIT}", edit))
    return f"{p}:make"


def _run(args: list[str]) -> Result:
    return CliRunner().invoke(cli, args)


def _runs(out: Path) -> list[Path]:
    return sorted((out / "runs").iterdir())


def test_an_edited_then_switched_agent_is_a_new_run_and_every_run_is_kept(inputs: list[str], tmp_path: Path) -> None:
    out = tmp_path / "out"
    base = ["audit", *inputs, "--out", str(out), *FAST]
    first = _run([*base, "--agent", _agent(tmp_path)])
    assert first.exit_code == 0, first.output
    (run1,) = _runs(out)
    kept = (run1 / "summary.json").read_bytes()
    assert (out / "summary.json").read_bytes() == kept

    _agent(tmp_path, edit="s = dict(s)")   # the user edits the agent: a new run, no flag, one line saying why
    edited = _run([*base, "--agent", _agent(tmp_path, edit="s = dict(s)")])
    assert edited.exit_code == 0, edited.output
    notes = [ln for ln in edited.stderr.splitlines() if "new run" in ln]
    assert len(notes) == 1 and "agent code changed (myagent.py)" in notes[0] and str(run1.name) in notes[0]
    assert "error" not in edited.stderr and "resuming" not in edited.stderr
    runs = _runs(out)   # (two runs started in the same second sort by their digests: find the new one by name)
    assert len(runs) == 2 and run1 in runs and (run1 / "summary.json").read_bytes() == kept   # nothing overwritten
    (run2,) = (r for r in runs if r != run1)
    assert os.readlink(out / ".results") == f"runs/{run2.name}/.results"    # OUT shows the latest run
    assert (out / "summary.json").read_bytes() == (run2 / "summary.json").read_bytes()

    again = _run([*base, "--agent", _agent(tmp_path, edit="s = dict(s)")])   # the same command: its run, resumed
    assert again.exit_code == 0 and "replay already complete" in again.stderr and len(_runs(out)) == 2

    switched = _run([*base, "--agent", "mean"])   # another agent: a new run
    assert switched.exit_code == 0 and "new run" in switched.stderr and len(_runs(out)) == 3
    assert json.loads((out / "summary.json").read_text())["agent"] == "mean"

    back = _run([*base, "--agent", _agent(tmp_path)])   # the first agent's code again: its kept run resumes
    assert back.exit_code == 0, back.output
    assert "replay already complete" in back.stderr and "resuming the kept run" in back.stderr and len(_runs(out)) == 3
    assert os.readlink(out / ".results") == f"runs/{run1.name}/.results"
    assert (out / "summary.json").read_bytes() == kept


def test_an_interrupted_run_resumes_exactly(inputs: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    args = ["audit", *inputs, "--agent", _agent(tmp_path), "--out", str(out), *FAST]
    monkeypatch.setenv("CRASH_STREAM", "s05")
    crashed = _run(args)
    assert crashed.exit_code == 3, crashed.output
    (run,) = _runs(out)
    assert len((run / "journal" / "done.jsonl").read_text().splitlines()) == 5   # s00..s04 finished
    assert not (out / "summary.json").exists()
    monkeypatch.delenv("CRASH_STREAM")
    resumed = _run(args)
    assert resumed.exit_code == 0, resumed.output
    assert "resuming: 5 of 8 shards done, 3 to replay" in resumed.stderr and "new run" not in resumed.stderr
    assert _runs(out) == [run]
    fresh = tmp_path / "fresh"
    assert _run([*args[:-len(FAST) - 2], "--out", str(fresh), *FAST]).exit_code == 0
    assert (out / "summary.json").read_bytes() == (fresh / "summary.json").read_bytes()


def test_a_run_of_the_earlier_layout_is_moved_and_resumed(inputs: list[str], tmp_path: Path) -> None:
    """OUT as ReplayLens kept it before runs/ (OUT/journal, OUT/.results -> .results-XXXX): the next audit moves it
    into OUT/runs/ (one line) and, when it is the same run, resumes it."""
    out = tmp_path / "out"
    args = ["audit", *inputs, "--agent", "mean", "--out", str(out), *FAST]
    assert _run(args).exit_code == 0
    (run,) = _runs(out)
    want = (out / "summary.json").read_bytes()
    old_set = os.readlink(run / ".results")
    (run / old_set / ".replaylens").unlink()   # the earlier layout: no marker, the journal and set in OUT itself
    shutil.move(run / "journal", out / "journal")
    shutil.move(run / old_set, out / old_set)
    (out / ".results").unlink()
    (out / ".results").symlink_to(old_set)
    shutil.rmtree(out / "runs")
    assert (out / "summary.json").read_bytes() == want
    res = _run(args)
    assert res.exit_code == 0, res.output
    assert "moved the earlier run" in res.stderr and "replay already complete" in res.stderr
    (moved,) = _runs(out)
    assert (moved / "journal" / "journal.json").is_file() and (moved / "summary.json").read_bytes() == want
    assert (out / "summary.json").read_bytes() == want and not (out / "journal").exists()
    assert not (out / old_set).exists()


def test_inputs_from_the_config_alone_and_no_required_noise(inputs: list[str], tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("REPLAYLENS_CONFIG", raising=False)
    helptext = _run(["audit", "--help-all"]).output + _run(["audit", "--help"]).output
    assert "[required]" not in helptext
    none = _run(["audit"])
    assert none.exit_code == 2 and len(none.stderr.splitlines()) == 1
    assert "replaylens.toml" in none.stderr and "pyproject.toml" in none.stderr
    (tmp_path / "replaylens.toml").write_text(f'history = "{inputs[1]}"\nagent = "mean"\n', encoding="utf-8")
    partial = _run(["audit"])
    assert partial.exit_code == 2 and len(partial.stderr.splitlines()) == 1, partial.output
    assert "--future, --utilities, --out" in partial.stderr and "replaylens.toml" in partial.stderr
    (tmp_path / "replaylens.toml").write_text(
        f'history = "{inputs[1]}"\nfuture = "{inputs[3]}"\nutilities = "{inputs[5]}"\nagent = "mean"\n'
        'out = "runs/ci"\ncells = ["value"]\nmaps = "1032"\nresamples = 200\nquiet = true\n', encoding="utf-8")
    ok = _run(["audit"])
    assert ok.exit_code == 0, ok.output
    assert len(_runs(tmp_path / "runs" / "ci")) == 1 and (tmp_path / "runs" / "ci" / "summary.json").is_file()


def test_switching_the_model_of_an_llm_agent_is_a_new_run(inputs: list[str], tmp_path: Path) -> None:
    """Each model setup has its own request journal (OUT/llm/<digest>/): a second model in one OUT is a new run,
    not a refused frozen manifest; the first model's command again resumes without a new request."""
    out = tmp_path / "out"
    base = ["audit", *inputs, "--agent", "llm", "--out", str(out), *FAST]
    first = _run([*base, "--model", "scripted/mean"])
    assert first.exit_code == 0, first.output
    (log,) = (out / "llm").glob("*/attempts.jsonl")
    asked = log.read_text()
    other = _run([*base, "--model", "scripted/latest"])
    assert other.exit_code == 0, other.output
    assert "new run" in other.stderr and len(_runs(out)) == 2 and len(list((out / "llm").iterdir())) == 2
    assert json.loads((out / "summary.json").read_text())["agent"] == "llm(scripted/latest)"
    back = _run([*base, "--model", "scripted/mean"])
    assert back.exit_code == 0 and "resuming the kept run" in back.stderr and len(_runs(out)) == 2
    assert log.read_text() == asked   # every answer read back from the journal: no new request
