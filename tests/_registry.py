"""Shared test helper: can the package registry (needed only by the real wine-red fetch) be reached?"""

from __future__ import annotations

import os
import socket
import urllib.parse


def registry_unreachable() -> str | None:
    """Why the package index cannot be reached (None when it can): a 5-second TCP probe."""
    url = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple/").split()[0]
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "file":
        return None
    host, port = parts.hostname or "pypi.org", parts.port or (443 if parts.scheme == "https" else 80)
    proxy = os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy")
    if proxy:
        p = urllib.parse.urlsplit(proxy)
        host, port = p.hostname or host, p.port or 8080
    try:
        with socket.create_connection((host, port), timeout=5):
            return None
    except OSError as exc:
        return f"package registry {host}:{port} unreachable ({exc})"
