"""Issue 26, points 1 and 5: the Python API locks OUT like the CLI, refuses a different run's results, publishes
a result set at once, and writes files with the user's umask (two real processes each)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from replaylens._durable import atomic_write

pytestmark = pytest.mark.slow  # end-to-end runs: left out of the fast subset (README)

_SRC = str(Path(__file__).resolve().parents[2] / "src")

# a child process: audit the small bandit into OUT with the mean agent; with a gate file, the agent waits
# for the gate to exist before its first decision (so the run holds OUT while the other process tries)
CHILD = textwrap.dedent("""
    import sys, time, pathlib, json
    from replaylens.agents import load_agent
    from replaylens.agents import from_callables
    from replaylens.errors import ConfigError
    from replaylens.report import audit
    from replaylens.bandit import make_bandit
    out, seed, gate = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    sub = make_bandit(n_streams=4, slots_per_block=8, n_future=4, rng=5)
    mean = load_agent("mean")
    def act(s, task, menu):
        if gate != "-":
            print("running", flush=True)
            while not pathlib.Path(gate).exists():
                time.sleep(0.05)
        return menu[0]
    agent = from_callables(lambda: None, lambda s, t, k, o: s, act, name="waiting") if gate != "-" else mean
    try:
        audit(sub.history, sub.futures, sub.evaluator, agent, cells="value", maps="1032", n_resamples=50,
              seed=seed, path="reference", out=out, overwrite="--overwrite" in sys.argv)
    except ConfigError as exc:
        print("refused:", exc, flush=True)
        sys.exit(2)
    print("done", flush=True)
""")


def _child(out: Path, seed: int, gate: str = "-", *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": _SRC}
    return subprocess.Popen([sys.executable, "-c", CHILD, str(out), str(seed), gate, *extra], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_processes_auditing_into_one_out(tmp_path: Path) -> None:
    out, gate = tmp_path / "out", tmp_path / "gate"
    first = _child(out, 0, str(gate))
    try:
        assert first.stdout is not None and first.stdout.readline().strip() == "running"
        second = _child(out, 0)
        so, se = second.communicate(timeout=120)
        assert second.returncode == 2, (so, se)
        assert "refused:" in so and "in use by another replaylens run" in so and "Traceback" not in se
    finally:
        gate.touch()
        so, se = first.communicate(timeout=120)
    assert first.returncode == 0 and "done" in so, se
    # the first run's results are whole; a different run is a new run beside it (issue 48), or replaces it
    man = json.loads((out / "manifest.json").read_text())
    assert man["agent"] == {"name": "waiting"}
    other = _child(out, 1)
    so, se = other.communicate(timeout=120)
    assert other.returncode == 0 and "new run" in se, (so, se)
    assert json.loads((out / "summary.json").read_text())["seed"] == 1 and len(list((out / "runs").iterdir())) == 2
    again = _child(out, 2, "-", "--overwrite")
    so, se = again.communicate(timeout=120)
    assert again.returncode == 0, (so, se)
    assert json.loads((out / "summary.json").read_text())["seed"] == 2 and len(list((out / "runs").iterdir())) == 2


def test_a_journal_alone_is_locked(tmp_path: Path) -> None:
    import threading

    from replaylens._durable import locked_dir
    from replaylens.agents import load_agent
    from replaylens.bandit import make_bandit
    from replaylens.errors import ConfigError
    from replaylens.report import audit

    sub = make_bandit(n_streams=4, slots_per_block=8, n_future=4, rng=5)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:  # another holder (a thread here; the lock is per holder, not per process)
        with locked_dir(tmp_path / "journal"):
            held.set()
            release.wait(60)

    t = threading.Thread(target=hold)
    t.start()
    held.wait(60)
    try:
        with pytest.raises(ConfigError, match="in use by another replaylens run"):
            audit(sub.history, sub.futures, sub.evaluator, load_agent("mean"), cells="value", maps="1032",
                  n_resamples=50, journal=str(tmp_path / "journal"))
    finally:
        release.set()
        t.join()


WRITER = textwrap.dedent("""
    import sys
    from replaylens.report import audit, write_results
    import json
    from replaylens.report._run import api_arguments, write_audit
    from replaylens.settings import AuditSettings
    from replaylens.replay import plan_replay
    from replaylens.agents import as_agent, load_agent
    from replaylens.bandit import make_bandit
    out, n, stop = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    sub = make_bandit(n_streams=4, slots_per_block=8, n_future=4, rng=5)
    res = []
    for seed, name in ((3, "mean"), (4, "latest")):
        agent = as_agent(load_agent(name))
        r = audit(sub.history, sub.futures, sub.evaluator, agent, cells="value", maps="1032", n_resamples=50,
                  seed=seed)
        plan = r.decisions.plan
        res.append((r, json.loads(json.dumps(api_arguments(sub.history, sub.futures, sub.evaluator, agent, plan,
                                                           AuditSettings(n_resamples=50))))))
    print("ready", flush=True)
    for i in range(n):
        r, ident = res[i % 2]
        write_audit(r, out, history=sub.history, futures=sub.futures, evaluator=sub.evaluator, arguments=ident)
    open(stop, "w").close()
