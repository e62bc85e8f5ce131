"""Private: the runs of one output directory during one audit (issue 48).

Each audit into ``OUT`` that is not a resume becomes a run of its own under ``OUT/runs/`` (see
:mod:`replaylens.report._publish`); the run a rerun resumes is the kept run made for the same journal key.
What a failed invocation made and holds no finished work of (a new run directory, an empty OUT) is removed,
so a configuration error leaves nothing behind.  A several-agent audit (:func:`agents_run`) is a run of its OUT the
same way: its comparison (report.html, agents.json) is published in ``OUT/runs/<run>/`` and linked as OUT's latest,
each agent's own audit being a one-agent OUT of its own, ``OUT/<agent>/``.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from .._durable import clean_stale, remove_ours
from ..replay import Journal
from ._publish import (
    CURRENT,
    RUNS,
    check_slots,
    comparison_links,
    current_run,
    find_run,
    link_latest,
    locked_out,
    move_earlier_layout,
    new_run,
    prune_runs,
    publish,
    run_digest,
)

__all__ = ["AGENT_FILES", "AgentsRun", "OutRuns", "agents_run", "most_recent", "named_agent_outs", "prune_agent_runs"]

AGENT_FILES = ("report.html", "agents.json")
"""The result names of a several-agent audit's run, linked in its OUT."""


def most_recent(keep: int) -> str:
    """How a ``--keep-runs`` of ``keep`` reads in a line: "most recent complete run(s)"."""
    return "most recent complete run" if keep == 1 else f"{keep} most recent complete runs"


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
        return self.choose_run(key, lambda prev: _journal_change(prev, key),
                               "the same inputs, agent, code and plan") / "journal"

    def choose_run(self, key: Mapping[str, Any], change: Callable[[Path], str], same: str) -> Path:
        """The run directory made for ``key``: a kept run's (a resume: ``same`` says what is the same), or a new
        run's (``change(previous latest run)`` says what changed, in the one line)."""
        digest = Journal.digest(key)
        found = find_run(self.out, digest)
        prev = self.previous
        if found is not None:
            self.run = found
            if prev is not None and prev != found:
                self.announce(f"resuming the kept run {self._rel(found)} ({same}); it is the latest again")
            return found
        self.run = new_run(self.out, digest, self.label)
        self.made_run = True
        if prev is not None:
            kept = (f"it replaces the earlier run {self._rel(prev)}" if self.overwrite else
                    f"the earlier run {self._rel(prev)} is kept beside it")
            self.announce(f"new run {self._rel(self.run)} ({change(prev)}); {kept}")
        return self.run

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
            assert n is not None   # (None prunes nothing)
            self.announce(f"removed {what} (--keep-runs {n}: {self.out} keeps its {most_recent(n)})")

    def failed(self) -> None:
        """After a failure: remove the run directory this invocation made when it holds no finished shard and no
        log a failure line names (Ray's ``ray.log``: the same command resumes into the directory), then
        ``OUT/runs`` and OUT themselves when this invocation made them and they are empty (only when it held OUT's
        lock: another run's directory is never touched)."""
        if not self.held:
            return
        if self.run is not None and self.made_run and not _has_work(self.run) and not _has_log(self.run):
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


def _has_log(run: Path) -> bool:
    """Whether ``run`` holds a non-empty ``ray.log`` (the one-line error of a Ray failure points at it)."""
    try:
        return (run / "ray.log").stat().st_size > 0
    except OSError:
        return False


def _journal_change(prev: Path, key: Mapping[str, Any]) -> str:
    old = Journal.stored(prev / "journal")
    return Journal.change(old, key) if old is not None else "a different run"


# ---------------------------------------------------------------- a several-agent audit as a run of its OUT


