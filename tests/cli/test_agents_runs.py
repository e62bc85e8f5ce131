"""A several-agent audit follows the run layout of a one-agent audit: each invocation is a run of OUT
(``OUT/runs/<UTC>-agents-…-<digest>/`` holding report.html and agents.json, linked as OUT's latest), the same command
resumes every agent's run and that comparison's run, OUT is locked throughout, and runs are kept and pruned alike."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from replaylens.bandit import make_bandit
from replaylens.cli._main import cli
from replaylens.records import write_evaluator, write_futures, write_history

FAST = ["--maps", "1032", "--resamples", "100", "--cells", "value", "--quiet"]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    d = tmp_path_factory.mktemp("agents")
    sub = make_bandit(n_streams=8, slots_per_block=4, n_future=2, rng=4)
    return ["--history", str(write_history(sub.history, d / "history.jsonl")),
            "--future", str(write_futures(sub.futures, d / "future.jsonl")),
            "--utilities", str(write_evaluator(sub.evaluator, d / "utilities.jsonl"))]


def _run(args: list[str]) -> Result:
    return CliRunner().invoke(cli, args)


def _runs(d: Path) -> list[str]:
    return sorted(p.name for p in (d / "runs").iterdir())


def _latest(out: Path) -> str:
    return os.readlink(out / ".results").split("/")[1]


def test_each_invocation_is_a_run_and_the_same_command_resumes_it(inputs: list[str], tmp_path: Path) -> None:
    out = tmp_path / "out"
    base = ["audit", *inputs, "--out", str(out), *FAST]
    first = _run([*base, "--agent", "mean", "--agent", "latest"])
    assert first.exit_code == 0, first.output
    (run1,) = _runs(out)
    assert "-agents-mean-latest-" in run1 and _latest(out) == run1
    assert os.readlink(out / "report.html") == ".results/report.html"
    assert os.readlink(out / "agents.json") == ".results/agents.json"
    index_bytes = (out / "agents.json").read_bytes()
    index = json.loads((out / "agents.json").read_text())
    (mean1,) = _runs(out / "mean")
    assert [a["run"] for a in index["agents"]] == [f"mean/runs/{mean1}", f"latest/runs/{_runs(out / 'latest')[0]}"]

    again = _run([*base, "--agent", "mean", "--agent", "latest"])   # the same command: every run resumed, none new
    assert again.exit_code == 0 and again.stderr.count("replay already complete") == 2, again.output
    assert "new run" not in again.stderr and _runs(out) == [run1] and _runs(out / "mean") == [mean1]
    assert (out / "agents.json").read_bytes() == index_bytes   # the same comparison (report.html: a new timestamp)

    other = _run([*base, "--agent", "mean", "--agent", "best"])   # other agents: a new run of OUT, the first kept
    assert other.exit_code == 0, other.output
    assert other.stderr.count("replay already complete") == 1 and _runs(out / "mean") == [mean1], other.output
    notes = [ln for ln in other.stderr.splitlines() if f"new run {out / 'runs'}" in ln]
    assert len(notes) == 1 and "(different agents)" in notes[0] and run1 in notes[0] and "kept beside it" in notes[0]
    run2 = _latest(out)
    assert sorted(_runs(out)) == sorted([run1, run2]) and "-agents-mean-best-" in run2
    assert (out / "runs" / run1 / "agents.json").read_bytes() == index_bytes   # the earlier comparison, as it was

    back = _run([*base, "--agent", "mean", "--agent", "latest"])   # back to the first: its kept run is the latest
    assert back.exit_code == 0 and f"resuming the kept run {out / 'runs' / run1}" in back.stderr, back.output
    assert _latest(out) == run1 and len(_runs(out)) == 2
    assert json.loads((out / "agents.json").read_text())["agents"] == index["agents"]


def _mine(d: Path) -> Path:
    """An agent file (``mine``: the first menu entry; edit ``sorted(m)[0]`` to change it)."""
    agent = d / "mine.py"
    agent.write_text("from replaylens.agents import from_callables\n\ndef make():\n"
                     "    return from_callables(dict, lambda s, t, k, o: s, lambda s, t, m: sorted(m)[0],\n"
                     "                          name='mine')\n")
    return agent


def test_a_changed_agent_names_itself_and_restart_and_overwrite_apply(inputs: list[str], tmp_path: Path) -> None:
    out = tmp_path / "out"
    agent = _mine(tmp_path)
    base = ["audit", *inputs, "--out", str(out), *FAST, "--agent", "mean", "--agent", f"{agent}:make"]
    assert _run(base).exit_code == 0
    (run1,) = _runs(out)
    agent.write_text(agent.read_text().replace("sorted(m)[0]", "sorted(m)[-1]"))
    edited = _run(base)
    assert edited.exit_code == 0, edited.output
    assert "agent code changed (mine.py)" in edited.stderr   # the agent's own run says why
    line = next(ln for ln in edited.stderr.splitlines() if f"new run {out / 'runs'}" in ln)
    assert f"(new runs of {agent}:make)" in line, line
    restarted = _run([*base, "--restart"])
    assert restarted.exit_code == 0 and "replay already complete" not in restarted.stderr, restarted.output
    over = _run([*base[:-4], "--agent", "mean", "--agent", "latest", "--overwrite"])
    assert over.exit_code == 0, over.output
    assert len(_runs(out)) == 2 and _latest(out) in _runs(out) and run1 in _runs(out)   # the latest replaced
    assert len(_runs(out / "mean")) == 1   # --overwrite applied in each agent's directory too


def test_out_is_locked_throughout_and_a_failure_leaves_no_run(inputs: list[str], tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)   # another run holds OUT
        res = _run(["audit", *inputs, "--out", str(out), *FAST, "--agent", "mean", "--agent", "latest"])
    finally:
        os.close(fd)
    assert res.exit_code == 2 and "in use by another replaylens run" in res.stderr, res.output
    assert os.listdir(out) == []   # no agent replayed, nothing written
    crash = tmp_path / "crash.py"
    crash.write_text("from replaylens.agents import from_callables\n\ndef make():\n"
                     "    def act(s, t, m):\n        raise RuntimeError('no')\n"
                     "    return from_callables(dict, lambda s, t, k, o: s, act, name='crash')\n")
    bad = _run(["audit", *inputs, "--out", str(out), *FAST, "--agent", "mean", "--agent", f"{crash}:make"])
    assert bad.exit_code == 3, bad.output
    assert not (out / "runs").exists() and not (out / "report.html").exists() and (out / "mean" / "runs").is_dir()


def test_one_agent_and_several_agents_in_one_out_leave_no_dangling_link(inputs: list[str], tmp_path: Path) -> None:
    out = tmp_path / "out"
    base = ["audit", *inputs, "--out", str(out), *FAST]
    assert _run([*base, "--agent", "mean", "--agent", "latest"]).exit_code == 0
    assert _run([*base, "--agent", "sum"]).exit_code == 0
    assert not (out / "agents.json").is_symlink() and (out / "summary.json").is_file()
    assert json.loads((out / "summary.json").read_text())["agent"] == "sum"
    assert _run([*base, "--agent", "mean", "--agent", "latest"]).exit_code == 0
    assert not (out / "summary.json").is_symlink() and (out / "agents.json").is_file()
    for p in out.iterdir():
        assert not p.is_symlink() or p.exists(), p


def test_several_agent_runs_are_kept_and_pruned_alike(inputs: list[str], tmp_path: Path) -> None:
    out = tmp_path / "out"
    base = ["audit", *inputs, "--out", str(out), *FAST, "--keep-runs", "2", "--agent", "mean", "--agent", "latest"]
    for seed in ("1", "2", "3"):   # (another seed: another plan, new runs of both agents)
        assert _run([*base, "--seed", seed]).exit_code == 0
    assert len(_runs(out)) == 2 and len(_runs(out / "mean")) == 2   # each agent's directory keeps its own two
    res = _run(["prune", str(out), "--keep", "1"])
    assert res.exit_code == 0, res.output
    assert len(_runs(out)) == 1 and len(_runs(out / "mean")) == 1 and len(_runs(out / "latest")) == 1
    assert "removed 3 runs" in res.stdout and "agents' directories" in res.stdout
    latest = json.loads((out / "agents.json").read_text())["agents"]
    assert all((out / a["run"] / "report.html").is_file() for a in latest)   # the latest comparison's runs stay


def test_a_run_a_kept_comparison_links_is_never_pruned(inputs: list[str], tmp_path: Path) -> None:
    """An agent's run stays while a kept comparison of OUT links it -- whoever prunes its directory: a one-agent
    audit into it, ``prune``, or the next comparison (which removes it once no kept comparison links it)."""
    out = tmp_path / "out"
    agent = _mine(tmp_path)
    pair = ["audit", *inputs, "--out", str(out), *FAST, "--agent", "mean", "--agent", f"{agent}:make"]
    assert _run(pair).exit_code == 0
    (first,) = _runs(out / "mine")
    agent.write_text(agent.read_text().replace("sorted(m)[0]", "sorted(m)[-1]"))
    alone = _run(["audit", *inputs, "--out", str(out / "mine"), *FAST, "--agent", f"{agent}:make",
                  "--keep-runs", "1"])   # the user iterates on the agent in its own directory
    assert alone.exit_code == 0, alone.output
    assert first in _runs(out / "mine") and len(_runs(out / "mine")) == 2, alone.output   # linked: kept
    assert "removed" not in alone.stderr
    links = json.loads((out / "agents.json").read_text())["agents"]
    assert all((out / a["run"] / "report.html").is_file() for a in links)   # OUT's comparison still whole
    res = _run(["prune", str(out), "--keep", "1"])
    assert res.exit_code == 0 and "removed 0 runs" in res.stdout and len(_runs(out / "mine")) == 2, res.output

    again = _run([*pair, "--keep-runs", "1"])   # the edited agent compared: the first comparison goes, then its run
    assert again.exit_code == 0, again.output
    assert first not in _runs(out / "mine") and len(_runs(out / "mine")) == 1 and len(_runs(out)) == 1
    assert "removed 1 earlier agent run (--keep-runs 1: each agent's directory keeps its most recent complete " \
           "run and every run a kept comparison links)" in again.stderr, again.output
    links = json.loads((out / "agents.json").read_text())["agents"]
    assert all((out / a["run"] / "report.html").is_file() for a in links)
