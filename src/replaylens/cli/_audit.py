"""``replaylens audit`` and ``replaylens demo``: replay an agent, summarise, write the report."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import click

from .._imports import require
from ..settings import (
    DEFAULT_CELLS,
    DEFAULT_KEEP_RUNS,
    DEFAULT_LEVEL,
    DEFAULT_LLM_CONCURRENCY,
    DEFAULT_RESAMPLES,
    AuditSettings,
    Execution,
    ModelSpec,
    cell_list,
)
from ._app import (
    F,
    cli,
    model_progress,
    parse_params,
    resolve_model,
    sectioned,
    table_console,
    traceback_option,
    user_errors,
)
from ._config import ConfigCommand, missing_inputs
from ._gate import GateOptions, gate_options
from ._help import short_help
from ._llmcost import CostOptions, cost_options, pop_cost, response_format_option
from ._prune import KEEP_HELP, KeepRuns

# ------------------------------------------------------------------ shared audit runner


def audit_settings(*, cells: str, maps: str | None, seed: int, draws: int, repeats: int | None, resamples: int,
                   level: float, path: str, rng: str = "independent",
                   execution: Execution | None = None) -> AuditSettings:
    """The frozen settings of one audit from the command line's options."""
    return AuditSettings(cells=cell_list(cells), maps=maps, draws=draws, repeats=repeats, seed=seed, rng=rng,
                         n_resamples=resamples, level=level, path=path, execution=execution or Execution())