class AgentsRun:
    """The run of a several-agent audit in its OUT, chosen once every agent's own run is published."""

    def __init__(self, runs: OutRuns) -> None:
        self._runs = runs

    def agent_run(self, agent_out: Path) -> Path:
        """The run of one agent's own OUT (``OUT/<agent>/``) that its audit just published."""
        run = current_run(agent_out)
        if run is None:
            raise RuntimeError(f"{agent_out}: no published run")   # pragma: no cover - run_audit publishes one
        return run

    def publish(self, specs: Sequence[str], agent_outs: Sequence[Path], settings: Mapping[str, Any],
                files: Callable[[list[str]], Mapping[str, str]]) -> Path:
        """Choose this audit's run from the agents' runs (``specs``, their OUTs) and ``settings`` (what else decides the
        comparison), write ``files(agent run directories relative to OUT)`` (name -> text) into it as one result set
        and make it OUT's latest (then prune OUT's runs); its run directory."""
        runs = self._runs
        agent_runs = [self.agent_run(d) for d in agent_outs]
        rel = [os.path.relpath(r, runs.out) for r in agent_runs]
        key = {"agents": [{"spec": sp, "run": rl, "digest": run_digest(r)}
                          for sp, rl, r in zip(specs, rel, agent_runs, strict=True)], **settings}
        run = runs.choose_run(key, lambda prev: _agents_change(prev, key), "the same agents' runs")
        texts = files(rel)

        def build(tmp: Path) -> None:
            for name, text in texts.items():
                (tmp / name).write_text(text, encoding="utf-8")

        with locked_out(run):
            publish(run, build, tuple(texts))
        dirs = named_agent_outs(runs.out)   # (before OUT's pruning removes a comparison naming them)
        runs.publish()
        gone = prune_agent_runs(dirs, runs.keep_runs)
        if gone:
            n = runs.keep_runs
            assert n is not None   # (None prunes nothing)
            runs.announce(f"removed {len(gone)} earlier agent run{'' if len(gone) == 1 else 's'} (--keep-runs {n}: "
                          f"each agent's directory keeps its {most_recent(n)} and every run a kept comparison links)")
        return run


def named_agent_outs(out: Path) -> list[Path]:
    """The agents' directories (``OUT/<agent>/``, each a one-agent OUT) OUT's several-agent runs name."""
    return [out / name for name in comparison_links(out) if (out / name / RUNS).is_dir()]


def prune_agent_runs(dirs: Sequence[Path], keep: int | None, *, skip: Sequence[Path] = (),
                     interrupted: bool = False, dry_run: bool = False) -> list[Path]:
    """Prune each agent's directory ``dirs`` (:func:`named_agent_outs`, read before OUT's own pruning removed a
    comparison naming one) to its ``keep`` most recent complete runs, never removing a run one of OUT's comparisons
    (but ``skip``: those a dry run would remove) links, and with ``interrupted`` its interrupted runs; the runs
    removed (with ``dry_run``: that would be)."""
    gone: list[Path] = []
    for d in dirs:
        gone += prune_runs(d, keep, skip_links=skip, interrupted=interrupted, dry_run=dry_run)
    return gone


def _agents_change(prev: Path, key: Mapping[str, Any]) -> str:
    """What differs between the several-agent run ``prev`` and ``key``: the agents, or which agents' runs."""
    try:
        old = json.loads((prev / CURRENT / "agents.json").read_text(encoding="utf-8"))
        before = {a["spec"]: a.get("run") for a in old["agents"]}
    except (OSError, ValueError, KeyError, TypeError):
        return "a different run"
    now = {a["spec"]: a["run"] for a in key["agents"]}
    if list(before) != list(now):
        return "different agents"
    changed = [spec for spec in now if before[spec] != now[spec]]
    return f"new runs of {', '.join(changed)}" if changed else "other comparison settings"


@contextlib.contextmanager
def agents_run(out: Path, *, overwrite: bool, keep_runs: int | None, label: str,
               announce: Callable[[str], None]) -> Iterator[AgentsRun]:
    """Hold ``out``'s run lock for a several-agent audit (a busy OUT is a :class:`ConfigError`), check it as a run
    of its own (what is in the way of its links, an earlier layout), and clean up after a failure as a one-agent
    audit does.  ``overwrite``/``keep_runs``: as for a one-agent run, applied to OUT's several-agent runs."""
    runs = OutRuns(out, AGENT_FILES, label=label, overwrite=overwrite, announce=announce, keep_runs=keep_runs)
    try:
        with locked_out(out):
            clean_stale(out)
            runs.check()
            yield AgentsRun(runs)
    except BaseException:
        runs.failed()
        raise
