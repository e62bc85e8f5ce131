"""The operating-system side of the candidate sandbox: the in-sandbox runner, bubblewrap, seccomp.

``run_candidate`` (``_sandbox.py``) starts :data:`RUNNER` either inside a bubblewrap jail
(:func:`bwrap_argv`: fresh user, mount, pid, network, ipc, uts and cgroup namespaces, uid/gid 65534,
a filesystem holding only the interpreter, the shared libraries, a read-only harness directory and a
writable work directory, a seccomp filter from :func:`seccomp_filter`) or, for trusted code on a machine
without one, as a plain subprocess. The runner sets the resource limits itself before any candidate code
runs (the candidate cannot raise a hard limit again) and reports on a framed result descriptor.
"""

from __future__ import annotations

import functools
import os
import shutil
import struct
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Mapping, Sequence

__all__ = ["RUNNER", "TMP_BYTES", "TMP_INODES", "WORK_BYTES", "WORK_INODES", "bwrap_argv", "bwrap_available",
           "capped_tmpfs", "inode_cap_available", "inode_cap_note", "seccomp_filter", "seccomp_note", "stdlib_dirs"]

# Frames on the result descriptor: 4-byte big-endian length + repr() of a tuple:
#   ("V", text)                         a refused action, sent by the audit hook before it raises
#   ("R", index, kind, got, args_after) the outcome of test ``index`` (0, 1, ... in order, once each)
#   ("D",)                              the runner finished; nothing may follow
RUNNER = r'''
import sys, os, ast, signal, resource
_cfg = ast.literal_eval(open(sys.argv[1], encoding="utf-8").read())
for _res, _val in _cfg["rlimits"]:
    try:
        resource.setrlimit(_res, (_val, _val))
    except (ValueError, OSError):
        pass
_fd = _cfg["fd"]
def _send(obj, _fd=_fd, _w=os.write, _r=repr):
    b = _r(obj).encode("utf-8", "replace")
    _w(_fd, len(b).to_bytes(4, "big") + b)
_root = os.path.realpath(os.getcwd()) + os.sep
_stdlib = tuple(os.path.realpath(p) + os.sep for p in _cfg["stdlib"])
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
def _refuse(what):
    _send(("V", what))
    raise PermissionError("sandbox: " + what + " is not allowed")
def _hook(event, args):
    if event.startswith(_BLOCK_PREFIX) or (event == "import" and args[0] in ("ctypes", "_ctypes", "_posixsubprocess")):
        _refuse(event)
    if event == "open":
        path, mode, flags = args[0], args[1], args[2]
        if isinstance(path, int):
            return
        writing = (mode is not None and any(c in str(mode) for c in "wax+")) or (
            mode is None and bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC)))
        roots = (_root,) if writing else (_root,) + _stdlib
        if not _inside(path, roots):
            _refuse("open:" + str(path))
    elif event in ("os.listdir", "os.scandir"):
        if isinstance(args[0], (str, bytes)) and not _inside(args[0], (_root,) + _stdlib):
            _refuse(event + ":" + str(args[0]))
    elif event.startswith(_PATH_EVENTS):
        for a in args:
            if isinstance(a, (str, bytes)) and not _inside(a, (_root,)):
                _refuse(event + ":" + str(a))
import socket as _socket_mod
def _no_socket(*a, **k):
    _refuse("socket.socket")
_socket_mod.socket = _no_socket
_socket_mod.create_connection = _no_socket
if _cfg["audit"]:
    sys.addaudithook(_hook)
class _Timeout(BaseException):
    pass
def _alarm(signum, frame):
    raise _Timeout()
signal.signal(signal.SIGALRM, _alarm)
_n = len(_cfg["tests"])
_i = 0
try:
    _ns = {"__name__": "candidate", "__builtins__": __builtins__}
    exec(compile(_cfg["source"], "candidate.py", "exec"), _ns)
    _fn = _ns[_cfg["func"]]
    for _i, _args_text in enumerate(_cfg["tests"]):
        _args = ast.literal_eval(_args_text)
        signal.setitimer(signal.ITIMER_REAL, _cfg["per_test_s"])
        try:
            _res = _fn(*_args)
            signal.setitimer(signal.ITIMER_REAL, 0)
            _send(("R", _i, "ok", repr(_res)[:20000], repr(_args)[:20000]))
        except _Timeout:
            _send(("R", _i, "timeout", "", ""))
        except BaseException as _e:
            signal.setitimer(signal.ITIMER_REAL, 0)
            _send(("R", _i, "error:" + type(_e).__name__, "", ""))
        _i += 1
except BaseException as _e:
    signal.setitimer(signal.ITIMER_REAL, 0)
    for _j in range(_i, _n):
        _send(("R", _j, "error:" + type(_e).__name__, "", ""))
try:
    sys.stdout.flush()
    sys.stderr.flush()
except BaseException:
    pass
_send(("D",))
os._exit(0)
'''


def stdlib_dirs() -> list[str]:
    """The standard-library directories the audit hook lets candidate code read."""
    paths = sysconfig.get_paths()
    dirs = {paths["stdlib"], paths["platstdlib"], os.path.join(paths["platstdlib"], "lib-dynload")}
    return sorted(d for d in dirs if d)


