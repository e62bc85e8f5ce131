"""Private: :func:`replaylens.report.audit` with ``out=`` — the same lock, refusal and result set as the CLI."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..agents import Agent
from ..records import Evaluator, FutureTasks, History
from ..replay import ReplayPlan
from ._audit import AuditResult
from ._publish import check_different_run, locked_out

__all__ = ["API_COMMAND", "api_identity", "hold_run", "write_api_results"]

API_COMMAND = "python:report.audit"


def api_identity(history: History, futures: FutureTasks, evaluator: Evaluator, agent: Agent, plan: ReplayPlan, *,
                 n_resamples: int, level: float, path: str) -> dict[str, Any]:
    """What makes two API audits the same run (the manifest's ``arguments``)."""
    return {"agent": dict(agent.spec) or {"name": agent.name}, "plan": plan.digest(),
            "history": history.fingerprint(), "futures": futures.fingerprint(), "utilities": evaluator.fingerprint(),
            "cells": list(plan.cell_names), "maps": list(plan.map_names), "draws": len(plan.draws),
            "repeats": plan.repeats, "seed": plan.seed, "n_resamples": n_resamples, "level": level, "path": path}


@contextlib.contextmanager
def hold_run(out: str | os.PathLike[str] | None, journal: str | None, identity: dict[str, Any], *,
             overwrite: bool) -> Iterator[tuple[str | None, bool]]:
    """Lock OUT (and the journal directory), refuse a different run's OUT unless ``overwrite``; yields the
    journal to use and whether to restart it (True when a different run's results are replaced)."""
    from .._durable import clean_stale

    restart = False
    with contextlib.ExitStack() as stack:
        if out is not None:
            root = Path(out)
            stack.enter_context(locked_out(root))
            clean_stale(root)
            restart = check_different_run(root, {"command": API_COMMAND, "arguments": identity}, overwrite)
            journal = journal if journal is not None else str(root / "journal")
        if journal is not None:
            stack.enter_context(locked_out(Path(journal)))
        yield journal, restart


def write_api_results(result: AuditResult, identity: dict[str, Any], out: str | os.PathLike[str], *,
                      history: History, futures: FutureTasks) -> Path:
    """Write the audit's result set with a manifest naming the in-memory inputs by content fingerprint."""
    import sys

    from ._manifest import InputFile, RunManifest, git_revision, package_versions
    from ._render import write_results

    plan = result.decisions.plan
    inputs = [InputFile(role=role, path="(in memory)", sha256=identity[key], content_fingerprint=identity[key])
              for role, key in (("history", "history"), ("futures", "futures"), ("utilities", "utilities"))]
    version = str(getattr(sys.modules.get("replaylens"), "__version__", "unknown"))
    manifest = RunManifest(tool_version=version, git_revision=git_revision(), command=API_COMMAND,
                           arguments=identity, inputs=inputs, agent=identity["agent"], plan=plan.to_dict(),
                           seeds={"root": result.seed, "slot_draws": [d.to_dict() for d in plan.draws],
                                  "bootstrap": f"SeedSequence([{result.seed}, 'bootstrap', cell])"},
                           packages=package_versions())
    return write_results(result, manifest, out, history=history, futures=futures, overwrite=True)
