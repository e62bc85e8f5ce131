"""Run untrusted candidate code in a contained subprocess and count passing tests.

Containment rests on the operating system (see "Trust boundary" in docs/paper/tools.md):

* **bubblewrap** (``_jail.bwrap_argv``): fresh user, mount, pid, network, ipc, uts and cgroup namespaces;
  uid/gid 65534 with no capabilities; a filesystem holding only the shared libraries, the interpreter's
  installation (read-only), a read-only harness directory, a writable private work directory and an empty
  ``/tmp`` (each a size- and inode-capped tmpfs); a pid-namespaced ``/proc``; an empty environment but
  ``PYTHONHASHSEED=0``; a seccomp filter refusing process creation (``fork``, ``clone`` without
  ``CLONE_THREAD``). Started with an empty environment itself, so even the jail's pid 1 holds no secret.
* **rlimits** set by the runner before any candidate code runs: CPU seconds, address space, file size,
  open files, no core dumps (hard limits, which the candidate cannot raise).
* **wall limit**: the parent reads the child's pipes with ``selectors`` against one deadline and, at it,
  kills bubblewrap's process group; bubblewrap's death ends the pid namespace's init and with it every
  process in the namespace (``setsid``, closed descriptors or orphaned children do not help).
* **result channel**: the verdict is computed here, in the parent, from expected values the child never
  sees. The child reports on a dedicated descriptor in length-prefixed frames: exactly one outcome per test
  in order, refused actions as they happen, then one end frame; a duplicate, out-of-order, malformed or
  late frame marks the run ``violation`` (``result channel: ...``), so a candidate can add nothing but
  failures and cannot erase a refusal already sent. stdout/stderr are capped at ``output_bytes`` each; the
  rest is read and discarded, so the parent does not grow.

Where bubblewrap is missing or the kernel forbids namespaces, an untrusted candidate is refused
(:class:`SandboxUnavailable`); ``trusted=True`` (the built-in catalogue) then runs it as a plain
subprocess (``python -P -s -S -B``, empty environment, rlimits, a new session and, where allowed, a new
network namespace). In both modes an in-child audit hook refuses sockets, process creation, ctypes and
file access outside the work directory with a clear message (recorded as a violation); it is an extra
layer for error messages, never the barrier.
"""

from __future__ import annotations

import ast
import contextlib
import ctypes
import functools
import math
import os
import resource
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ...errors import ReplayLensError
from ._jail import (
    JAIL_MOUNTS,
    RUNNER,
    TMP_BYTES,
    TMP_INODES,
    WORK_BYTES,
    WORK_INODES,
    bwrap_argv,
    bwrap_available,
    capped_tmpfs,
    inode_cap_available,
    inode_cap_note,
    interpreter,
    seccomp_filter,
    seccomp_note,
    stdlib_dirs,
)

__all__ = ["RunResult", "SandboxLimits", "SandboxUnavailable", "TestCase", "network_isolation", "run_candidate",
           "same_value", "sandbox_backend"]


class SandboxUnavailable(ReplayLensError):
    """No operating-system isolation on this machine, and the candidate was not declared trusted."""


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
    output_bytes: int = 64 * 1024  # kept of each of stdout / stderr; the rest is discarded
    work_bytes: int = WORK_BYTES  # jail: size of the writable work directory (tmpfs), all files together
    tmp_bytes: int = TMP_BYTES    # jail: size of /tmp and of /dev/shm (tmpfs each); /dev is read-only
    work_inodes: int = WORK_INODES  # jail: inode cap (nr_inodes) of the work directory's tmpfs
    tmp_inodes: int = TMP_INODES    # jail: inode cap of /tmp and of /dev/shm (each)
    audit_hook: bool = True
    network_namespace: bool = True  # trusted fallback only: used where network_isolation() allows it
    jail: bool = True  # False: trusted fallback even where bubblewrap works (for tests and comparisons)
    seccomp: bool = True  # False only to show that the pid namespace alone ends a process tree (tests)


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
    stdout_head: str = field(default="", compare=False)

    @property
    def failed(self) -> bool:
        return self.status != "ok" or self.passed < self.total

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "passed": self.passed, "total": self.total, "per_test": list(self.per_test),
                "violations": list(self.violations), "returncode": self.returncode}


def sandbox_backend() -> str:
    """``"bwrap"`` where bubblewrap can jail a candidate on this machine, else ``"none"`` (cached probe)."""
    return "bwrap" if sys.platform.startswith("linux") and bwrap_available() is None else "none"


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



def _preexec_netns(flags: int) -> None:
    if flags:
        _unshare(flags)