def _run_audit(*, history: Any, futures: Any, evaluator: Any, agent: Any, settings: AuditSettings,
               inputs: list[tuple[str, str | None]], command: str, arguments: dict[str, Any], out: Path,
               quiet: bool, prepared: Any = None, cost: CostOptions | None = None, model: str | None = None,
               restart: bool = False, overwrite: bool = False, expect_invariant: str = "",
               tolerance: float | None = None, gate: Any = None, release_utilities: bool = False,
               keep_runs: int | None = DEFAULT_KEEP_RUNS) -> Any:
    """Run the library's audit (:func:`replaylens.report.run_audit`) with a progress bar, then print the
    summary and check the --expect-invariant expectations (exit 1 on a violated one).  ``release_utilities``:
    the evaluator is this run's alone (released after its replay)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..errors import BudgetExhausted
    from ..report import run_audit, stream_warning
    from ._gate import finish_gate, gate_expectations
    from ._llmcost import attach_usage, write_partial

    llm = _llm_of(agent, cost, model)
    if gate is not None and gate.on_inconclusive != settings.on_inconclusive:
        settings = dataclasses.replace(settings, on_inconclusive=gate.on_inconclusive)
    planned: list[Any] = []
    declared: dict[str, Any] = {}  # filled once the plan is known; run_audit reads it after before_replay

    def before_replay(plan: Any) -> None:
        planned.append(plan)
        declared.update(gate_expectations(gate, expect_invariant, tolerance, plan))
        if llm is not None:
            llm.bind_plan(plan.cell_names, len(plan.draws), len(plan.maps))

    if llm is not None and cost is not None:
        if cost.estimate:   # an estimate writes nothing, so it neither creates nor locks OUT
            return _estimate_audit(history, futures, evaluator, agent, llm, settings, cost, str(model),
                                   before_replay)
        if cost.budgeted:
            llm.set_budget(cost.budget(str(model)))
    streams = prepared.plan.streams if prepared is not None else futures.streams
    warn = stream_warning(len(streams))
    if warn:
        click.echo(f"replaylens: warning: {warn}", err=True)
    console = Console(stderr=True, quiet=quiet)
    with Progress(TextColumn("[bold]{task.description}[/]"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[info]}"), TimeElapsedColumn(), console=console, transient=True,
                  disable=quiet) as bar, \
            model_progress(console, bar):
        task = bar.add_task("replay", total=None, info="decisions")

        def progress(done: int, total: int, info: str = "decisions") -> None:   # info: the backend's status
            bar.update(task, completed=done, total=total, info=info)

        try:
            result = run_audit(history, futures, evaluator, agent, settings, out=out, inputs=inputs,
                               command=command, arguments=arguments, restart=restart, overwrite=overwrite,
                               progress=progress, prepared=prepared, before_replay=before_replay, expect=declared,
                               release_utilities=release_utilities and prepared is None, keep_runs=keep_runs,
                               on_warning=lambda w: click.echo(f"replaylens: warning: {w}", err=True))
        except BudgetExhausted as exc:
            assert llm is not None and cost is not None
            write_partial(out, _usage(llm, planned[0], futures, cost, str(model), str(exc)), agent.name)
    if llm is not None and cost is not None:
        attach_usage(out, _usage(llm, result.decisions.plan, futures, cost, str(model), None))
    _print_summary(result, out, quiet)
    code = finish_gate(result, out, gate, history=history, futures=futures)  # issue 24: verdict, CI outputs
    if code:
        sys.exit(code)
    return result


#: LLM agent parameters that do not change what is asked: one model setup's request journal serves them all
_LLM_OPERATIONAL = ("run_dir", "cache", "cache_sampled", "api_key_env", "env_file", "offline")


def llm_dir(out: Path, params: dict[str, Any]) -> Path:
    """The request journal of an LLM audit into ``out``: ``OUT/llm/<12 hex of the model setup's digest>/``, one per
    model setup, so runs of different models (or prompts, seeds, ...) in one OUT never collide and a rerun of a
    setup finds its answers; ``OUT/llm`` itself when an earlier ReplayLens made it (its one journal per OUT)."""
    base = out / "llm"
    if (base / "manifest.json").is_file():
        return base
    setup = {k: v for k, v in params.items() if k not in _LLM_OPERATIONAL}
    return base / hashlib.sha256(json.dumps(setup, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _llm_of(agent: Any, cost: CostOptions | None, model: str | None) -> Any:
    """The LLM agent behind ``agent`` (None for other agents; cost options then are an error)."""
    from ..errors import ConfigError
    from ..llm import LLMAgent

    llm = agent.array if isinstance(agent.array, LLMAgent) else None
    if llm is None and cost is not None and cost.used:
        raise ConfigError("--estimate, prices, --max-requests and --max-cost apply to --agent llm only")
    return llm if cost is not None and model is not None else None


def _usage(llm: Any, plan: Any, futures: Any, cost: CostOptions, model: str, stopped: str | None) -> dict[str, Any]:
    """Token usage and cost per cell of the audit's run directory (``llm_usage`` in summary.json)."""
    from ._llmcost import llm_usage

    per_cell = sum(1 for f in futures if f.stream in set(plan.streams)) * len(plan.maps) * len(plan.draws) \
        * plan.repeats
    return llm_usage(llm.store, cost.pricing(model), plan.cell_names, {c: per_cell for c in plan.cell_names},
                     stopped)


def _estimate_audit(history: Any, futures: Any, evaluator: Any, agent: Any, llm: Any, settings: AuditSettings,
                    cost: CostOptions, model: str, before_replay: Any) -> None:
    """Replay with placeholder answers to collect every request, print the estimate, write nothing."""
    from ..replay import plan_replay, replay
    from ..report import resolve_repeats
    from ._llmcost import print_estimate

    plan = plan_replay(history, futures, cells=settings.cells, maps=settings.maps, draws=settings.draws,
                       repeats=resolve_repeats(settings.repeats, agent, settings.rng), seed=settings.seed,
                       rng=settings.rng)
    before_replay(plan)
    llm.set_mode("estimate")
    replay(history, futures, evaluator, agent, plan=plan, path=settings.path)
    reqs = list(llm.estimated.values())
    print_estimate(reqs, model=model, backend=llm.backend, cost=cost, what=f"audit of {agent.name}",
                   group=lambda r: str(r.meta.get("cell", "unattributed")))


