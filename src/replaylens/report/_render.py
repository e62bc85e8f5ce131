"""Writing and reading audit results: decisions.parquet, summary.json, manifest.json, report.md, report.html,
forest.png."""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..records import FutureTasks, History
from ._ahead import ReportAhead
from ._audit import AuditResult
from ._html import TEXT_CHARS, clip, render_report
from ._json import dumps_indented
from ._manifest import RunManifest
from ._staged import StagedDecisions
from ._verdict import DEFINITIONS_MD, verdict_markdown

__all__ = ["AuditFiles", "load_results", "read_decisions", "render_markdown", "write_results"]

RESULT_FILES = ("decisions.parquet", "summary.json", "forest.png", "report.md", "report.html", "manifest.json")


def _fmt(x: float, pct: bool = False, pp: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if pp or pct:
        v = round(100 * float(x), 1) + 0.0  # + 0.0 turns -0.0 into 0.0: never print "-0.0"
        return (f"{v:+.1f}pp" if v else "0.0pp") if pp else f"{v:.1f}%"
    return f"{x:+.4f}"


def _ci(ci: list[float], pct: bool = False, pp: bool = False) -> str:
    if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in ci):
        return "n/a"
    return f"[{_fmt(ci[0], pct, pp)}, {_fmt(ci[1], pct, pp)}]"


