"""Acquisition: run planned requests through a back-end with the frozen protocol, recording every attempt.

Protocol (partB §5.5, partC C7): a bounded number of concurrent requests, a per-attempt timeout,
exactly one format-only retry after a schema-invalid response (both attempts kept), transport and
capacity failures retried only under an amendment (the frozen retry policy is amendment 0000,
declared before acquisition; seeded exponential back-off with full jitter), observed model
metadata checked against the frozen settings, and missing decisions never imputed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..errors import ConfigError
from ..rng import derive_rng
from ._backends import Backend
from ._budget import Budget
from ._cache import ATTEMPT_ROLE
from ._serialize import decode_response
from ._store import RunStore, Step, Terminal, now_iso
from ._types import AccessError, BackendError, Completion, Request

__all__ = ["AcquireProgress", "AcquireSettings", "AcquireSummary", "Acquirer", "acquisition_progress", "run_sync"]

T = TypeVar("T")


@dataclass(frozen=True)
class AcquireSettings:
    """Frozen acquisition settings (recorded in the manifest).

    ``retries``: transport/capacity retries per request under the frozen retry amendment (0 = the
    paper's no-retry protocol, where only a later amendment can authorize one replacement).
    """

    concurrency: int = 4
    timeout_s: float = 180.0
    retries: int = 3
    backoff_base_s: float = 1.0
    backoff_max_s: float = 60.0

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ConfigError(f"concurrency must be >= 1; got {self.concurrency}")
        if not self.timeout_s > 0:
            raise ConfigError(f"timeout_s must be > 0; got {self.timeout_s}")
        if self.retries < 0:
            raise ConfigError(f"retries must be >= 0; got {self.retries}")
        if self.backoff_base_s < 0 or self.backoff_max_s < 0:
            raise ConfigError("back-off times must be >= 0")

    def to_dict(self) -> dict[str, Any]:
        return {"concurrency": self.concurrency, "timeout_s": self.timeout_s, "retries": self.retries,
                "backoff_base_s": self.backoff_base_s, "backoff_max_s": self.backoff_max_s,
                "format_retries": 1}


@dataclass
class AcquireSummary:
    """What one acquisition pass did."""

    calls: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    decided: int = 0
    failed: dict[str, str] = field(default_factory=dict)
    access_error: str | None = None
    budget_stop: str | None = None
    wall_s: float = 0.0


def run_sync(factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine to completion from synchronous code (also inside a running event loop)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(factory())
    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        return ex.submit(asyncio.run, factory()).result()


@dataclass
class AcquireProgress:
    """Live counters of one acquisition pass, handed to the :func:`acquisition_progress` callback after
    every finished attempt: requests finished (decided or terminally failed) out of those that needed
    an attempt, failed attempts, calls and token usage."""

    total: int
    done: int = 0
    calls: int = 0
    failed_attempts: int = 0
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0


ProgressCallback = Callable[[AcquireProgress], None]
_PROGRESS: ContextVar[ProgressCallback | None] = ContextVar("replaylens_acquire_progress", default=None)


@contextmanager
def acquisition_progress(callback: ProgressCallback) -> Iterator[None]:
    """Report every :class:`Acquirer` created inside the block to ``callback`` (e.g. a progress bar)."""
    token = _PROGRESS.set(callback)
    try:
        yield
    finally:
        _PROGRESS.reset(token)


class _GroupCommit:
    """Durable attempt writes off the event loop: every line is written and fsynced (one fsync per
    record) before its worker continues; lines that arrive while a write is running queue for the
    next drain, so the event loop never waits on the disk."""

    def __init__(self, store: RunStore, io: concurrent.futures.ThreadPoolExecutor) -> None:
        self.store = store
        self.io = io
        self.pending: list[tuple[dict[str, Any], asyncio.Future[None]]] = []
        self.draining = False
        self.task: asyncio.Task[None] | None = None

    async def run(self, fn: Callable[[Any], None], arg: Any) -> None:
        await asyncio.get_running_loop().run_in_executor(self.io, fn, arg)

    async def attempt(self, attempt: dict[str, Any]) -> None:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self.pending.append((attempt, fut))
        if not self.draining:
            self.draining = True
            self.task = loop.create_task(self._drain())
        await fut

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self.pending:
                batch, self.pending = self.pending, []
                try:
                    await loop.run_in_executor(self.io, self.store.write_attempts, [a for a, _ in batch])
                except Exception as exc:  # surface the I/O error in every waiting worker
                    for _, f in batch:
                        f.set_exception(exc)
                    continue
                for _, f in batch:
                    f.set_result(None)
        finally:
            self.draining = False


class Acquirer:
    """Runs requests through ``backend`` and journals every attempt in ``store``."""

    def __init__(self, store: RunStore, backend: Backend, settings: AcquireSettings, *,
                 budget: Budget | None = None) -> None:
        self.store = store
        self.backend = backend
        self.settings = settings
        self.budget = budget
        self._used = (0, 0.0)  # (attempts started or journaled, cost) over the run directory
        self.progress_callback = _PROGRESS.get()  # read here: acquisition may run on another thread
        self._progress = AcquireProgress(0)
        for s in backend.secrets():
            store.redact.add(s)

    def backoff(self, rid: str, failures: int, retry_after: float | None) -> float:
        """Full-jitter exponential back-off from a Generator derived from the recorded seed."""
        s = self.settings
        cap = min(s.backoff_max_s, s.backoff_base_s * 2.0 ** max(failures - 1, 0))
        delay = float(derive_rng(self.store.seed, "backoff", rid, failures).uniform(0.0, cap)) if cap > 0 else 0.0
        if retry_after is not None:
            delay = max(delay, min(retry_after, s.backoff_max_s))
        return delay

    def run(self, requests: Sequence[Request], *, offline: bool = False) -> AcquireSummary:
        """Acquire every request that still needs an attempt (in the given order); returns a summary."""
        return run_sync(lambda: self.arun(requests, offline=offline))

    async def arun(self, requests: Sequence[Request], *, offline: bool = False) -> AcquireSummary:
        summary = AcquireSummary()
        t0 = time.perf_counter()
        todo = [r for r in requests if isinstance(self.store.next_step(r.request_id), Step)]
        self._progress = AcquireProgress(len(todo))
        if self.budget is not None:
            self._used = self.budget.spent(self.store)
        if self.progress_callback is not None:
            self.progress_callback(self._progress)
        if todo and not offline:
            io = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="replaylens-llm-io")
            commit = _GroupCommit(self.store, io)
            queue = iter(todo)
            await self.backend.open()
            try:
                n_workers = min(self.settings.concurrency, len(todo))
                await asyncio.gather(*[self._worker(queue, commit, summary) for _ in range(n_workers)])
            finally:
                await self.backend.close()
                io.shutdown(wait=True)
        for r in requests:
            st = self.store.next_step(r.request_id)
            if st is None:
                summary.decided += 1
            elif isinstance(st, Terminal):
                summary.failed[r.request_id] = st.reason
            else:
                stopped = offline or summary.access_error or summary.budget_stop
                summary.failed[r.request_id] = "not attempted" if stopped else "pending"
        summary.wall_s = time.perf_counter() - t0
        return summary

    async def _worker(self, queue: Any, commit: _GroupCommit, summary: AcquireSummary) -> None:
        for req in queue:
            if summary.access_error is not None or summary.budget_stop is not None:
                return
            await self._one(req, commit, summary)

    async def _one(self, req: Request, commit: _GroupCommit, summary: AcquireSummary) -> None:
        store = self.store
        timeout = self.settings.timeout_s
        while summary.access_error is None:
            step = store.next_step(req.request_id)
            if not isinstance(step, Step):
                return
            if self.budget is not None:
                summary.budget_stop = summary.budget_stop or self.budget.reached(*self._used)
                if summary.budget_stop is not None:
                    return
                self._used = (self._used[0] + 1, self._used[1])  # reserved before the await: a hard request cap
            if step.role == "replacement":
                await asyncio.sleep(self.backoff(req.request_id, step.failures, step.retry_after))
            start = store.begin(req.request_id, step)
            store.write_start(start)
            t0 = time.perf_counter()
            comp: Completion | None = None
            err: BackendError | None = None
            ATTEMPT_ROLE.set(step.role)  # a format retry or replacement is never answered from the request cache
            try:
                comp = await asyncio.wait_for(self.backend.complete(req, timeout), timeout)
            except TimeoutError:
                err = BackendError(f"timeout after {timeout:g} s")
            except AccessError as exc:
                summary.access_error = store.redact(str(exc))
                store.drop_start(start)
                await commit.run(store.record_access_failure, {
                    "attempt_id": start["attempt_id"], "request_id": req.request_id, "started_at": start["started_at"],
                    "ended_at": now_iso(), "http_status": exc.http_status, "error": str(exc)})
                return
            except BackendError as exc:
                err = exc
            latency = time.perf_counter() - t0
            summary.calls += 1
            attempt = self._attempt(req, step, start, latency, comp, err)
            summary.by_status[attempt["status"]] = summary.by_status.get(attempt["status"], 0) + 1
            store.note_attempt(attempt)
            if self.budget is not None:
                chars = len(req.prompt) + len(req.system or "")
                self._used = (self._used[0], self._used[1] + self.budget.attempt_cost(attempt, chars))
            await commit.attempt(attempt)
            self._report(req.request_id, attempt)

    def _report(self, rid: str, attempt: dict[str, Any]) -> None:
        p = self._progress
        p.calls += 1
        p.failed_attempts += attempt["status"] != "ok"
        use = attempt.get("usage") or {}
        p.input_tokens += int(use.get("input_tokens") or 0)
        p.cached_input_tokens += int(use.get("cached_input_tokens") or 0)
        p.output_tokens += int(use.get("output_tokens") or 0)
        p.done += not isinstance(self.store.next_step(rid), Step)
        if self.progress_callback is not None:
            self.progress_callback(p)

    def _attempt(self, req: Request, step: Step, start: dict[str, Any], latency: float, comp: Completion | None,
                 err: BackendError | None) -> dict[str, Any]:
        a: dict[str, Any] = {
            "attempt_id": start["attempt_id"], "request_id": req.request_id, "kind": step.kind, "role": step.role,
            "recovers": step.recovers, "amendment_id": step.amendment_id if step.role == "replacement" else None,
            "started_at": start["started_at"], "ended_at": now_iso(), "latency_s": round(latency, 6),
            "prompt_sha256": req.prompt_sha256, "schema_sha256": req.schema_sha256, "server_input_sha256": None,
            "runtime_metadata": None, "raw_response": None, "finish_reason": None, "response_id": None,
            "parsed_decisions": None, "decoded_semantic_actions": None, "usage": None, "provider_notifications": [],
            "error": None, "http_status": None, "retry_after_s": None,
        }
        if err is not None:
            a.update(status=err.status, error=str(err), http_status=err.http_status, retry_after_s=err.retry_after)
            return a
        assert comp is not None
        a.update(server_input_sha256=comp.server_input_sha256, raw_response=comp.text, finish_reason=comp.finish_reason,
                 response_id=comp.response_id, usage=comp.usage, provider_notifications=list(comp.notifications),
                 runtime_metadata={"model": comp.model, "reasoning_effort": comp.reasoning_effort,
                                   "service_tier": comp.service_tier})
        violations = self.store.settings.check_observed(comp.model, comp.reasoning_effort, comp.service_tier)
        if comp.server_input_sha256 is not None and comp.server_input_sha256 != req.prompt_sha256:
            violations.append("server-accepted input digest differs from the prompt digest")
        if comp.tool_calls:
            violations.append(f"response contains {comp.tool_calls} tool call(s)")
        if violations:
            a.update(status="protocol_violation", error="; ".join(violations))
            return a
        dec = decode_response(comp.text, req.decoders)
        if comp.refusal:
            a.update(status="schema_invalid", error=f"refusal: {comp.refusal}")
        elif comp.finish_reason == "length":
            a.update(status="schema_invalid", error="output truncated (finish_reason=length)")
        elif not dec.ok:
            a.update(status="schema_invalid", error=dec.error, parsed_decisions=dec.parsed)
        else:
            a.update(status="ok", parsed_decisions=list(dec.tokens), decoded_semantic_actions=list(dec.actions))
        return a
