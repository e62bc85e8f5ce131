"""Model-driven tool agents for both environments (C4 planning, C5 debugging) and their journal (C7).

A trajectory is a fresh conversation: system prompt, opening user message (task card, the ledger as the
environment shows it, the menu), then one tool turn per decision stage; each verified tool result enters the
conversation before the next turn, and the last turn is forced to the submit tool.  The one-format-correction
rule (C4.4; applied equally to debugging): a schema-invalid call, an unknown or out-of-sequence tool, a non-menu
ID, an already-tried configuration (C10-D5) or an ineligible submission is a *format error*; the first one gets
a correction prompt (both attempts are recorded), a second one ends the trajectory as a recorded
``protocol_violation`` (never imputed).

Every model turn is journaled append-only (``turns.jsonl``, fsync'd, secrets redacted) with the sha256 of the
exact request bytes (stored once in ``prompts.jsonl``, zlib + base64 as in ``replaylens.llm``), the raw output,
the parsed call, usage and the observed metadata; ``starts.jsonl`` is the intent log that turns an
interrupted trajectory into a ``recovery`` attempt.  The format is shared by ``PlanningRun`` and ``DebugRun``.
"""

from __future__ import annotations

import base64
import inspect
import json
import os
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ...errors import ConfigError
from ...llm import (
    REQUIRED,
    AccessError,
    BackendError,
    Budget,
    BudgetExhausted,
    FormatError,
    Redactor,
    ToolSpec,
    ToolTurn,
    ToolTurnBackend,
    ToolTurnRequest,
    backoff_delay,
    parse_tool_call,
    sampling_seed,
)
from ._debugging import ToolSession
from ._protocol import ProtocolViolation, SealError, canonical, sha256, source_hash

__all__ = ["FORCE_MODES", "LLMDebugger", "LLMPlanner", "LLMToolAgent", "ToolEnvironment", "TurnJournal",
           "acquire_with_model", "model_gate", "model_manifest",
           "usage_totals"]

FORCE_MODES = ("last", "every")
PROMPT_VERSION = "tool-prompts/1"


class ToolEnvironment(Protocol):
    """What a tool agent needs from an environment."""

    stages: int
    submit: str
    tools: tuple[ToolSpec, ...]

    def system(self) -> str: ...

    def opening(self) -> str: ...

    def stage_tool(self, stage: int) -> str: ...

    def execute(self, name: str, args: Mapping[str, Any]) -> dict[str, Any]: ...

    @property
    def events(self) -> list[dict[str, Any]]: ...

    @property
    def label_accesses(self) -> int: ...


# ---------------------------------------------------------------------------------------------- journal


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSONL file, skipping a torn (unterminated or unparsable) line left by a kill."""
    if not path.exists():
        return []
    out = []
    for raw in path.read_bytes().split(b"\n"):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        if isinstance(row, dict):
            out.append(row)
    return out


class TurnJournal:
    """Append-only, fsync'd JSONL files of one run directory, every line passed through a redactor."""

    def __init__(self, root: Path, redact: Redactor | None = None) -> None:
        self.root = root
        self.redact = redact or Redactor()
        self._prompts = {r["sha256"] for r in read_jsonl(root / "prompts.jsonl")}

    def append(self, name: str, rows: Sequence[Mapping[str, Any]], *, sync: bool = True) -> None:
        path = self.root / name
        torn = path.exists() and path.stat().st_size > 0 and not path.read_bytes().endswith(b"\n")
        data = "".join(self.redact(canonical(dict(r)).decode("utf-8")) + "\n" for r in rows).encode("utf-8")
        with path.open("ab") as fh:
            fh.write((b"\n" if torn else b"") + data)
            fh.flush()
            if sync:
                os.fsync(fh.fileno())

    def store_prompt(self, data: bytes) -> str:
        sha = sha256(data)
        if sha not in self._prompts:
            z = base64.b64encode(zlib.compress(self.redact(data.decode("utf-8")).encode("utf-8"), 6)).decode("ascii")
            self.append("prompts.jsonl", [{"sha256": sha, "zlib": z}])
            self._prompts.add(sha)
        return sha

    def prompt_bytes(self, sha: str) -> bytes:
        for r in read_jsonl(self.root / "prompts.jsonl"):
            if r["sha256"] == sha:
                return zlib.decompress(base64.b64decode(r["zlib"]))
        raise KeyError(sha)