def interpreter() -> str:
    """The real interpreter binary (a venv's ``python`` resolved to the base installation)."""
    return os.path.realpath(sys.executable)


# --- seccomp: refuse process creation (fork, vfork, clone without CLONE_THREAD, clone3) -----------
_AUDIT_ARCH_X86_64 = 0xC000003E
_RET_ALLOW, _RET_KILL = 0x7FFF0000, 0x80000000
_RET_EPERM, _RET_ENOSYS = 0x00050000 | 1, 0x00050000 | 38
_CLONE_THREAD = 0x00010000


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def seccomp_filter() -> bytes | None:
    """A classic-BPF seccomp program for bubblewrap's ``--seccomp`` (x86-64 only, else ``None``).

    Processes and threads count against RLIMIT_NPROC only for a non-root owner, and the jail's uid maps to
    root outside when the parent is root, so process creation is refused here instead: ``fork``/``vfork``
    and a ``clone`` without ``CLONE_THREAD`` get EPERM, ``clone3`` ENOSYS (libc then falls back to
    ``clone``); x32 system calls and any other architecture are killed.
    """
    if sys.platform != "linux" or os.uname().machine != "x86_64":
        return None
    ld_w, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    prog = [
        _insn(ld_w, 0, 0, 4),                        # 0 arch
        _insn(jeq, 1, 0, _AUDIT_ARCH_X86_64),        # 1
        _insn(ret, 0, 0, _RET_KILL),                 # 2
        _insn(ld_w, 0, 0, 0),                        # 3 nr
        _insn(jge, 0, 1, 0x40000000),                # 4 x32 ABI
        _insn(ret, 0, 0, _RET_KILL),                 # 5
        _insn(jeq, 5, 0, 57),                        # 6 fork  -> 12
        _insn(jeq, 4, 0, 58),                        # 7 vfork -> 12
        _insn(jeq, 5, 0, 435),                       # 8 clone3 -> 14
        _insn(jeq, 0, 3, 56),                        # 9 clone -> 10, anything else -> 13
        _insn(ld_w, 0, 0, 16),                       # 10 low word of clone flags
        _insn(jset, 1, 0, _CLONE_THREAD),            # 11 thread -> 13
        _insn(ret, 0, 0, _RET_EPERM),                # 12
        _insn(ret, 0, 0, _RET_ALLOW),                # 13
        _insn(ret, 0, 0, _RET_ENOSYS),               # 14
    ]
    return b"".join(prog)


@functools.cache
def seccomp_note() -> str | None:
    """Say once, on stderr, that the seccomp layer is missing on this architecture (None on x86-64)."""
    if seccomp_filter() is not None:
        return None
    note = (f"replaylens: warning: the sandbox's seccomp filter is x86-64 only; on {os.uname().machine} the "
            "candidate jail has no seccomp layer (namespaces, --disable-userns, rlimits and the wall limit remain)")
    print(note, file=sys.stderr)
    return note


def _bind_system_libs() -> list[str]:
    args: list[str] = []
    for d in ("/usr/lib", "/usr/lib64", "/usr/lib32"):
        if os.path.isdir(d):
            args += ["--ro-bind", d, d]
    for d in ("/lib", "/lib64", "/lib32"):
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    return args


WORK_BYTES = 32 * 1024 * 1024
"""Default size of the jail's writable work directory (a tmpfs: an aggregate quota on everything written)."""
TMP_BYTES = 8 * 1024 * 1024
"""Default size of each of the jail's other writable tmpfs mounts, ``/tmp`` and ``/dev/shm``."""
WORK_INODES = 4000
"""Default inode cap (``nr_inodes``) of the work directory's tmpfs: files, directories and links together."""
TMP_INODES = 1000
"""Default inode cap of ``/tmp`` and of ``/dev/shm`` (each)."""

JAIL_MOUNTS = ("/dev/shm", "/tmp", "/sandbox/work")
"""The jail's writable places, in mount order."""

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_MS_NOSUID, _MS_NODEV, _MS_REC, _MS_PRIVATE = 2, 4, 1 << 14, 1 << 18


