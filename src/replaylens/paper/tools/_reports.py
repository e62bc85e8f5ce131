"""What a sealed run directory can honestly report when its validation gate does not pass (C7).

A weak model may end many trajectories as recorded protocol failures (the one-format-correction rule); the gate
then refuses to seal and nothing hidden is scored.  :func:`failure_report` summarizes such an acquisition from the
public journal only (attempts, turns, starts, the frozen manifest): planned and completed trajectories, protocol
failures by reason, format corrections, capacity / transport failures, attempts by kind and token usage.
:func:`unsealed_export_doc` adds the accepted tool events of the completed trajectories under ``"sealed": false``.
Neither reads the hidden-test / final-test file nor any score release.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING, Any

from ...errors import ConfigError

if TYPE_CHECKING:
    from ._debugging import SealedRunDirectory

__all__ = ["action_profile", "failure_report", "failure_summary", "unsealed_export_doc"]

_CAPACITY = ("capacity_error", "transport_error")
_CONDITIONS = ("aligned", "value", "pair", "rename")


def _reason(attempt: dict[str, Any], turns: dict[str, dict[str, Any]]) -> str:
    """Why a protocol-failed attempt ended: the terminal turn's format-error kind, else a protocol violation."""
    ids = attempt.get("turns") or []
    last = turns.get(ids[-1]) if ids else None
    if last is not None and last.get("status") == "schema_invalid":
        return f"second format error ({last.get('format_error') or 'schema_invalid'})"
    return "protocol violation"


def _counts(c: Counter[str]) -> dict[str, int]:
    return {k: int(v) for k, v in sorted(c.items())}


def _outcomes(run: SealedRunDirectory) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Per planned trajectory: final status, reason (protocol failures), format corrections, attempts; and the
    aggregate report fields."""
    from ._agents import read_jsonl, usage_totals

    planned = [r["request_id"] for r in run.plan]
    wanted = set(planned)
    attempts = [a for a in run.attempts() if a["request_id"] in wanted]
    turns = {t["turn_id"]: t for t in read_jsonl(run.root / "turns.jsonl") if t.get("request_id") in wanted}
    started = {s["request_id"] for s in read_jsonl(run.root / "starts.jsonl")}
    mine: dict[str, list[dict[str, Any]]] = {}
    for a in attempts:
        mine.setdefault(a["request_id"], []).append(a)
    out: dict[str, dict[str, Any]] = {}
    for rid in planned:
        att = mine.get(rid, [])
        ok = [a for a in att if a["status"] == "ok"]
        final = ok[0] if ok else (att[-1] if att else None)
        if final is None:
            status = "interrupted" if rid in started else "not_attempted"
        else:
            status = str(final["status"])
        out[rid] = {"status": status, "attempts": len(att),
                    "reason": _reason(final, turns) if final is not None and status == "protocol_violation" else None,
                    "format_corrections": int((final or {}).get("format_corrections") or 0)}
    statuses = Counter(o["status"] for o in out.values())
    reasons = Counter(o["reason"] for o in out.values() if o["reason"] is not None)
    by_kind: dict[str, Counter[str]] = {}
    for a in attempts:
        by_kind.setdefault(str(a["kind"]), Counter())[str(a["status"])] += 1
    fmt = Counter(str(t["format_error"]) for t in turns.values() if t.get("format_error"))
    report = {
        "planned_trajectories": len(planned),
        "completed": statuses.get("ok", 0),
        "outcomes": _counts(statuses),
        "protocol_failures": {"total": statuses.get("protocol_violation", 0), "by_reason": _counts(reasons)},
        "format_errors_by_kind": _counts(fmt),
        "format_corrections": {
            "turns": sum(t.get("kind") == "format_retry" for t in turns.values()),
            "trajectories": sum(o["format_corrections"] > 0 for o in out.values()),
            "completed_after_correction": sum(o["format_corrections"] > 0 and o["status"] == "ok"
                                              for o in out.values())},
        "capacity_failures": {"attempts": sum(a["status"] in _CAPACITY for a in attempts),
                              "unresolved": sum(statuses.get(s, 0) for s in _CAPACITY),
                              "by_status": _counts(Counter(str(a["status"]) for a in attempts
                                                           if a["status"] in _CAPACITY))},
        "attempts_by_kind": {k: _counts(v) for k, v in sorted(by_kind.items())},
        "usage": usage_totals(list(turns.values())),
    }
    return out, report


def failure_report(run: SealedRunDirectory) -> dict[str, Any]:
    """Summary of an acquisition from the public journal: the gate's verdict, planned / completed trajectories,
    outcomes, protocol failures by reason, format errors by kind and corrections, capacity failures, attempts by
    kind × status, token usage by turn kind, and the manifest sha256.  Nothing hidden is read or scored."""
    from ._debugging import SealError

    manifest_sha = run.manifest_sha()
    try:
        run.validate()
        gate: dict[str, Any] = {"passed": True, "error": None}
    except SealError as exc:
        gate = {"passed": False, "error": str(exc)}
    manifest = json.loads((run.root / "manifest.json").read_text())
    _, report = _outcomes(run)
    return {"experiment": manifest.get("experiment"), "manifest_sha256": manifest_sha, "gate": gate, **report}


def unsealed_export_doc(run: SealedRunDirectory) -> dict[str, Any]:
    """The unsealed export of a run whose gate did not pass: ``"sealed": false``, the manifest, the failure report,
    the plan, each trajectory's outcome and the accepted tool events of the completed trajectories (public tool
    responses only; no hidden / final-test score, no score release)."""
    from ._debugging import SealError

    report = failure_report(run)
    if report["gate"]["passed"]:
        raise SealError("the validation gate passes: seal(), score() and export() a sealed export instead")
    outcomes, _ = _outcomes(run)
    events: dict[str, list[dict[str, Any]]] = {}
    for a in run.attempts():
        if a["status"] == "ok" and a["request_id"] in outcomes and a["request_id"] not in events:
            events[a["request_id"]] = a["events"]
    return {"sealed": False, "manifest": json.loads((run.root / "manifest.json").read_text()),
            "failure_report": report, "plan": run.plan, "outcomes": outcomes,
            "events": {rid: events[rid] for rid in sorted(events)}}


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