# ---------------------------------------------------------------------------------------------- agent


@dataclass
class LLMToolAgent:
    """Drives a tool environment turn by turn with a :class:`ToolTurnBackend`.

    ``force``: ``"last"`` (the paper: the model picks among the tools; the last turn is forced to the submit
    tool) or ``"every"`` (each stage's protocol tool is forced).  ``retries`` > 0 declares a capacity /
    transport replacement amendment before acquisition (at most ``retries`` replacements per trajectory, after
    a seeded full-jitter back-off); 0 is the paper's no-retry protocol.  ``max_corrections`` is 1 (C4.4).
    """

    backend: ToolTurnBackend
    timeout_s: float = 180.0
    force: str = "last"
    retries: int = 0
    backoff_base_s: float = 1.0
    backoff_max_s: float = 60.0
    max_corrections: int = 1
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)
    spend: Budget | None = field(default=None, repr=False, compare=False)  # checked before each trajectory
    name: str = "llm-tool-agent-v1"
    epsilon: float | None = None

    def __post_init__(self) -> None:
        if self.force not in FORCE_MODES:
            raise ConfigError(f"force must be one of {FORCE_MODES}; got {self.force!r}")
        if self.retries < 0 or self.max_corrections not in (0, 1):
            raise ConfigError("retries must be >= 0 and max_corrections 0 or 1")

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "model": self.backend.describe(), "force": self.force,
                "timeout_s": self.timeout_s, "max_format_corrections": self.max_corrections,
                "retries": self.retries, "backoff": [self.backoff_base_s, self.backoff_max_s],
                "prompt_version": PROMPT_VERSION,
                "note": "sampling parameters are exactly the back-end's params (none for hosted models by default)"}

    def _choice(self, env: ToolEnvironment, stage: int) -> str:
        if stage == env.stages - 1 or self.force == "every":
            return env.stage_tool(stage)
        return REQUIRED

    def run(self, env: ToolEnvironment, journal: TurnJournal, *, attempt_id: str, request_id: str, kind: str,
            seed: int, clock: Callable[[], str]) -> dict[str, Any]:
        """One trajectory; returns the attempt fields (status, events, usage, turns, corrections, error)."""
        messages: list[dict[str, Any]] = [{"role": "system", "content": env.system()},
                                          {"role": "user", "content": env.opening()}]
        turns: list[str] = []
        corrections = 0
        usage: dict[str, int] = {}
        stage = 0
        n = 0
        retrying = False
        settings = self.backend.settings
        while stage < env.stages:
            req = ToolTurnRequest(tuple(messages), env.tools, self._choice(env, stage))
            data = req.request_bytes(settings)
            sha = journal.store_prompt(data)
            turn_id = f"{attempt_id}/{n}"
            row: dict[str, Any] = {"turn_id": turn_id, "attempt_id": attempt_id, "request_id": request_id,
                                   "stage": stage, "kind": "format_retry" if retrying else kind,
                                   "role": "correction" if retrying else "decision", "tool_choice": req.tool_choice,
                                   "prompt_sha256": sha, "started_at": clock()}
            t0 = time.perf_counter()
            n += 1
            turns.append(turn_id)
            try:
                turn = self.backend.turn(req, self.timeout_s, sampling_seed=sampling_seed(seed, attempt_id, n))
            except BackendError as exc:
                row.update(ended_at=clock(), latency_s=round(time.perf_counter() - t0, 6), status=exc.status,
                           error=str(exc), http_status=exc.http_status, retry_after_s=exc.retry_after, usage=None)
                journal.append("turns.jsonl", [row])
                if isinstance(exc, AccessError):
                    raise
                return {"status": exc.status, "events": env.events, "turns": turns, "usage": usage or None,
                        "format_corrections": corrections, "error": str(exc), "retry_after_s": exc.retry_after}
            row.update(self._turn_fields(turn), ended_at=clock(), latency_s=round(time.perf_counter() - t0, 6))
            bad = settings.check_observed(turn.model, turn.reasoning_effort, turn.service_tier)
            if turn.server_input_sha256 is not None and turn.server_input_sha256 != sha:
                bad.append("server input echo differs from the request digest")
            if bad:
                row.update(status="protocol_violation", error="; ".join(bad))
                journal.append("turns.jsonl", [row])
                return {"status": "protocol_violation", "events": env.events, "turns": turns,
                        "usage": usage or None, "format_corrections": corrections, "error": "; ".join(bad)}
            for k, v in (turn.usage or {}).items():
                usage[k] = usage.get(k, 0) + int(v or 0)
            try:
                call = parse_tool_call(turn, req)
                if self.force == "last" and call.name != env.stage_tool(stage):
                    raise FormatError(f"{call.name} is out of sequence: stage {stage + 1} calls "
                                      f"{env.stage_tool(stage)}", "tool_not_allowed")
                resp = env.execute(call.name, call.arguments)
            except FormatError as exc:
                row.update(status="schema_invalid", error=str(exc), format_error=exc.kind)
                journal.append("turns.jsonl", [row])
                if corrections >= self.max_corrections:
                    return {"status": "protocol_violation", "events": env.events, "turns": turns, "usage": usage,
                            "format_corrections": corrections,
                            "error": f"second format error ({exc.kind}): {exc} — recorded protocol failure"}
                corrections += 1
                retrying = True
                messages += self._correction(turn, stage, str(exc))
                continue
            except ProtocolViolation as exc:
                row.update(status="protocol_violation", error=str(exc))
                journal.append("turns.jsonl", [row])
                return {"status": "protocol_violation", "events": env.events, "turns": turns, "usage": usage,
                        "format_corrections": corrections, "error": str(exc)}
            row.update(status="ok", parsed=call.arguments, decoded_choice=env.events[-1]["choice"], response=resp)
            journal.append("turns.jsonl", [row])
            cid = f"call_{stage + 1}"
            messages += [{"role": "assistant", "content": None, "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": call.name,
                                                             "arguments": canonical(call.arguments).decode()}}]},
                         {"role": "tool", "tool_call_id": cid, "content": canonical(resp).decode()}]
            stage += 1
            retrying = False
        return {"status": "ok", "events": env.events, "turns": turns, "usage": usage,
                "format_corrections": corrections, "error": None}

    @staticmethod
    def _turn_fields(turn: ToolTurn) -> dict[str, Any]:
        return {"raw_response": turn.raw_text, "tool_name": turn.name, "arguments_text": turn.arguments_text,
                "n_tool_calls": turn.n_calls, "usage": turn.usage, "finish_reason": turn.finish_reason,
                "response_id": turn.response_id, "server_input_sha256": turn.server_input_sha256,
                "runtime_metadata": {"model": turn.model, "reasoning_effort": turn.reasoning_effort,
                                     "service_tier": turn.service_tier},
                "provider_notifications": turn.notifications}

    @staticmethod
    def _correction(turn: ToolTurn, stage: int, error: str) -> list[dict[str, Any]]:
        note = (f"Format error: {error}. This is the one permitted correction for this task: call a tool again "
                "with valid arguments (an ID from the menu that the protocol accepts now).")
        if turn.name is None:
            return [{"role": "assistant", "content": turn.raw_text or ""}, {"role": "user", "content": note}]
        cid = f"call_{stage + 1}_rejected"
        return [{"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": turn.name, "arguments": turn.arguments_text or ""}}]},
            {"role": "tool", "tool_call_id": cid, "content": canonical({"status": "rejected", "error": note}).decode()}]


