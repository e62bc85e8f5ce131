"""``replaylens audit --agent A --agent B ...``: several agents replayed on one prepared plan.

The plan, the transformed streams, the utilities and the oracle are prepared once
(:func:`replaylens.replay.prepare_replay`); each agent is replayed with :meth:`PreparedReplay.run` and
written to ``OUT/<agent>/`` exactly as a one-agent audit would be (so ``replaylens compare`` works on
any two of them).  ``OUT/report.html`` puts them side by side: a per-agent table and the paired
stream-cluster differences of every agent against the first.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ..settings import AuditSettings


def agent_dirs(names: list[str]) -> list[str]:
    """A distinct, file-system-safe directory name per agent (``mean``, ``mypkg_make``, ``mean-2``)."""
    out: list[str] = []
    for n in names:
        base = re.sub(r"[^\w.-]+", "_", n).strip("._") or "agent"
        name, k = base, 2
        while name in out:
            name, k = f"{base}-{k}", k + 1
        out.append(name)
    return out


def run_agents(run_audit: Callable[..., Any], specs: tuple[str, ...], params: dict[str, Any], *, history: Any,
               futures: Any, evaluator: Any, inputs: list[tuple[str, str | None]], arguments: dict[str, Any],
               settings: AuditSettings, out: Path, quiet: bool) -> list[Any]:
    """Replay every agent of ``specs`` on one prepared plan; write OUT/<agent>/ each and OUT/report.html."""
    from ..agents import load_agent
    from ..replay import plan_replay, prepare_replay
    from ..report import compare_summaries, render_report

    agents = [load_agent(s, params) for s in specs]
    plan = plan_replay(history, futures, cells=settings.cells, maps=settings.maps, draws=settings.draws,
                       repeats=settings.repeats, seed=settings.seed)
    prepared = prepare_replay(history, futures, evaluator, plan=plan)
    dirs = agent_dirs([a.name for a in agents])
    results = []
    for spec, agent, d in zip(specs, agents, dirs, strict=True):
        click.echo(f"agent {agent.name} → {out / d}")
        results.append(run_audit(history=history, futures=futures, evaluator=evaluator, agent=agent, inputs=inputs,
                                 command="audit", arguments={**arguments, "agent": spec, "agents": list(specs)},
                                 settings=settings, out=out / d, quiet=quiet, prepared=prepared))
    summaries = [r.summary() for r in results]
    frames = [r.decisions.frame() for r in results]
    comparisons = []
    for k in range(1, len(results)):
        c = compare_summaries(summaries[0], summaries[k], frames[0], frames[k], seed=settings.seed,
                              n_resamples=settings.n_resamples, level=settings.level)
        comparisons.append(c | {"id": f"agent-{k}"})
    manifest = json.loads((out / dirs[0] / "manifest.json").read_text())
    html = render_report(summaries[0], manifest, results[0].decisions, history=history, futures=futures,
                         agents=[{"dir": d, "summary": s} for d, s in zip(dirs, summaries, strict=True)],
                         agent_comparisons=comparisons)
    index = {"format": 1, "agents": [{"spec": sp, "name": s["agent"], "dir": d}
                                     for sp, s, d in zip(specs, summaries, dirs, strict=True)],
             "plan_digest": plan.digest(), "seed": settings.seed, "comparisons": comparisons}
    for name, text in (("agents.json", json.dumps(index, indent=2, allow_nan=True) + "\n"), ("report.html", html)):
        fd, tmp = tempfile.mkstemp(dir=out, prefix=f".{name}-")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, out / name)
    if not quiet:
        click.echo(f"wrote {out}/report.html (all agents) and agents.json")
    return results
