"""The sealed run directory that planning and debugging share (C7): a manifest frozen before acquisition,
append-only attempts and model-turn journal, recorded amendments, a choice seal checked before any hidden score,
the frozen replacement policy, the per-turn provenance of an export, and what such a directory can honestly
report when its validation gate does not pass.

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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ...llm import Redactor
from ._agents import TurnJournal, read_jsonl, usage_totals
from ._protocol import SealError, canonical, sha256, write_export

__all__ = ["SealedRunDirectory", "declare_retries", "export_turns", "failure_report", "unsealed_export_doc"]


class SealedRunDirectory:
    """Shared provenance of a sealed run directory: a manifest frozen before acquisition, append-only
    attempts, and a choice seal (sha256 of the complete choice matrix) checked before any hidden score.

    Subclasses provide ``root``, ``_clock``, ``validate()`` and ``_choice_list(selection)``.
    """

    root: Path
    plan: list[dict[str, Any]]
    _clock: Callable[[], str]
    released = "hidden scores"

    def validate(self) -> dict[str, dict[str, Any]]:  # pragma: no cover - overridden
        raise NotImplementedError

    def _choice_list(self, sel: dict[str, dict[str, Any]]) -> list[list[Any]]:  # pragma: no cover - overridden
        raise NotImplementedError

    def _freeze(self, manifest: dict[str, Any]) -> str:
        data = canonical(manifest)
        path = self.root / "manifest.json"
        if path.exists() and path.read_bytes() != data:
            raise SealError("manifest.json is frozen and differs from this run's settings")
        path.write_bytes(data)
        (self.root / "manifest.sha256").write_text(sha256(data))
        return sha256(data)

    def manifest_sha(self) -> str:
        path = self.root / "manifest.json"
        if not path.exists():
            raise SealError("no frozen manifest: call freeze_manifest() before acquisition")
        h = sha256(path.read_bytes())
        if (self.root / "manifest.sha256").read_text().strip() != h:
            raise SealError("manifest.json changed after it was frozen")
        return h

    def attempts(self) -> list[dict[str, Any]]:
        """Finished attempts (a torn last line left by a kill is skipped)."""
        return read_jsonl(self.root / "attempts.jsonl")

    def journal(self, agent: Any) -> Any:
        """The model-turn journal of this run (secrets of the agent's back-end redacted in every line)."""
        return TurnJournal(self.root, Redactor(agent.backend.secrets()))

    def amend(self, applies_to: Sequence[str], *, reason: str, declared_before_acquisition: bool,
              authorized_by: str = "protocol", max_replacements: int = 1) -> Path:
        """Record a capacity-replacement amendment (C7.6) naming the requests it covers (``"*"``: all)."""
        d = self.root / "amendments"
        d.mkdir(exist_ok=True)
        n = len(list(d.glob("*.json"))) + 1
        doc = {"amendment_id": f"{n:04d}", "created_at": self._clock(), "authorized_by": authorized_by,
               "reason": reason, "applies_to": sorted(applies_to), "declared_before_acquisition":
               declared_before_acquisition, "constraints": {"same_prompts": True, "same_schema": True,
               "same_agent": True, "max_replacements_per_request": max_replacements,
               "successful_originals_untouched": True},
               "manifest_sha256": self.manifest_sha()}
        p = d / f"{n:04d}-capacity-replacement.json"
        p.write_bytes(canonical(doc))
        return p

    def amendments(self) -> list[dict[str, Any]]:
        d = self.root / "amendments"
        return [json.loads(p.read_text()) for p in sorted(d.glob("*.json"))] if d.exists() else []

    def _seal(self, choices: list[list[Any]], counts: dict[str, int]) -> str:
        h = sha256(canonical(choices))
        doc = {"choices": choices, "counts": counts, "manifest_sha256": self.manifest_sha(), "choices_sha256": h,
               "sealed_at": self._clock()}
        (self.root / "choice_seal.json").write_bytes(canonical(doc))
        return h

    def failure_report(self) -> dict[str, Any]:
        """Summary of the acquisition from the public journal (gate verdict, planned / completed trajectories,
        protocol failures by reason, format corrections, capacity failures, attempts by kind, token usage, manifest
        sha256); reads nothing hidden and scores nothing."""
        return failure_report(self)

    def export_unsealed(self, path: str | Path) -> Path:
        """When the gate does not pass: a compact export with ``"sealed": false``, the manifest, the failure
        report, the plan, per-trajectory outcomes and the accepted tool events of the completed trajectories (no
        hidden or final-test score). Refuses when the gate passes."""
        return write_export(path, unsealed_export_doc(self))

    def check_seal(self) -> dict[str, Any]:
        p = self.root / "choice_seal.json"
        if not p.exists():
            raise SealError(f"no choice seal: {self.released} are released only after seal()")
        seal = json.loads(p.read_text())
        if seal["manifest_sha256"] != self.manifest_sha():
            raise SealError("the seal was made under a different manifest")
        now = sha256(canonical(self._choice_list(self.validate())))
        if sha256(canonical(seal["choices"])) != seal["choices_sha256"] or now != seal["choices_sha256"]:
            raise SealError("the recorded choices differ from the sealed choice matrix")
        return dict(seal)


def declare_retries(run: SealedRunDirectory, agent: Any) -> None:
    """With ``agent.retries`` > 0, the frozen replacement amendment (declared before acquisition, all requests)."""
    if getattr(agent, "retries", 0) > 0 and not run.amendments():
        run.amend(["*"], reason="frozen capacity/transport replacement policy", declared_before_acquisition=True,
                  max_replacements=int(agent.retries))


def export_turns(root: Path) -> list[dict[str, Any]]:
    """Compact per-turn provenance for an export: digests, kinds, statuses, parsed calls, usage (no prompt text)."""
    keep = ("turn_id", "attempt_id", "request_id", "stage", "kind", "role", "tool_choice", "prompt_sha256",
            "server_input_sha256", "status", "format_error", "error", "tool_name", "arguments_text", "decoded_choice",
            "usage", "runtime_metadata", "latency_s")
    return [{k: t.get(k) for k in keep} for t in read_jsonl(root / "turns.jsonl")]


# ---------------------------------------------------------------- report of a run whose gate does not pass


_CAPACITY = ("capacity_error", "transport_error")


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

