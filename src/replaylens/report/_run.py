"""The one orchestration of an audit: plan, replay (journaled), read out and infer, then (with an output
directory) lock it, write the manifest and every artifact.  The CLI and :func:`replaylens.report.audit` both
call :func:`run_audit`."""

from __future__ import annotations

import contextlib
import json
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from .._durable import LockedError, clean_stale, locked_dir
from .._gc import FrozenHeap
from .._imports import require
from .._jit import preload_for
from .._memory import release_freed_memory
from .._version import __version__
from ..agents import Agent, as_agent
from ..errors import ConfigError
from ..maps import SlotSpec
from ..records import Evaluator, FutureTasks, History, check_storable
from ..replay import PreparedReplay, plan_replay, prepare_replay
from ..settings import DEFAULT_CELLS, DEFAULT_KEEP_RUNS, DEFAULT_LEVEL, DEFAULT_RESAMPLES, AuditSettings, Execution
from ..settings import keep_runs as keep_runs_value
from ._ahead import ReportAhead
from ._audit import AuditResult, extra_readouts, prepared_state_responses, summarize
from ._manifest import InputFile, RunManifest, file_sha256, git_revision, package_versions
from ._publish import busy
from ._render import RESULT_FILES, write_results
from ._runs import OutRuns
from ._staged import StagedDecisions
from ._stochastic import resolve_repeats, stochastic_warnings

__all__ = ["API_COMMAND", "api_arguments", "audit", "run_audit", "write_audit"]

API_COMMAND = "python:report.audit"
"""The manifest's ``command`` of an audit run from Python (``arguments`` then identify its inputs by content)."""


def run_audit(
    history: History,
    futures: FutureTasks,
    evaluator: Evaluator,
    agent: Agent | Any,
    settings: AuditSettings | None = None,
    *,
    out: str | Path | None = None,
    journal: str | Path | None = None,
    inputs: Sequence[tuple[str, str | None]] = (),
    command: str = "audit",
    arguments: dict[str, Any] | None = None,
    restart: bool = False,
    overwrite: bool = False,
    progress: Callable[[int, int], None] | None = None,
    prepared: PreparedReplay | None = None,
    before_replay: Callable[[Any], None] | None = None,
    expect: Mapping[str, Any] | None = None,
    on_warning: Callable[[str], None] | None = None,
    release_utilities: bool = False,
    keep_runs: int | str | None = DEFAULT_KEEP_RUNS,
) -> AuditResult:
    """Run an audit of ``agent`` under ``settings`` and return its :class:`AuditResult`.

    With ``out``, the directory is locked for the run (a busy ``out`` is a :class:`ConfigError`), a killed
    run's leftovers are cleaned, and the audit is a run of its own, ``out/runs/<UTC time>-<agent>-<digest>/``,
    journaled there: a rerun resumes the kept run whose journal key equals its own (``arguments`` and everything
    else that decides the decisions; ``restart`` discards that journal), any other audit becomes a new run beside
    the earlier ones (one line on stderr says so; ``overwrite`` removes the previous latest run instead), and its
    result set (report.html, report.md, summary.json, decisions.parquet, manifest.json, forest.png) is written
    whole and linked as ``out``'s latest; then ``out`` keeps its ``keep_runs`` most recently published complete
    runs, this one among them (``"all"``/None: every run; interrupted runs are never removed).  An invocation that
    fails leaves no new run without finished work.
    ``inputs`` names the input files by role (history, futures, utilities) for the manifest; ``prepared``
    reuses a prepared replay (several agents on one plan); ``before_replay(plan)`` runs once the plan is known.
    ``expect`` declares expectations per row (``{"pair": "invariant", "value": "responds", ...}``, see
    :func:`~replaylens.report.parse_expectations`; read after ``before_replay``), judged in the summary's
    ``verdict``.  ``on_warning`` receives each warning line (default: :func:`warnings.warn`).
    ``release_utilities``: the caller hands ``evaluator`` to this run, which releases its table once the replay
    is prepared, every utility read (:meth:`~replaylens.records.Evaluator.release`; the CLI does: 50 MB of a
    10^6-record audit's peak).
    """
    settings = settings or AuditSettings()
    agent = as_agent(agent)
    if settings.execution.resolved_backend == "ray":   # a missing extra: one line before anything is made
        require("ray", "--backend ray")
    keep = keep_runs_value(keep_runs)   # a bad value: one line before anything is made
    runs: OutRuns | None = None
    if out is not None:   # text the result files cannot hold: one input error before OUT is touched or a replay runs
        check_storable(history, futures)
        runs = OutRuns(Path(out), RESULT_FILES, label=agent.name, overwrite=overwrite, keep_runs=keep,
                       announce=lambda line: print(f"replaylens: {line}", file=sys.stderr))
    try:
        return _run_audit(history, futures, evaluator, agent, settings, runs=runs, journal=journal, inputs=inputs,
                          command=command, arguments=arguments, restart=restart, progress=progress,
                          prepared=prepared, before_replay=before_replay, expect=expect, on_warning=on_warning,
                          release_utilities=release_utilities)
    except BaseException:
        if runs is not None:
            runs.failed()
        raise