class _Channel:
    """Parses the child's result frames; anything but the protocol is recorded as tampering."""

    def __init__(self, n: int, cap: int) -> None:
        self.n, self.cap, self.buf, self.size = n, cap, bytearray(), 0
        self.results: list[tuple[str, str, str]] = []
        self.violations: list[str] = []
        self.tamper: str | None = None
        self.done = False

    def feed(self, data: bytes) -> None:
        self.size += len(data)
        if self.tamper is not None:
            return
        if self.size > self.cap:
            self.tamper = f"result channel: more than {self.cap} bytes"
            return
        self.buf += data
        while len(self.buf) >= 4 and self.tamper is None:
            length = int.from_bytes(self.buf[:4], "big")
            if len(self.buf) < 4 + length:
                return
            frame, self.buf = bytes(self.buf[4:4 + length]), self.buf[4 + length:]
            self._frame(frame)

    def _frame(self, frame: bytes) -> None:
        try:
            obj = ast.literal_eval(frame.decode("utf-8"))
        except (ValueError, SyntaxError, UnicodeDecodeError, MemoryError, RecursionError):
            obj = None
        if self.done:
            self.tamper = "result channel: a frame after the end frame"
        elif isinstance(obj, tuple) and len(obj) == 2 and obj[0] == "V" and isinstance(obj[1], str):
            self.violations.append(obj[1])
        elif (isinstance(obj, tuple) and len(obj) == 5 and obj[0] == "R" and obj[1] == len(self.results)
              and obj[1] < self.n and all(isinstance(x, str) for x in obj[2:])):
            self.results.append((obj[2], obj[3], obj[4]))
        elif obj == ("D",) and len(self.results) == self.n:
            self.done = True
        else:
            self.tamper = "result channel: unexpected frame " + repr(frame[:80])

    def close(self) -> None:
        if self.buf and self.tamper is None:
            self.tamper = "result channel: a truncated frame"


def _pump(proc: subprocess.Popen[bytes], res_fd: int, chan: _Channel, cap: int,
          deadline: float) -> tuple[bool, bytes, bytes]:
    """Read result/stdout/stderr until all close or ``deadline``; keep ``cap`` bytes of each output."""
    assert proc.stdout is not None and proc.stderr is not None
    keep = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
    with selectors.DefaultSelector() as sel:
        for fd in (res_fd, *keep):
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return True, bytes(keep[proc.stdout.fileno()]), bytes(keep[proc.stderr.fileno()])
            for key, _ in sel.select(left):
                fd = int(key.fd)
                try:
                    data = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                if not data:
                    sel.unregister(fd)
                elif fd == res_fd:
                    chan.feed(data)
                elif len(keep[fd]) < cap:
                    keep[fd] += data[:cap - len(keep[fd])]
    return False, bytes(keep[proc.stdout.fileno()]), bytes(keep[proc.stderr.fileno()])


