"""Run untrusted candidate code in a contained subprocess and count passing tests.

Layers (see docs/tools.md for what each does when the parent runs as root):

* a fresh interpreter ``python -P -s -S -B`` in a private temporary directory with an environment that
  holds only ``PYTHONHASHSEED=0``, so no user site, no venv packages, no inherited paths, and string
  hashing (hence set order, which buggy candidates may depend on) is the same in every run; ``-I``
  is not used because it would ignore ``PYTHONHASHSEED`` (the environment is empty otherwise);
* an in-child audit hook (``sys.addaudithook``, which child code cannot remove) that refuses sockets,
  process creation (fork / exec / spawn / subprocess), ``ctypes``, and any ``open`` outside the private
  directory and the standard library (writes only inside the private directory); ``socket.socket`` is
  also replaced by a function that raises;
* on Linux, a fresh, empty network namespace (``unshare(CLONE_NEWNET)``, or inside a new user namespace
  when the parent is not privileged): the child has no interface but a down loopback, so no connection
  can leave it even if the audit hook were bypassed; :func:`network_isolation` says which form this
  machine allows (``"none"`` where neither is permitted — the audit hook still refuses sockets);
* ``resource.setrlimit`` in a ``preexec_fn``: CPU seconds, address space, process count, file size,
  open files, no core dumps; ``os.setsid`` puts the child in its own session / process group;
* a wall-clock timeout after which the whole process group is killed (``os.killpg``), and a per-test
  interval timer inside the child; the group is killed after every run, so no descendant survives.

The child receives only the candidate source and the test *inputs*; expected outputs stay in the
parent, which compares the returned values (type-strict, floats to 1e-9). Hidden tests are never
written to the child's directory, and the child is never told where they live.
"""

from __future__ import annotations

import ast
import contextlib
import ctypes
import functools
import json
import math
import os
import resource
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RunResult", "SandboxLimits", "TestCase", "network_isolation", "run_candidate", "same_value"]


