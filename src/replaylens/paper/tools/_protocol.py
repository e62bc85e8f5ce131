"""Primitives of the frozen tool protocol that planning and debugging share (C7): the two protocol errors,
canonical JSON bytes, sha256 digests, source hashes, and the compact export file (canonical JSON, optionally
gzip)."""

from __future__ import annotations

import hashlib
import inspect
import json
from pathlib import Path
from typing import Any

from ...errors import ConfigError, ReplayLensError

__all__ = ["ProtocolViolation", "SealError", "canonical", "read_export", "sha256", "source_hash", "write_export"]


class SealError(ReplayLensError):
    """The choice seal is missing, incomplete or does not match the recorded choices."""


class ProtocolViolation(ReplayLensError):
    """A tool call outside the frozen protocol (3 run_tests then 1 submit_patch, IDs from the menu)."""


def canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def source_hash(*objs: Any) -> str:
    parts = sorted((inspect.getsourcefile(o) or "", sha256(inspect.getsource(o).encode())) for o in objs)
    return sha256(canonical([[Path(p).name, h] for p, h in parts]))


def write_export(path: str | Path, doc: dict[str, Any]) -> Path:
    """Write an export as canonical JSON (gzip when the name ends in ``.gz``, with a fixed mtime)."""
    import gzip

    p = Path(path)
    data = canonical(doc)
    p.write_bytes(gzip.compress(data, 9, mtime=0) if p.suffix == ".gz" else data)
    return p


def read_export(path: str | Path, *, unsealed: bool = False) -> dict[str, Any]:
    """Read an export. A sealed export (no ``sealed`` field, as written by ``export()``) must carry the choice seal
    and the score release; an unsealed one (``"sealed": false``) is refused unless ``unsealed`` is true (its
    failure report and completed trajectories can be shown, no score can be computed from it)."""
    import gzip

    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{p}: no such export file")
    data = p.read_bytes()
    try:
        doc = json.loads(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{p}: not a JSON export ({type(exc).__name__})") from None
    if isinstance(doc, dict) and doc.get("sealed", True) is not True:
        if unsealed and doc.get("sealed") is False:
            return doc
        gate = (doc.get("failure_report") or {}).get("gate") or {}
        raise ConfigError(f"{p}: field 'sealed' is {json.dumps(doc.get('sealed'))}: the validation gate did not pass "
                          f"({gate.get('error') or 'no seal'}), so the export carries no hidden / final-test scores "
                          "and no table is computed from it; see its failure_report")
    if not isinstance(doc, dict) or "choice_seal" not in doc or "score_release" not in doc:
        raise ConfigError(f"{p}: field 'choice_seal' / 'score_release' missing (not a sealed export)")
    return doc
