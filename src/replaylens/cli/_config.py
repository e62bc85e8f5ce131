"""The project config: ``replaylens.toml`` or ``[tool.replaylens]`` in ``pyproject.toml`` (issue 24).

It holds what an audit's command line would: inputs, agent, cells, repeats, ... and, per cell or
``rekey``, an expectation (``invariant`` with a tolerance, ``responds``, ``free``).  ``replaylens audit``
with no arguments runs it; every command-line option overrides the config's value.  The config becomes
click's ``default_map`` of the audit command, so a config run and the equivalent command line take the
same code path and write the same files.

    [tool.replaylens]
    history = "data/history.jsonl"
    future = "data/future.jsonl"
    utilities = "data/utilities.jsonl"
    agent = "mypkg.agent:make"          # or a list of agents
    agent_params = { alpha = 0.1 }
    out = "replaylens-out"
    cells = ["value", "pair", "mask", "reorder", "rename"]
    repeats = 1
    junit_xml = "replaylens-junit.xml"

    [tool.replaylens.expect]
    pair = "invariant"
    reorder = { kind = "invariant", tolerance = 0.01 }
    value = "responds"
    mask = "free"
"""

from __future__ import annotations

import json
import os
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from ..errors import ConfigError

__all__ = ["ConfigCommand", "config_option", "find_config", "load_config", "missing_inputs", "to_default_map"]

CONFIG_ENV = "REPLAYLENS_CONFIG"
CONFIG_META = "replaylens.config"
"""``click.Context.meta`` key of the config file a command's defaults came from (None when none was found)."""
PATH_KEYS = {"history": "history_path", "future": "future_path", "utilities": "util_path", "out": "out",
             "junit_xml": "junit_xml", "baseline": "baseline", "cache": "cache_path"}
#: config key -> audit parameter name (values checked and converted by the option's click type)
SCALAR_KEYS = {"model": "model", "maps": "maps", "seed": "seed", "draws": "draws", "repeats": "repeats",
               "resamples": "resamples", "level": "level", "path": "path_", "quiet": "quiet",
               "tolerance": "tolerance", "workers": "workers", "backend": "backend", "concurrency": "concurrency",
               "overwrite": "overwrite", "base_url": "base_url", "namespace": "llm_namespace",
               "on_inconclusive": "on_inconclusive", "keep_runs": "keep_runs"}
LIST_KEYS = {"cells": "cells", "expect_invariant": "expect_invariant", "fail_on": "fail_on"}


def find_config(start: Path | None = None) -> Path | None:
    """``$REPLAYLENS_CONFIG``, else ``replaylens.toml`` in the working directory, else its ``pyproject.toml``
    when that has a ``[tool.replaylens]`` table; None when there is no config."""
    env = os.environ.get(CONFIG_ENV)
    if env:
        return Path(env)
    here = start or Path.cwd()
    if (here / "replaylens.toml").is_file():
        return here / "replaylens.toml"
    py = here / "pyproject.toml"
    if py.is_file():
        try:
            if "replaylens" in tomllib.loads(py.read_text(encoding="utf-8")).get("tool", {}):
                return py
        except (tomllib.TOMLDecodeError, UnicodeDecodeError):
            return None  # not ours to judge: a broken pyproject without our table is not an error here
    return None


def load_config(path: Path) -> dict[str, Any]:
    """The config table of ``path`` (``[tool.replaylens]`` of a pyproject.toml, or a replaylens.toml's top level)."""
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML ({exc})") from None
    if path.name == "pyproject.toml":
        table = data.get("tool", {}).get("replaylens")
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: no [tool.replaylens] table")
        return table
    return data


def _section(path: Path) -> str:
    return "tool.replaylens" if path.name == "pyproject.toml" else ""


def to_default_map(table: Mapping[str, Any], path: Path) -> dict[str, Any]:
    """The audit command's ``default_map`` for a config table; one-line ConfigError naming file and key."""
    from ..report import parse_expectations

    sec = _section(path)
    where = f"{path}: {sec + '.' if sec else ''}"
    base = path.resolve().parent
    out: dict[str, Any] = {}
    for key, val in table.items():
        if key in PATH_KEYS:
            if not isinstance(val, str):
                raise ConfigError(f"{where}{key} must be a path (a string); got {val!r}")
            p = Path(val)
            # relative to the config file (the same path as written when the file is in the working directory)
            out[PATH_KEYS[key]] = str(p if p.is_absolute() or base == Path.cwd().resolve() else base / p)
        elif key in SCALAR_KEYS:
            if isinstance(val, (dict, list)):
                raise ConfigError(f"{where}{key} must be a single value; got {val!r}")
            out[SCALAR_KEYS[key]] = val
        elif key in LIST_KEYS:
            if isinstance(val, list):
                val = ",".join(str(v) for v in val)
            if not isinstance(val, str):
                raise ConfigError(f"{where}{key} must be a list of names or a comma list; got {val!r}")
            out[LIST_KEYS[key]] = val
        elif key == "agent":
            agents = [val] if isinstance(val, str) else val
            if not isinstance(agents, list) or not agents or not all(isinstance(a, str) for a in agents):
                raise ConfigError(f"{where}agent must be an agent name or a list of them; got {val!r}")
            out["agent_specs"] = tuple(agents)
        elif key == "agent_params":
            if not isinstance(val, dict):
                raise ConfigError(f"{where}agent_params must be a table; got {val!r}")
            out["agent_param"] = tuple(f"{k}={json.dumps(v)}" for k, v in val.items())
        elif key == "expect":
            if not isinstance(val, dict):
                raise ConfigError(f"{where}expect must be a table of cell = expectation; got {val!r}")
            exps = parse_expectations(val, where=f"{where}expect")
            out["expect_specs"] = tuple(e.spec() for e in exps.values())
        else:
            known = sorted([*PATH_KEYS, *SCALAR_KEYS, *LIST_KEYS, "agent", "agent_params", "expect"])
            raise ConfigError(f"{where}unknown key {key!r} (known: {', '.join(known)})")
    return out


