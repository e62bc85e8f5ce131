"""Run directory with provenance (partC C7): frozen manifest, plan, append-only attempts, amendments, gate.

Layout of one acquisition::

    RUN/manifest.json, manifest.sha256   frozen before the first call
    RUN/plan.jsonl                       one entry per request, in a fixed seeded acquisition order
    RUN/prompts.jsonl                    exact prompt texts (zlib + base64), keyed by sha256
    RUN/starts.jsonl                     intent log: one line per attempt started (interruption evidence)
    RUN/attempts.jsonl                   append-only, fsync per record: one line per finished client attempt
    RUN/access_failures.jsonl            model-access failures (not scientific attempts)
    RUN/amendments/NNNN-<slug>.json      retry / capacity-replacement amendments
    RUN/selection.json, validation.json, usage_summary.json, choice_seal.json   written by the gate

A kill at any point loses at most the attempts in flight: on reopen, torn last lines are skipped,
finished requests are never re-asked, and an interrupted attempt is re-issued as ``recovery``.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import json
import os
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from .._durable import atomic_write
from ..errors import ConfigError, JournalError
from ..rng import derive_rng
from ._secrets import Redactor
from ._serialize import ItemDecoder, canonical_json, decode_response, sha256_text
from ._types import ModelSettings, Request

__all__ = ["RunStore", "Step", "ValidationReport", "now_iso", "open_store"]

FORMAT = "replaylens-llm-run/1"
RETRYABLE = ("capacity_error", "transport_error")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _read_jsonl(path: Path) -> tuple[list[dict[str, Any]], int]:
    """Parsed lines and the number of torn / unparsable lines skipped (a kill can tear the last one)."""
    if not path.exists():
        return [], 0
    rows: list[dict[str, Any]] = []
    torn = 0
    with path.open("rb") as fh:
        for raw in fh:
            if not raw.strip():
                continue
            if not raw.endswith(b"\n"):
                torn += 1
                continue
            try:
                obj = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                torn += 1
                continue
            if isinstance(obj, dict):
                rows.append(obj)
            else:
                torn += 1
    return rows, torn


class _Appender:
    """An append-only JSONL file; repairs a torn last line with a newline before the first append."""

    def __init__(self, path: Path, redact: Redactor) -> None:
        self.path = path
        self.redact = redact
        self._fh: IO[bytes] | None = None

    def _open(self) -> IO[bytes]:
        if self._fh is None:
            torn = self.path.exists() and self.path.stat().st_size > 0 and not self.path.read_bytes().endswith(b"\n")
            self._fh = self.path.open("ab")
            if torn:
                self._fh.write(b"\n")
        return self._fh

    def write(self, rows: Sequence[Mapping[str, Any]], *, sync: bool) -> None:
        fh = self._open()
        data = "".join(self.redact(canonical_json(r)) + "\n" for r in rows).encode("utf-8")
        fh.write(data)
        fh.flush()
        if sync:
            os.fsync(fh.fileno())

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


@dataclass(frozen=True)
class Step:
    """What a request needs next: an attempt of ``kind`` (``role`` = the protocol step it performs)."""

    kind: str
    role: str
    recovers: str | None = None
    amendment_id: str | None = None
    failures: int = 0          # consecutive capacity/transport failures so far (for back-off)
    retry_after: float | None = None


@dataclass(frozen=True)
class Terminal:
    """A request that will get no further attempt without a new amendment."""

    reason: str


@dataclass
class ValidationReport:
    """Result of the validation gate (partC C7.4)."""

    ok: bool
    n_planned: int
    n_selected: int
    missing: list[str]
    n_attempts: int
    by_status: dict[str, int]
    by_kind: dict[str, int]
    format_retries: int
    problems: list[str] = field(default_factory=list)
    unverified: list[str] = field(default_factory=list)
    torn_lines: int = 0
    expected: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "n_planned": self.n_planned, "n_selected": self.n_selected,
                "n_missing": len(self.missing), "missing": self.missing, "n_attempts": self.n_attempts,
                "by_status": self.by_status, "by_kind": self.by_kind, "format_retries": self.format_retries,
                "problems": self.problems, "unverified_metadata": self.unverified, "torn_lines": self.torn_lines,
                "expected_requests": self.expected}

    def summary(self) -> str:
        head = "validation passed" if self.ok else "validation FAILED"
        return (f"{head}: {self.n_selected}/{self.n_planned} requests decided, {len(self.missing)} missing, "
                f"{self.n_attempts} attempts {self.by_status}, {self.format_retries} format retries"
                + ("" if not self.problems else "; " + "; ".join(self.problems[:5])))


class RunStore:
    """One acquisition's run directory (see the module docstring).  One process at a time (file lock).

    ``manifest`` is frozen on first use; reopening with a different manifest (other settings,
    template, source or design) is refused with :class:`~replaylens.JournalError`.
    """

    def __init__(self, root: str | os.PathLike[str], manifest: Mapping[str, Any] | None = None, *,
                 redactor: Redactor | None = None) -> None:
        self.root = Path(root)
        self.redact = redactor or Redactor()
        if manifest is None and not (self.root / "manifest.json").exists():
            raise ConfigError(f"{self.root} is not a ReplayLens LLM run directory (no manifest.json)")
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "amendments").mkdir(exist_ok=True)
        self._lockfh = (self.root / ".lock").open("a")
        try:
            fcntl.flock(self._lockfh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lockfh.close()
            raise JournalError(f"{self.root} is in use by another process") from None
        self.manifest = self._freeze(manifest)
        self.settings = ModelSettings.from_dict(self.manifest["settings"])
        self.seed = int(self.manifest.get("seed", 0))
        self._plan_rows, t1 = _read_jsonl(self.root / "plan.jsonl")
        self.plan: dict[str, dict[str, Any]] = {}
        for row in self._plan_rows:
            self.plan.setdefault(row["request_id"], row)
        prompts, t2 = _read_jsonl(self.root / "prompts.jsonl")
        self._prompts: dict[str, str] = {p["sha256"]: p["zlib"] for p in prompts}
        atts, t3 = _read_jsonl(self.root / "attempts.jsonl")
        starts, t4 = _read_jsonl(self.root / "starts.jsonl")
        self.torn_lines = t1 + t2 + t3 + t4
        self.attempts: dict[str, list[dict[str, Any]]] = {}
        self._attempt_ids: set[str] = set()
        for a in atts:
            if a["attempt_id"] in self._attempt_ids:
                continue
            self._attempt_ids.add(a["attempt_id"])
            self.attempts.setdefault(a["request_id"], []).append(a)
        access, t5 = _read_jsonl(self.root / "access_failures.jsonl")
        self.torn_lines += t5
        closed = {a.get("attempt_id") for a in access}
        self.starts: dict[str, list[dict[str, Any]]] = {}
        for s in starts:
            if s["attempt_id"] in closed:
                continue
            self.starts.setdefault(s["request_id"], []).append(s)
        self._counter: dict[str, int] = {}
        for row in [*atts, *starts]:
            rid = row["request_id"]
            self._counter[rid] = max(self._counter.get(rid, 0), _seq(row["attempt_id"]))
        self.amendments = self._load_amendments()
        self._files = {n: _Appender(self.root / f"{n}.jsonl", self.redact)
                       for n in ("plan", "prompts", "attempts", "starts", "access_failures")}

        self._refs = 1

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Release one reference (see :func:`open_store`); the last one closes files and the lock."""
        self._refs -= 1
        if self._refs > 0:
            return
        _OPEN.pop(self.root.resolve(), None)
        for f in self._files.values():
            f.close()
        if not self._lockfh.closed:
            fcntl.flock(self._lockfh.fileno(), fcntl.LOCK_UN)
            self._lockfh.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _freeze(self, manifest: Mapping[str, Any] | None) -> dict[str, Any]:
        path = self.root / "manifest.json"
        if path.exists():
            old = json.loads(path.read_text(encoding="utf-8"))
            if manifest is not None:
                try:
                    self._check_same(manifest, old)
                except JournalError:
                    self._lockfh.close()
                    raise
            return dict(old)
        assert manifest is not None
        frozen = {**manifest, "format": FORMAT, "created_at": now_iso()}
        text = self.redact(json.dumps(frozen, sort_keys=True, indent=1, ensure_ascii=False))
        atomic_write(path, text.encode("utf-8"))
        atomic_write(self.root / "manifest.sha256", (hashlib.sha256(text.encode()).hexdigest() + "\n").encode())
        acq = frozen.get("acquisition", {})
        if int(acq.get("retries", 0)) > 0:
            self._write_amendment({
                "amendment_id": "0000", "slug": "frozen-retry-policy", "created_at": frozen["created_at"],
                "authorized_by": "frozen acquisition settings",
                "reason": "transport/capacity errors are retried with seeded exponential back-off (declared before "
                          "acquisition)",
                "applies_to": "*", "qualifying_statuses": list(RETRYABLE),
                "constraints": {"same_model": True, "same_prompts": True, "same_schema": True, "same_reasoning": True,
                                "max_replacements_per_request": int(acq["retries"]),
                                "successful_originals_untouched": True},
                "backoff": {"base_s": acq.get("backoff_base_s"), "max_s": acq.get("backoff_max_s"),
                            "jitter": "full, from derive_rng(seed, 'backoff', request_id, k)"},
                "declared_before_acquisition": True, "created_after_queue_complete": False,
                "precedes_aggregate_inspection": True, "manifest_sha256": self.manifest_sha256(path)})
        return frozen

    def _check_same(self, manifest: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> None:
        old = self.manifest if old is None else old
        new = json.loads(self.redact(canonical_json({**manifest, "format": FORMAT})))
        a = {k: v for k, v in old.items() if k != "created_at"}
        b = {k: v for k, v in new.items() if k != "created_at"}
        if a != b:
            diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
            raise JournalError(f"{self.root} holds a run with a different frozen manifest (differs in "
                               f"{', '.join(diff)}); use a new run directory")

    @staticmethod
    def manifest_sha256(path: Path) -> str:
        return hashlib.sha256(path.read_bytes()).hexdigest()

    # ------------------------------------------------------------------ amendments

    def _load_amendments(self) -> list[dict[str, Any]]:
        out = []
        for p in sorted((self.root / "amendments").glob("*.json")):
            try:
                out.append(json.loads(p.read_text(encoding="utf-8")))
            except json.JSONDecodeError:
                continue
        return out

    def _write_amendment(self, a: Mapping[str, Any]) -> None:
        p = self.root / "amendments" / f"{a['amendment_id']}-{a['slug']}.json"
        atomic_write(p, self.redact(json.dumps(a, sort_keys=True, indent=1, ensure_ascii=False)).encode("utf-8"))

    def amend(self, reason: str, authorized_by: str, *, request_ids: Sequence[str] | None = None,
              declared_before_acquisition: bool = False, precedes_aggregate_inspection: bool = True,
              slug: str = "capacity-replacement") -> dict[str, Any]:
        """Record a capacity-replacement amendment: one replacement per listed failed request.

        Default ``request_ids``: every unselected request whose last attempt is a capacity or
        transport error.  Only those qualify; successful requests are never re-asked.
        """
        failed = [rid for rid in self.plan if isinstance(self.next_step(rid), Terminal)
                  and self.attempts.get(rid) and self.attempts[rid][-1]["status"] in RETRYABLE]
        ids = list(failed if request_ids is None else request_ids)
        bad = [r for r in ids if r not in failed]
        if bad:
            raise ConfigError(f"amendment may only list unselected requests that ended in a capacity/transport "
                              f"error; not eligible: {bad[:5]}")
        if not ids:
            raise ConfigError("no failed capacity/transport requests to amend")
        pending = [rid for rid in self.plan if isinstance(self.next_step(rid), Step)]
        next_id = max((int(x["amendment_id"]) for x in self.amendments), default=0) + 1
        a = {"amendment_id": f"{next_id:04d}", "slug": slug,
             "created_at": now_iso(), "authorized_by": authorized_by, "reason": reason, "applies_to": ids,
             "qualifying_statuses": list(RETRYABLE),
             "constraints": {"same_model": True, "same_prompts": True, "same_schema": True, "same_reasoning": True,
                             "max_replacements_per_request": 1, "successful_originals_untouched": True},
             "declared_before_acquisition": declared_before_acquisition,
             "created_after_queue_complete": not pending,
             "precedes_aggregate_inspection": precedes_aggregate_inspection,
             "manifest_sha256": self.manifest_sha256(self.root / "manifest.json")}
        self._write_amendment(a)
        self.amendments.append(a)
        return a

    def _amendment_for(self, rid: str) -> tuple[str | None, int]:
        """An amendment with replacement budget left for ``rid`` (None) and the replacements used so far."""
        used_total = 0
        for a in self.amendments:
            applies = a["applies_to"] == "*" or rid in a["applies_to"]
            if not applies:
                continue
            used = sum(1 for x in self.attempts.get(rid, []) if x.get("amendment_id") == a["amendment_id"]
                       and _role(x) == "replacement")
            used_total += used
            if used < int(a["constraints"]["max_replacements_per_request"]):
                return a["amendment_id"], used_total
        return None, used_total

    # ------------------------------------------------------------------ plan

    def add_requests(self, requests: Sequence[Request], *, order_key: str = "") -> list[Request]:
        """Append the requests not yet planned, in a seeded order; returns every request in schedule order.

        An already planned request id must have identical prompt and schema digests.
        """
        new: list[Request] = []
        seen: set[str] = set()
        for r in requests:
            old = self.plan.get(r.request_id)
            if old is not None:
                if old["prompt_sha256"] != r.prompt_sha256 or old["schema_sha256"] != r.schema_sha256:
                    raise JournalError(f"request {r.request_id} is planned with different prompt/schema digests")
                continue
            if r.request_id not in seen:
                seen.add(r.request_id)
                new.append(r)
        if new:
            digest = sha256_text(canonical_json(sorted(r.request_id for r in new)))
            order = derive_rng(self.seed, "acquisition-order", order_key, digest).permutation(len(new))
            new = [new[int(i)] for i in order]
            prompt_rows = []
            for r in new:
                for text in (r.prompt, r.system):
                    if text is None:
                        continue
                    sha = sha256_text(text)
                    if sha not in self._prompts:
                        z = base64.b64encode(zlib.compress(text.encode("utf-8"), 6)).decode("ascii")
                        self._prompts[sha] = z
                        prompt_rows.append({"sha256": sha, "zlib": z})
            if prompt_rows:
                self._files["prompts"].write(prompt_rows, sync=True)
            start = len(self.plan)
            rows = []
            for k, r in enumerate(new):
                row = {"request_id": r.request_id, "schedule_index": start + k, "prompt_sha256": r.prompt_sha256,
                       "schema_sha256": r.schema_sha256, "repeat": r.repeat,
                       "system_sha256": None if r.system is None else sha256_text(r.system),
                       "items": [d.to_dict() for d in r.decoders], "meta": dict(r.meta)}
                rows.append(row)
                self.plan[r.request_id] = row
            self._files["plan"].write(rows, sync=True)
        by_id = {r.request_id: r for r in requests}
        return sorted(by_id.values(), key=lambda r: int(self.plan[r.request_id]["schedule_index"]))

    def prompt_text(self, sha: str) -> str:
        return zlib.decompress(base64.b64decode(self._prompts[sha])).decode("utf-8")

    def request(self, rid: str) -> Request:
        """Rebuild a planned request from disk (exact prompt bytes, decoders, repeat key)."""
        row = self.plan[rid]
        system = None if row.get("system_sha256") is None else self.prompt_text(row["system_sha256"])
        req = Request(rid, self.prompt_text(row["prompt_sha256"]),
                      tuple(ItemDecoder.from_dict(d) for d in row["items"]), str(row["repeat"]), row["meta"], system)
        if req.prompt_sha256 != row["prompt_sha256"] or req.schema_sha256 != row["schema_sha256"]:
            raise JournalError(f"stored prompt of {rid} does not match its plan digest")
        return req

    def scheduled(self) -> list[str]:
        return sorted(self.plan, key=lambda r: int(self.plan[r]["schedule_index"]))

    # ------------------------------------------------------------------ attempts

    def next_step(self, rid: str) -> Step | Terminal | None:
        """The protocol state machine: None when decided, a :class:`Step` to take, or :class:`Terminal`."""
        atts = self.attempts.get(rid, [])
        if any(a["status"] == "ok" for a in atts):
            return None
        last = atts[-1] if atts else None
        amendment = None
        failures = 0
        retry_after = None
        if last is None:
            role = "original"
        elif last["status"] == "schema_invalid":
            if sum(1 for a in atts if _role(a) == "format_retry") >= 1:
                return Terminal("schema_invalid after the format retry")
            role = "format_retry"
        elif last["status"] in RETRYABLE:
            amendment, _ = self._amendment_for(rid)
            if amendment is None:
                return Terminal(last["status"])
            role = "replacement"
            for a in reversed(atts):
                if a["status"] not in RETRYABLE:
                    break
                failures += 1
            retry_after = last.get("retry_after_s")
        else:
            return Terminal(str(last["status"]))
        recorded = {a["attempt_id"] for a in atts}
        starts = self.starts.get(rid, [])
        pending = [s for s in starts if s["attempt_id"] not in recorded]
        latest_recorded = max((_seq(a["attempt_id"]) for a in atts), default=0)
        pending = [s for s in pending if _seq(s["attempt_id"]) > latest_recorded]
        if pending:
            return Step("recovery", role, recovers=pending[-1]["attempt_id"], amendment_id=amendment,
                        failures=failures, retry_after=retry_after)
        return Step(role, role, amendment_id=amendment, failures=failures, retry_after=retry_after)

    def begin(self, rid: str, step: Step) -> dict[str, Any]:
        """Allocate an attempt id and its intent line (written by :meth:`write_start`)."""
        k = self._counter.get(rid, 0) + 1
        self._counter[rid] = k
        start = {"attempt_id": f"{rid}.{k}", "request_id": rid, "kind": step.kind, "role": step.role,
                 "started_at": now_iso()}
        if step.recovers:
            start["recovers"] = step.recovers
        self.starts.setdefault(rid, []).append(start)
        return start

    def drop_start(self, start: Mapping[str, Any]) -> None:
        """Forget an intent that ended in a model-access failure (it is not an interrupted attempt)."""
        lst = self.starts.get(str(start["request_id"]), [])
        self.starts[str(start["request_id"])] = [s for s in lst if s["attempt_id"] != start["attempt_id"]]

    def write_start(self, start: Mapping[str, Any]) -> None:
        self._files["starts"].write([start], sync=False)

    def note_attempt(self, attempt: Mapping[str, Any]) -> None:
        """Update the in-memory state with a finished attempt (durable only after :meth:`write_attempt`)."""
        a = dict(attempt)
        self._attempt_ids.add(a["attempt_id"])
        self.attempts.setdefault(a["request_id"], []).append(a)

    def write_attempt(self, attempt: Mapping[str, Any]) -> None:
        self._files["attempts"].write([attempt], sync=True)

    def write_attempts(self, attempts: Sequence[Mapping[str, Any]]) -> None:
        """Append finished attempts, each line written and fsynced on its own (fsync per record)."""
        for a in attempts:
            self._files["attempts"].write([a], sync=True)

    def record_access_failure(self, row: Mapping[str, Any]) -> None:
        self._files["access_failures"].write([row], sync=True)

    def selected(self, rid: str) -> dict[str, Any] | None:
        for a in self.attempts.get(rid, []):
            if a["status"] == "ok":
                return a
        return None

    def decisions(self, rid: str) -> tuple[str, ...] | None:
        a = self.selected(rid)
        return None if a is None else tuple(a["decoded_semantic_actions"])

    def iter_attempts(self) -> Iterator[dict[str, Any]]:
        for rid in self.attempts:
            yield from self.attempts[rid]

    # ------------------------------------------------------------------ validation gate

    def validate(self, *, expected: int | None = None, write: bool = True) -> ValidationReport:
        """Run the gate before analysis: counts against the plan, one selected attempt per request,
        digests, observed metadata, re-decoding, retry limits and amendments (partC C7.4)."""
        problems: list[str] = []
        unverified: set[str] = {"model", "reasoning_effort", "service_tier"}
        by_status: dict[str, int] = {}
        by_kind: dict[str, int] = {}
        fmt = 0
        missing = []
        selection: dict[str, Any] = {}
        amend_ids = {a["amendment_id"]: a for a in self.amendments}
        for rid in self.attempts:
            if rid not in self.plan:
                problems.append(f"attempts for unplanned request {rid}")
        for rid in self.scheduled():
            row = self.plan[rid]
            atts = self.attempts.get(rid, [])
            oks = [a for a in atts if a["status"] == "ok"]
            n_fmt = sum(1 for a in atts if _role(a) == "format_retry")
            fmt += n_fmt
            if n_fmt > 1:
                problems.append(f"{rid}: {n_fmt} format retries (at most one allowed)")
            if len(oks) > 1:
                problems.append(f"{rid}: {len(oks)} successful attempts (duplicate decisions)")
            if not oks:
                missing.append(rid)
            for a in atts:
                by_status[a["status"]] = by_status.get(a["status"], 0) + 1
                by_kind[a["kind"]] = by_kind.get(a["kind"], 0) + 1
                if a["prompt_sha256"] != row["prompt_sha256"]:
                    problems.append(f"{a['attempt_id']}: prompt digest differs from the plan")
                echo = a.get("server_input_sha256")
                if echo is not None and echo != row["prompt_sha256"]:
                    problems.append(f"{a['attempt_id']}: server-accepted input digest differs from the plan")
                if _role(a) == "replacement":
                    am = amend_ids.get(a.get("amendment_id") or "")
                    if am is None or not (am["applies_to"] == "*" or rid in am["applies_to"]):
                        problems.append(f"{a['attempt_id']}: replacement without an amendment listing {rid}")
            if oks:
                a = oks[0]
                meta = a.get("runtime_metadata") or {}
                for k in ("model", "reasoning_effort", "service_tier"):
                    if meta.get(k) is not None:
                        unverified.discard(k)
                bad = self.settings.check_observed(meta.get("model"), meta.get("reasoning_effort"),
                                                   meta.get("service_tier"))
                problems += [f"{a['attempt_id']}: {b}" for b in bad]
                dec = decode_response(a.get("raw_response"), [ItemDecoder.from_dict(d) for d in row["items"]])
                if not dec.ok or list(dec.actions) != list(a.get("decoded_semantic_actions") or []):
                    problems.append(f"{a['attempt_id']}: recorded decisions do not re-decode from the raw response")
                selection[rid] = {"attempt_id": a["attempt_id"], "kind": a["kind"],
                                  "amendment_id": a.get("amendment_id"),
                                  "source": "replacement (amendment)" if _role(a) == "replacement" else a["kind"]}
        n_planned = len(self.plan)
        if expected is not None and expected != n_planned:
            problems.append(f"plan holds {n_planned} requests, the design expects {expected}")
        if missing:
            problems.append(f"{len(missing)} planned requests have no valid decision (never imputed)")
        for k in ("model",):
            if k in unverified and selection:
                problems.append(f"observed {k} was never reported by the endpoint")
        rep = ValidationReport(ok=not problems, n_planned=n_planned, n_selected=len(selection), missing=missing,
                               n_attempts=sum(by_status.values()), by_status=by_status, by_kind=by_kind,
                               format_retries=fmt, problems=problems, unverified=sorted(unverified),
                               torn_lines=self.torn_lines, expected=expected)
        if write:
            atomic_write(self.root / "selection.json", canonical_json(selection).encode("utf-8"))
            atomic_write(self.root / "validation.json",
                          json.dumps(rep.to_dict(), sort_keys=True, indent=1).encode("utf-8"))
            atomic_write(self.root / "usage_summary.json",
                          json.dumps(self.usage_summary(), sort_keys=True, indent=1).encode("utf-8"))
            if rep.ok:
                self._seal(selection)
        return rep

    def usage_summary(self) -> dict[str, Any]:
        """Token usage by attempt kind and status; total = input + output (reasoning is inside output)."""
        groups: dict[str, dict[str, Any]] = {}
        keys = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens")
        for a in self.iter_attempts():
            for g in (f"kind:{a['kind']}", f"status:{a['status']}", "all"):
                d = groups.setdefault(g, {"attempts": 0, "with_usage": 0, **dict.fromkeys(keys, 0)})
                d["attempts"] += 1
                u = a.get("usage")
                if u is None:
                    continue
                d["with_usage"] += 1
                for k in keys:
                    d[k] += int(u.get(k) or 0)
        for d in groups.values():
            d["total_tokens"] = d["input_tokens"] + d["output_tokens"]
        return groups

    def _seal(self, selection: Mapping[str, Any]) -> None:
        choices = [[rid, self.plan[rid]["meta"], list(self.attempts_ok(rid))] for rid in self.scheduled()
                   if rid in selection]
        body = canonical_json(choices)
        seal = {"manifest_sha256": self.manifest_sha256(self.root / "manifest.json"), "n_requests": len(choices),
                "n_decisions": sum(len(c[2]) for c in choices), "choices_sha256": sha256_text(body),
                "sealed_at": now_iso()}
        atomic_write(self.root / "choice_seal.json", json.dumps(seal, sort_keys=True, indent=1).encode("utf-8"))

    def attempts_ok(self, rid: str) -> tuple[str, ...]:
        d = self.decisions(rid)
        return () if d is None else d


_OPEN: dict[Path, RunStore] = {}


def open_store(root: str | os.PathLike[str], manifest: Mapping[str, Any] | None = None, *,
               redactor: Redactor | None = None) -> RunStore:
    """Open a run directory, sharing one instance (and its lock) per directory within this process.

    Each call must be paired with ``close()`` (or used as a context manager).
    """
    key = Path(root).resolve()
    st = _OPEN.get(key)
    if st is None:
        st = RunStore(root, manifest, redactor=redactor)
        _OPEN[key] = st
        return st
    if manifest is not None:
        st._check_same(manifest)
    if redactor is not None:
        for s in redactor.secrets:
            st.redact.add(s)
    st._refs += 1
    return st


def _role(a: Mapping[str, Any]) -> str:
    return str(a.get("role") or a["kind"])


def _seq(attempt_id: str) -> int:
    return int(attempt_id.rsplit(".", 1)[1])