@dataclass
class LLMPlanner(LLMToolAgent):
    """A model planner for :class:`PlanningRun` (C4)."""

    name: str = "llm-planner-v1"


@dataclass
class LLMDebugger(LLMToolAgent):
    """A model debugger for :class:`DebugRun` (C5)."""

    name: str = "llm-debugger-v1"


# ---------------------------------------------------------------------------------------------- acquisition


def transport_objects() -> tuple[Any, ...]:
    """The client transport and journaling code whose source enters a model run's transport hash."""
    from ...llm import LlamaToolBackend, OpenAIToolBackend, parse_tool_call

    return (OpenAIToolBackend, LlamaToolBackend, parse_tool_call, TurnJournal,
            acquire_with_model, run_one)


def _replacement_budget(amendments: list[dict[str, Any]], rid: str) -> tuple[str | None, int]:
    for a in amendments:
        if rid in a["applies_to"] or "*" in a["applies_to"]:
            return a["amendment_id"], int(a["constraints"].get("max_replacements_per_request", 1))
    return None, 0


def acquire_with_model(run: Any, agent: LLMToolAgent, make_env: Callable[[dict[str, Any]], ToolEnvironment],
                       order: Sequence[int], *, only: Sequence[str] | None = None) -> dict[str, int]:
    """Run every planned trajectory that still needs an attempt, in ``order`` (plan indices).

    A trajectory with a successful attempt is never asked again; a started attempt without a finished line
    (a kill) is re-run from its original inputs as ``recovery``; a capacity / transport failure is replaced
    only under a recorded amendment naming it (``"*"``: every request), at most its allowance; a protocol
    failure is terminal.  Returns counts by outcome.

    ``agent.spend`` (a :class:`~replaylens.llm.Budget`, optional) is checked before each trajectory against the
    run directory's journaled turns; reaching it raises :class:`~replaylens.llm.BudgetExhausted` (a trajectory
    is never cut, so the last one may pass the request cap by its own turns)."""
    run.manifest_sha()
    journal = run.journal(agent)
    spend = getattr(agent, "spend", None)
    counts: dict[str, int] = {}
    agent.backend.open()
    try:
        for j in order:
            req = run.plan[int(j)]
            rid = req["request_id"]
            if only is not None and rid not in only:
                continue
            while True:
                starts = [s for s in read_jsonl(run.root / "starts.jsonl") if s["request_id"] == rid]
                mine = [a for a in run.attempts() if a["request_id"] == rid]
                if any(a["status"] == "ok" for a in mine):
                    counts["done"] = counts.get("done", 0) + 1
                    break
                # a start is closed by its own finished line or by a finished recovery of it
                finished = {a["attempt_id"] for a in mine} | {a["recovers"] for a in mine if a.get("recovers")}
                open_ = [s for s in starts if s["attempt_id"] not in finished]
                amendment = None
                recovers = None
                if open_:
                    kind, recovers = "recovery", open_[-1]["attempt_id"]
                elif not mine:
                    kind = "original"
                elif mine[-1]["status"] in ("capacity_error", "transport_error"):
                    amendment, allowed = _replacement_budget(run.amendments(), rid)
                    used = sum(a["kind"] == "replacement" for a in mine)
                    if amendment is None or used >= allowed:
                        counts["failed"] = counts.get("failed", 0) + 1
                        break
                    agent.sleep(backoff_delay(run.seed, rid, used + 1, mine[-1].get("retry_after_s"),
                                              base_s=agent.backoff_base_s, max_s=agent.backoff_max_s))
                    kind = "replacement"
                else:
                    counts["protocol_failure"] = counts.get("protocol_failure", 0) + 1
                    break
                if spend is not None:
                    stop = spend.reached(*_turns_spent(run.root, spend))
                    if stop is not None:
                        raise BudgetExhausted(f"budget reached: {stop}; counts so far {counts} (journaled in "
                                              f"{run.root}); rerun with a higher budget to resume")
                rec = run_one(run, agent, journal, req, make_env(req), kind, len(starts), recovers, amendment)
                counts[rec["status"]] = counts.get(rec["status"], 0) + 1
                if rec["status"] not in ("capacity_error", "transport_error"):
                    break
    finally:
        agent.backend.close()
    return counts