""")

READER = textwrap.dedent("""
    import sys, json, os
    from replaylens.report import load_results
    out, stop = sys.argv[1], sys.argv[2]
    mixed = 0
    seen = set()
    while not os.path.exists(stop):
        try:
            f = load_results(out)
        except Exception as exc:  # a set removed under a slow reader: never a mixed one
            continue
        a = (f.summary["agent"], f.summary["seed"])
        b = (f.manifest["agent"]["name"], f.manifest["seeds"]["root"])
        seen.add(a)
        mixed += a != b
    print(json.dumps({"mixed": mixed, "seen": sorted(map(list, seen))}))
""")


@pytest.mark.slow
def test_a_reader_never_sees_a_mixed_result_set(tmp_path: Path) -> None:
    """A writer alternates two runs' result sets (each publish replaces the other, overwrite) while a reader
    loads OUT again and again: every set it loads is one run's summary with that run's manifest."""
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": _SRC}
    stop = tmp_path / "writer-done"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(out), "12", str(stop)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
    while not (out / "manifest.json").exists():
        time.sleep(0.01)
    reader = subprocess.run([sys.executable, "-c", READER, str(out), str(stop)], env=env, capture_output=True,
                            text=True, timeout=300)
    writer.communicate(timeout=300)
    assert writer.returncode == 0
    res = json.loads(reader.stdout)
    assert res["mixed"] == 0
    assert len(res["seen"]) == 2  # it read both runs' result sets while they replaced each other


def test_write_results_refuses_a_different_run(tmp_path: Path) -> None:
    from replaylens.agents import as_agent, load_agent
    from replaylens.bandit import make_bandit
    from replaylens.errors import ConfigError
    from replaylens.report import audit
    from replaylens.report._render import write_results
    from replaylens.report._run import api_arguments, write_audit
    from replaylens.settings import AuditSettings

    sub = make_bandit(n_streams=4, slots_per_block=8, n_future=4, rng=5)
    out = tmp_path / "out"
    a = audit(sub.history, sub.futures, sub.evaluator, load_agent("mean"), cells="value", maps="1032", n_resamples=50,
              out=out)
    b = audit(sub.history, sub.futures, sub.evaluator, load_agent("latest"), cells="value", maps="1032", n_resamples=50)
    ident = api_arguments(sub.history, sub.futures, sub.evaluator, as_agent(load_agent("latest")), b.decisions.plan,
                          AuditSettings(n_resamples=50))
    from replaylens.report import RunManifest

    man = RunManifest.model_validate(json.loads((out / "manifest.json").read_text()))
    with pytest.raises(ConfigError, match="different run"):
        write_results(b, man.model_copy(update={"arguments": ident}), out)
    assert json.loads((out / "summary.json").read_text())["agent"] == a.agent.name
    write_audit(b, out, history=sub.history, futures=sub.futures, evaluator=sub.evaluator,
                arguments=ident)  # overwrite=True inside
    assert json.loads((out / "summary.json").read_text())["agent"] == "latest"
    assert not [p for p in out.glob(".results-*") if p.resolve() != (out / ".results").resolve()]


# ---------------------------------------------------------------- 5. the user's umask


def test_outputs_get_the_users_umask(tmp_path: Path) -> None:
    from replaylens.agents import load_agent
    from replaylens.bandit import make_bandit
    from replaylens.report import audit

    sub = make_bandit(n_streams=4, slots_per_block=8, n_future=4, rng=5)
    from replaylens.records import write_history

    old = os.umask(0o022)
    try:
        atomic_write(tmp_path / "x.json", b"{}")
        write_history(sub.history, tmp_path / "h.jsonl")
        write_history(sub.history, tmp_path / "h.parquet")
        audit(sub.history, sub.futures, sub.evaluator, load_agent("mean"), cells="value", maps="1032",
              n_resamples=50, out=tmp_path / "out")
    finally:
        os.umask(old)
    for name in ("x.json", "h.jsonl", "h.parquet"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o644, name
    for name in ("summary.json", "manifest.json", "report.html", "decisions.parquet", "forest.png", "report.md"):
        assert stat.S_IMODE((tmp_path / "out" / name).stat().st_mode) == 0o644, name
    assert stat.S_IMODE((tmp_path / "out" / ".results").stat().st_mode) == 0o755
    (run,) = (tmp_path / "out" / "runs").iterdir()
    assert stat.S_IMODE(run.stat().st_mode) == 0o755
    for p in (run / "journal").iterdir():
        assert stat.S_IMODE(p.stat().st_mode) == 0o644, p