def _config_arg(args: list[str]) -> str | None:
    for i, a in enumerate(args):
        if a == "--config" and i + 1 < len(args):
            return args[i + 1]
        if a.startswith("--config="):
            return a.split("=", 1)[1]
    return None


def _asks_help(args: list[str], parent: click.Context | None, extra: Mapping[str, Any]) -> bool:
    """``args`` hold a help flag (the context's help option names, ``--help-all``): help reads no config."""
    from ._help import HELP_ALL

    names = extra.get("help_option_names") or (parent.help_option_names if parent is not None else ["--help"])
    flags = {*names, HELP_ALL}
    head = args[:args.index("--")] if "--" in args else args
    return any(a in flags for a in head)


def _from_config(exc: click.BadParameter) -> bool:
    """The refused value came from the config (click's ``default_map``), not the command line."""
    from click.core import ParameterSource

    return (exc.ctx is not None and exc.param is not None and exc.param.name is not None
            and exc.ctx.get_parameter_source(exc.param.name) is ParameterSource.DEFAULT_MAP)


def _config_key(param: click.Parameter | None) -> str:
    """The config key of an audit parameter (its option name when the config has no key of its own for it)."""
    name = param.name if param is not None else None
    for table in (PATH_KEYS, SCALAR_KEYS, LIST_KEYS):
        for key, target in table.items():
            if target == name:
                return key
    return str(name)


def _config_error(exc: ConfigError) -> None:
    click.echo(f"replaylens: error: {exc}", err=True)
    sys.exit(2)


class ConfigCommand(click.Command):
    """A command whose option defaults come from the project config (``--config FILE``, else
    :func:`find_config`): the config is click's ``default_map``, so command-line options override it."""

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        path = None
        error: ConfigError | None = None
        if "default_map" not in extra and not _asks_help(args, parent, extra):
            explicit = _config_arg(args)
            path = Path(explicit) if explicit else find_config()
            if path is not None:
                try:
                    extra["default_map"] = to_default_map(load_config(path), path)
                except ConfigError as exc:
                    error = exc   # said once the arguments are parsed: an eager flag (any help) exits first
        try:
            ctx = super().make_context(info_name, args, parent=parent, **extra)
        except click.BadParameter as exc:   # a config value the option's type refuses: one line naming file and key
            if path is None or not _from_config(exc):
                raise
            _config_error(ConfigError(f"{path}: {_section(path) + '.' if _section(path) else ''}"
                                      f"{_config_key(exc.param)}: {exc.message}"))
        if error is not None:
            _config_error(error)
        ctx.meta[CONFIG_META] = path
        return ctx


    @classmethod
    def over(cls, base: type[click.Command]) -> type[click.Command]:
        """This behaviour on top of another command class (e.g. one with sectioned help)."""
        return type(f"Config{base.__name__}", (cls, base), {})


def missing_inputs(given: Mapping[str, Any]) -> str:
    """The one line for an audit whose inputs (``given``: option -> value) are not all given: the options missing
    and where they were looked for (the command line, and the config file found or the names searched)."""
    missing = [opt for opt, val in given.items() if val is None or val == ()]
    ctx = click.get_current_context(silent=True)
    path = ctx.meta.get(CONFIG_META) if ctx is not None else None
    if path is not None:
        return f"missing {', '.join(missing)}: neither on the command line nor in the config {path}"
    looked = f"looked for ./replaylens.toml, [tool.replaylens] in ./pyproject.toml and ${CONFIG_ENV}"
    if len(missing) == len(given):
        return (f"no inputs given and no project config found ({looked}): pass {', '.join(missing)}, or write them "
                "in replaylens.toml")
    return f"missing {', '.join(missing)} (no project config found: {looked})"


config_option = click.option(
    "--config", "config_path", default=None, expose_value=False, type=click.Path(dir_okay=False),
    help="Project config (TOML). Default: $REPLAYLENS_CONFIG, else ./replaylens.toml, else [tool.replaylens] in "
         "./pyproject.toml. Command-line options override its values.")
