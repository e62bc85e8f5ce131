"""Short ``--help`` by default, every option one flag away (``--help-all``): for commands with many options."""

from __future__ import annotations

from collections.abc import Sequence

import click

__all__ = ["HELP_ALL", "short_help"]

HELP_ALL = "--help-all"
_ALL, _SHORT = "replaylens.help_all", "replaylens.help_short"


def _long(p: click.Parameter) -> str:
    return next((o for o in p.opts if o.startswith("--")), p.opts[0])


def _show_all(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        ctx.meta[_ALL] = True
        click.echo(ctx.get_help(), color=ctx.color)
        ctx.exit()


def short_help(base: type[click.Command], essential: Sequence[str], more: str) -> type[click.Command]:
    """``base`` whose ``--help`` lists only the ``essential`` options (first long names), then one line saying how
    many more (``more``: what they are about) ``--help-all`` lists in ``base``'s own layout (e.g. sections)."""
    keep = {*essential, "--help", HELP_ALL}

    class _Short(base):  # type: ignore[misc, valid-type]
        def get_params(self, ctx: click.Context) -> list[click.Parameter]:
            params: list[click.Parameter] = super().get_params(ctx)
            if not any(HELP_ALL in p.opts for p in params):
                params.append(click.Option([HELP_ALL], is_flag=True, expose_value=False, is_eager=True,
                                           callback=_show_all, help="Show every option (--help: the common ones)."))
            if ctx.meta.get(_SHORT):  # only while the short help is written, never while parsing
                params = [p for p in params if not isinstance(p, click.Option) or _long(p) in keep]
            return params

        def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
            if ctx.meta.get(_ALL):
                super().format_options(ctx, formatter)
                return
            every = [p for p in self.get_params(ctx) if not getattr(p, "hidden", False)]
            ctx.meta[_SHORT] = True
            try:
                super().format_options(ctx, formatter)
            finally:
                ctx.meta[_SHORT] = False
            hidden = sum(1 for p in every if isinstance(p, click.Option) and _long(p) not in keep)
            if hidden:
                with formatter.section("More options"):
                    formatter.write_text(f"{hidden} more ({more}): {ctx.command_path} {HELP_ALL}")

    _Short.__name__ = f"Short{base.__name__}"
    return _Short