def _run_adaptive(history: Any, futures: Any, evaluator: Any, agent: Any, *, cells: str, maps: str | None,
                  draws: int, seed: int, margin: float, rounds: int, level: float, path: str, out: Path,
                  quiet: bool) -> None:
    from .._durable import atomic_write
    from ..report import adaptive_audit, adaptive_summary

    res, asked, n_full = adaptive_audit(history, futures, evaluator, agent, cells=cells, maps=maps, draws=draws,
                                        seed=seed, margin=margin, rounds=rounds, level=level, path=path)
    summary = adaptive_summary(res, asked, n_full)
    summary["agent"] = dict(agent.spec) or {"name": agent.name}
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "adaptive.json", json.dumps(summary, indent=2, default=str).encode())
    for c in res.cells:
        verdict = c.verdict.replace("±m", f"±{margin:g}")
        click.echo(f"{c.cell}: {verdict} [{100 * c.low:.1f}, {100 * c.high:.1f}]% after {c.n_streams} of "
                   f"{res.n_streams} streams")
    if not quiet:
        click.echo(f"adaptive: {asked} of {n_full} decisions ({100 * asked / max(n_full, 1):.1f}%); wrote "
                   f"{out}/adaptive.json")


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.4f}"


def _iv(ci: list[float | None], fmt: Any) -> str:
    return "[n/a]" if any(v is None for v in ci) else f"[{fmt(ci[0])}, {fmt(ci[1])}]"


def _print_summary(result: Any, out: Path, quiet: bool) -> None:
    from rich.table import Table

    from ..report import pct

    console = table_console()
    s = result.document()   # read-only here: no copy of every per-stream value
    lv = f"{100 * s['level']:g}%"
    table = Table(title=f"ReplayLens audit — {s['agent']} ({s['n_streams']} streams, {s['n_future_tasks']} future "
                        f"tasks, {len(s['maps'])} maps)")
    table.add_column("cell")
    table.add_column(f"action response [{lv}]", justify="right")
    table.add_column(f"ΔU [{lv}]", justify="right")
    table.add_column(f"ΔO [{lv}]", justify="right")
    for r in s["rows"]:
        a, u, o = r["action_ci"], r["delta_utility_ci"], r["delta_oracle_ci"]
        sg = r["action_readout"].startswith("T_gr")  # signed, repeat-corrected
        table.add_row(r["cell"], f"{pct(r['action'], signed=sg)}% {_iv(a, lambda x, sg=sg: pct(x, signed=sg))}",
                      f"{_num(r['delta_utility'])} {_iv(u, _num)}",
                      f"{pct(r['delta_oracle'], signed=True)}pp {_iv(o, lambda x: pct(x, signed=True))}")
    from ..report import verdict_lines

    if quiet:   # exactly the verdict lines, every row (warnings go to stderr either way)
        for line in verdict_lines(s["verdict"]):
            click.echo(line)
        return
    console.print(table)
    for v in result.verdicts():
        click.echo(v)
    from ._stores import retrieval_console_lines

    for line in retrieval_console_lines(s):  # a retrieval agent's retrieval level and cross-tab per cell
        click.echo(line)
    from ._expect import state_lines  # issue 24: the caveat only where states changed but decisions did not

    for line in state_lines(s):
        click.echo(line)
    click.echo("")
    for line in verdict_lines(s["verdict"]):
        click.echo(line)
    click.echo(f"wrote {out}/report.html, report.md, summary.json, decisions.parquet, manifest.json, forest.png")