def _kill_tree(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the launcher's process group; with bubblewrap this ends the pid namespace and all in it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()


def run_candidate(source: str, func: str, tests: Sequence[TestCase], limits: SandboxLimits | None = None, *,
                  trusted: bool = False) -> RunResult:
    """Run ``func`` from ``source`` on ``tests`` in the sandbox; return how many passed.

    Any escape attempt, crash or timeout is recorded as a failed run (status ≠ ok, or fewer passes). Raises
    :class:`SandboxUnavailable` for an untrusted candidate on a machine without bubblewrap namespaces.
    """
    lim = limits or SandboxLimits()
    jailed = lim.jail and sandbox_backend() == "bwrap"
    if not jailed and not trusted:
        why = bwrap_available() if sys.platform.startswith("linux") else "not Linux"
        raise SandboxUnavailable("refusing to run an untrusted candidate without operating-system isolation: "
                                 f"{why or 'the jail was switched off'}; pass trusted=True only for code you trust")
    n = len(tests)
    tmp = tempfile.mkdtemp(prefix="rl-sandbox-")
    try:
        harness, work = os.path.join(tmp, "harness"), os.path.join(tmp, "work")
        os.mkdir(harness, 0o755)
        os.mkdir(work, 0o777 if jailed else 0o700)
        os.chmod(work, 0o777 if jailed else 0o700)  # the jail's uid 65534 maps to this uid; no one else sees tmp
        os.chmod(tmp, 0o700)
        res_r, res_w = os.pipe()
        rlimits = [(resource.RLIMIT_CPU, lim.cpu_s), (resource.RLIMIT_AS, lim.memory_bytes),
                   (resource.RLIMIT_NPROC, lim.nproc), (resource.RLIMIT_FSIZE, lim.file_bytes),
                   (resource.RLIMIT_NOFILE, lim.open_files), (resource.RLIMIT_CORE, 0)]
        cfg = {"source": source, "func": func, "tests": [repr(tuple(t.args)) for t in tests], "fd": res_w,
               "per_test_s": float(lim.per_test_s), "stdlib": stdlib_dirs(), "audit": lim.audit_hook,
               "rlimits": rlimits}
        for name, text in (("runner.py", RUNNER), ("cfg", repr(cfg))):
            with open(os.path.join(harness, name), "w", encoding="utf-8") as fh:
                fh.write(text)
        pass_fds = [res_w]
        seccomp_fd = None
        if jailed:
            bpf = seccomp_filter() if lim.seccomp else None
            if bpf is None and lim.seccomp:
                seccomp_note()
            if bpf is not None:
                seccomp_fd = os.open(os.path.join(tmp, "seccomp.bpf"), os.O_RDWR | os.O_CREAT, 0o600)
                os.write(seccomp_fd, bpf)
                os.lseek(seccomp_fd, 0, os.SEEK_SET)
                pass_fds.append(seccomp_fd)
            capped: dict[str, str] | None = None
            preexec: Any = None
            if inode_cap_available() is None:
                capped = {m: os.path.join(tmp, "mnt" + m.replace("/", "-")) for m in JAIL_MOUNTS}
                sizes = {"/sandbox/work": (lim.work_bytes, lim.work_inodes)}
                for d in capped.values():
                    os.mkdir(d, 0o700)
                preexec = functools.partial(capped_tmpfs, [(capped[m], *sizes.get(m, (lim.tmp_bytes, lim.tmp_inodes)))
                                                           for m in JAIL_MOUNTS])
            else:
                inode_cap_note()
            argv = bwrap_argv(harness, work, seccomp_fd, work_bytes=lim.work_bytes, tmp_bytes=lim.tmp_bytes,
                              capped=capped)
        else:
            isolation = network_isolation() if lim.network_namespace else "none"
            argv = [interpreter(), "-P", "-s", "-S", "-B", os.path.join(harness, "runner.py"),
                    os.path.join(harness, "cfg")]
            preexec = functools.partial(_preexec_netns, _NAMESPACE_FLAGS.get(isolation, 0))
        t0 = time.monotonic()
        try:
            proc = subprocess.Popen(argv, cwd=work, env={"PYTHONHASHSEED": "0"}, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=pass_fds,
                                    start_new_session=True, preexec_fn=preexec)
        finally:
            os.close(res_w)
            if seccomp_fd is not None:
                os.close(seccomp_fd)
        chan = _Channel(n, (1 << 20) + 50_000 * n)
        try:
            timed_out, out, err = _pump(proc, res_r, chan, lim.output_bytes, t0 + lim.wall_s)
        finally:
            os.close(res_r)
            _kill_tree(proc)
            assert proc.stdout is not None and proc.stderr is not None
            proc.stdout.close()
            proc.stderr.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=2.0)
        chan.close()
        wall = time.monotonic() - t0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    tail, head = err.decode("utf-8", "replace")[-2000:], out.decode("utf-8", "replace")[:2000]
    rc = proc.returncode
    if timed_out:
        return RunResult("timeout", 0, n, ("timeout",) * n, tuple(chan.violations), rc, wall, tail, head)
    if chan.tamper is not None:
        return RunResult("violation", 0, n, ("error:crashed",) * n, (*chan.violations, chan.tamper), rc, wall,
                         tail, head)
    if not chan.done:
        verdicts = tuple(k for k, _, _ in chan.results) + ("error:crashed",) * (n - len(chan.results))
        status = "violation" if chan.violations else "crashed"
        return RunResult(status, 0, n, verdicts, tuple(chan.violations), rc, wall, tail, head)
    verdicts_l: list[str] = []
    for test, (kind, got_text, args_text) in zip(tests, chan.results, strict=True):
        if kind != "ok":
            verdicts_l.append(kind)
            continue
        try:
            got, args_after = ast.literal_eval(got_text), ast.literal_eval(args_text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            verdicts_l.append("fail")
            continue
        ok = same_value(got, test.expected) and same_value(args_after, tuple(test.args))
        verdicts_l.append("pass" if ok else "fail")
    if chan.violations:
        return RunResult("violation", 0, n, tuple(verdicts_l), tuple(chan.violations), rc, wall, tail, head)
    return RunResult("ok", verdicts_l.count("pass"), n, tuple(verdicts_l), (), rc, wall, tail, head)
