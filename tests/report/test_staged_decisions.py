"""decisions.parquet is written from the end of the replay, beside the statistics (issue 27): the published
file is the one written after the statistics before, and a run that fails after its replay leaves neither a
staging file nor a result set."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from replaylens.agents import load_agent
from replaylens.bandit import make_bandit
from replaylens.report import _run, audit


def _audit(out: Path) -> None:
    sub = make_bandit(n_streams=4, slots_per_block=8, n_future=4, rng=5)
    audit(sub.history, sub.futures, sub.evaluator, load_agent("mean"), cells="value,pair", maps="1032",
          n_resamples=50, seed=3, out=out)


def test_the_published_decisions_equal_the_table_and_no_staging_file_is_left(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _audit(out)
    assert not list(out.glob(".writing-*"))
    sub = make_bandit(n_streams=4, slots_per_block=8, n_future=4, rng=5)
    res = audit(sub.history, sub.futures, sub.evaluator, load_agent("mean"), cells="value,pair", maps="1032",
                n_resamples=50, seed=3)
    pd.testing.assert_frame_equal(pd.read_parquet(out / "decisions.parquet"), res.decisions.frame())


def test_a_run_failing_after_its_replay_leaves_no_staging_file(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    staged: list[Path] = []
    real = _run.StagedDecisions

    class Watched(real):  # type: ignore[misc, valid-type]
        def __init__(self, *a: object, **k: object) -> None:
            super().__init__(*a, **k)
            staged.append(self.path)

    def broken(*a: object, **k: object) -> None:
        raise RuntimeError("statistics failed")

    monkeypatch.setattr(_run, "StagedDecisions", Watched)
    monkeypatch.setattr(_run, "summarize", broken)
    with pytest.raises(RuntimeError, match="statistics failed"):
        _audit(out)
    assert len(staged) == 1 and staged[0].parent == out   # the writer had started
    assert not staged[0].exists() and not list(out.glob(".writing-*"))
    assert not (out / "decisions.parquet").exists() and not (out / "summary.json").exists()


def test_a_run_handed_its_evaluator_releases_the_table_and_reports_the_same(tmp_path: Path) -> None:
    """``release_utilities``: the run lets go of a file-read utility table once its replay has read it; the
    summary and manifest are those of a run that keeps it, the fingerprint stays, a later lookup says why not."""
    from replaylens.records import read_evaluator, write_evaluator
    from replaylens.report import load_results, run_audit
    from replaylens.settings import AuditSettings

    sub = make_bandit(n_streams=6, slots_per_block=8, n_future=4, rng=5)
    path = write_evaluator(sub.evaluator, tmp_path / "u.parquet")
    settings = AuditSettings(cells=("value", "pair"), n_resamples=60, seed=3)
    kept, handed = read_evaluator(path), read_evaluator(path)
    a = run_audit(sub.history, sub.futures, kept, load_agent("mean"), settings, out=tmp_path / "a")
    b = run_audit(sub.history, sub.futures, handed, load_agent("mean"), settings, out=tmp_path / "b",
                  release_utilities=True)
    assert a.summary() == b.summary() and handed.fingerprint() == kept.fingerprint()
    assert load_results(tmp_path / "a").manifest["inputs"] == load_results(tmp_path / "b").manifest["inputs"]
    task = sub.futures.tasks[0]
    assert kept.utilities(task).tolist() == sub.evaluator.utilities(task).tolist()
    with pytest.raises(RuntimeError, match="released"):
        handed.utilities(task)
    with pytest.raises(RuntimeError, match="released"):
        len(handed.table)
    sub.evaluator.release()   # a table given as a mapping is the caller's: left as it is
    assert sub.evaluator.utilities(task).tolist() == kept.utilities(task).tolist()


class _KeyMeans:
    """Per-key means with a state fingerprint (a state-level response is read from the run's prepared replay)."""

    name = "key-means"

    def init_state(self) -> tuple[Any, ...]:
        return ()

    def update(self, state: tuple[Any, ...], task: str, key: str, outcome: float) -> tuple[Any, ...]:
        d = dict(state)
        n, m = d.get(key, (0, 0.0))
        d[key] = (n + 1, m + (outcome - m) / (n + 1))
        return tuple(sorted(d.items()))

    def act(self, state: tuple[Any, ...], task: str, menu: tuple[str, ...], rng: object) -> str:
        d = dict(state)
        return max(menu, key=lambda a: (d.get(a, (0, 0.0))[1], a))

    def state_fingerprint(self, state: tuple[Any, ...]) -> tuple[Any, ...]:
        return state


def test_state_responses_come_from_the_runs_own_prepared_replay(tmp_path: Path) -> None:
    """An agent with state fingerprints: the audit's state responses (read from the replay it prepared, its
    utility table released before the agent ran) are those of a fresh preparation from the inputs."""
    from replaylens.agents import Agent
    from replaylens.records import read_evaluator, write_evaluator
    from replaylens.report import run_audit, state_responses
    from replaylens.settings import AuditSettings

    sub = make_bandit(n_streams=4, slots_per_block=6, n_future=3, rng=11)
    path = write_evaluator(sub.evaluator, tmp_path / "u.parquet")
    w = _KeyMeans()
    agent = Agent("key-means", w, w)
    handed = read_evaluator(path)
    res = run_audit(sub.history, sub.futures, handed, agent, AuditSettings(cells=("value", "pair"), n_resamples=40),
                    release_utilities=True)
    fresh = state_responses(sub.history, sub.futures, read_evaluator(path), agent, res.decisions.plan)
    assert res.settings["state_response"] == fresh and fresh["value"]["changed"] > 0
    with pytest.raises(RuntimeError, match="released"):
        handed.utilities(sub.futures.tasks[0])


def test_the_table_is_flushed_while_it_is_written_and_the_flusher_stops(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The staging file's pages go to disk every FLUSH_EVERY seconds while the encoder writes (the final fsync
    then has little left), on the staging file itself; the flushing thread ends with the write."""
    import os
    import threading
    import time

    from replaylens.report import _staged

    sub = make_bandit(n_streams=4, slots_per_block=8, n_future=4, rng=5)
    res = audit(sub.history, sub.futures, sub.evaluator, load_agent("mean"), cells="value,pair", maps="1032",
                n_resamples=50, seed=3)
    flushed: list[int] = []
    real_sync = os.fdatasync

    def counted(fd: int) -> None:
        flushed.append(os.fstat(fd).st_ino)
        real_sync(fd)

    real_write = type(res.decisions).to_parquet

    def slow(self: object, path: object, **kw: object) -> None:
        time.sleep(0.3)   # long enough for a few flushes
        real_write(self, path, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(_staged, "FLUSH_EVERY", 0.05)
    monkeypatch.setattr(_staged.os, "fdatasync", counted)
    monkeypatch.setattr(type(res.decisions), "to_parquet", slow)
    staged = _staged.StagedDecisions(res.decisions, tmp_path)
    inode = None
    while inode is None:
        try:
            inode = staged.path.stat().st_ino
        except FileNotFoundError:
            time.sleep(0.01)
    staged.move_to(tmp_path / "decisions.parquet")
    assert len(flushed) >= 2 and set(flushed) == {inode}
    assert not [t for t in threading.enumerate() if t.name == "replaylens-decisions-flush"]
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "decisions.parquet"), res.decisions.frame())