_audit_options = [
    click.option("--cells", default=",".join(DEFAULT_CELLS), show_default=True,
                 help="Cells to replay besides aligned (comma list, or 'all')."),
    click.option("--maps", default=None,
                 help="Label maps: derangements, involutions, cyclic, all, or explicit (ACMR, 1,0,3,2, JSON), "
                      "joined with '+'. Default: all derangements for <= 5 labels, else cyclic shifts."),
    click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0), help="Root seed (recorded)."),
    click.option("--draws", default=1, show_default=True, type=click.IntRange(min=1), help="Slot draws σ."),
    click.option("--repeats", default=None, type=click.IntRange(min=1),
                 help="Fresh repeats per decision (>= 2 enables the repeat-corrected T_gr). Default: 2 for a "
                      "declared stochastic agent under --rng independent, else 1."),
    click.option("--rng", "rng", default="independent", show_default=True,
                 type=click.Choice(["independent", "common"]),
                 help="Per-decision generators: independent per (cell, map, draw), or common random numbers "
                      "shared by the aligned and every intervened decision of a task and repeat."),
    click.option("--resamples", default=DEFAULT_RESAMPLES, show_default=True, type=click.IntRange(min=1),
                 help="Stream-cluster bootstrap draws."),
    click.option("--level", default=DEFAULT_LEVEL, show_default=True, type=click.FloatRange(0.5, 0.9999),
                 help="Interval level."),
    click.option("--path", "path_", default="auto", show_default=True,
                 type=click.Choice(["auto", "array", "reference"]), help="Replay path."),
    click.option("--quiet", is_flag=True, help="Print only the verdict lines (SAFE / UNSAFE / INCONCLUSIVE / "
                 "EXPECTED RESPONSE / NOT JUDGED, one per row) and warnings."),
]


def _with_audit_options(fn: F) -> F:
    for opt in reversed(_audit_options):
        fn = opt(fn)
    return fn


AUDIT_SECTIONS: dict[str, tuple[str, ...]] = {
    "Inputs and output": ("--history", "--future", "--utilities", "--out", "--restart", "--overwrite",
                          "--keep-runs"),
    "Agent": ("--agent", "--agent-param"),
    "Plan and inference": ("--cells", "--maps", "--seed", "--draws", "--repeats", "--rng", "--resamples", "--level",
                           "--path"),
    "CI gate": ("--expect-invariant", "--tolerance", "--expect", "--on-inconclusive", "--config", "--junit-xml",
                "--baseline", "--fail-on"),
    "Execution": ("--workers", "--backend", "--ray-address", "--ray-runtime-env", "--max-shard-memory",
                  "--concurrency"),
    "LLM agent (--agent llm)": ("--model", "--base-url", "--api-key-env", "--env-file", "--namespace", "--timeout",
                                "--retries", "--reasoning-effort", "--service-tier", "--offline",
                                "--response-format", "--cache", "--no-cache", "--cache-sampled"),
    "Cost (--agent llm)": ("--estimate", "--price-in", "--price-out", "--pricing", "--max-requests", "--max-cost",
                           "--tokenizer"),
    "Adaptive audit": ("--adaptive", "--margin", "--rounds"),
    "Output": ("--quiet", "--traceback", "--help"),
}


#: the options ``audit --help`` lists (issue 48); ``--help-all`` lists every one, in AUDIT_SECTIONS' sections
AUDIT_COMMON = ("--history", "--future", "--utilities", "--agent", "--out", "--cells", "--seed", "--repeats",
                "--expect-invariant", "--expect", "--config", "--junit-xml", "--baseline", "--fail-on", "--quiet")


@cli.command(cls=ConfigCommand.over(short_help(sectioned(AUDIT_SECTIONS), AUDIT_COMMON,  # issue 24: config defaults
                                               "execution, LLM agents, cost, adaptive audits, inference")))
@click.option("--history", "history_path", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="History file (JSONL, CSV or Parquet). Needed, here or in the project config (as are --future, "
                   "--utilities, --agent and --out).")
@click.option("--future", "future_path", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="Future task file.")
@click.option("--utilities", "util_path", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="Counterfactual utility table (the evaluator).")
@click.option("--agent", "agent_specs", multiple=True,
              help="Built-in agent name (mean, sum, count, latest, best, commutative, ...), module:factory, or "
                   "path/to/file.py:factory (modules beside the file can be imported). Repeat it to audit several "
                   "agents on one prepared plan (OUT/<agent>/ each, one OUT/report.html comparing them).")
