"""The self-contained HTML report: a Jinja2 template, matplotlib figures as inline SVG, no network.

Everything the page shows comes from ``summary.json``, ``manifest.json`` and the explanations of
:mod:`._explain`; the page has no script, no external stylesheet, font or image.  Colours are the
Okabe–Ito palette (colour-blind safe); the heatmap uses the perceptually uniform ``cividis`` map.

Labels (actions, keys, task, stream and block ids, agent names) are shortened to :data:`LABEL_CHARS` characters
and any other text from the data to :data:`TEXT_CHARS`, with the full length said (``abc… (1,000,000
characters)``); decisions.parquet and summary.json keep the full values.
"""

from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import markupsafe

__all__ = ["LABEL_CHARS", "OKABE_ITO", "TEXT_CHARS", "ReportParts", "clip", "forest_svg", "heatmap_svg",
           "render_report", "render_template"]

#: longest label (action, key, task / stream / block id, agent name) shown in report.html and report.md
LABEL_CHARS = 80
#: longest other text from the data (a sentence, a warning, a list joined) shown there
TEXT_CHARS = 2000


def clip(value: Any, limit: int = LABEL_CHARS) -> str:
    """``value`` as text, cut to ``limit`` characters plus ``… (N characters)`` when longer."""
    text = str(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def _finalize(value: Any) -> Any:
    """Every ``{{ … }}`` of the templates: data text over :data:`TEXT_CHARS` is cut (our own markup is not)."""
    if isinstance(value, str) and not isinstance(value, markupsafe.Markup) and len(value) > TEXT_CHARS:
        return clip(value, TEXT_CHARS)
    return value

#: Okabe–Ito colour-blind-safe palette
OKABE_ITO = {"orange": "#E69F00", "sky": "#56B4E9", "green": "#009E73", "yellow": "#F0E442", "blue": "#0072B2",
             "vermillion": "#D55E00", "purple": "#CC79A7", "black": "#000000"}


def _svg(fig: Any) -> str:
    """A matplotlib figure as an inline ``<svg>`` element (no XML prolog, fixed ids, no date)."""
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    with plt.rc_context({"svg.hashsalt": "replaylens", "svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    # inline SVG in HTML needs no namespace declarations; they and the RDF metadata are URLs we do not ship
    text = re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)
    text = re.sub(r' xmlns(:\w+)?="[^"]*"', "", text)
    return text.replace("<svg", '<svg role="img"', 1)


def _finite(*xs: Any) -> bool:
    return all(x is not None and not (isinstance(x, float) and math.isnan(x)) for x in xs)


#: smallest font (SVG user units = pt) in the figures; each figure is at most ~4.6 in wide, so at a 390 px
#: phone width (≈ 360 px of figure) no label is drawn below 10 CSS px
FIG_FONT = 9.5


def forest_svg(rows: list[dict[str, Any]], level: float) -> str:
    """Forest plot (action response, ΔU, ΔO per row with intervals): three narrow inline SVGs, one per
    readout, laid side by side on a wide page and stacked on a phone."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = (("action", "decisions changed (D_A)", OKABE_ITO["blue"]),
              ("delta_utility", "utility change ΔU", OKABE_ITO["vermillion"]),
              ("delta_oracle", "oracle agreement change ΔO", OKABE_ITO["green"]))
    ys = list(range(len(rows)))[::-1]
    out = []
    with plt.rc_context({"font.size": FIG_FONT + 0.5}):
        for key, title, colour in panels:
            fig, ax = plt.subplots(figsize=(3.3, 0.36 * len(rows) + 1.0))
            for y, r in zip(ys, rows, strict=True):
                lo, hi = r[f"{key}_ci"]
                if _finite(lo, hi):
                    ax.plot([lo, hi], [y, y], color=OKABE_ITO["black"], lw=1.8)
                ax.plot([r[key]], [y], "o", color=colour, ms=6)
            ax.axvline(0.0, color="0.55", lw=1, ls="--")
            ax.set_title(f"{title}\n({100 * level:g}% interval)", fontsize=FIG_FONT + 0.5)
            ax.set_yticks(ys)
            ax.set_yticklabels([r["cell"] for r in rows])
            ax.tick_params(labelsize=FIG_FONT)
            ax.locator_params(axis="x", nbins=4)
            ax.grid(axis="x", color="0.9")
            fig.tight_layout()
            out.append(_svg(fig))
    return "\n".join(out)


def heatmap_svg(rows: list[dict[str, Any]], maps: list[str]) -> str:
    """Label map × cell heatmap of the action response (blank where a row is not read out at that map):
    maps are rows, so the figure stays narrow however many maps there are."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    grid = np.full((len(maps), len(rows)), np.nan)
    for j, r in enumerate(rows):
        for i, m in enumerate(maps):
            v = r["by_map"]["action"].get(m)
            if _finite(v):
                grid[i, j] = v
    with plt.rc_context({"font.size": FIG_FONT}):
        fig, ax = plt.subplots(figsize=(min(1.6 + 0.42 * len(rows), 4.6), 0.3 * len(maps) + 1.5))
        top = float(np.nanmax(grid)) if np.isfinite(grid).any() else 1.0
        im = ax.imshow(np.ma.masked_invalid(grid), cmap="cividis", vmin=0.0, vmax=max(top, 1e-9), aspect="auto")
        ax.set_yticks(range(len(maps)))
        ax.set_yticklabels(maps)
        ax.set_xticks(range(len(rows)))
        ax.set_xticklabels([r["cell"] for r in rows], rotation=45, ha="right")
        ax.set_ylabel("label map ρ")
        for i in range(grid.shape[0]):
            for j in range(grid.shape[1]):
                if np.isfinite(grid[i, j]):
                    ax.text(j, i, f"{100 * grid[i, j]:.0f}", ha="center", va="center", fontsize=FIG_FONT,
                            color="white" if grid[i, j] < 0.5 * top else "black")
        fig.colorbar(im, ax=ax, label="decisions changed", fraction=0.06)
        fig.tight_layout()
    return _svg(fig)


def _fmt_ci(ci: Any, pct: bool = False) -> str:
    if not ci or not _finite(*ci):
        return "n/a"
    if pct:
        return f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"
    return f"[{ci[0]:+.4f}, {ci[1]:+.4f}]"


def _pp(x: Any) -> str:
    return f"{100 * x:+.1f}pp" if _finite(x) else "n/a"


def _pp_ci(ci: Any) -> str:
    return f"[{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]" if ci and _finite(*ci) else "n/a"


def _pct(x: Any) -> str:
    return f"{100 * x:.1f}%" if _finite(x) else "n/a"


def _num(x: Any) -> str:
    return f"{x:+.4f}" if _finite(x) else "n/a"


def _p(p: Any) -> str:
    if not _finite(p):
        return "n/a"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


_ENV = jinja2.Environment(loader=jinja2.PackageLoader("replaylens.report", "templates"),
                          autoescape=jinja2.select_autoescape(["html", "j2"]), undefined=jinja2.StrictUndefined,
                          trim_blocks=True, lstrip_blocks=True, finalize=_finalize)
_CSS = Path(__file__).with_name("templates") / "style.css"
_ENV.filters.update(pct=_pct, num=_num, ci=_fmt_ci, p=_p, pp=_pp, pp_ci=_pp_ci, label=clip)


def render_template(name: str, **context: Any) -> str:
    """Render one of the report templates (``report.html.j2``, ``compare.html.j2``)."""
    # the stylesheet is ours, not data: marked safe, or autoescaping turns its quotes into &#34; inside <style>
    return _ENV.get_template(name).render(css=markupsafe.Markup(_CSS.read_text(encoding="utf-8")), **context)


@dataclass(frozen=True)
class ReportParts:
    """Parts of report.html made before the intervals exist (:class:`~replaylens.report._ahead.ReportAhead`):
    the utility consequences, the changed examples (None without the audit's inputs) and the heatmap (None: made
    by :func:`render_report`)."""

    consequences: dict[str, dict[str, Any]]
    examples: dict[str, list[dict[str, Any]]] | None
    heatmap: str | None = None


def render_report(summary: dict[str, Any], manifest: dict[str, Any] | None, decisions: Any, *, history: Any = None,
                  futures: Any = None, agents: list[dict[str, Any]] | None = None,
                  agent_comparisons: list[dict[str, Any]] | None = None, parts: ReportParts | None = None) -> str:
    """The report.html text of one audit (``decisions``: its :class:`~replaylens.replay.Decisions`).

    With ``history`` and ``futures`` the page shows concrete changed decisions with the records before
    and after the intervention; ``agents`` / ``agent_comparisons`` add the multi-agent section.  ``parts``: those
    already made from the same decisions and inputs (else they are made here).
    """
    from ._explain import changed_examples, consequences

    rows = summary["rows"]
    if parts is None:
        examples = (changed_examples(decisions, history, futures) if history is not None and futures is not None
                    else None)
        parts = ReportParts(consequences(decisions), examples)
    heatmap = parts.heatmap if parts.heatmap is not None else heatmap_svg(rows, summary["maps"]) if rows else ""
    return render_template("report.html.j2", s=summary, manifest=manifest, consequences=parts.consequences,
                           examples=parts.examples, forest=forest_svg(rows, summary["level"]) if rows else "",
                           heatmap=heatmap, agents=agents or [], agent_comparisons=agent_comparisons or [])