def _p(p: float | None) -> str:
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "n/a"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def forest_plot(summary: dict[str, Any], path: Path) -> None:
    """Forest plot of the action response and ΔU per cell with their intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = summary["rows"]
    names = [r["cell"] for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(9, 0.5 * len(rows) + 1.6), sharey=True)
    for ax, key, title in ((axes[0], "action", "action response"), (axes[1], "delta_utility", "ΔU (cell − aligned)")):
        ys = list(range(len(rows)))[::-1]
        est = [r[key] for r in rows]
        lo = [r[f"{key}_ci"][0] for r in rows]
        hi = [r[f"{key}_ci"][1] for r in rows]
        for y, e, a, b in zip(ys, est, lo, hi, strict=True):
            if a is not None and b is not None and not (math.isnan(a) or math.isnan(b)):
                ax.plot([a, b], [y, y], color="0.3", lw=2)
            ax.plot([e], [y], "o", color="C0" if key == "action" else "C3")
        ax.axvline(0.0, color="0.6", lw=1, ls="--")
        ax.set_title(title)
        ax.set_yticks(ys)
        ax.set_yticklabels(names)
    level = summary.get("level", 0.95)
    fig.suptitle(f"{clip(summary['agent'])}: {summary['n_streams']} streams, "
                 f"{100 * level:.0f}% stream-cluster intervals")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def render_markdown(summary: dict[str, Any], manifest: dict[str, Any] | None = None) -> str:
    """The report.md text (a table per cell, the verdicts, and provenance)."""
    lv = f"{100 * summary['level']:.1f}".rstrip("0").rstrip(".")
    lines = [
        f"# ReplayLens audit: {clip(summary['agent'])}",
        "",
        f"{summary['n_streams']} streams, {summary['n_strata']} strata, {summary['n_future_tasks']} future tasks; "
        f"cells {', '.join(summary['cells'])}; {len(summary['maps'])} label maps; {summary['draws']} slot draw(s); "
        f"{summary['repeats']} repeat(s); seed {summary['seed']}.",
        "",
        f"Aligned replay: mean utility {summary['aligned']['mean_utility']:.4f}, oracle agreement "
        f"{100 * summary['aligned']['oracle_agreement']:.1f}%.",
        "",
        *[f"> **Warning:** {clip(w, TEXT_CHARS)}\n" for w in summary.get("warnings", [])],
        *[clip(line, TEXT_CHARS) for line in verdict_markdown(summary)],
        "## What the replay shows",
        "",
        *[f"- {clip(v, TEXT_CHARS)}" for v in summary["verdicts"]],
        "",
        f"## Evidence ({lv}% stream-cluster bootstrap intervals, {summary['n_resamples']} draws; "
        "two-sided cluster sign-flip p)",
        "",
        "| intervention (cell) | measure | decisions changed (D_A^q) | utility change (ΔU) | p (utility) | "
        "oracle agreement change (ΔO) | p (oracle) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in summary["rows"]:
        lines.append(
            f"| {r['cell']} | {r['action_readout']} | {_fmt(r['action'], True)} {_ci(r['action_ci'], True)} | "
            f"{_fmt(r['delta_utility'])} {_ci(r['delta_utility_ci'])} | {_p(r['delta_utility_p'])} | "
            f"{_fmt(r['delta_oracle'], pp=True)} {_ci(r['delta_oracle_ci'], pp=True)} | {_p(r['delta_oracle_p'])} |")
    lines += ["", *DEFINITIONS_MD, "", "![forest plot](forest.png)", "",
              "Pooling: tasks within a stratum, strata equally weighted, label maps, then streams; the 95% "
              "interval resamples whole streams. History cells compare with aligned at ρ = id; consistent "
              "renaming compares each renamed replay (decoded back) with aligned at id; the rekey row is "
              "A_rekey with mapped − identity contrasts.", ""]
    if manifest is not None:
        lines += ["## Provenance", "", f"- replaylens {manifest['tool_version']}, git {manifest['git_revision']}",
                  f"- created {manifest['created']}"]
        lines += [f"- {f['role']}: `{f['path']}` sha256 `{f['sha256']}`" for f in manifest["inputs"]]
        lines.append("")
    return "\n".join(lines)


@dataclass(frozen=True)
class AuditFiles:
    """The artifacts of one audit directory, loaded back."""

    root: Path
    manifest: dict[str, Any]
    summary: dict[str, Any]
    decisions: Any  # pandas.DataFrame


def write_results(result: AuditResult, manifest: RunManifest, out: str | os.PathLike[str], *,
                  history: History | None = None, futures: FutureTasks | None = None,
                  agents: list[dict[str, Any]] | None = None,
                  agent_comparisons: list[dict[str, Any]] | None = None, overwrite: bool = False,
                  staged: StagedDecisions | None = None, ahead: ReportAhead | None = None) -> Path:
    """Write every artifact into a fresh sibling directory, then publish the set with one rename (a reader
    never sees a partial or mixed set; see :mod:`replaylens.report._publish`).

    Holds OUT's run lock (``ConfigError`` when another run holds it) and refuses to replace the results of
    a different run (another command or other arguments in ``manifest.json``) unless ``overwrite``.
    ``history``/``futures`` (the audit's inputs) let report.html show concrete changed decisions with
    the records before and after the intervention; ``agents``/``agent_comparisons`` add the
    multi-agent section (see :func:`~replaylens.report.render_report`).  ``staged``: decisions.parquet already
    being written since the replay ended (moved into the set when it is done; else it is written here).
    ``ahead``: the report parts made beside the statistics from these decisions and inputs (waited for here).
    """
    from ._publish import check_different_run, locked_out, publish

    root = Path(out)
    parts = ahead.parts() if ahead is not None else None   # done before matplotlib is used on this thread
    summary = result.document()   # shared, read-only: the writers below only read it
    man = manifest.model_dump(mode="json")

    def build(tmp: Path) -> None:
        # decisions.parquet (pyarrow's encoder, mostly outside the GIL) is written on a thread beside the reports:
        # the audit's writer, started when its replay ended, or one started here; on a failure the writer is
        # waited for (nothing is left writing) and its file removed
        writer = staged if staged is not None else StagedDecisions(result.decisions, tmp)
        try:
            (tmp / "summary.json").write_text(dumps_indented(summary) + "\n")
            (tmp / "manifest.json").write_text(json.dumps(man, indent=2) + "\n")
            forest_plot(summary, tmp / "forest.png")
            (tmp / "report.md").write_text(render_markdown(summary, man))
            (tmp / "report.html").write_text(render_report(summary, man, result.decisions, history=history,
                                                           futures=futures, agents=agents,
                                                           agent_comparisons=agent_comparisons, parts=parts),
                                             encoding="utf-8")
            writer.move_to(tmp / "decisions.parquet")  # the writer's error, if it had one
        except BaseException:
            writer.discard()
            raise

    with locked_out(root):
        check_different_run(root, man, overwrite)
        publish(root, build, RESULT_FILES)
    return root


def read_decisions(path: str | os.PathLike[str]) -> Any:
    """The tidy decision table of an audit as a pandas DataFrame."""
    import pandas as pd

    p = Path(path)
    if p.is_dir():
        p = p / "decisions.parquet"
    if not p.exists():
        raise InputError(str(p), None, None, "no decisions.parquet here (not an audit output directory?)")
    return pd.read_parquet(p)


def load_results(out: str | os.PathLike[str]) -> AuditFiles:
    """Load an audit directory: manifest, summary and the decision table (pandas)."""
    from ._publish import result_root

    root = result_root(Path(out))  # resolved once: every file below comes from one published set
    files = {}
    for name in ("manifest.json", "summary.json"):
        p = root / name
        if not p.exists():
            raise InputError(str(p), None, None, "missing: not a finished audit output directory")
        try:
            files[name] = json.loads(p.read_text())
        except json.JSONDecodeError as exc:
            raise InputError(str(p), exc.lineno, None, f"invalid JSON ({exc.msg})") from None
    RunManifest.model_validate(files["manifest.json"])
    return AuditFiles(Path(out), files["manifest.json"], files["summary.json"], read_decisions(root))
