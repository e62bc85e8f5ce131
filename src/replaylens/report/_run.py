"""The one orchestration of an audit: plan, replay (journaled), read out and infer, then (with an output
directory) lock it, write the manifest and every artifact.  The CLI and :func:`replaylens.report.audit` both
call :func:`run_audit`."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .._durable import LockedError, clean_stale, locked_dir
from .._version import __version__
from ..agents import Agent, as_agent
from ..errors import ConfigError
from ..maps import SlotSpec
from ..records import Evaluator, FutureTasks, History
from ..replay import PreparedReplay, plan_replay, replay
from ..settings import DEFAULT_CELLS, DEFAULT_LEVEL, DEFAULT_RESAMPLES, AuditSettings, Execution
from ._audit import AuditResult, state_responses, summarize
from ._manifest import InputFile, RunManifest, file_sha256, git_revision, package_versions
from ._render import write_results

__all__ = ["audit", "run_audit"]


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
) -> AuditResult:
    """Run an audit of ``agent`` under ``settings`` and return its :class:`AuditResult`.

    With ``out``, the directory is locked for the run (a busy ``out`` is a :class:`ConfigError`), a killed
    run's leftovers are cleaned, the replay is journaled in ``out/journal`` (a rerun resumes only when
    ``arguments`` and everything else that decides the decisions are unchanged; ``restart`` discards the
    journal), the report of a different run is never replaced unless ``overwrite``, and the result set
    (report.html, report.md, summary.json, decisions.parquet, manifest.json, forest.png) is written whole.
    ``inputs`` names the input files by role (history, futures, utilities) for the manifest; ``prepared``
    reuses a prepared replay (several agents on one plan); ``before_replay(plan)`` runs once the plan is known.
    """
    settings = settings or AuditSettings()
    agent = as_agent(agent)
    arguments = dict(arguments) if arguments is not None else _default_arguments(settings)
    if out is None:
        return _run(history, futures, evaluator, agent, settings, journal=journal, arguments=arguments,
                    restart=restart, progress=progress, prepared=prepared, before_replay=before_replay)
    root = Path(out)
    try:
        with locked_dir(root):
            clean_stale(root)
            restart = _replaces_other_run(root, arguments, overwrite) or restart
            result = _run(history, futures, evaluator, agent, settings, journal=journal or root / "journal",
                          arguments=arguments, restart=restart, progress=progress, prepared=prepared,
                          before_replay=before_replay)
            manifest = _manifest(result, history, futures, evaluator, agent, settings, inputs, command, arguments)
            write_results(result, manifest, root, history=history, futures=futures)
            return result
    except LockedError:
        raise ConfigError(f"{root} is in use by another replaylens run; wait for it to finish or use a "
                          "different output directory") from None


def _default_arguments(settings: AuditSettings) -> dict[str, Any]:
    return {k: v for k, v in settings.to_dict().items() if k != "execution"}


def _run(history: History, futures: FutureTasks, evaluator: Evaluator, agent: Agent, settings: AuditSettings, *,
         journal: str | Path | None, arguments: dict[str, Any], restart: bool,
         progress: Callable[[int, int], None] | None, prepared: PreparedReplay | None,
         before_replay: Callable[[Any], None] | None) -> AuditResult:
    plan = prepared.plan if prepared is not None else plan_replay(
        history, futures, cells=settings.cells, maps=settings.maps, draws=settings.draws,
        repeats=settings.repeats, seed=settings.seed)
    if before_replay is not None:
        before_replay(plan)
    kw: dict[str, Any] = dict(path=settings.path, progress=progress, restart=restart,
                              **settings.execution.replay_kwargs())
    if journal is not None:
        kw.update(journal=str(journal),
                  journal_key={"arguments": json.dumps(arguments, sort_keys=True, default=str)})
    if prepared is not None:
        dec = prepared.run(agent, **kw)
    else:
        dec = replay(history, futures, evaluator, agent, plan=plan, **kw)
    rows = summarize(dec, seed=settings.seed, n_resamples=settings.n_resamples, level=settings.level)
    info = {"state_response": state_responses(history, futures, evaluator, agent, plan),
            "cells": list(plan.cell_names), "maps": list(plan.map_names), "draws": len(plan.draws),
            "repeats": plan.repeats, "seed": settings.seed, "n_resamples": settings.n_resamples,
            "level": settings.level, "path": dec.path}
    return AuditResult(dec, tuple(rows), settings.seed, settings.n_resamples, settings.level, agent, info)


def _replaces_other_run(out: Path, arguments: dict[str, Any], overwrite: bool) -> bool:
    """Refuse to write over the report of a different run unless ``overwrite`` (True: one is overwritten,
    so its journal is discarded too)."""
    man = out / "manifest.json"
    if not man.exists():
        return False
    try:
        old = json.loads(man.read_text()).get("arguments")
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        old = None
    if json.loads(json.dumps(old, default=str)) == json.loads(json.dumps(arguments, default=str)):
        return False
    if not overwrite:
        raise ConfigError(f"{out} holds the report of a different run; pass --overwrite (overwrite=True) to "
                          "replace it, or use a new output directory")
    return True


def _manifest(result: AuditResult, history: History, futures: FutureTasks, evaluator: Evaluator, agent: Agent,
              settings: AuditSettings, inputs: Sequence[tuple[str, str | None]], command: str,
              arguments: dict[str, Any]) -> RunManifest:
    plan = result.decisions.plan
    objs = {"history": history, "futures": futures, "utilities": evaluator}
    files = [InputFile(role=role, path=str(p), sha256=file_sha256(p), content_fingerprint=objs[role].fingerprint())
             for role, p in inputs if p is not None]
    return RunManifest(tool_version=__version__, git_revision=git_revision(), command=command,
                       arguments=arguments, inputs=files, agent=dict(agent.spec) or {"name": agent.name},
                       plan=plan.to_dict(),
                       seeds={"root": settings.seed, "slot_draws": [d.to_dict() for d in plan.draws],
                              "bootstrap": f"SeedSequence([{settings.seed}, 'bootstrap', cell])"},
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
    repeats: int = 1,
    seed: int = 0,
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
) -> AuditResult:
    """Run an audit: plan, replay (journaled when ``journal`` or ``out`` is set), read out and infer; with
    ``out``, lock the directory and write the report there (exactly what ``replaylens audit`` does).

    ``backend``/``workers``/``concurrency``/``ray_address``/``shard_memory`` choose how shards run
    (see :meth:`replaylens.replay.PreparedReplay.run`); the decisions are the same on every backend.
    ``agent`` may be an :class:`Agent` or anything with an ``.agent()`` method (a HistoryReader, ...).
    """
    settings = AuditSettings(
        cells=tuple(cells.split(",")) if isinstance(cells, str) else tuple(cells),
        maps=maps if maps is None or isinstance(maps, str) else tuple(maps),
        draws=draws if isinstance(draws, int) else tuple(draws), repeats=repeats, seed=seed,
        n_resamples=n_resamples, level=level, path=path,
        execution=Execution(backend=backend, workers=workers, concurrency=concurrency, ray_address=ray_address,
                            shard_memory=shard_memory))
    return run_audit(history, futures, evaluator, agent, settings, out=out, journal=journal, restart=restart,
                     overwrite=overwrite, progress=progress)