def _turns_spent(root: Path, spend: Budget) -> tuple[int, float]:
    """(journaled model turns, their cost) of a tool run directory."""
    prompts = {r["sha256"]: r["zlib"] for r in read_jsonl(root / "prompts.jsonl")}
    n, cost = 0, 0.0
    for t in read_jsonl(root / "turns.jsonl"):
        z = prompts.get(t.get("prompt_sha256", ""))
        chars = len(zlib.decompress(base64.b64decode(z))) if z else 0
        n += 1
        cost += spend.attempt_cost(t, chars)
    return n, cost


def run_one(run: Any, agent: LLMToolAgent, journal: TurnJournal, req: dict[str, Any], env: ToolEnvironment,
            kind: str, n: int, recovers: str | None = None, amendment: str | None = None) -> dict[str, Any]:
    rid = req["request_id"]
    attempt_id = f"{rid}#{n}"
    started = run._clock()
    journal.append("starts.jsonl", [{"attempt_id": attempt_id, "request_id": rid, "kind": kind,
                                     "started_at": started}], sync=False)
    out = agent.run(env, journal, attempt_id=attempt_id, request_id=rid, kind=kind, seed=run.seed, clock=run._clock)
    rec = {"attempt_id": attempt_id, "request_id": rid, "kind": kind, "recovers": recovers,
           "amendment_id": amendment, "started_at": started, "ended_at": run._clock(),
           "label_accesses": env.label_accesses, **out}
    journal.append("attempts.jsonl", [rec])
    return rec


