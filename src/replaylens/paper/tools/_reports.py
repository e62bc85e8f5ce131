"""One-line and per-condition summaries of what a run whose validation gate did not pass can report (C7):
:func:`failure_summary` of a failure report (``failure_report`` of the sealed run directory), :func:`action_profile`
of an unsealed export.  Neither reads a hidden-test / final-test file nor any score release.
"""

from __future__ import annotations

import json
from typing import Any

from ...errors import ConfigError

__all__ = ["action_profile", "failure_summary"]

_CONDITIONS = ("aligned", "value", "pair", "rename")



def failure_summary(report: dict[str, Any]) -> str:
    """One line: completed of planned, protocol failures by reason, corrections, capacity failures, tokens."""
    pf = report["protocol_failures"]
    why = ", ".join(f"{k}: {v}" for k, v in pf["by_reason"].items())
    use = report["usage"]["by_kind"]
    tokens = sum(int(v.get("total_tokens", 0)) for v in use.values())
    other = {k: v for k, v in report["outcomes"].items() if k not in ("ok", "protocol_violation")}
    return (f"{report['completed']} of {report['planned_trajectories']} trajectories completed; protocol failures "
            f"{pf['total']}" + (f" ({why})" if why else "") + f"; format corrections "
            f"{report['format_corrections']['turns']}; capacity/transport failures "
            f"{report['capacity_failures']['attempts']} attempts"
            + (f"; other outcomes {json.dumps(other, sort_keys=True)}" if other else "")
            + f"; {report['usage']['turns']} model turns, {tokens} tokens")


def action_profile(doc: dict[str, Any], *, final_step: int) -> dict[str, dict[str, Any]]:
    """From an unsealed export: per condition, completed trajectories, the number of distinct (task, first action)
    and (task, final action) pairs (final: step ``final_step``; decoded choices), and the disagreement of first /
    final actions with aligned over the (task, repeat) pairs where both trajectories completed (``None`` without
    such a pair).  No utilities."""
    if doc.get("sealed", True) is not False:
        raise ConfigError("action_profile reads unsealed exports (field 'sealed' is false)")
    plan = {r["request_id"]: r for r in doc["plan"]}
    first: dict[tuple[str, str, int], int] = {}
    final: dict[tuple[str, str, int], int] = {}
    for rid, events in doc["events"].items():
        r = plan[rid]
        key = (str(r["task"]), str(r["condition"]), int(r["repeat"]))
        for e in events:
            if e["step"] == 0:
                first[key] = int(e["choice"])
            if e["step"] == final_step:
                final[key] = int(e["choice"])
    out: dict[str, dict[str, Any]] = {}
    for cond in _CONDITIONS:
        keys = sorted(k for k in first if k[1] == cond)
        pairs = [k for k in keys if (k[0], "aligned", k[2]) in first and k in final
                 and (k[0], "aligned", k[2]) in final]
        row: dict[str, Any] = {"completed": len(keys), "distinct_first": len({(k[0], first[k]) for k in keys}),
                               "distinct_final": len({(k[0], final[k]) for k in keys if k in final}),
                               "pairs": len(pairs) if cond != "aligned" else 0}
        if cond != "aligned":
            row["first_disagreement"] = (sum(first[k] != first[(k[0], "aligned", k[2])] for k in pairs) / len(pairs)
                                         if pairs else None)
            row["final_disagreement"] = (sum(final[k] != final[(k[0], "aligned", k[2])] for k in pairs) / len(pairs)
                                         if pairs else None)
        out[cond] = row
    return out