def _run_audit(history: History, futures: FutureTasks, evaluator: Evaluator, agent: Agent,
               settings: AuditSettings, *, runs: OutRuns | None, journal: str | Path | None,
               inputs: Sequence[tuple[str, str | None]], command: str, arguments: dict[str, Any] | None,
               restart: bool, progress: Callable[[int, int], None] | None, prepared: PreparedReplay | None,
               before_replay: Callable[[Any], None] | None, expect: Mapping[str, Any] | None,
               on_warning: Callable[[str], None] | None, release_utilities: bool) -> AuditResult:
    out = runs.out if runs is not None else None
    with contextlib.ExitStack() as stack:
        heap = stack.enter_context(FrozenHeap())   # what the run holds throughout: out of the collector's passes
        # the run holds OUT (and its journal) from its first call into the agent to its last write
        if runs is not None:
            stack.enter_context(_exclusive(runs.out))
            clean_stale(runs.out)
            runs.check()
        if journal is not None:  # one run per journal, whoever holds it
            stack.enter_context(_exclusive(Path(journal)))
        repeats = resolve_repeats(settings.repeats, agent, settings.rng)  # 2 for a declared stochastic agent
        warns = stochastic_warnings(agent, history, repeats, settings.rng)
        for w in warns:  # a stochastic agent read from one independent repeat, or an undeclared one
            if on_warning is not None:
                on_warning(w)
            else:
                warnings.warn(w, UserWarning, stacklevel=2)
        plan = prepared.plan if prepared is not None else plan_replay(
            history, futures, cells=settings.cells, maps=settings.maps, draws=settings.draws, repeats=repeats,
            seed=settings.seed, rng=settings.rng)
        preload_for(len(futures) * plan.n_decisions_per_task)  # numba, for a large run, beside the input hashes
        if arguments is None:
            command = API_COMMAND
            arguments = api_arguments(history, futures, evaluator, agent, plan, settings)
        if out is not None:
            for obj in (history, futures, evaluator):   # the manifest's content hashes (kept), taken now: their
                obj.fingerprint()                        # temporaries fall before the replay's peak, not on top
        staged: list[StagedDecisions] = []
        ahead: list[ReportAhead] = []

        def stage(dec: Any) -> None:  # decisions.parquet and the report parts that need no interval are made
            if out is not None:       # beside the statistics, not after them
                staged.append(StagedDecisions(dec, Path(out)))
                stack.callback(staged[-1].discard)  # a failed run leaves no staging file (a no-op once moved)
                ahead.append(ReportAhead(dec, history, futures))
                stack.callback(ahead[-1].close)     # nor a report thread running

        def readouts(rows: Any) -> None:
            if ahead:
                ahead[0].readouts(rows, plan.map_names)

        result = _run(history, futures, evaluator, agent, settings, plan, journal=journal, arguments=arguments,
                      restart=restart, progress=progress, prepared=prepared, before_replay=before_replay,
                      expect=expect, warns=warns, on_decisions=stage, on_readouts=readouts,
                      release_utilities=release_utilities, heap=heap,
                      choose_journal=runs.choose if runs is not None and journal is None else None)
        if runs is not None and runs.run is not None:
            write_audit(result, runs.run, history=history, futures=futures, evaluator=evaluator, inputs=inputs,
                        command=command, arguments=arguments, staged=staged[0] if staged else None,
                        ahead=ahead[0] if ahead else None)
            runs.publish()
        elif out is not None:   # an explicit journal elsewhere: the result set in OUT itself
            write_audit(result, out, history=history, futures=futures, evaluator=evaluator, inputs=inputs,
                        command=command, arguments=arguments, staged=staged[0] if staged else None,
                        ahead=ahead[0] if ahead else None)
        return result


@contextlib.contextmanager
def _exclusive(path: Path) -> Iterator[None]:
    """Hold ``path``'s run lock for a whole run; any other holder — another process, or another run in this
    one, this thread included — makes it busy (:class:`ConfigError`).  Writers inside the run re-enter it."""
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(locked_dir(path))
        except LockedError:
            raise busy(path) from None
        yield


