"""What model audits share on the command line: the cost options (``--estimate``, prices, ``--max-requests``,
``--max-cost``, ``--response-format``), the no-call estimate printout, and token usage / partial-run status
written into summary.json and report.md.

A budget stop exits with status 1 (see docs/decisions.md, "Issue 18"): the run directory keeps every
journaled request, summary.json says ``"partial": true`` and lists the incomplete cells.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from ._app import F

__all__ = ["BUDGET_EXIT", "CostOptions", "cost_options", "response_format_option"]

BUDGET_EXIT = 1
"""Exit status of a run stopped by --max-requests / --max-cost (partial, resumable)."""

_COST_OPTIONS = [
    click.option("--estimate", is_flag=True,
                 help="Print the number of model requests, input/output tokens and cost, and make NO request."),
    click.option("--price-in", type=click.FloatRange(min=0), default=None,
                 help="USD per million input tokens (for --estimate and --max-cost)."),
    click.option("--price-out", type=click.FloatRange(min=0), default=None,
                 help="USD per million output tokens (for --estimate and --max-cost)."),
    click.option("--pricing", "pricing_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
                 help='JSON pricing file: {"input": USD_PER_M, "output": USD_PER_M} or {"MODEL": {...}}.'),
    click.option("--max-requests", type=click.IntRange(min=0), default=None,
                 help="Stop cleanly once this many requests are journaled in the run directory (rerun with a "
                      "higher budget resumes)."),
    click.option("--max-cost", type=click.FloatRange(min=0), default=None,
                 help="Stop cleanly once the journaled requests cost this many USD (needs prices)."),
]


def cost_options(fn: F) -> F:
    """Add the estimate / price / budget options to a command (keyword ``cost`` gets a :class:`CostOptions`)."""
    for opt in reversed(_COST_OPTIONS):
        fn = opt(fn)
    return fn


def cache_options(fn: F) -> F:
    """--cache / --no-cache / --cache-sampled: the cross-run request cache (issue 18)."""
    opts = [
        click.option("--cache", "cache_path", default=None, type=click.Path(dir_okay=False, path_type=Path),
                     help="The cross-run request cache (SQLite) file. Default: $REPLAYLENS_CACHE, else the user "
                          "cache directory's replaylens/requests.sqlite."),
        click.option("--no-cache", is_flag=True, help="Neither read nor write the request cache."),
        click.option("--cache-sampled", is_flag=True,
                     help="Also cache sampled answers (default: greedy decoding only)."),
    ]
    for o in reversed(opts):
        fn = o(fn)
    return fn


def response_format_option(fn: F) -> F:
    opt = click.option("--response-format", type=click.Choice(["auto", "json_schema", "json_object", "text"]),
                       default="auto", show_default=True,
                       help="openai/... models: structured-output mode. auto probes the endpoint once (a cheap "
                            "request) and uses the strongest it accepts: json_schema, json_object (schema in the "
                            "prompt), text (parsed, one format retry).")
    return opt(fn)


@dataclass(frozen=True)
class CostOptions:
    """The parsed cost options of one command."""

    estimate: bool = False
    price_in: float | None = None
    price_out: float | None = None
    pricing_file: Path | None = None
    max_requests: int | None = None
    max_cost: float | None = None

    @property
    def budgeted(self) -> bool:
        return self.max_requests is not None or self.max_cost is not None

    @property
    def used(self) -> bool:
        return self.estimate or self.budgeted or self.price_in is not None or self.price_out is not None \
            or self.pricing_file is not None

    def pricing(self, model: str) -> Any:
        from ..llm import load_pricing

        return load_pricing(self.pricing_file, model, self.price_in, self.price_out)

    def budget(self, model: str) -> Any:
        from ..llm import Budget

        if not self.budgeted:
            return None
        return Budget(self.max_requests, self.max_cost, self.pricing(model))


def pop_cost(kwargs: dict[str, Any]) -> CostOptions:
    """Remove the cost options from a command's keyword arguments."""
    return CostOptions(kwargs.pop("estimate"), kwargs.pop("price_in"), kwargs.pop("price_out"),
                       kwargs.pop("pricing_file"), kwargs.pop("max_requests"), kwargs.pop("max_cost"))


def token_counter(model: str) -> Any:
    """The model's own tokenizer for ``local/PATH.gguf`` models (llama-cpp-python installed), else chars / 4."""
    from ..llm import TokenCounter

    provider, _, name = model.partition("/")
    return TokenCounter(name if provider == "local" and name.endswith(".gguf") else None)


def message_builder(backend: Any) -> Callable[[Any], Sequence[Mapping[str, str]]]:
    """The messages a back-end would send (the schema instruction of json_object / text modes included)."""
    from ..llm import format_messages

    settings = backend.settings
    if settings.provider == "openai":
        mode = settings.response_format if settings.structured else "text"
        return lambda r: format_messages(r, mode)
    return lambda r: r.messages()


