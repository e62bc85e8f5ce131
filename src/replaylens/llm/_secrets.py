"""API keys: read from the environment or a ``.env`` file, never logged, redacted from every artifact."""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from ..errors import ConfigError

__all__ = ["Redactor", "load_api_key", "sanitize_url"]

REDACTED = "[REDACTED]"


def _parse_env_file(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export "):].lstrip()
        name, sep, value = line.partition("=")
        if not sep:
            continue
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        out[name.strip()] = value
    return out


def load_api_key(env_var: str, env_file: str | os.PathLike[str] | None = ".env") -> str | None:
    """The key named ``env_var`` from the environment, else from ``env_file`` (if it exists), else None.

    The value is returned to the caller only; it is never written, printed or hashed.
    """
    if not env_var:
        return None
    val = os.environ.get(env_var)
    if val:
        return val
    if env_file is not None:
        p = Path(env_file)
        if p.is_file():
            try:
                val = _parse_env_file(p).get(env_var)
            except (OSError, UnicodeDecodeError) as exc:
                raise ConfigError(f"cannot read env file {p}: {type(exc).__name__}") from None
            if val:
                return val
    return None


def sanitize_url(url: str) -> str:
    """Drop user:password@, the query and the fragment of a URL (they may carry credentials)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


class Redactor:
    """Replaces every known secret (and its JSON-escaped form) in text by ``[REDACTED]``."""

    def __init__(self, secrets: list[str] | None = None) -> None:
        self._secrets: list[str] = []
        for s in secrets or []:
            self.add(s)

    def add(self, secret: str | None) -> None:
        if not secret or len(secret) < 4:
            return
        forms = {secret, json.dumps(secret)[1:-1]}
        for f in forms:
            if f not in self._secrets:
                self._secrets.append(f)
        self._secrets.sort(key=len, reverse=True)

    @property
    def secrets(self) -> list[str]:
        return list(self._secrets)

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def __call__(self, text: str) -> str:
        for s in self._secrets:
            if s in text:
                text = text.replace(s, REDACTED)
        return text