@click.option("--agent-param", multiple=True, metavar="KEY=JSON", help="Keyword argument for the agent factory.")
@click.option("--out", default=None, type=click.Path(path_type=Path),   # a file there: one line (make_dir)
              help="Output directory: each audit that is not a resume is a run of its own in OUT/runs/, the latest "
                   "linked as OUT/report.html, OUT/summary.json, ...")
@click.option("--model", default=None, help="With --agent llm: openai/NAME (any OpenAI-compatible endpoint), "
              "scripted/RULE, local/PATH.gguf or local/embedded (the bundled SmolLM2-135M).")
@click.option("--base-url", default=None, help="With --agent llm: the endpoint's base URL (required for openai/...).")
@click.option("--api-key-env", default="OPENAI_API_KEY", show_default=True,
              help="Environment variable (or .env entry) holding the API key; the key is never logged.")
@click.option("--env-file", default=".env", show_default=True, help="Optional .env file read for the API key.")
@click.option("--namespace", "llm_namespace", default="arm", show_default=True,
              help="With --agent llm: label namespace shown to the model (arm, opaque, AD, WZ, semantic, ...).")
@click.option("--concurrency", default=None, type=click.IntRange(min=1),
              help="Decisions in flight at once: a thread pool for per-record/history-reading agents (or a "
                   "semaphore over `async def act`); with --agent llm, concurrent model requests (default 4).")
@click.option("--timeout", "timeout_s", default=180.0, show_default=True, type=click.FloatRange(min=1),
              help="With --agent llm: seconds before one model request is abandoned and retried.")
@click.option("--retries", default=3, show_default=True, type=click.IntRange(min=0),
              help="With --agent llm: retries of a failed model request (with backoff).")
@click.option("--reasoning-effort", default=None,
              help="With --agent llm: reasoning effort passed to the endpoint (e.g. low, medium, high).")
@click.option("--service-tier", default=None, help="With --agent llm: service tier passed to the endpoint.")
@click.option("--offline", is_flag=True, help="With --agent llm: analyse recorded decisions only (no model calls).")
@click.option("--restart", is_flag=True, help="Discard the journal of this run (the kept run with the same inputs, "
              "agent, code and plan) and replay it again.")
@click.option("--overwrite", is_flag=True, help="Replace OUT's latest run with this one instead of keeping it beside "
              "(and replace files of an earlier layout at OUT's result names).")
@click.option("--keep-runs", "keep_runs", default=DEFAULT_KEEP_RUNS, type=KeepRuns(), help=KEEP_HELP)
@click.option("--expect-invariant", default="", metavar="CELLS", help="CI gate: comma list of cells (and rekey) "
              "the agent must be invariant to; exit 1 with one line per violated expectation.")
@click.option("--tolerance", default=None, type=click.FloatRange(0, 1),
              help="With --expect-invariant: the margin -- the allowed share of changed decisions (a deterministic "
                   "agent, a census) or T_gr (a stochastic agent). Default: 0 for a deterministic agent, 0.05 for a "
                   "stochastic one (docs/guide/verdicts.md).")
@traceback_option
@response_format_option
@cost_options
@click.option("--workers", default=None, type=click.IntRange(min=1),
              help="Worker processes (or Ray CPUs) running shards in parallel, for CPU-bound agents.")
@click.option("--backend", default="auto", show_default=True,
              type=click.Choice(["auto", "serial", "threads", "processes", "ray"]),
              help="Where shards run; auto: processes with --workers > 1, threads with --concurrency > 1, else "
                   "two shards at a time on threads for a built-in (thread-safe) vectorized agent, one otherwise.")
@click.option("--ray-address", default=None,
              help="With --backend ray: the Ray cluster to join (host:port, ray://host:port, auto or local; default: "
                   "RAY_ADDRESS, else a cluster running on this machine, else a local instance of --workers CPUs).")
@click.option("--ray-runtime-env", default=None, metavar="JSON|FILE",
              help="With --backend ray: Ray's runtime_env for the workers, a JSON object or a JSON/YAML file (pip "
                   "requirements, working_dir, py_modules, env_vars).")