def print_estimate(requests: Sequence[Any], *, model: str, backend: Any, cost: CostOptions, what: str,
                   group: Callable[[Any], str] | None = None, max_tokens: int | None = None) -> dict[str, Any]:
    """Print (and return) the no-call estimate of ``requests``."""
    from ..llm import estimate_requests

    pricing = cost.pricing(model)
    est = estimate_requests(requests, counter=token_counter(model), pricing=pricing,
                            messages=message_builder(backend), max_tokens=max_tokens, group=group)
    fmt = getattr(backend, "format_choice", None) or {}
    click.echo(f"estimate for {what} (no request made):")
    click.echo(f"  model requests: {est['requests']:,}")
    click.echo(f"  input tokens:   {est['input_tokens']:,}  (counted with {est['tokenizer']}; chat-template "
               "tokens not included)")
    click.echo(f"  output tokens:  {est['output_tokens']:,}  (bound: {est['output_bound']})")
    if fmt:
        click.echo(f"  response format assumed: {fmt.get('response_format')} ({fmt.get('chosen_by')})")
    if est["cost_usd"] is None:
        click.echo("  cost: give --price-in and --price-out (USD per million tokens) or --pricing FILE")
    else:
        click.echo(f"  cost: {est['cost_usd']:.4f} USD at {pricing.price_in:g} in / {pricing.price_out:g} out USD "
                   "per million tokens")
    for name, g in sorted((est.get("groups") or {}).items()):
        c = "" if g["cost_usd"] is None else f", {g['cost_usd']:.4f} USD"
        click.echo(f"    {name}: {g['requests']:,} requests, {g['input_tokens']:,} in / {g['output_tokens']:,} "
                   f"out tokens{c}")
    return est


def llm_usage(store: Any, pricing: Any, cells: Sequence[str], planned: Mapping[str, int] | None = None,
              stopped: str | None = None) -> dict[str, Any]:
    """The ``llm_usage`` block of summary.json: totals and per cell tokens, cost, decided/planned requests."""
    from ..llm import usage_by_cell

    per = usage_by_cell(store, pricing)
    for c in cells:
        per.setdefault(c, {"requests": 0, "decided": 0, "attempts": 0, "input_tokens": 0, "output_tokens": 0,
                           "usage_reported": True, "cost_usd": pricing.cost(0, 0)})
    for c, d in per.items():
        if planned is not None and c in planned:
            d["planned_requests"] = planned[c]
        d["complete"] = d["decided"] >= d.get("planned_requests", d["requests"]) and d["decided"] == d["requests"]
    tot = {k: sum(int(d[k]) for d in per.values()) for k in ("requests", "decided", "attempts", "input_tokens",
                                                             "output_tokens")}
    costs = [d["cost_usd"] for d in per.values()]
    return {"partial": stopped is not None, "stopped_by": stopped,
            "incomplete_cells": sorted(c for c, d in per.items() if not d["complete"]),
            "total": {**tot, "cost_usd": None if any(c is None for c in costs) else sum(costs)},
            "tokens": "server-reported usage where given, else ceil(characters / 4)",
            "price_in_usd_per_m": pricing.price_in, "price_out_usd_per_m": pricing.price_out, "cells": per}


def usage_markdown(usage: Mapping[str, Any]) -> str:
    """The report.md section of ``llm_usage``."""
    lines = ["", "## Model requests and cost", ""]
    if usage["partial"]:
        lines += [f"**PARTIAL RUN** — stopped by {usage['stopped_by']}. Incomplete cells: "
                  f"{', '.join(usage['incomplete_cells']) or 'none'}. Rerun the same command with a higher budget "
                  "to resume.", ""]
    lines += ["| cell | decided / requests | attempts | input tokens | output tokens | cost (USD) |",
              "|---|---|---|---|---|---|"]
    for c, d in sorted(usage["cells"].items()):
        cost = "—" if d["cost_usd"] is None else f"{d['cost_usd']:.6f}"
        req = d.get("planned_requests", d["requests"])
        lines.append(f"| {c} | {d['decided']} / {req} | {d['attempts']} | {d['input_tokens']:,} | "
                     f"{d['output_tokens']:,} | {cost} |")
    t = usage["total"]
    cost = "—" if t["cost_usd"] is None else f"{t['cost_usd']:.6f}"
    lines += [f"| **total** | {t['decided']} / {t['requests']} | {t['attempts']} | {t['input_tokens']:,} | "
              f"{t['output_tokens']:,} | {cost} |", "", f"Tokens: {usage['tokens']}.", ""]
    return "\n".join(lines)


def attach_usage(out: Path, usage: Mapping[str, Any]) -> None:
    """Add ``llm_usage`` to OUT/summary.json and its section to OUT/report.md (each replaced atomically)."""
    from .._durable import atomic_write

    sp, rp = out / "summary.json", out / "report.md"
    summary = json.loads(sp.read_text(encoding="utf-8")) if sp.exists() else {}
    summary["llm_usage"] = usage
    summary["partial"] = usage["partial"]
    atomic_write(sp, (json.dumps(summary, indent=2, allow_nan=True) + "\n").encode("utf-8"))
    text = rp.read_text(encoding="utf-8") if rp.exists() else ""
    atomic_write(rp, (text + usage_markdown(usage)).encode("utf-8"))


def write_partial(out: Path, usage: Mapping[str, Any], agent_name: str) -> None:
    """A budget-stopped audit: summary.json / report.md say the run is partial (no decisions, no verdicts), then
    exit with :data:`BUDGET_EXIT`.  Earlier complete results in OUT are removed, never mixed with this state."""
    from .._durable import atomic_write

    out.mkdir(parents=True, exist_ok=True)
    for name in ("decisions.parquet", "forest.png", "manifest.json"):
        (out / name).unlink(missing_ok=True)
    atomic_write(out / "summary.json", (json.dumps({"format": 1, "agent": agent_name, "partial": True,
                                                    "llm_usage": usage}, indent=2) + "\n").encode("utf-8"))
    atomic_write(out / "report.md", (f"# ReplayLens audit: {agent_name}\n\nNo verdicts: the run is partial.\n"
                                     + usage_markdown(usage)).encode("utf-8"))
    click.echo(f"PARTIAL: {usage['stopped_by']}; incomplete cells: {', '.join(usage['incomplete_cells'])}. "
               f"Wrote {out}/summary.json and report.md; rerun with a higher budget to resume.", err=True)
    sys.exit(BUDGET_EXIT)
