"""The back-end factory: one model spec (``provider/name``) → the back-end that serves it."""

from __future__ import annotations

import os
from typing import Any

from ..errors import ConfigError
from ..settings import ModelSpec
from ._backends import Backend, OpenAIBackend, ScriptedBackend, openai_endpoint
from ._local import LlamaCppBackend
from ._types import ModelSettings

__all__ = ["make_backend"]


def make_backend(
    model: str,
    *,
    base_url: str | None = None,
    api_key_env: str | None = "OPENAI_API_KEY",
    env_file: str | os.PathLike[str] | None = ".env",
    reasoning_effort: str | None = None,
    service_tier: str | None = None,
    params: dict[str, Any] | None = None,
    structured: bool = True,
    accept_models: tuple[str, ...] | list[str] = (),
    noise: float = 0.0,
    seed: int = 0,
    n_threads: int | None = None,
    n_ctx: int = 4096,
    response_format: str = "auto",
    local_readout: str = "logits",
) -> Backend:
    """Back-end from a model spec: ``openai/NAME`` (any OpenAI-compatible endpoint at ``base_url``),
    ``scripted/RULE`` (mean, sum, count, latest, best) or ``local/PATH`` (a GGUF file via llama-cpp-python).

    The API key is read from ``api_key_env`` in the environment, else from ``env_file``; a missing key
    is an error (no fallback to another provider or endpoint).  ``api_key_env=None`` declares an
    endpoint without authentication.  ``local_readout`` (``local/`` models only): ``"logits"`` (argmax over the
    menu tokens' single-token continuations) or ``"grammar"`` (greedy generation constrained to the menu tokens,
    which may be several tokens long).
    """
    spec = ModelSpec.parse(model)
    name = spec.name
    if local_readout != "logits" and spec.provider != "local":
        raise ConfigError(f"the local readout applies to local/ models only; got model {model!r}")
    if spec.provider == "scripted":
        return ScriptedBackend(name, noise=noise, seed=seed)
    if spec.provider == "local":
        return LlamaCppBackend(name, seed=seed, n_ctx=n_ctx, n_threads=n_threads, readout=local_readout)
    url, key = openai_endpoint(base_url, api_key_env, env_file)
    settings = ModelSettings("openai", name, base_url=url, reasoning_effort=reasoning_effort,
                             service_tier=service_tier, params=dict(params or {}), structured=structured,
                             api_key_env=api_key_env or None, accept_models=tuple(accept_models))
    return OpenAIBackend(settings, api_key=key, response_format=response_format)
