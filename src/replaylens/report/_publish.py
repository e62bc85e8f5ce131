"""Private: runs kept side by side in an output directory, each result set published all at once.

``OUT`` holds one exclusive lock per run (:func:`replaylens._durable.locked_dir`, a ``flock`` on the
directory's inode; the CLI and :func:`replaylens.report.audit` with ``out=`` take the same lock).  Every run
that is not a resume gets a directory of its own, ``OUT/runs/<UTC time>-<agent>-<key digest>/``, holding its
journal and its result sets; a rerun whose journal key (everything that decides the decisions) equals a kept
run's resumes that run.  A result set is written into a fresh hidden ``.results-XXXX/`` and published by one
rename of the link ``.results`` beside it; ``OUT/.results`` links to the latest run's ``.results`` and
``OUT/summary.json`` and the other result names are fixed links into ``OUT/.results/``, so a reader that
resolves ``OUT/.results`` once (as :func:`~replaylens.report.load_results` does) sees one complete result set,
never a mix of two runs.  Only directories holding ReplayLens's marker (:data:`replaylens._durable.MARKER`)
are ever removed.  :func:`prune_runs` keeps the most recently published complete runs of OUT
(:data:`replaylens.settings.DEFAULT_KEEP_RUNS`) and removes older complete ones, never an interrupted run.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from .._durable import MARKER, LockedError, fsync_dir, holds_lock, is_ours, locked_dir, make_dir, mark, umask_mode
from ..errors import ConfigError

__all__ = ["CURRENT", "RUNS", "check_different_run", "check_slots", "comparison_links", "current_run", "find_run",
           "link_latest", "locked_out", "move_earlier_layout", "new_run", "prune_runs", "publish", "result_root",
           "run_digest"]

CURRENT = ".results"
RUNS = "runs"
_PREFIX = ".results-"
_SET = "results"   # marker kinds: a result set, a run directory
_RUN = "run"
_PRUNED = ".pruned-"   # a run being removed: renamed out of the listing first (a rerun never resumes half of one)


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
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
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


def check_slots(out: Path, names: tuple[str, ...]) -> None:
    """A one-line :class:`ConfigError` when a directory (or a file at ``.results``) sits where OUT's result links
    go: ReplayLens replaces its own links and files, never a directory or a file it cannot tell is its own."""
    for name in (CURRENT, *names):
        p = out / name
        if p.is_symlink():
            continue
        if p.is_dir():
            raise ConfigError(f"{p} is a directory where ReplayLens links its {name}; move it away (ReplayLens "
                              "never removes a directory it did not make)")
        if name == CURRENT and p.exists():
            raise ConfigError(f"{p} is a file where ReplayLens links its current results; move it away")


def _link_names(out: Path, names: tuple[str, ...]) -> None:
    """Fixed links OUT/<name> -> .results/<name> (made once; a file of an earlier layout is replaced)."""
    for name in names:
        p = out / name
        if not (p.is_symlink() and os.readlink(p) == f"{CURRENT}/{name}"):
            nl = out / f".{name}.link.tmp"
            nl.unlink(missing_ok=True)
            nl.symlink_to(f"{CURRENT}/{name}")
            os.replace(nl, p)


def _switch(out: Path, target: str) -> None:
    """Point ``OUT/.results`` at ``target`` (relative) with one rename."""
    link = out / f"{CURRENT}.{re.sub(r'[^A-Za-z0-9_.-]', '_', target)}.tmp"
    link.unlink(missing_ok=True)
    link.symlink_to(target)
    os.replace(link, out / CURRENT)


def _drop_old_sets(out: Path) -> None:
    """Remove the result sets ReplayLens made in ``out`` that ``out/.results`` no longer names."""
    cur = os.readlink(out / CURRENT) if (out / CURRENT).is_symlink() else None
    for old in out.glob(f"{_PREFIX}*"):
        if old.name != cur and is_ours(old, _SET):
            shutil.rmtree(old, ignore_errors=True)


def publish(out: Path, build: Callable[[Path], None], names: tuple[str, ...]) -> None:
    """Write a result set with ``build(tmpdir)`` and make it OUT's current set with one rename.

    Call it holding OUT's lock.  Earlier sets ReplayLens made (and sets left by a killed run) are removed
    afterwards; a directory in the way of a result link is refused before anything is written."""
    check_slots(out, names)
    for stale in [*out.glob(f"{CURRENT}.*.tmp"), *out.glob(".*.link.tmp")]:  # links left by a killed run
        if stale.is_symlink() or stale.is_file():
            stale.unlink(missing_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out, prefix=_PREFIX))
    try:
        os.chmod(tmp, umask_mode(0o777))
        mark(tmp, _SET)
        build(tmp)
        for p in tmp.iterdir():
            if p.is_file():
                os.chmod(p, umask_mode())
                with p.open("rb") as fh:
                    os.fsync(fh.fileno())
        fsync_dir(tmp)
        _switch(out, tmp.name)  # the one step that publishes the whole set
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _link_names(out, names)
    fsync_dir(out)
    _drop_old_sets(out)


# ---------------------------------------------------------------- runs side by side


def run_digest(run: Path) -> str | None:
    """The journal-key digest a run directory was made for (from its marker), or None when it is not one."""
    if not is_ours(run, _RUN):
        return None
    try:
        lines = (run / MARKER).read_text(encoding="utf-8").split()
    except (OSError, UnicodeDecodeError):
        return None
    return lines[1] if len(lines) > 1 else None


def find_run(out: Path, digest: str) -> Path | None:
    """The kept run of OUT made for the journal key with this digest (the run a rerun resumes), or None."""
    runs = out / RUNS
    if not runs.is_dir() or runs.is_symlink():
        return None
    for d in sorted(runs.glob(f"*-{digest[:12]}"), reverse=True):
        if not d.name.startswith(".") and run_digest(d) == digest:
            return d
    return None


def new_run(out: Path, digest: str, label: str) -> Path:
    """A new run directory ``OUT/runs/<UTC time>-<label>-<digest[:12]>/`` (with ReplayLens's marker)."""
    runs = make_dir(out / RUNS)
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", label).strip("._-")[:32] or "agent"
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    for k in range(1000):
        d = runs / f"{stamp}{f'.{k}' if k else ''}-{safe}-{digest[:12]}"
        try:
            d.mkdir()
        except FileExistsError:
            continue
        os.chmod(d, umask_mode(0o777))
        (d / MARKER).write_text(f"{_RUN}\n{digest}\n", encoding="utf-8")
        return d
    raise ConfigError(f"{runs}: cannot name a new run directory")  # pragma: no cover - 1000 in one second


def current_run(out: Path) -> Path | None:
    """The run directory OUT's result links lead to (the latest published run), or None."""
    cur = out / CURRENT
    if not cur.is_symlink():
        return None
    parts = Path(os.readlink(cur)).parts
    if len(parts) == 3 and parts[0] == RUNS and parts[2] == CURRENT:
        return out / RUNS / parts[1]
    return None


def link_latest(out: Path, run: Path, names: tuple[str, ...]) -> None:
    """Make ``run`` (a directory under OUT/runs holding a published set) OUT's latest: ``OUT/.results`` ->
    ``runs/<id>/.results`` with one rename, and the result names linked into it."""
    check_slots(out, names)
    _switch(out, f"{RUNS}/{run.name}/{CURRENT}")
    _link_names(out, names)
    _drop_dangling(out)
    fsync_dir(out)
    _drop_old_sets(out)


def _drop_dangling(out: Path) -> None:
    """Remove OUT's result links (``NAME -> .results/NAME``) the latest run has no file for: a one-agent run published
    after a several-agent one (or the other way round) leaves no link to the other kind's files."""
    for p in out.iterdir():
        if p.is_symlink() and os.readlink(p) == f"{CURRENT}/{p.name}" and not p.exists():
            p.unlink(missing_ok=True)


def comparison_links(out: Path, *, skip: Sequence[Path] = ()) -> dict[str, set[str]]:
    """The agents' directories OUT's several-agent runs name (``OUT/<agent>/``, by name), each with the names of its
    runs those comparisons (but the runs ``skip``) link -- what ``agents.json`` lists as ``<agent>/runs/<run>``."""
    skipped = {p.resolve() for p in skip}
    found: dict[str, set[str]] = {}
    runs = out / RUNS
    if not runs.is_dir() or runs.is_symlink():
        return found
    for index in sorted(runs.glob("*/agents.json")):
        try:
            named = [(a["dir"], a.get("run")) for a in json.loads(index.read_text(encoding="utf-8"))["agents"]]
        except (OSError, ValueError, AttributeError, KeyError, TypeError):
            continue
        for name, run in named:   # plain names, as the audit wrote them (never a path out of OUT)
            if not _plain(name):
                continue
            linked = found.setdefault(name, set())
            parts = run.split("/") if isinstance(run, str) else []
            if index.parent.resolve() not in skipped and len(parts) == 3 and parts[:2] == [name, RUNS] \
                    and _plain(parts[2]):
                linked.add(parts[2])
    return found


def _plain(name: object) -> bool:
    return isinstance(name, str) and bool(name) and Path(name).name == name and not name.startswith(".")


def prune_runs(out: str | os.PathLike[str], keep: int | None, *, protect: Sequence[Path] = (),
               skip_links: Sequence[Path] = (), interrupted: bool = False, dry_run: bool = False) -> list[Path]:
    """Remove the complete runs of ``out`` beyond the ``keep`` most recently published (None: keep every run); the
    runs removed (with ``dry_run``: that would be), oldest first.

    Holds OUT's run lock (re-entered when this thread holds it; a busy OUT is a :class:`ConfigError`).  A complete
    run is a directory of ``OUT/runs`` with ReplayLens's run marker and a published result set; runs are ranked by
    when their set was last published (a resumed run counts from its resume).  OUT's latest run and ``protect``
    (the run just written) are always kept, and count among the ``keep``.  Never removed: an interrupted run (no
    published set: rerunning its command resumes it), a directory without the marker, a link, a run another holder
    has locked, and -- ``out`` being an agent's directory of a several-agent audit -- a run one of the comparisons
    of ``out``'s parent links (:func:`comparison_links`; but those of the parent's runs ``skip_links``).
    ``interrupted``: remove the interrupted runs too (whatever ``keep``; their work is lost: the same command then
    starts afresh), still never one another holder has locked."""
    root = Path(out)
    runs = root / RUNS
    if (keep is None and not interrupted) or not runs.is_dir() or runs.is_symlink():
        return []
    with locked_out(root):
        for left in runs.glob(f"{_PRUNED}*"):   # a removal a killed prune left half done
            if not dry_run and is_ours(left, _RUN):
                shutil.rmtree(left, ignore_errors=True)
        ranked: list[tuple[int, str, Path]] = []
        unfinished: list[Path] = []
        for d in sorted(runs.iterdir()):
            link = d / CURRENT
            if d.name.startswith(".") or not is_ours(d, _RUN):
                continue
            if link.is_symlink() and link.is_dir():
                ranked.append((os.lstat(link).st_mtime_ns, d.name, d))
            elif not (link.exists() or link.is_symlink()):
                unfinished.append(d)
        ranked.sort(reverse=True)
        latest = current_run(root)
        linked = [runs / r for r in comparison_links(root.parent, skip=skip_links).get(root.name, ())]
        held = {p.resolve() for p in (*protect, *linked, *([latest] if latest is not None else []))}
        kept = [d for *_, d in ranked if d.resolve() in held]
        gone: list[Path] = []
        for *_, d in ranked:
            if d.resolve() in held:
                continue
            if keep is None or len(kept) < keep:
                kept.append(d)
            elif _free(d) if dry_run else _remove_run(d):
                gone.append(d)
        gone.reverse()
        if interrupted:
            gone += [d for d in unfinished if d.resolve() not in held and (_free(d) if dry_run else _remove_run(d))]
        if gone and not dry_run:
            fsync_dir(runs)
    return gone


def _free(run: Path) -> bool:
    """Whether no other holder has locked ``run`` (what a dry run asks instead of removing it)."""
    try:
        with locked_dir(run):
            return True
    except LockedError:
        return False


def _remove_run(run: Path) -> bool:
    """Remove one run directory unless another holder has locked it: renamed out of ``OUT/runs``'s listing first
    (one step), then deleted."""
    try:
        with locked_dir(run):
            if not is_ours(run, _RUN):
                return False
            gone = run.with_name(f"{_PRUNED}{run.name}")
            os.rename(run, gone)
            shutil.rmtree(gone, ignore_errors=True)
            return True
    except LockedError:
        return False


def move_earlier_layout(out: Path, digest_of: Callable[[Mapping[str, Any]], str], label: str,
                        names: tuple[str, ...]) -> Path | None:
    """Move the run an earlier ReplayLens kept in OUT itself (``OUT/journal/``, ``OUT/.results-XXXX/``) into a run
    directory of its own, so it is kept (and resumed by the same command) like any other; its new directory,
    or None when OUT holds no such run.  ``digest_of``: the digest of a journal key."""
    journal = out / "journal"
    head = journal / "journal.json"
    cur = out / CURRENT
    target = os.readlink(cur) if cur.is_symlink() else ""
    old_set = out / target if target.startswith(_PREFIX) and "/" not in target else None
    if old_set is not None and (old_set.is_symlink() or not old_set.is_dir()):
        old_set = None
    has_journal = journal.is_dir() and not journal.is_symlink() and head.is_file()
    if old_set is None and not has_journal:
        return None
    key: Any = None
    if has_journal:
        with contextlib.suppress(OSError, ValueError, RecursionError):
            key = json.loads(head.read_bytes().decode("utf-8"))
    digest = digest_of(key) if isinstance(key, dict) else digest_of({"earlier-layout": target or str(journal)})
    run = new_run(out, digest, label)
    if has_journal:
        os.rename(journal, run / "journal")
    if old_set is not None:
        mark(old_set, _SET)
        os.rename(old_set, run / old_set.name)
        _switch(run, old_set.name)
        _link_names(run, tuple(n for n in names if (run / old_set.name / n).exists()))
        link_latest(out, run, names)
    fsync_dir(out)
    return run
