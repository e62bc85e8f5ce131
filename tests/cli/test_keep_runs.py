"""Runs under OUT/runs are pruned: an audit keeps OUT's ``--keep-runs`` most recently published complete runs (the
one just written among them), ``replaylens prune OUT --keep N`` applies the same policy, and neither ever removes an
interrupted run, a directory without ReplayLens's run marker or a run another holder has locked."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from replaylens.bandit import make_bandit
from replaylens.cli._main import cli
from replaylens.errors import ConfigError
from replaylens.records import write_evaluator, write_futures, write_history
from replaylens.report import prune_runs
from replaylens.report._publish import new_run
from replaylens.settings import DEFAULT_KEEP_RUNS, keep_runs

FAST = ["--maps", "1032", "--resamples", "100", "--cells", "value", "--quiet"]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    d = tmp_path_factory.mktemp("keep")
    sub = make_bandit(n_streams=8, slots_per_block=4, n_future=2, rng=3)
    return ["--history", str(write_history(sub.history, d / "history.jsonl")),
            "--future", str(write_futures(sub.futures, d / "future.jsonl")),
            "--utilities", str(write_evaluator(sub.evaluator, d / "utilities.jsonl"))]


def _run(args: list[str]) -> Result:
    return CliRunner().invoke(cli, args)


def _names(out: Path) -> list[str]:
    return sorted(p.name for p in (out / "runs").iterdir())


def _fake_run(out: Path, label: str, published_ns: int | None) -> Path:
    """A run directory as ReplayLens makes it; ``published_ns``: when its result set was published (None: an
    interrupted run, a journal and no set)."""
    run = new_run(out, f"{label:0<64}"[:64], label)
    (run / "journal").mkdir()
    (run / "journal" / "done.jsonl").write_text('{"shard": 0}\n')
    if published_ns is not None:
        (run / ".results-x").mkdir()
        (run / ".results").symlink_to(".results-x")
        os.utime(run / ".results", ns=(published_ns, published_ns), follow_symlinks=False)
    return run


def test_the_default_lives_in_settings_and_bad_values_are_one_line() -> None:
    assert DEFAULT_KEEP_RUNS == 20
    assert keep_runs(3) == 3 and keep_runs("5") == 5 and keep_runs("all") is None and keep_runs(None) is None
    for bad in (0, -1, "x", True, 1.5):
        with pytest.raises(ConfigError, match="keep_runs must be a number of runs"):
            keep_runs(bad)   # type: ignore[arg-type]


def test_pruning_keeps_the_most_recently_published_and_never_what_is_not_a_complete_run(tmp_path: Path) -> None:
    out = tmp_path / "out"
    s = 10**18
    runs = [_fake_run(out, f"a{k}", s + k * 10**9) for k in range(6)]   # a0 oldest ... a5 newest
    resumed = _fake_run(out, "old", s - 10**9)                          # made first ...
    os.utime(resumed / ".results", ns=(s + 9 * 10**9,) * 2, follow_symlinks=False)   # ... published last (a resume)
    interrupted = _fake_run(out, "int", None)
    user = out / "runs" / "my-notes"          # a user's directory: no marker
    user.mkdir()
    fake = out / "runs" / "20990101T000000Z-x-000000000000"   # looks like a run, no marker
    (fake / ".results-x").mkdir(parents=True)
    (fake / ".results").symlink_to(".results-x")
    (out / "runs" / "link").symlink_to(runs[0])   # a link to a run is not a run

    assert prune_runs(out, None) == []   # keep every run
    would = prune_runs(out, 3, dry_run=True)
    assert would == runs[:4] and all(r.is_dir() for r in runs)   # oldest first; nothing removed
    assert prune_runs(out, 3) == runs[:4]
    left = set(_names(out))
    assert left == {resumed.name, runs[5].name, runs[4].name, interrupted.name, "my-notes", fake.name, "link"}
    assert not any(n.startswith(".pruned-") for n in left)
    # the latest run of OUT and the protected one stay, and count among the kept
    (out / ".results").symlink_to(f"runs/{runs[4].name}/.results")
    assert prune_runs(out, 1, protect=[runs[5]]) == [resumed]
    assert {runs[4].name, runs[5].name, interrupted.name} <= set(_names(out))


def test_a_run_another_holder_has_locked_is_never_removed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    old, mid, new = (_fake_run(out, n, 10**18 + k) for k, n in enumerate(("old", "mid", "new")))
    fd = os.open(old, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)   # another process's lock on that run
        assert prune_runs(out, 1) == [mid]
        assert old.is_dir() and (old / ".replaylens").is_file() and new.is_dir()
    finally:
        os.close(fd)
    assert prune_runs(out, 1) == [old]


def test_prune_interrupted_removes_interrupted_runs_too_but_never_a_locked_one(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = [_fake_run(out, f"d{k}", 10**18 + k) for k in range(2)]
    stopped, held = _fake_run(out, "stop", None), _fake_run(out, "held", None)
    fd = os.open(held, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)   # a process still holds that run
        assert prune_runs(out, 5, interrupted=True, dry_run=True) == [stopped]
        dry = _run(["prune", str(out), "--keep", "all", "--interrupted", "--dry-run"])
        assert dry.exit_code == 0 and f"would remove {stopped}\n" in dry.stdout and stopped.is_dir(), dry.output
        assert "would remove 1 run" in dry.stdout
        res = _run(["prune", str(out), "--keep", "all", "--interrupted"])
        assert res.exit_code == 0 and f"removed {stopped}\n" in res.stdout and "removed 1 run" in res.stdout, res.output
        assert not stopped.exists() and held.is_dir() and all(d.is_dir() for d in done)
    finally:
        os.close(fd)
    assert prune_runs(out, 1, interrupted=True) == [done[0], held]   # complete runs first (oldest first), then these
    assert _names(out) == [done[1].name]


def test_prune_is_refused_while_another_run_holds_out(tmp_path: Path) -> None:
    out = tmp_path / "out"
    for k in range(3):
        _fake_run(out, f"r{k}", 10**18 + k)
    fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)   # what a running audit holds on OUT
        res = _run(["prune", str(out), "--keep", "1"])
        assert res.exit_code == 2 and res.stderr.count("\n") == 1 and "in use by another replaylens run" in res.stderr
        assert len(_names(out)) == 3
    finally:
        os.close(fd)
    dry = _run(["prune", str(out), "--keep", "1", "--dry-run"])
    assert dry.exit_code == 0 and dry.stdout.count("would remove ") == 3 and len(_names(out)) == 3, dry.output
    res = _run(["prune", str(out), "--keep", "1"])
    assert res.exit_code == 0 and len(_names(out)) == 1 and "removed 2 runs" in res.stdout, res.output
    bad = _run(["prune", str(tmp_path / "nowhere")])
    assert bad.exit_code == 2 and len(bad.stderr.splitlines()) == 1 and "OUT/runs is missing" in bad.stderr


def test_an_audit_keeps_its_runs_and_resumes_after_pruning(inputs: list[str], tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    base = ["audit", *inputs, "--out", str(out), *FAST, "--keep-runs", "2"]
    first = _run([*base, "--agent", "mean"])
    assert first.exit_code == 0, first.output
    (mean,) = _names(out)
    assert _run([*base, "--agent", "sum"]).exit_code == 0 and len(_names(out)) == 2
    third = _run([*base, "--agent", "latest"])
    assert third.exit_code == 0, third.output
    assert mean not in _names(out) and len(_names(out)) == 2
    notes = [ln for ln in third.stderr.splitlines() if "removed" in ln]
    assert notes == [f"replaylens: removed the earlier run {out / 'runs' / mean} (--keep-runs 2: {out} keeps its 2 "
                     "most recent complete runs)"]
    # a kept run's command resumes it (nothing replayed) and makes it the latest; it is then the most recent
    sum_again = _run([*base, "--agent", "sum"])
    assert sum_again.exit_code == 0 and "replay already complete" in sum_again.stderr, sum_again.output
    assert "removed" not in sum_again.stderr and json.loads((out / "summary.json").read_text())["agent"] == "sum"
    # a pruned run's command is a new run, identical to the first
    again = _run([*base, "--agent", "mean"])
    assert again.exit_code == 0 and "new run" in again.stderr, again.output
    assert json.loads((out / "summary.json").read_text())["rows"] == \
        json.loads((out / "runs" / sorted(_names(out))[-1] / "summary.json").read_text())["rows"]
    assert "latest" not in " ".join(_names(out))   # the run published longest ago went, not the oldest made
    # an interrupted run is never counted or removed, and resumes after pruning
    crash = tmp_path / "crash.py"
    crash.write_text("import os\nfrom replaylens.agents import from_callables\n\ndef make():\n"
                     "    def act(s, task, menu):\n"
                     "        if task.stream == os.environ.get('CRASH_STREAM'):\n            raise RuntimeError('x')\n"
                     "        return sorted(menu)[0]\n"
                     "    return from_callables(dict, lambda s, t, k, o: s, act, name='crashy')\n")
    monkeypatch.setenv("CRASH_STREAM", "s04")
    assert _run([*base, "--agent", f"{crash}:make"]).exit_code == 3
    (interrupted,) = [n for n in _names(out) if "crashy" in n]
    monkeypatch.delenv("CRASH_STREAM")
    for agent in ("count", "best"):
        assert _run([*base, "--agent", agent]).exit_code == 0
    assert interrupted in _names(out) and len(_names(out)) == 3
    resumed = _run([*base, "--agent", f"{crash}:make"])
    assert resumed.exit_code == 0 and "resuming: 4 of 8 shards done" in resumed.stderr, resumed.output
    assert interrupted in _names(out) and len(_names(out)) == 2


def test_keep_runs_from_the_config_and_all(inputs: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("REPLAYLENS_CONFIG", raising=False)
    config = tmp_path / "replaylens.toml"
    config.write_text(f'history = "{inputs[1]}"\nfuture = "{inputs[3]}"\nutilities = "{inputs[5]}"\nout = "o"\n'
                      'cells = ["value"]\nmaps = "1032"\nresamples = 100\nquiet = true\nkeep_runs = 1\n')
    for agent in ("mean", "sum"):
        assert _run(["audit", "--agent", agent]).exit_code == 0
    assert len(_names(tmp_path / "o")) == 1
    assert _run(["audit", "--agent", "count", "--keep-runs", "all"]).exit_code == 0   # the command line wins
    assert len(_names(tmp_path / "o")) == 2
    config.write_text(config.read_text().replace("keep_runs = 1", "keep_runs = 0"))
    res = _run(["audit", "--agent", "count"])
    assert res.exit_code == 2 and res.stderr.splitlines() == [
        f"replaylens: error: {config}: keep_runs: 0 is not a number of runs (>= 1) or 'all'"], res.output
    assert "--keep-runs" in _run(["audit", "--help-all"]).stdout