@dataclass(frozen=True)
class TestCase:
    """One test: positional arguments (Python literals) and the expected return value."""

    __test__ = False

    args: tuple[Any, ...]
    expected: Any


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits for one sandboxed run."""

    cpu_s: int = 4
    memory_bytes: int = 512 * 1024 * 1024
    nproc: int = 64
    file_bytes: int = 1024 * 1024
    open_files: int = 64
    per_test_s: float = 2.0
    wall_s: float = 10.0
    audit_hook: bool = True
    network_namespace: bool = True  # used where network_isolation() allows it


@dataclass(frozen=True)
class RunResult:
    """Outcome of one sandboxed run; ``failed`` unless every test passed in a clean run."""

    status: str  # ok | timeout | crashed | violation | error
    passed: int
    total: int
    per_test: tuple[str, ...] = ()  # pass | fail | error:<Type> | timeout
    violations: tuple[str, ...] = ()
    returncode: int | None = None
    wall_s: float = 0.0
    stderr_tail: str = field(default="", compare=False)

    @property
    def failed(self) -> bool:
        return self.status != "ok" or self.passed < self.total

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "passed": self.passed, "total": self.total, "per_test": list(self.per_test),
                "violations": list(self.violations), "returncode": self.returncode}


_RUNNER = r'''
import sys, os, ast, signal
_cfg = ast.literal_eval(sys.stdin.read())
sys.stdin.close()
_root = os.path.realpath(os.getcwd()) + os.sep
_stdlib = tuple(os.path.realpath(p) + os.sep for p in _cfg["stdlib"])
_violations = []
_out_fd = os.dup(1)
_BLOCK_PREFIX = ("socket.", "subprocess.", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
                 "os.system", "ctypes.", "os.kill", "os.killpg", "pty.", "os.startfile", "webbrowser.")
_PATH_EVENTS = ("os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.link",
                "os.symlink", "os.truncate", "os.utime", "shutil.")
def _inside(p, roots):
    try:
        if isinstance(p, bytes):
            p = p.decode("utf-8", "replace")
        rp = os.path.realpath(os.path.join(_root, p))
    except Exception:
        return False
    return any(rp == r.rstrip(os.sep) or rp.startswith(r) for r in roots)
def _hook(event, args):
    if event.startswith(_BLOCK_PREFIX) or (event == "import" and args[0] in ("ctypes", "_ctypes", "_posixsubprocess")):
        _violations.append(event)
        raise PermissionError("sandbox: " + event + " is not allowed")
    if event == "open":
        path, mode, flags = args[0], args[1], args[2]
        if isinstance(path, int):
            return
        writing = (mode is not None and any(c in str(mode) for c in "wax+")) or (
            mode is None and bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC)))
        roots = (_root,) if writing else (_root,) + _stdlib
        if not _inside(path, roots):
            _violations.append("open:" + str(path))
            raise PermissionError("sandbox: open outside the sandbox: " + str(path))
    elif event.startswith(_PATH_EVENTS):
        for a in args:
            if isinstance(a, (str, bytes)) and not _inside(a, (_root,)):
                _violations.append(event + ":" + str(a))
                raise PermissionError("sandbox: " + event + " outside the sandbox")
import socket as _socket_mod
def _no_socket(*a, **k):
    _violations.append("socket.socket")
    raise PermissionError("sandbox: sockets are disabled")
_socket_mod.socket = _no_socket
_socket_mod.create_connection = _no_socket
if _cfg["audit"]:
    sys.addaudithook(_hook)
class _Timeout(BaseException):
    pass
def _alarm(signum, frame):
    raise _Timeout()
signal.signal(signal.SIGALRM, _alarm)
results = []
try:
    _ns = {"__name__": "candidate", "__builtins__": __builtins__}
    exec(compile(_cfg["source"], "candidate.py", "exec"), _ns)
    _fn = _ns[_cfg["func"]]
    for _args_text in _cfg["tests"]:
        _args = ast.literal_eval(_args_text)
        signal.setitimer(signal.ITIMER_REAL, _cfg["per_test_s"])
        try:
            _res = _fn(*_args)
            signal.setitimer(signal.ITIMER_REAL, 0)
            results.append(["ok", repr(_res)[:20000], repr(_args)[:20000]])
        except _Timeout:
            results.append(["timeout", "", ""])
        except BaseException as _e:
            signal.setitimer(signal.ITIMER_REAL, 0)
            results.append(["error:" + type(_e).__name__, "", ""])
except BaseException as _e:
    signal.setitimer(signal.ITIMER_REAL, 0)
    results = [["error:" + type(_e).__name__, "", ""] for _ in _cfg["tests"]]
os.write(_out_fd, ("\n@@RESULT@@" + repr({"results": results, "violations": _violations})).encode())
os._exit(0)
'''


def same_value(got: Any, want: Any) -> bool:
    """Type-strict equality (``True`` is not ``1``, ``1`` is not ``1.0``); floats agree to 1e-9."""
    if type(got) is not type(want):
        return False
    if isinstance(want, float):
        if math.isnan(want):
            return math.isnan(got)
        return math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(want, (list, tuple)):
        return len(got) == len(want) and all(same_value(g, w) for g, w in zip(got, want, strict=True))
    if isinstance(want, dict):
        return list(got) == list(want) and all(same_value(got[k], want[k]) for k in want)
    return bool(got == want)


def _stdlib_dirs() -> list[str]:
    paths = sysconfig.get_paths()
    dirs = {paths["stdlib"], paths["platstdlib"], os.path.join(paths["platstdlib"], "lib-dynload")}
    return sorted(d for d in dirs if d)


_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_NAMESPACE_FLAGS = {"netns": _CLONE_NEWNET, "userns+netns": _CLONE_NEWUSER | _CLONE_NEWNET}


def _unshare(flags: int) -> None:
    """``unshare(2)`` in the calling (forked, single-threaded) child; raises ``OSError`` when refused."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(ctypes.c_int(flags)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


