"""``replaylens paper tools plan|debug``: tool-using agents with a model."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from ...cli import BUDGET_EXIT, CostOptions, F, resolve_model, user_errors
from ._group import paper

# ------------------------------------------------------------------ tool agents with a model (issue 7)


@paper.group()
def tools() -> None:
    """Tool-using agents with a model: sequential experiment planning (C4) and code debugging (C5)."""


def _tool_options(fn: F) -> F:
    opts = [
        click.option("--model", required=True, help="local/embedded, local/PATH.gguf or openai/NAME."),
        click.option("--run-dir", required=True, type=click.Path(file_okay=False, path_type=Path),
                     help="Run directory (journal; rerun the same command to resume)."),
        click.option("--base-url", default=None, help="openai/...: the endpoint's base URL."),
        click.option("--api-key-env", default="OPENAI_API_KEY", show_default=True,
                     help="openai/...: environment variable holding the key ('' for none)."),
        click.option("--env-file", default=".env", show_default=True),
        click.option("--export", "export_path", default=None, type=click.Path(dir_okay=False, path_type=Path),
                     help="After a passing gate: seal, score and write the compact export (.json.gz) here; "
                     "otherwise write an unsealed export (failure report, no scores) and exit 1."),
        click.option("--threads", default=None, type=click.IntRange(min=1), help="Local models: CPU threads."),
        click.option("--temperature", default=0.0, show_default=True, type=click.FloatRange(min=0.0),
                     help="Local models: 0 = greedy; > 0 samples with per-turn seeds drawn from --seed."),
        click.option("--force", type=click.Choice(["last", "every"]), default="last", show_default=True,
                     help="Force the submit tool on the last turn only (paper) or each stage's tool."),
        click.option("--retries", default=0, show_default=True, type=click.IntRange(min=0),
                     help="Capacity/transport replacements per trajectory under a frozen amendment (0: paper)."),
        click.option("--repeats", default=2, show_default=True, type=click.IntRange(min=1)),
        click.option("--tasks", "n_tasks", default=None, type=click.IntRange(min=1),
                     help="Smoke runs: only the first N tasks (the tables need the full design)."),
        click.option("--conditions", default="aligned,value,pair,rename", show_default=True),
        click.option("--prompt-cache", "memo_path", default=None, type=click.Path(dir_okay=False, path_type=Path),
                     help="Local greedy models: keep the exact repeat memo in this file, so a restarted run keeps it."),
        click.option("--estimate", is_flag=True,
                     help="Print the trajectories, model turns and first-turn input tokens, and make NO request."),
        click.option("--price-in", type=click.FloatRange(min=0), default=None,
                     help="USD per million input tokens (for --estimate and --max-cost)."),
        click.option("--price-out", type=click.FloatRange(min=0), default=None,
                     help="USD per million output tokens (for --max-cost)."),
        click.option("--max-requests", type=click.IntRange(min=0), default=None,
                     help="Stop cleanly (exit 1, resumable) once this many model turns are journaled; checked "
                          "before each trajectory."),
        click.option("--max-cost", type=click.FloatRange(min=0), default=None,
                     help="Stop cleanly once the journaled turns cost this many USD (needs prices)."),
    ]
    for o in reversed(opts):
        fn = o(fn)
    return fn


def _tool_backend(model: str, base_url: str | None, api_key_env: str, env_file: str, threads: int | None,
                  temperature: float, seed: int, memo_path: Path | None = None) -> Any:
    from ...llm import make_tool_backend

    return make_tool_backend(resolve_model(model), base_url=base_url, api_key_env=api_key_env or None,
                             env_file=env_file, n_threads=threads, temperature=temperature, seed=seed,
                             memo_path=memo_path)


def _estimate_tools(run: Any, agent: Any, model: str, price_in: float | None, what: str) -> None:
    """Turns and input tokens of the planned trajectories, no request made.  A trajectory's turns and its later
    prompts depend on the model's own tool calls, so: turns between stages and stages + max format corrections,
    input tokens counted at each trajectory's first-turn request size (a lower bound)."""
    from ...cli import token_counter
    from ...llm import Pricing, ToolTurnRequest

    counter = token_counter(resolve_model(model))
    settings = agent.backend.settings
    n_min = n_max = 0
    t_in = 0
    for req in run.plan:
        env = run._env(req)
        first = ToolTurnRequest(({"role": "system", "content": env.system()},
                                 {"role": "user", "content": env.opening()}), env.tools, agent._choice(env, 0))
        n_min += env.stages
        n_max += env.stages + agent.max_corrections
        t_in += env.stages * counter.count(first.request_bytes(settings).decode("utf-8"))
    click.echo(f"estimate for {what} (no request made):")
    click.echo(f"  trajectories:   {len(run.plan):,}")
    click.echo(f"  model requests: at most {n_max:,} (stages per trajectory plus at most {agent.max_corrections} "
               f"format correction each); {n_min:,} when every trajectory completes without a correction")
    click.echo(f"  input tokens:   at least {t_in:,} (each turn counted at its trajectory's first-turn request "
               f"size with {counter.method}; tool calls and results added by later turns are not counted)")
    click.echo("  output tokens:  not estimated (tool-call arguments depend on the model)")
    cost = Pricing(price_in, 0.0).cost(t_in, 0)
    if cost is not None:
        click.echo(f"  input cost:     at least {cost:.4f} USD at {price_in:g} USD per million input tokens")