def api_arguments(history: History, futures: FutureTasks, evaluator: Evaluator, agent: Agent, plan: Any,
                  settings: AuditSettings) -> dict[str, Any]:
    """What makes two audits run from Python the same run (the manifest's ``arguments``): the agent, the plan
    and the inputs by content fingerprint, and the inference settings."""
    return {"agent": dict(agent.spec) or {"name": agent.name}, "plan": plan.digest(),
            "history": history.fingerprint(), "futures": futures.fingerprint(), "utilities": evaluator.fingerprint(),
            "cells": list(plan.cell_names), "maps": list(plan.map_names), "draws": len(plan.draws),
            "repeats": plan.repeats, "seed": plan.seed, "n_resamples": settings.n_resamples,
            "level": settings.level, "path": settings.path}


def write_audit(result: AuditResult, out: str | Path, *, history: History, futures: FutureTasks,
                evaluator: Evaluator, inputs: Sequence[tuple[str, str | None]] = (), command: str = API_COMMAND,
                arguments: dict[str, Any], staged: StagedDecisions | None = None,
                ahead: ReportAhead | None = None) -> Path:
    """Write ``result``'s whole result set into ``out`` (replacing the current one in one rename) with its
    manifest; inputs without a file are named by content fingerprint.  ``staged``: its decisions.parquet,
    already being written (:class:`~replaylens.report._staged.StagedDecisions`); ``ahead``: the report parts
    made beside the statistics (:class:`~replaylens.report._ahead.ReportAhead`)."""
    manifest = _manifest(result, history, futures, evaluator, result.agent, inputs, command, arguments)
    return write_results(result, manifest, out, history=history, futures=futures, overwrite=True, staged=staged,
                         ahead=ahead)


def _run(history: History, futures: FutureTasks, evaluator: Evaluator, agent: Agent, settings: AuditSettings,
         plan: Any, *, journal: str | Path | None, arguments: dict[str, Any], restart: bool,
         progress: Callable[[int, int], None] | None, prepared: PreparedReplay | None,
         before_replay: Callable[[Any], None] | None, expect: Mapping[str, Any] | None = None,
         warns: Sequence[str] = (), on_decisions: Callable[[Any], None] | None = None,
         on_readouts: Callable[[Any], None] | None = None, release_utilities: bool = False,
         heap: FrozenHeap | None = None, choose_journal: Callable[[Any], Path] | None = None) -> AuditResult:
    if before_replay is not None:
        before_replay(plan)
    release_freed_memory()  # what reading and checking the inputs freed, before the replay's peak
    kw: dict[str, Any] = dict(path=settings.path, progress=progress, restart=restart,
                              **settings.execution.replay_kwargs())
    extra: dict[str, object] = {"arguments": json.dumps(arguments, sort_keys=True, default=str)}
    ready = prepared if prepared is not None else prepare_replay(history, futures, evaluator, plan=plan)
    if choose_journal is not None:   # the run of OUT this replay is (a kept one resumed, or a new one)
        journal = choose_journal(ready.journal_key(agent, path=settings.path,
                                                   shard_memory=settings.execution.shard_memory, extra=extra))
    if journal is not None:
        kw.update(journal=str(journal), journal_key=extra)
    if release_utilities:   # the prepared replay carries every utility the run reads: the replay's peak is without it
        evaluator.release()
        release_freed_memory()   # (its columns, and what its content hash left, before the replay's peak)
    if heap is not None:
        heap.freeze()   # the prepared streams
    dec = ready.run(agent, **kw)
    if heap is not None:
        heap.freeze()   # the decisions
    if on_decisions is not None:
        on_decisions(dec)
    state = prepared_state_responses(ready, agent)   # from the same prepared streams, not prepared again
    del ready
    release_freed_memory()  # the replay's temporaries, before the statistics allocate theirs
    rows = summarize(dec, seed=settings.seed, n_resamples=settings.n_resamples, level=settings.level,
                     on_readouts=on_readouts)
    release_freed_memory()  # the resampling's blocks and tables, before the report is rendered beside the writer
    info = {"state_response": state,
            "cells": list(plan.cell_names), "maps": list(plan.map_names), "draws": len(plan.draws),
            "repeats": plan.repeats, "seed": settings.seed, "n_resamples": settings.n_resamples,
            "level": settings.level, "path": dec.path, "rng": plan.rng, "warnings": list(warns),
            "on_inconclusive": settings.on_inconclusive,
            **extra_readouts(history, futures, agent, plan, dec, seed=settings.seed,
                             n_resamples=settings.n_resamples, level=settings.level)}
    if expect:
        info["expectations"] = _declared(expect, plan)
    return AuditResult(dec, tuple(rows), settings.seed, settings.n_resamples, settings.level, agent, info)


