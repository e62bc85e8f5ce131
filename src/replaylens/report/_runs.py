"""Private: the runs of one output directory during one audit (issue 48).

Each audit into ``OUT`` that is not a resume becomes a run of its own under ``OUT/runs/`` (see
:mod:`replaylens.report._publish`); the run a rerun resumes is the kept run made for the same journal key.
What a failed invocation made and holds no finished work of (a new run directory, an empty OUT) is removed,
so a configuration error leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .._durable import remove_ours
from ..replay import Journal
from ._publish import RUNS, check_slots, current_run, find_run, link_latest, move_earlier_layout, new_run, prune_runs

__all__ = ["OutRuns"]


class OutRuns:
    """Which run of ``out`` this audit is (chosen once its journal key is known), and what it made.

    ``names``: the result names linked in OUT; ``label``: the agent's name, part of a new run's directory name;
    ``overwrite``: the new run replaces OUT's latest run (removed once the new one is published) instead of
    keeping it beside; ``keep_runs``: the complete runs OUT keeps once this one is published (the most recent;
    None: every run, see :func:`~replaylens.report._publish.prune_runs`); ``announce``: receives the one line
    saying a new run was started beside earlier ones (or earlier runs were removed)."""

    def __init__(self, out: Path, names: tuple[str, ...], *, label: str, overwrite: bool,
                 announce: Callable[[str], None], keep_runs: int | None = None) -> None:
        self.out = out
        self.names = names
        self.label = label
        self.overwrite = overwrite
        self.keep_runs = keep_runs
        self.announce = announce
        self.fresh_out = not (out.exists() or out.is_symlink())
        self.held = False   # this invocation holds OUT's lock (only then is anything removed after a failure)
        self.run: Path | None = None
        self.made_run = False
        self.previous: Path | None = None

    def check(self) -> None:
        """Once OUT's lock is held, before any replay: refuse what is in the way of the result links, and move a run an
        earlier ReplayLens kept in OUT itself into ``OUT/runs/``."""
        self.held = True
        check_slots(self.out, self.names)
        moved = move_earlier_layout(self.out, Journal.digest, "earlier", self.names)
        if moved is not None:
            self.announce(f"moved the earlier run kept in {self.out} to {self._rel(moved)} (runs are kept side by "
                          "side now)")
        self.previous = current_run(self.out)

    def _rel(self, run: Path) -> str:
        return str(self.out / RUNS / run.name)

    def choose(self, key: Mapping[str, Any]) -> Path:
        """The journal directory of the run made for ``key``: a kept run's (a resume), or a new run's."""
        digest = Journal.digest(key)
        found = find_run(self.out, digest)
        prev = self.previous
        if found is not None:
            self.run = found
            if prev is not None and prev != found:
                self.announce(f"resuming the kept run {self._rel(found)} (the same inputs, agent, code and plan); "
                              "it is the latest again")
            return found / "journal"
        self.run = new_run(self.out, digest, self.label)
        self.made_run = True
        if prev is not None:
            old = Journal.stored(prev / "journal")
            why = Journal.change(old, key) if old is not None else "a different run"
            kept = (f"it replaces the earlier run {self._rel(prev)}" if self.overwrite else
                    f"the earlier run {self._rel(prev)} is kept beside it")
            self.announce(f"new run {self._rel(self.run)} ({why}); {kept}")
        return self.run / "journal"

    def publish(self) -> None:
        """Make the chosen run (its result set published) OUT's latest; with ``overwrite``, remove the previous
        latest run; then keep only the ``keep_runs`` most recent complete runs (one line names what went)."""
        assert self.run is not None
        link_latest(self.out, self.run, self.names)
        if self.overwrite and self.previous is not None and self.previous != self.run:
            remove_ours(self.previous)
        gone = prune_runs(self.out, self.keep_runs, protect=[self.run])
        if gone:
            what = (f"the earlier run {self._rel(gone[0])}" if len(gone) == 1 else
                    f"{len(gone)} earlier runs, {self._rel(gone[0])} … {self._rel(gone[-1])}")
            n = self.keep_runs
            self.announce(f"removed {what} (--keep-runs {n}: {self.out} keeps its "
                          f"{'most recent complete run' if n == 1 else f'{n} most recent complete runs'})")

    def failed(self) -> None:
        """After a failure: remove the run directory this invocation made when it holds no finished shard, then
        ``OUT/runs`` and OUT themselves when this invocation made them and they are empty (only when it held OUT's
        lock: another run's directory is never touched)."""
        if not self.held:
            return
        if self.run is not None and self.made_run and not _has_work(self.run):
            remove_ours(self.run)
        if self.fresh_out:
            for d in (self.out / RUNS, self.out):
                with contextlib.suppress(OSError):
                    if d.is_dir() and not d.is_symlink() and not os.listdir(d):
                        d.rmdir()


def _has_work(run: Path) -> bool:
    """Whether ``run`` holds a finished shard or a published result set."""
    done = run / "journal" / "done.jsonl"
    try:
        if done.is_file() and done.stat().st_size > 0:
            return True
    except OSError:
        return True
    return (run / ".results").is_symlink()