def _acquire(run: Any, agent: Any, model: str, price_in: float | None, price_out: float | None,
             max_requests: int | None, max_cost: float | None) -> Any:
    """``run.acquire()`` under an optional budget; a budget stop prints PARTIAL and exits 1."""
    from ...llm import BudgetExhausted

    agent.spend = CostOptions(price_in=price_in, price_out=price_out, max_requests=max_requests,
                              max_cost=max_cost).budget(model)
    try:
        return run.acquire()
    except BudgetExhausted as exc:
        click.echo(f"PARTIAL: {exc}", err=True)
        sys.exit(BUDGET_EXIT)


def _tool_finish(run: Any, counts: Any, export_path: Path | None) -> None:
    from ..tools import SealError, failure_summary

    click.echo(f"trajectories: {json.dumps(counts, sort_keys=True)}; run directory {run.root}")
    try:
        run.seal()
    except SealError as exc:
        click.echo(f"gate not passed: {exc}", err=True)
        click.echo(f"failure report: {failure_summary(run.failure_report())}")
        if export_path is not None:
            click.echo(f"unsealed export (\"sealed\": false; failure report and completed trajectories, no hidden "
                       f"or final-test score) written to {run.export_unsealed(export_path)}")
            sys.exit(1)
        return
    run.score()
    click.echo("gate passed; choices sealed and scored")
    if export_path is not None:
        click.echo(f"export written to {run.export(export_path)}")


@tools.command("plan")
@_tool_options
@click.option("--seed", default=20260908, show_default=True, type=click.IntRange(min=0))
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
@user_errors
def tools_plan(model: str, run_dir: Path, base_url: str | None, api_key_env: str, env_file: str,
               export_path: Path | None, threads: int | None, temperature: float, force: str, retries: int,
               repeats: int, n_tasks: int | None, conditions: str, memo_path: Path | None,
               estimate: bool, price_in: float | None, price_out: float | None, max_requests: int | None,
               max_cost: float | None, seed: int, data_dir: Path | None) -> None:
    """Sequential experiment planning (48 tasks x 4 conditions x 2 trajectories) with MODEL."""
    from ..tools import LLMPlanner, PlanningRun, build_planning_suite

    suite = build_planning_suite(seed, data_dir=data_dir)
    tasks = None if n_tasks is None else [t.task_id for t in suite.tasks[:n_tasks]]
    agent = LLMPlanner(_tool_backend(model, base_url, api_key_env, env_file, threads, temperature, seed, memo_path),
                       force=force, retries=retries)
    run = PlanningRun(run_dir, suite, seed=seed, repeats=repeats, planner=agent, tasks=tasks,
                      conditions=tuple(c for c in conditions.split(",") if c))
    if estimate:
        _estimate_tools(run, agent, model, price_in, "tools plan")
        return
    run.freeze_manifest()
    _tool_finish(run, _acquire(run, agent, model, price_in, price_out, max_requests, max_cost), export_path)


@tools.command("debug")
@_tool_options
@click.option("--seed", default=20260907, show_default=True, type=click.IntRange(min=0))
@user_errors
def tools_debug(model: str, run_dir: Path, base_url: str | None, api_key_env: str, env_file: str,
                export_path: Path | None, threads: int | None, temperature: float, force: str, retries: int,
                repeats: int, n_tasks: int | None, conditions: str, memo_path: Path | None,
                estimate: bool, price_in: float | None, price_out: float | None, max_requests: int | None,
                max_cost: float | None, seed: int) -> None:
    """Code debugging (24 tasks x 4 conditions x 2 trajectories) with MODEL."""
    from ..tools import DebugRun, LLMDebugger, build_suite

    suite = build_suite(seed)
    agent = LLMDebugger(_tool_backend(model, base_url, api_key_env, env_file, threads, temperature, seed, memo_path),
                        force=force, retries=retries)
    run = DebugRun(run_dir, suite, seed=seed, repeats=repeats, agent=agent)
    keep = {t.task_id for t in suite.tasks[: n_tasks or len(suite.tasks)]}
    conds = set(c for c in conditions.split(",") if c)
    run.plan = [r for r in run.plan if r["task"] in keep and r["condition"] in conds]
    if estimate:
        _estimate_tools(run, agent, model, price_in, "tools debug")
        return
    run.freeze_manifest()
    _tool_finish(run, _acquire(run, agent, model, price_in, price_out, max_requests, max_cost), export_path)
