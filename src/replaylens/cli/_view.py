"""``replaylens view OUT``: print, open or serve an audit's (or a comparison's) report.html."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import time
import webbrowser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import click

from ._app import cli, user_errors


def stable(p: Path) -> Path:
    """``p`` made absolute without resolving links: OUT/report.html stays OUT/report.html (a link that always
    leads to OUT's latest result set), never the internal ``.results-XXXX/report.html`` the next run removes."""
    return Path(os.path.abspath(p))


def report_path(out: Path, *, served: bool = False) -> Path:
    """OUT/report.html (or OUT itself when it is an .html file); a one-line error when there is none."""
    from ..errors import InputError

    p = out if out.suffix == ".html" else out / "report.html"
    if not p.is_file() and out.is_dir():  # issue 24: a directory of runs gets an index page
        from ..report import find_runs, write_index

        if find_runs(out):
            return stable(write_index(out, served=served))
    if not p.is_file():
        raise InputError(str(p), None, None, "no report here (run `replaylens audit --out DIR` or `replaylens demo` "
                                             "first, or give the .html file of a comparison)")
    return stable(p)


def has_display() -> bool:
    """Whether a browser window can be shown (always on macOS/Windows; X11 or Wayland elsewhere)."""
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


class _Quiet(SimpleHTTPRequestHandler):
    live_index: Path | None = None  # a run index rewritten before each request for it (``view DIR --serve``)

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        if self.live_index is not None and self.path.split("?")[0] in ("/", f"/{self.live_index.name}"):
            from ..report import write_index

            with contextlib.suppress(OSError):  # else the page written last is served
                write_index(self.live_index.parent, served=True)
        super().do_GET()


@cli.command()
@click.argument("out", type=click.Path(path_type=Path))
@click.option("--serve", is_flag=True, help="Serve OUT's directory read-only on 127.0.0.1 (stop with Ctrl-C).")
@click.option("--port", default=0, show_default=True, type=click.IntRange(0, 65535),
              help="Port for --serve (0: any free port).")
@click.option("--timeout", "max_seconds", default=None, type=click.FloatRange(min=0.1),
              help="With --serve: stop serving after this many seconds (default: until Ctrl-C).")
@click.option("--no-browser", is_flag=True, help="Do not open a browser, only print the path (or URL).")
@click.option("--index", "as_index", is_flag=True,
              help="List the runs under OUT in OUT/index.html (the default when OUT has no report.html of its own).")
@user_errors
def view(out: Path, serve: bool, port: int, max_seconds: float | None, no_browser: bool, as_index: bool) -> None:
    """Show the report of an audit directory OUT (or a comparison page OUT.html): print its path, open it in a
    browser when a display exists, or serve it on 127.0.0.1 with --serve.  On a directory of runs, write
    OUT/index.html listing each run (agent, date, seed, rng, repeats, cells, verdicts, inputs hash; sortable and
    filterable) with its report, a comparison with the previous run of the same plan and the decisions that changed
    per cell (OUT/index_files/); while a run is in progress the page reloads itself (--serve rewrites it each
    time).  The path printed is stable: OUT/report.html, never the result set it currently leads to."""
    if as_index:
        from ..errors import InputError
        from ..report import write_index

        if not out.is_dir():
            raise InputError(str(out), None, None, "not a directory (--index lists the runs under a directory)")
        page = stable(write_index(out, served=serve))
    else:
        page = report_path(out, served=serve)
    if not serve:
        click.echo(str(page))
        if not no_browser and has_display():
            webbrowser.open(page.as_uri())
        return
    live = type("_Live", (_Quiet,), {"live_index": page if page.name == "index.html" else None})
    handler = functools.partial(live, directory=str(page.parent))
    with ThreadingHTTPServer(("127.0.0.1", port), handler) as httpd:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/{page.name}"
        click.echo(url)
        click.echo("serving (read-only, this machine only); Ctrl-C stops", err=True)
        sys.stdout.flush()
        if not no_browser and has_display():
            webbrowser.open(url)
        deadline = None if max_seconds is None else time.monotonic() + max_seconds
        httpd.timeout = 0.2
        try:
            while deadline is None or time.monotonic() < deadline:
                httpd.handle_request()
        except KeyboardInterrupt:
            click.echo("stopped", err=True)
