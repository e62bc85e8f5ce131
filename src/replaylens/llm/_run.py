"""Run-directory operations without a design in memory: resume acquisition, validate, amend."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ._acquire import Acquirer, AcquireSettings, AcquireSummary
from ._backends import Backend, OpenAIBackend, ScriptedBackend
from ._secrets import Redactor, load_api_key
from ._store import ValidationReport, open_store
from ._types import ModelSettings

__all__ = ["acquire_run", "amend", "backend_for", "validate"]


def backend_for(settings: ModelSettings, *, env_file: str | os.PathLike[str] | None = ".env") -> Backend:
    """Rebuild the frozen back-end of a run from its manifest settings (the key comes from the environment)."""
    if settings.provider == "scripted":
        rule = settings.model.split("/", 1)[1]
        p = dict(settings.params)
        be: Backend = ScriptedBackend(rule, noise=float(p.get("noise", 0.0)), seed=int(p.get("seed", 0)))
    elif settings.provider == "openai":
        key = None
        if settings.api_key_env:
            key = load_api_key(settings.api_key_env, env_file)
            if key is None:
                raise ConfigError(f"no API key: set {settings.api_key_env} in the environment or in {env_file}")
        be = OpenAIBackend(settings, api_key=key, response_format=settings.response_format)  # frozen: no probe
    elif settings.provider == "local":
        from ._local import LlamaCppBackend

        p = dict(settings.params)
        be = LlamaCppBackend(settings.model.split("/", 1)[1], seed=int(p.get("seed", 0)),
                             readout=str(p.get("readout", "logits")), prompt_format=str(p.get("prompt_format", "chat")))
    else:
        raise ConfigError(f"unknown provider {settings.provider!r} in the run manifest")
    if be.settings.digest() != settings.digest():
        raise ConfigError("the rebuilt back-end's settings differ from the frozen manifest")
    return be


def acquire_run(run_dir: str | os.PathLike[str], *, env_file: str | os.PathLike[str] | None = ".env",
                backend: Backend | None = None) -> AcquireSummary:
    """Acquire every planned request that still needs an attempt, with the run's frozen settings."""
    probe = open_store(run_dir)
    settings, acq_d = probe.settings, dict(probe.manifest.get("acquisition", {}))
    probe.close()
    be = backend or backend_for(settings, env_file=env_file)
    acq = AcquireSettings(**{k: acq_d[k] for k in ("concurrency", "timeout_s", "retries", "backoff_base_s",
                                                   "backoff_max_s") if k in acq_d})
    with open_store(run_dir, redactor=Redactor(be.secrets())) as store:
        reqs = [store.request(rid) for rid in store.scheduled()]
        return Acquirer(store, be, acq).run(reqs)


def validate(run_dir: str | os.PathLike[str], *, expected: int | None = None) -> ValidationReport:
    """Run the validation gate on a run directory (writes selection, validation, usage and seal files)."""
    with open_store(run_dir) as store:
        exp = expected if expected is not None else store.manifest.get("expected_requests")
        return store.validate(expected=exp)


def amend(run_dir: str | os.PathLike[str], *, reason: str, authorized_by: str,
          request_ids: list[str] | None = None, declared_before_acquisition: bool = False,
          precedes_aggregate_inspection: bool = True) -> dict[str, Any]:
    """Record a capacity-replacement amendment (one replacement per listed failed request)."""
    if not Path(run_dir, "manifest.json").exists():
        raise ConfigError(f"{run_dir} is not a ReplayLens LLM run directory")
    with open_store(run_dir) as store:
        return store.amend(reason, authorized_by, request_ids=request_ids,
                           declared_before_acquisition=declared_before_acquisition,
                           precedes_aggregate_inspection=precedes_aggregate_inspection)