@click.option("--max-shard-memory", "shard_memory_mb", default=None, type=click.IntRange(min=1),
              help="Memory budget of one vectorized shard in MB (default 256; each of the shards running at "
                   "once); lower it for huge histories.")
@click.option("--cache", "cache_path", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="With --agent llm: the cross-run request cache (SQLite) file. Default: $REPLAYLENS_CACHE, else "
                   "the user cache directory's replaylens/requests.sqlite.")
@click.option("--no-cache", is_flag=True, help="With --agent llm: neither read nor write the request cache.")
@click.option("--cache-sampled", is_flag=True,
              help="With --agent llm: also cache sampled answers (temperature != 0); default: greedy decoding only.")
@click.option("--adaptive", is_flag=True,
              help="Ask streams in a seeded random order, in rounds, and stop a cell once its anytime-valid interval "
                   "settles the verdict (writes adaptive.json instead of the full report).")
@click.option("--margin", default=0.05, show_default=True,
              type=click.FloatRange(0.0, 1.0, min_open=True, max_open=True),
              help="With --adaptive: equivalence margin m ('no change beyond ±m').")
@click.option("--rounds", default=10, show_default=True, type=click.IntRange(min=1),
              help="With --adaptive: number of rounds (equal stream chunks).")
@_with_audit_options
@gate_options
@user_errors
def audit(history_path: Path | None, future_path: Path | None, util_path: Path | None, agent_specs: tuple[str, ...],
          agent_param: tuple[str, ...], out: Path | None, model: str | None, base_url: str | None, api_key_env: str,
          env_file: str, llm_namespace: str,
          concurrency: int | None, timeout_s: float, retries: int, reasoning_effort: str | None,
          service_tier: str | None, offline: bool, workers: int | None, backend: str, ray_address: str | None,
          ray_runtime_env: str | None,
          shard_memory_mb: int | None, cache_path: Path | None, no_cache: bool, cache_sampled: bool, adaptive: bool,
          margin: float, rounds: int, cells: str, maps: str | None, seed: int, draws: int, repeats: int | None,
          rng: str, resamples: int, level: float, path_: str, quiet: bool, restart: bool, overwrite: bool,
          keep_runs: int | None,
          expect_invariant: str, tolerance: float | None, response_format: str, gate: GateOptions,
          **cost_kw: Any) -> None:
    """Audit an agent on a history, future tasks and a utility table.

    --agent llm audits a language model: every decision is a journaled request (OUT/llm), repeats are
    fresh calls (2 by default, the repeat-corrected T_gr; --rng common reads one), and a rerun resumes
    without re-asking.
    """
    from ..agents import load_agent
    from ..errors import ConfigError
    from ..records import check_inputs, read_inputs

    gate.check()   # options that would otherwise be ignored (--fail-on without --baseline): one line, exit 2
    if history_path is None or future_path is None or util_path is None or not agent_specs or out is None:
        raise ConfigError(missing_inputs({"--history": history_path, "--future": future_path,
                                          "--utilities": util_path, "--agent": agent_specs, "--out": out}))
    if backend == "ray" or (ray_address is not None and backend == "auto"):
        require("ray", "--backend ray")   # a missing extra: one line before anything is read or made
    params = parse_params(agent_param)
    agent_spec = agent_specs[0]
    if len(agent_specs) > 1 and "llm" in agent_specs:
        raise ConfigError("--agent llm audits one model per run; compare two model runs with `replaylens compare`")
    cost = pop_cost(cost_kw)
    if agent_spec == "llm":
        if model is None:
            raise ConfigError("--agent llm needs --model (openai/NAME, scripted/RULE, local/PATH.gguf or "
                              "local/embedded)")
        agent_spec = "replaylens.llm:make_agent"
        user_run_dir = "run_dir" in params
        params = {"model": resolve_model(model), "run_dir": str(out / "llm"), "base_url": base_url,
                  "api_key_env": api_key_env, "env_file": env_file, "namespace": llm_namespace,
                  "concurrency": concurrency or DEFAULT_LLM_CONCURRENCY, "timeout_s": timeout_s, "retries": retries,
                  "reasoning_effort": reasoning_effort, "service_tier": service_tier, "offline": offline,
                  "seed": seed, "cache": False if no_cache else (str(cache_path) if cache_path else True),
                  "cache_sampled": cache_sampled, **params}
        if ModelSpec.parse(params["model"]).is_remote:
            require("openai", "--agent llm with an openai/ model")   # one line naming the extra, before OUT
            params.setdefault("response_format", response_format)
        if cost.estimate:  # an estimate sends nothing: no API key needed
            params["api_key_env"] = None
        if not user_run_dir:
            params["run_dir"] = str(llm_dir(out, params))
    elif model is not None:
        raise ConfigError("--model is only used with --agent llm")
    history, futures, evaluator = read_inputs(history_path, future_path, util_path)   # hashed beside the reads
    check_inputs(history, futures, evaluator, strict=True)
    agent = load_agent(agent_spec, params)
    if adaptive:
        if repeats not in (None, 1) or rng != "independent":
            raise ConfigError("--adaptive reads the direct action response: use --repeats 1 and --rng independent")
        _run_adaptive(history, futures, evaluator, agent, cells=cells, maps=maps, draws=draws, seed=seed,
                      margin=margin, rounds=rounds, level=level, path=path_, out=out, quiet=quiet)
        return
    # the cache changes who pays, not the decisions: kept out of the journal key (the agent spec records it)
    kept = {k: v for k, v in params.items() if k not in ("cache", "cache_sampled")}
    args = {"history": str(history_path), "future": str(future_path), "utilities": str(util_path),
            "agent": agent_spec, "agent_params": kept, "cells": cells, "maps": maps, "seed": seed, "draws": draws,
            "repeats": repeats, "resamples": resamples, "level": level, "path": path_, "rng": rng}
    is_llm = agent_spec == "replaylens.llm:make_agent"
    execution = Execution(backend=backend, workers=workers, concurrency=None if is_llm else concurrency,
                          ray_address=ray_address, shard_memory=shard_memory_mb * 2**20 if shard_memory_mb else None,
                          ray_runtime_env=ray_runtime_env)
    settings = audit_settings(cells=cells, maps=maps, seed=seed, draws=draws, repeats=repeats, resamples=resamples,
                              level=level, path=path_, rng=rng, execution=execution)
    if len(agent_specs) > 1:  # several agents, one prepared plan
        from ._agents_audit import run_agents
        from ._gate import refuse_several_agents

        refuse_several_agents(gate, expect_invariant)

        run_agents(_run_audit, agent_specs, params, history=history, futures=futures, evaluator=evaluator,
                   inputs=[("history", str(history_path)), ("futures", str(future_path)),
                           ("utilities", str(util_path))], arguments=args, settings=settings, out=out, quiet=quiet,
                   restart=restart, overwrite=overwrite, keep_runs=keep_runs)
        return
    _run_audit(history=history, futures=futures, evaluator=evaluator, agent=agent, settings=settings,
               inputs=[("history", str(history_path)), ("futures", str(future_path)), ("utilities", str(util_path))],
               command="audit", arguments=args, out=out, quiet=quiet, cost=cost,
               model=params.get("model") if is_llm else None, restart=restart, overwrite=overwrite, keep_runs=keep_runs,
               expect_invariant=expect_invariant, tolerance=tolerance, gate=gate,
               release_utilities=True)   # this run's own evaluator: its table goes once the replay has read it


