"""The pytest plugin (issue 24): the documented example passes for the Mean agent, and a first-record
agent fails with the documented message (cell, share, one changed decision with records before/after)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from replaylens.agents import from_callables, load_agent
from replaylens.pytest_plugin import assert_invariant, assert_responds

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs" / "examples" / "test_agent_invariance.py"

FIRST_RECORD = '''
from replaylens.agents import from_callables
from replaylens.pytest_plugin import assert_invariant


def first_record_agent():
    """Always picks the action of the first record it saw: depends on record order."""
    return from_callables(lambda: None, lambda s, task, key, outcome: key if s is None else s,
                          lambda s, task, menu: s if s in menu else menu[0], name="first-record")


def test_first_record_agent_is_order_invariant():
    assert_invariant(first_record_agent(), cells="pair,reorder")
'''


def _pytest(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """pytest in a subprocess with only this plugin loaded (as the pytest11 entry point loads it once the
    package is installed; ``-p`` here, so the check does not depend on how this checkout was installed)."""
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "replaylens.pytest_plugin", "-p", "no:cacheprovider",
                           "-q", "-W", "error", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_the_documented_example_passes_for_the_mean_agent(tmp_path: Path) -> None:
    res = _pytest("--strict-markers", str(EXAMPLE), cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert re.search(r"\b2 passed\b", res.stdout)


def test_a_first_record_agent_fails_with_the_documented_message(tmp_path: Path) -> None:
    (tmp_path / "test_first.py").write_text(FIRST_RECORD, encoding="utf-8")
    res = _pytest(str(tmp_path / "test_first.py"), cwd=tmp_path)
    assert res.returncode == 1 and re.search(r"\b1 failed\b", res.stdout), res.stdout[-3000:]
    out = res.stdout
    assert "AssertionError: ReplayLens: agent 'first-record' is not invariant to pair (reordering intact records): " \
           in out
    m = re.search(r"not invariant to pair \(reordering intact records\): (\d+) of (\d+) decisions changed "
                  r"\((\d+\.\d)%, margin 0%\)", out)
    assert m is not None and int(m.group(1)) > 0
    assert re.search(r"changed decision: stream \S+, task \S+ \(.*\), map id, draw 0: (\w+) -> (?!\1)\w+ "
                     r"\(utility", out)
    assert "records before -> after:" in out and re.search(r"slot \d+ \[.*\]: before \(.*\) -> after \(", out)
    # issue 48: the failure shows the message, not the plugin's own source (its frames are hidden)
    assert "raise AssertionError" not in out and "def _check(" not in out and "__tracebackhide__" not in out


def test_helpers_return_the_audit_and_raise_assertion_errors() -> None:
    res = assert_invariant(load_agent("mean"), cells="pair", n_streams=4, n_future=4, n_resamples=200)
    assert res.row("pair").n_changed == 0
    with pytest.raises(AssertionError, match=r"agent 'mean' does not respond to pair"):
        assert_responds(load_agent("mean"), cells="pair", n_streams=4, n_future=4, n_resamples=200)
    with pytest.raises(AssertionError, match=r"is not invariant to value .*decisions changed"):
        assert_invariant("mean", cells="value", n_streams=4, n_future=4, n_resamples=200)


def test_a_stochastic_agent_is_judged_on_the_repeat_corrected_interval() -> None:
    """A history-blind random agent: its raw decisions change between replays by decoding noise alone; with
    repeats (the default for a stochastic agent) T_gr reads that as no change, so the test is not flaky."""
    agent = from_callables(lambda: 0, lambda s, t, k, u: s, lambda s, t, m, rng: m[int(rng.integers(len(m)))],
                           name="random", stochastic=True)
    for seed in (0, 1, 2):
        res = assert_invariant(agent, cells="pair,reorder", seed=seed, n_streams=8, n_future=8, n_resamples=500)
        assert res.row("pair").action_name.startswith("T_gr") and res.row("pair").n_changed > 0


def test_identical_audits_run_once_per_session() -> None:
    """Issue 48: an assertion on the same agent, inputs and plan reuses the session's audit."""
    first = assert_invariant("mean", cells="pair", n_streams=4, n_future=4, n_resamples=200)
    again = assert_invariant("mean", cells="pair", n_streams=4, n_future=4, n_resamples=200)
    other = assert_invariant("mean", cells="pair", n_streams=4, n_future=4, n_resamples=200, seed=3)
    assert again is first and other is not first


SEEDED = '''
from replaylens.pytest_plugin import assert_invariant


def test_one():
    res = assert_invariant("mean", cells="pair", n_streams=4, n_future=4)
    assert res.seed == 7 and res.n_resamples == 300


def test_two():
    assert_invariant("count", cells="pair", n_streams=4, n_future=4)
'''


def test_seed_resamples_and_report_dir_options(tmp_path: Path) -> None:
    """Issue 48: --replaylens-seed / --replaylens-resamples set the helpers' defaults; --replaylens-report-dir
    writes each audited test's report under its own directory."""
    (tmp_path / "test_seeded.py").write_text(SEEDED, encoding="utf-8")
    res = _pytest(str(tmp_path / "test_seeded.py"), "--replaylens-seed", "7", "--replaylens-resamples", "300",
                  "--replaylens-report-dir", str(tmp_path / "rep"), cwd=tmp_path)
    assert res.returncode == 0 and re.search(r"\b2 passed\b", res.stdout), res.stdout[-3000:]
    reports = sorted(p.parent.name for p in (tmp_path / "rep").glob("*/report.html"))
    assert reports == ["test_seeded.py_test_one", "test_seeded.py_test_two"]