def _declared(expect: Mapping[str, Any], plan: Any) -> dict[str, Any]:
    """Declared expectations, every one naming a row of this plan (a cell, or ``rekey`` with label maps)."""
    from ._verdict import parse_expectations

    out = parse_expectations(expect)
    known = set(plan.cell_names[1:]) | ({"rekey"} if len(plan.maps) > 1 else set())
    for name in out:
        if name not in known:
            raise ConfigError(f"expectation for {name!r}: not a replayed cell (replayed: {', '.join(sorted(known))})")
    return out


def _manifest(result: AuditResult, history: History, futures: FutureTasks, evaluator: Evaluator, agent: Agent,
              inputs: Sequence[tuple[str, str | None]], command: str, arguments: dict[str, Any]) -> RunManifest:
    plan = result.decisions.plan
    objs: dict[str, Any] = {"history": history, "futures": futures, "utilities": evaluator}
    prints = {role: objs[role].fingerprint() for role in objs}  # one content hash per input (a pass over it)
    files = [InputFile(role=role, path=str(p), sha256=file_sha256(p), content_fingerprint=prints[role])
             for role, p in inputs if p is not None]
    if not files:  # in-memory inputs: named by content
        files = [InputFile(role=role, path="(in memory)", sha256=prints[role], content_fingerprint=prints[role])
                 for role in objs]
    return RunManifest(tool_version=__version__, git_revision=git_revision(), command=command,
                       arguments=arguments, inputs=files, agent=dict(agent.spec) or {"name": agent.name},
                       plan=plan.to_dict(),
                       seeds={"root": result.seed, "slot_draws": [d.to_dict() for d in plan.draws],
                              "bootstrap": f"SeedSequence([{result.seed}, 'audit-bootstrap', block])",
                              "signflip": f"SeedSequence([{result.seed}, 'audit-signflip', block])"},
                       packages=package_versions())


def audit(
    history: History,
    futures: FutureTasks,
    evaluator: Evaluator,
    agent: Agent | Any,
    *,
    cells: str | Sequence[str] = DEFAULT_CELLS,
    maps: str | Sequence[str] | None = None,
    draws: int | Sequence[SlotSpec] = 1,
    repeats: int | None = None,
    seed: int = 0,
    rng: str = "independent",
    n_resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    path: str = "auto",
    journal: str | Path | None = None,
    out: str | Path | None = None,
    restart: bool = False,
    overwrite: bool = False,
    progress: Callable[[int, int], None] | None = None,
    backend: str = "auto",
    workers: int | None = None,
    concurrency: int | None = None,
    ray_address: str | None = None,
    shard_memory: int | None = None,
    expect: Mapping[str, Any] | None = None,
    on_inconclusive: str = "pass",
    keep_runs: int | str | None = DEFAULT_KEEP_RUNS,
) -> AuditResult:
    """Run an audit: plan, replay (journaled when ``journal`` or ``out`` is set), read out and infer; with
    ``out``, lock the directory and write the report there (exactly what ``replaylens audit`` does).

    ``backend``/``workers``/``concurrency``/``ray_address``/``shard_memory`` choose how shards run
    (see :meth:`replaylens.replay.PreparedReplay.run`); the decisions are the same on every backend.
    ``agent`` may be an :class:`Agent` or anything with an ``.agent()`` method (a HistoryReader, ...).
    ``expect`` declares expectations per row (``{"pair": "invariant", "value": "responds"}``), judged in
    the summary's ``verdict`` (SAFE / UNSAFE / INCONCLUSIVE; ``on_inconclusive="fail"`` makes an INCONCLUSIVE
    declared row fail the gate).  ``keep_runs``: the complete runs ``out`` keeps (the most recent; ``"all"``: every
    one).
    """
    settings = AuditSettings(
        cells=tuple(cells.split(",")) if isinstance(cells, str) else tuple(cells),
        maps=maps if maps is None or isinstance(maps, str) else tuple(maps),
        draws=draws if isinstance(draws, int) else tuple(draws), repeats=repeats, seed=seed, rng=rng,
        n_resamples=n_resamples, level=level, path=path, on_inconclusive=on_inconclusive,
        execution=Execution(backend=backend, workers=workers, concurrency=concurrency, ray_address=ray_address,
                            shard_memory=shard_memory))
    return run_audit(history, futures, evaluator, agent, settings, out=out, journal=journal, restart=restart,
                     overwrite=overwrite, progress=progress, expect=expect, keep_runs=keep_runs)
