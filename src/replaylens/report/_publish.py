"""Private: one run per output directory, and a result set published all at once.

``OUT`` holds one exclusive lock per run (:func:`replaylens._durable.locked_dir`, a ``flock`` on the
directory's inode; the CLI and :func:`replaylens.report.audit` with ``out=`` take the same lock).  The result
files are written into a fresh hidden sibling ``OUT/.results-XXXX/`` and published by one rename of the link
``OUT/.results``; ``OUT/summary.json`` and the other result names are fixed links into ``.results/``, so a
reader that resolves ``OUT/.results`` once (as :func:`~replaylens.report.load_results` does) sees one
complete result set, never a mix of two runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .._durable import LockedError, fsync_dir, holds_lock, locked_dir, umask_mode
from ..errors import ConfigError

__all__ = ["CURRENT", "check_different_run", "locked_out", "publish", "result_root"]

CURRENT = ".results"
_PREFIX = ".results-"


def busy(out: Path) -> ConfigError:
    return ConfigError(f"{out} is in use by another replaylens run; wait for it to finish or use a different "
                       "--out (out=)")


@contextlib.contextmanager
def locked_out(out: Path) -> Iterator[Path]:
    """Hold OUT's run lock (a no-op when this thread holds it already); a busy OUT is a :class:`ConfigError`."""
    if holds_lock(out):
        yield out
        return
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(locked_dir(out))
        except LockedError:
            raise busy(out) from None
        yield out


def _identity(manifest: dict[str, Any]) -> Any:
    return json.loads(json.dumps([manifest.get("command"), manifest.get("arguments")], sort_keys=True,
                                 default=str))


def check_different_run(out: Path, manifest: dict[str, Any], overwrite: bool) -> bool:
    """Refuse (``ConfigError``) to replace the results of a different run (command and arguments differ)
    unless ``overwrite``; True when a different run's results are being replaced."""
    man = out / "manifest.json"
    if not man.exists():
        return False
    try:
        old = json.loads(man.read_text())
        same = isinstance(old, dict) and _identity(old) == _identity(manifest)
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        same = False
    if same:
        return False
    if not overwrite:
        raise ConfigError(f"{out} holds the results of a different run; pass overwrite=True (--overwrite) to "
                          "replace them, or use a new output directory")
    return True


def result_root(out: Path) -> Path:
    """The directory holding OUT's current result set (OUT itself for a pre-link layout)."""
    cur = out / CURRENT
    return cur.resolve() if cur.is_symlink() else out


def publish(out: Path, build: Callable[[Path], None], names: tuple[str, ...]) -> None:
    """Write a result set with ``build(tmpdir)`` and make it OUT's current set with one rename.

    Call it holding OUT's lock.  Earlier sets (and sets left by a killed run) are removed afterwards."""
    for stale in [*out.glob(f"{CURRENT}.*.tmp"), *out.glob(".*.link.tmp")]:  # links left by a killed run
        stale.unlink(missing_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out, prefix=_PREFIX))
    try:
        os.chmod(tmp, umask_mode(0o777))
        build(tmp)
        for p in tmp.iterdir():
            if p.is_file():
                os.chmod(p, umask_mode())
                with p.open("rb") as fh:
                    os.fsync(fh.fileno())
        fsync_dir(tmp)
        link = out / f"{CURRENT}.{tmp.name}.tmp"
        link.symlink_to(tmp.name)
        os.replace(link, out / CURRENT)  # the one step that publishes the whole set
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    for name in names:  # fixed links OUT/<name> -> .results/<name> (made once; a pre-link file is replaced)
        p = out / name
        if not (p.is_symlink() and os.readlink(p) == f"{CURRENT}/{name}"):
            nl = out / f".{name}.link.tmp"
            nl.unlink(missing_ok=True)
            nl.symlink_to(f"{CURRENT}/{name}")
            os.replace(nl, p)
    fsync_dir(out)
    for old in out.glob(f"{_PREFIX}*"):
        if old.name != tmp.name and old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
