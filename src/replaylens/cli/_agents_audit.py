"""``replaylens audit --agent A --agent B ...``: several agents replayed on one prepared plan.

The plan, the transformed streams, the utilities and the oracle are prepared once
(:func:`replaylens.replay.prepare_replay`); each agent is replayed with :meth:`PreparedReplay.run` and
written to ``OUT/<agent>/`` exactly as a one-agent audit into that directory would be (its runs side by side,
resumed, kept and pruned the same way; ``replaylens compare`` works on any two of them).  The comparison is a run
of OUT like a one-agent audit's (:func:`replaylens.report.agents_run`): ``OUT/runs/<UTC>-agents-…-<digest>/`` holds
its report.html (a per-agent table, linking each agent's own run, and the paired stream-cluster differences of
every agent against the first) and agents.json, linked as ``OUT/report.html`` and ``OUT/agents.json``; the same
command resumes every agent's run and makes that comparison's run the latest again.  An agent's run is keyed by
what decides its decisions (its spec and code, the plan, the inputs), not by the agents beside it: ``mean`` audited
with ``latest`` and then with ``best`` is replayed once (the plan is the same unless an agent beside it raises the
repeats a stochastic agent needs).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ..settings import DEFAULT_KEEP_RUNS, AuditSettings

#: names of OUT an agent's directory must not take (OUT's runs, result links, LLM journals, the run index)
_TAKEN = frozenset({"runs", "llm", "index.html", "index_files", "agents.json", "summary.json", "report.html",
                    "report.md", "manifest.json", "decisions.parquet", "forest.png", "journal"})


def agent_dirs(names: list[str]) -> list[str]:
    """A distinct, file-system-safe directory name per agent (``mean``, ``mypkg_make``, ``mean-2``), never one of
    OUT's own names (an agent called ``runs`` gets ``runs-2``)."""
    out: list[str] = []
    for n in names:
        base = re.sub(r"[^\w.-]+", "_", n).strip("._") or "agent"
        name, k = base, 2
        while name in out or name.lower() in _TAKEN:
            name, k = f"{base}-{k}", k + 1
        out.append(name)
    return out


def run_agents(run_audit: Callable[..., Any], specs: tuple[str, ...], params: dict[str, Any], *, history: Any,
               futures: Any, evaluator: Any, inputs: list[tuple[str, str | None]], arguments: dict[str, Any],
               settings: AuditSettings, out: Path, quiet: bool, restart: bool = False, overwrite: bool = False,
               keep_runs: int | None = DEFAULT_KEEP_RUNS) -> list[Any]:
    """Replay every agent of ``specs`` on one prepared plan into OUT/<agent>/ each (a one-agent audit's run there,
    ``restart``/``overwrite``/``keep_runs`` as for one), then publish the comparison as a run of OUT, holding OUT's
    lock throughout."""
    from ..agents import load_agent
    from ..replay import plan_replay, prepare_replay
    from ..report import agents_run, resolve_repeats

    agents = [load_agent(s, params) for s in specs]
    dirs = agent_dirs([a.name for a in agents])
    with agents_run(out, overwrite=overwrite, keep_runs=keep_runs, label="agents-" + "-".join(dirs),
                    announce=lambda line: click.echo(f"replaylens: {line}", err=True)) as run:
        repeats = max(resolve_repeats(settings.repeats, a, settings.rng) for a in agents)  # one plan: the most needed
        plan = plan_replay(history, futures, cells=settings.cells, maps=settings.maps, draws=settings.draws,
                           repeats=repeats, seed=settings.seed, rng=settings.rng)
        prepared = prepare_replay(history, futures, evaluator, plan=plan)
        results = []
        for spec, agent, d in zip(specs, agents, dirs, strict=True):
            click.echo(f"agent {agent.name} → {out / d}")
            results.append(run_audit(history=history, futures=futures, evaluator=evaluator, agent=agent,
                                     inputs=inputs, command="audit",
                                     arguments={**arguments, "agent": spec},   # (the plan: in the key)
                                     settings=settings, out=out / d, quiet=quiet, prepared=prepared, restart=restart,
                                     overwrite=overwrite, keep_runs=keep_runs))
        comparison = {"dirs": dirs, "seed": settings.seed, "n_resamples": settings.n_resamples,
                      "level": settings.level, "plan_digest": plan.digest()}
        run.publish(specs, [out / d for d in dirs], comparison,
                    lambda runs: _files(out, specs, dirs, runs, results, plan, settings, history, futures))
    if not quiet:
        click.echo(f"wrote {out}/report.html (all agents) and agents.json")
    return results


def _files(out: Path, specs: tuple[str, ...], dirs: list[str], runs: list[str], results: list[Any], plan: Any,
           settings: AuditSettings, history: Any, futures: Any) -> dict[str, str]:
    """The comparison's files: report.html (linking each agent's run, ``runs``: relative to OUT) and agents.json."""
    from ..report import compare_summaries, render_report

    summaries = [r.summary() for r in results]
    frames = [r.decisions.frame() for r in results]
    comparisons = []
    for k in range(1, len(results)):
        c = compare_summaries(summaries[0], summaries[k], frames[0], frames[k], seed=settings.seed,
                              n_resamples=settings.n_resamples, level=settings.level)
        comparisons.append(c | {"id": f"agent-{k}"})
    manifest = json.loads((out / runs[0] / "manifest.json").read_text())
    html = render_report(summaries[0], manifest, results[0].decisions, history=history, futures=futures,
                         agents=[{"dir": r, "summary": s} for r, s in zip(runs, summaries, strict=True)],
                         agent_comparisons=comparisons)
    index = {"format": 1, "agents": [{"spec": sp, "name": s["agent"], "dir": d, "run": r}
                                     for sp, s, d, r in zip(specs, summaries, dirs, runs, strict=True)],
             "plan_digest": plan.digest(), "seed": settings.seed, "comparisons": comparisons}
    return {"agents.json": json.dumps(index, indent=2, allow_nan=True) + "\n", "report.html": html}
