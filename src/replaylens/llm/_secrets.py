"""API keys: read from the environment or a ``.env`` file, never logged, redacted from every artifact."""

from __future__ import annotations

import json
import os
import re
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


# a provider's mask: stars, an ellipsis (also as a JSON escape), three or more dots, bullets, or a run of x
_MASK = re.compile(r"\*+|(?:…|\\u2026)+|\.{3,}|(?:•|\\u2022)+|[xX]{3,}")
MIN_FRAGMENT = 4
"""A run of this many leading or trailing characters of a secret next to a mask is redacted."""


def _left_fragment(text: str, end: int, secret: str, least: int) -> int:
    """Start of the longest prefix of ``secret`` (at least ``least`` characters) ending at ``end``; -1 if none."""
    for m in range(min(len(secret), end), least - 1, -1):
        if m and text[end - m:end] == secret[:m]:
            return end - m
    return -1


def _right_fragment(text: str, start: int, secret: str, least: int) -> int:
    """End of the longest suffix of ``secret`` (at least ``least`` characters) starting at ``start``; -1 if none."""
    for m in range(min(len(secret), len(text) - start), least - 1, -1):
        if m and text[start:start + m] == secret[-m:]:
            return start + m
    return -1


class Redactor:
    """Replaces every known secret by ``[REDACTED]``: the exact value, its JSON escape, and any masked echo of
    it (a provider's ``sk-RL*****b8a6f0e5d``, ``sk-…e5d0``, ``xxxxxxxxe5d0``): a mask with a run of at least
    :data:`MIN_FRAGMENT` of the secret's leading characters before it or trailing characters after it is
    replaced together with those runs (and any shorter fragment on its other side)."""

    def __init__(self, secrets: list[str] | None = None) -> None:
        self._secrets: list[str] = []
        for s in secrets or []:
            self.add(s)

    def add(self, secret: str | None) -> None:
        if not secret or len(secret) < 4:
            return
        forms = {secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]}
        for f in forms:
            if f not in self._secrets:
                self._secrets.append(f)
        self._secrets.sort(key=len, reverse=True)

    @property
    def secrets(self) -> list[str]:
        return list(self._secrets)

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def _masked_spans(self, text: str) -> list[tuple[int, int]]:
        spans: list[tuple[int, int]] = []
        for m in _MASK.finditer(text):
            a, b = m.span()
            for s in self._secrets:
                left = _left_fragment(text, a, s, MIN_FRAGMENT)
                right = _right_fragment(text, b, s, MIN_FRAGMENT)
                if left < 0 and right < 0:
                    continue
                if left < 0:
                    left = max(_left_fragment(text, a, s, 1), -1)
                if right < 0:
                    right = max(_right_fragment(text, b, s, 1), -1)
                spans.append((a if left < 0 else left, b if right < 0 else right))
        return spans

    def __call__(self, text: str) -> str:
        for s in self._secrets:
            if s in text:
                text = text.replace(s, REDACTED)
        if not self._secrets or not _MASK.search(text):
            return text
        spans = sorted(self._masked_spans(text))
        out, pos = [], 0
        for a, b in spans:
            if b <= pos:
                continue
            out += [text[pos:max(a, pos)], REDACTED] if a >= pos else [REDACTED]
            pos = b
        out.append(text[pos:])
        return "".join(out)