@cli.command()
@click.option("--out", default="replaylens-demo", show_default=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--agent", "agent_spec", default=None,
              help="Agent to audit on the built-in bandit (a built-in name or module:factory). Default: the "
                   "embedded model when installed, else the scripted Mean rule.")
@click.option("--scripted", is_flag=True, help="Use the scripted Mean agent even if the embedded model is installed.")
@click.option("--streams", default=16, show_default=True, type=click.IntRange(min=2))
@click.option("--stores", is_flag=True,
              help="Instead: a retrieval-memory agent on the shipped tool-use log (retrieval and decision level per "
                   "cell) and store migration checks (Chroma → Qdrant, hnswlib at ef 10 and 200); needs "
                   "replaylens[stores].")
@click.option("--operations", is_flag=True,
              help="Instead: the memory-operations example (merge near-duplicates averaging their outcomes; keep "
                   "the latest record per key) for a learning (mean) and a recency (latest) agent, as "
                   "`check-operation --demo`; writes OUT/operations.json and OUT/manifest.json.")
@_with_audit_options
@user_errors
def demo(out: Path, agent_spec: str | None, scripted: bool, streams: int, cells: str, maps: str | None, seed: int,
         draws: int, repeats: int | None, rng: str, resamples: int, level: float, path_: str, quiet: bool,
         stores: bool = False, operations: bool = False) -> None:
    """Audit the built-in default agent on the built-in 4-arm bandit (writes the inputs too)."""
    if operations:  # replaylens.memory.operations' demo: cli/_operations.py
        from ..errors import ConfigError
        from ._operations import run_operations_demo

        if stores:
            raise ConfigError("demo --stores and --operations are two different examples: give one")
        run_operations_demo(out=out, seed=seed, level=level)
        return
    if stores:  # replaylens.memory.retrieval's demo: cli/_stores.py
        from ._stores import run_stores_demo

        for module in ("chromadb", "qdrant_client", "hnswlib"):   # its store checks: one line before anything runs
            require(module, "demo --stores")

        run_stores_demo(_run_audit, out=out, seed=seed, resamples=resamples, level=level, quiet=quiet)
        return
    from ..agents import load_agent
    from ..bandit import BANDIT_ARMS, make_bandit
    from ..records import write_evaluator, write_futures, write_history

    n_future = 16
    embedded = None
    if agent_spec is None and not scripted:
        from ..llm import embedded_model_path, llama_available

        embedded = embedded_model_path() if llama_available() else None
    if embedded is not None:
        from ..llm import make_agent

        # a tiny design: the local model reads every prompt on the CPU (seconds per request on 2 cores)
        streams, n_future = min(streams, 2), 1
        cells, maps = "value,pair,rename", maps or "1032"
        agent = make_agent(f"local/{embedded}", run_dir=str(out / "llm"), namespace="AD", seed=seed,
                           actions=list(BANDIT_ARMS), budget=None)
        label = "the embedded SmolLM2-135M-Instruct model (llama-cpp-python)"
    else:
        agent = load_agent(agent_spec or "mean")
        label = f"the scripted '{agent.name}' agent" + ("" if agent_spec else
                                                         " (the embedded model is not installed)")
    sub = make_bandit(n_streams=streams, n_future=n_future)
    inputs = out / "inputs"
    hp = write_history(sub.history, inputs / "history.jsonl")
    fp = write_futures(sub.futures, inputs / "future.jsonl")
    up = write_evaluator(sub.evaluator, inputs / "utilities.jsonl")
    if not quiet:
        click.echo(f"demo: auditing {label} on the built-in 4-arm bandit ({streams} streams); inputs in {inputs}")
    args = {"agent": agent.name if embedded is None else "local/embedded", "streams": streams, "cells": cells,
            "maps": maps, "seed": seed, "draws": draws, "repeats": repeats, "resamples": resamples, "level": level,
            "path": path_, "rng": rng}
    settings = audit_settings(cells=cells, maps=maps, seed=seed, draws=draws, repeats=repeats,
                              resamples=resamples, level=level, path=path_, rng=rng)
    _run_audit(history=sub.history, futures=sub.futures, evaluator=sub.evaluator, agent=agent, settings=settings,
               inputs=[("history", str(hp)), ("futures", str(fp)), ("utilities", str(up))], command="demo",
               arguments=args, out=out, quiet=quiet,
               overwrite=True)  # the demo directory is a scratch space: a changed demo replaces it