def capped_tmpfs(mounts: Sequence[tuple[str, int, int]]) -> None:
    """In a forked child before it execs bubblewrap: a private mount namespace (inside a new user namespace
    unless root) with a tmpfs of ``(size bytes, nr_inodes)`` on each host directory of ``mounts``.

    bubblewrap's ``--tmpfs`` takes a size but no inode cap, and empty files cost inodes (kernel memory), not
    bytes; so the capped file systems are made here, in a namespace only this child and its jail see, and
    bound into the jail. Raises ``OSError`` when the kernel refuses."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    def check(rc: int, what: str) -> None:
        if rc != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"{what}: {os.strerror(err)}")

    uid, gid = os.getuid(), os.getgid()
    check(libc.unshare(ctypes.c_int(_CLONE_NEWNS | (_CLONE_NEWUSER if uid else 0))), "unshare")
    if uid:  # map this user to root of the new namespace: it may mount there, and nowhere else
        for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
            with open(f"/proc/self/{name}", "w", encoding="ascii") as fh:
                fh.write(text)
    check(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "mount --make-rprivate /")
    for host, size, inodes in mounts:
        opts = f"size={int(size)},nr_inodes={int(inodes)},mode=1777".encode()
        check(libc.mount(b"tmpfs", os.fsencode(host), b"tmpfs", _MS_NOSUID | _MS_NODEV, opts), f"tmpfs on {host}")


@functools.cache
def inode_cap_available() -> str | None:
    """``None`` when :func:`capped_tmpfs` works here (probed once), else why not."""
    with tempfile.TemporaryDirectory(prefix="rl-probe-") as tmp:
        try:
            subprocess.run([interpreter(), "-S", "-c", "pass"], env={}, capture_output=True, timeout=30, check=True,
                           preexec_fn=functools.partial(capped_tmpfs, [(tmp, 1 << 20, 16)]))
        except (OSError, subprocess.SubprocessError) as e:
            return f"no private mount namespace for the inode caps: {e}"
    return None


@functools.cache
def inode_cap_note() -> str | None:
    """Say once, on stderr, when the jail's tmpfs mounts cannot be inode-capped here; returns the note."""
    why = inode_cap_available()
    if why is None:
        return None
    note = (f"replaylens: note: the sandbox's tmpfs mounts are size-capped but not inode-capped here ({why}); "
            "a candidate can create many empty files")
    print(note, file=sys.stderr)
    return note


def bwrap_argv(harness: str, work: str, seccomp_fd: int | None, *, work_bytes: int = WORK_BYTES,
               tmp_bytes: int = TMP_BYTES, capped: Mapping[str, str] | None = None) -> list[str]:
    """The bubblewrap command that runs the runner in ``harness`` (read-only) with a fresh work directory.

    Every writable place is a size-limited tmpfs (``/sandbox/work``: ``work_bytes``; ``/tmp`` and
    ``/dev/shm``: ``tmp_bytes`` each; ``/dev`` itself read-only), so the candidate can neither fill the
    host's disk nor hold more than their sum of memory outside its address-space limit; ``--disable-userns``
    stops it from making nested user namespaces. (``work``, the host directory, is not mounted.) With
    ``capped`` (jail mount -> host directory holding a size- and inode-capped tmpfs made by
    :func:`capped_tmpfs`), those are bound instead of bubblewrap's own (inode-unlimited) tmpfs."""
    prefix = os.path.realpath(sys.base_prefix)
    exe = interpreter()
    argv = ["bwrap", "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
            "--clearenv", "--setenv", "PYTHONHASHSEED", "0", "--uid", "65534", "--gid", "65534", "--cap-drop", "ALL"]
    argv += _bind_system_libs() if prefix != "/usr" else ["--ro-bind", "/usr", "/usr"]
    if prefix != "/usr":
        argv += ["--ro-bind", prefix, prefix]
    if not exe.startswith(prefix + os.sep):
        argv += ["--ro-bind", exe, exe]

    def writable(mount: str, size: int) -> list[str]:
        if capped is not None:
            return ["--bind", capped[mount], mount]
        return ["--size", str(size), "--perms", "1777", "--tmpfs", mount]

    argv += ["--proc", "/proc", "--dev", "/dev", *writable("/dev/shm", tmp_bytes), "--remount-ro", "/dev",
             *writable("/tmp", tmp_bytes), "--ro-bind", harness, "/sandbox/harness",
             *writable("/sandbox/work", work_bytes), "--chdir", "/sandbox/work"]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    return [*argv, "--", exe, "-P", "-s", "-S", "-B", "/sandbox/harness/runner.py", "/sandbox/harness/cfg"]


@functools.cache
def bwrap_available() -> str | None:
    """``None`` when bubblewrap runs a jailed interpreter here, else why not (probed once, cached)."""
    exe = shutil.which("bwrap")
    if exe is None:
        return "bubblewrap is not installed (Debian package `bubblewrap`)"
    with tempfile.TemporaryDirectory(prefix="rl-probe-") as tmp:
        harness, work = os.path.join(tmp, "h"), os.path.join(tmp, "w")
        os.mkdir(harness)
        os.mkdir(work)
        argv = bwrap_argv(harness, work, None)
        argv = [*argv[:argv.index("--") + 1], interpreter(), "-S", "-c", "pass"]
        try:
            r = subprocess.run(argv, env={}, capture_output=True, timeout=30, check=False)
        except (OSError, subprocess.SubprocessError) as e:
            return f"bubblewrap could not start: {e}"
    if r.returncode != 0:
        first = r.stderr.decode("utf-8", "replace").strip().splitlines()[:1]
        if first and "Unknown option" in first[0]:  # --disable-userns needs 0.8, --size 0.6
            return f"bubblewrap is too old for the jail's quotas (needs >= 0.8): {first[0]}"
        return "bubblewrap cannot create namespaces here: " + (first[0] if first else f"exit {r.returncode}")
    return None