def model_manifest(agent: Any, env_cls: Any, schemas: list[dict[str, Any]]) -> dict[str, Any]:
    """Manifest fields of a model-driven run (agent settings, prompt/tool-schema digests, source hash)."""
    mod = inspect.getmodule(env_cls)
    return {"agent": agent.describe(), "tool_schemas_sha256": sha256(canonical(schemas)),
            "prompt_source_sha256": sha256(inspect.getsource(mod).encode()) if mod else None,
            "source_sha256": source_hash(env_cls, LLMToolAgent, ToolSession),
            "retry_policy": ("at most one format correction per trajectory (C4.4); a second format error is a "
                             "recorded protocol failure; capacity/transport replacements only under an amendment")}


def model_gate(run: Any, sel: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """The model-run checks of the validation gate: ≤ 1 format correction per trajectory, replacements under an
    amendment, every selected event backed by an accepted turn whose stored request bytes hash to its digest and
    whose parsed call decodes to the event, and observed usage totals (total = input + output)."""
    turns = {t["turn_id"]: t for t in read_jsonl(run.root / "turns.jsonl")}
    prompts = {r["sha256"]: r["zlib"] for r in read_jsonl(run.root / "prompts.jsonl")}
    amendments = run.amendments()
    for rid, a in sel.items():
        mine = [turns[t] for t in a.get("turns", []) if t in turns]
        if len(mine) != len(a.get("turns", [])):
            raise SealError(f"{rid}: a turn of the selected attempt is missing from turns.jsonl")
        if sum(t["kind"] == "format_retry" for t in mine) > 1 or a.get("format_corrections", 0) > 1:
            raise SealError(f"{rid}: more than one format correction")
        if a["kind"] == "replacement" and _replacement_budget(amendments, rid)[0] is None:
            raise SealError(f"{rid}: replacement without an amendment")
        ok = [t for t in mine if t["status"] == "ok"]
        if [t["decoded_choice"] for t in ok] != [e["choice"] for e in a["events"]]:
            raise SealError(f"{rid}: the accepted turns do not match the recorded events")
        for t in mine:
            z = prompts.get(t["prompt_sha256"])
            if z is None or sha256(zlib.decompress(base64.b64decode(z))) != t["prompt_sha256"]:
                raise SealError(f"{rid}: request bytes of {t['turn_id']} do not match their digest")
            if t.get("server_input_sha256") not in (None, t["prompt_sha256"]):
                raise SealError(f"{rid}: the server echo of {t['turn_id']} differs from the request digest")
    summary = usage_totals(list(turns.values()))
    (run.root / "usage_summary.json").write_bytes(canonical(summary))
    return summary


def usage_totals(turns: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Token usage of journaled turns per kind (total = input + output), the turn count and the number of
    format-correction turns (the content of ``usage_summary.json``)."""
    totals: dict[str, dict[str, int]] = {}
    for t in turns:
        key = f"{t['kind']}"
        agg = totals.setdefault(key, {"turns": 0, "input_tokens": 0, "cached_input_tokens": 0, "output_tokens": 0,
                                      "reasoning_tokens": 0, "failed_turns": 0})
        agg["turns"] += 1
        if t.get("usage") is None:
            agg["failed_turns"] += 1
            continue
        for k in ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens"):
            agg[k] += int(t["usage"].get(k) or 0)
    for agg in totals.values():
        agg["total_tokens"] = agg["input_tokens"] + agg["output_tokens"]
    return {"by_kind": totals, "turns": len(turns),
            "format_corrections": sum(t["kind"] == "format_retry" for t in turns)}