@functools.cache
def network_isolation() -> str:
    """The kernel network layer the sandbox adds on this machine (probed once, then cached).

    ``"netns"``: a new network namespace (privileged parent); ``"userns+netns"``: a new user namespace
    holding a new network namespace (unprivileged parent where the kernel allows it); ``"none"``: neither
    is permitted (non-Linux, or a kernel / container policy forbids it) — sockets are then refused by the
    in-child audit hook only.
    """
    if not sys.platform.startswith("linux"):
        return "none"
    for name, flags in _NAMESPACE_FLAGS.items():
        try:
            subprocess.run([sys.executable, "-S", "-c", "pass"], env={}, capture_output=True, timeout=30,
                           check=True, preexec_fn=functools.partial(_unshare, flags))
        except (subprocess.SubprocessError, OSError):
            continue
        return name
    return "none"


def _preexec(limits: SandboxLimits, namespace_flags: int) -> None:
    os.setsid()
    if namespace_flags:
        _unshare(namespace_flags)
    for res, val in ((resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 1)),
                     (resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes)),
                     (resource.RLIMIT_NPROC, (limits.nproc, limits.nproc)),
                     (resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes)),
                     (resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files)),
                     (resource.RLIMIT_CORE, (0, 0))):
        with contextlib.suppress(ValueError, OSError):  # platform without the limit
            resource.setrlimit(res, val)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def run_candidate(source: str, func: str, tests: Sequence[TestCase], limits: SandboxLimits | None = None) -> RunResult:
    """Run ``func`` from ``source`` on ``tests`` in the sandbox; return how many passed.

    Any escape attempt, crash or timeout is recorded as a failed run (status ≠ ok, or fewer passes).
    """
    lim = limits or SandboxLimits()
    tmp = tempfile.mkdtemp(prefix="rl-sandbox-")
    try:
        os.chmod(tmp, 0o700)
        runner = os.path.join(tmp, "_runner.py")
        with open(runner, "w", encoding="utf-8") as fh:
            fh.write(_RUNNER)
        cfg = {"source": source, "func": func, "tests": [repr(tuple(t.args)) for t in tests],
               "per_test_s": float(lim.per_test_s), "stdlib": _stdlib_dirs(), "audit": lim.audit_hook}
        isolation = network_isolation() if lim.network_namespace else "none"
        flags = _NAMESPACE_FLAGS.get(isolation, 0)
        t0 = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-P", "-s", "-S", "-B", runner], cwd=tmp, env={"PYTHONHASHSEED": "0"},
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                preexec_fn=lambda: _preexec(lim, flags), close_fds=True)
        timed_out = False
        try:
            out, err = proc.communicate(repr(cfg).encode(), timeout=lim.wall_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc.pid)
            out, err = proc.communicate()
        finally:
            _kill_group(proc.pid)
        wall = time.monotonic() - t0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    n = len(tests)
    tail = err.decode("utf-8", "replace")[-2000:]
    if timed_out:
        return RunResult("timeout", 0, n, ("timeout",) * n, (), proc.returncode, wall, tail)
    text = out.decode("utf-8", "replace")
    marker = text.rfind("@@RESULT@@")
    try:
        payload = ast.literal_eval(text[marker + len("@@RESULT@@"):]) if marker >= 0 else None
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        payload = None
    if not isinstance(payload, dict) or len(payload.get("results", [])) != n:
        return RunResult("crashed", 0, n, ("error:crashed",) * n, (), proc.returncode, wall, tail)
    verdicts: list[str] = []
    for test, (kind, got_text, args_text) in zip(tests, payload["results"], strict=True):
        if kind != "ok":
            verdicts.append(kind)
            continue
        try:
            got, args_after = ast.literal_eval(got_text), ast.literal_eval(args_text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            verdicts.append("fail")
            continue
        ok = same_value(got, test.expected) and same_value(args_after, tuple(test.args))
        verdicts.append("pass" if ok else "fail")
    violations = tuple(str(v) for v in payload.get("violations", []))
    if violations:
        return RunResult("violation", 0, n, tuple(verdicts), violations, proc.returncode, wall, tail)
    return RunResult("ok", verdicts.count("pass"), n, tuple(verdicts), (), proc.returncode, wall, tail)


def _json_default(o: Any) -> Any:  # pragma: no cover - helper for debugging dumps
    return repr(o)


_ = json  # keep the import for callers that dump RunResult.to_dict()
