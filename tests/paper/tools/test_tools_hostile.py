"""Hostile candidates (issue 16): each file in tests/paper/tools/hostile/ is one attack; each must be contained.

Every candidate but ``forge_result`` starts with ``_prelude.txt``, which switches the in-child audit hook
off the way the issue's attack did (``test_prelude_switches_the_audit_hook_off`` proves it works), so what
contains these attacks is the operating system: bubblewrap's namespaces, seccomp, rlimits, the wall limit
and the parent's framed, capped reading. ``test_containment_report`` prints and asserts ``N/N``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import require
from replaylens.paper.tools import RunResult, SandboxLimits, TestCase, run_candidate, sandbox_backend

HOSTILE = Path(__file__).parent / "hostile"
PROJECT = str(Path(__file__).resolve().parents[3])
SECRET_VAR = "REPLAYLENS_HOSTILE_SECRET"


@pytest.fixture(autouse=True)
def _needs_the_jail() -> None:
    if sandbox_backend() != "bwrap":
        from replaylens.paper.tools._jail import bwrap_available

        require("sandbox", f"hostile candidates need the bubblewrap jail: {bwrap_available()}")


@dataclass
class Ctx:
    tmp: Path
    secret: str = field(default_factory=lambda: "s3cr3t-" + uuid.uuid4().hex)
    marker: str = field(default_factory=lambda: "rl-hostile-" + uuid.uuid4().hex)
    host_tmp: Path = field(default_factory=lambda: Path("/tmp") / ("rl-hostile-" + uuid.uuid4().hex))
    port: int = 0
    signals: list[int] = field(default_factory=list)

    @property
    def hidden(self) -> Path:
        return self.tmp / "hidden_tests.json"


def candidate(name: str, ctx: Ctx, prelude: bool = True) -> str:
    body = (HOSTILE / f"{name}.txt").read_text()
    target = ctx.host_tmp if name in ("tmp_outside", "symlink_out") else ctx.tmp / "escape.txt"
    for key, value in {"TARGET": str(target), "HIDDEN": str(ctx.hidden), "PROJECT": PROJECT, "SECRET": ctx.secret,
                       "MARKER": ctx.marker}.items():
        body = body.replace("{{" + key + "}}", repr(value))
    body = body.replace("{{PARENT_PID}}", str(os.getpid())).replace("{{PORT}}", str(ctx.port))
    return ((HOSTILE / "_prelude.txt").read_text() + "\n" if prelude else "") + body


def _alive_with(marker: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            pass
    return found


@dataclass(frozen=True)
class Attack:
    tests: tuple[TestCase, ...]
    contained: Callable[[RunResult, Ctx, float], bool]
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    prelude: bool = True


ONE = (TestCase((1,), 2),)
FOUND = (TestCase((1,), "found"),)


TRUE = (TestCase((1,), True),)


def _not_passed(r: RunResult, ctx: Ctx, wall: float) -> bool:
    return r.passed == 0 and "pass" not in r.per_test


def _mib(r: RunResult) -> int:
    """The MiB a filling candidate reports it wrote (it prints ``MiB n``); a huge number when it printed none."""
    words = r.stdout_head.split()
    return int(words[words.index("MiB") + 1]) if "MiB" in words else 1 << 30


def _files(r: RunResult) -> tuple[int, ...]:
    """The files an inode-flooding candidate reports it made (``FILES work tmp shm``); huge when it printed none."""
    words = r.stdout_head.split()
    return tuple(int(w) for w in words[words.index("FILES") + 1:][:3]) if "FILES" in words else (1 << 30,) * 3


def _inodes_capped(r: RunResult, c: Ctx, w: float) -> bool:
    lim = SandboxLimits()
    work, tmp, shm = _files(r)
    return _not_passed(r, c, w) and work < lim.work_inodes and tmp < lim.tmp_inodes and shm < lim.tmp_inodes


ATTACKS: dict[str, Attack] = {
    "write_outside": Attack(ONE, lambda r, c, w: not (c.tmp / "escape.txt").exists() and r.passed == 0),
    "read_sealed": Attack(FOUND, _not_passed),  # expected is replaced by the sealed content below
    "walk_outside": Attack(FOUND, _not_passed, SandboxLimits(per_test_s=8.0, wall_s=20.0)),
    "proc1_environ": Attack(FOUND, _not_passed),
    "parent_environ": Attack(FOUND, _not_passed),
    # the write itself succeeds (passed == 1): it lands in the jail's private /tmp, never the host's
    "tmp_outside": Attack(ONE, lambda r, c, w: not c.host_tmp.exists() and r.passed == 1),
    "symlink_out": Attack(FOUND, lambda r, c, w: not c.host_tmp.exists() and r.passed == 0),
    "signal_parent": Attack(ONE, lambda r, c, w: time.sleep(0.3) is None and not c.signals),
    "fd_exhaustion": Attack((TestCase((1,), True),), lambda r, c, w: r.status == "ok" and r.per_test == ("fail",)),
    "deep_recursion": Attack(ONE, lambda r, c, w: r.status == "crashed" and r.passed == 0,
                             SandboxLimits(per_test_s=8.0, wall_s=20.0)),
    "forge_result": Attack((TestCase((1,), 2), TestCase((2,), 3)),
                           lambda r, c, w: r.status == "violation" and r.passed == 0, prelude=False),
    "setsid_outlive": Attack(ONE, lambda r, c, w: time.sleep(1.0) is None and not _alive_with(c.marker),
                             SandboxLimits(seccomp=False)),
    "hold_descriptors": Attack(ONE, lambda r, c, w: r.status == "timeout" and w < 3.0 + 1.5,
                               SandboxLimits(per_test_s=1.0, wall_s=3.0, seccomp=False)),
    "stdout_flood": Attack(ONE, lambda r, c, w: True),  # measured in a fresh interpreter, see _flood_growth
    "network_connect": Attack(ONE, _not_passed),
    "fork_bomb": Attack(ONE, lambda r, c, w: r.passed == 0 and w < 3.0 + 1.5,
                        SandboxLimits(per_test_s=1.0, wall_s=3.0)),
    "memory_bomb": Attack(ONE, lambda r, c, w: r.per_test == ("error:MemoryError",)),
    "infinite_loop": Attack(ONE, lambda r, c, w: r.status == "timeout" and w < 3.0 + 1.5,
                            SandboxLimits(per_test_s=1.0, wall_s=3.0)),
    # issue 26: aggregate quotas and no nested namespaces (each prints the MiB it managed to write)
    "disk_fill": Attack(TRUE, lambda r, c, w: _not_passed(r, c, w) and _mib(r) <= SandboxLimits().work_bytes >> 20),
    "tmp_fill": Attack(TRUE, lambda r, c, w: _not_passed(r, c, w) and _mib(r) <= SandboxLimits().tmp_bytes >> 20),
    "shm_fill": Attack(TRUE, lambda r, c, w: _not_passed(r, c, w) and _mib(r) <= SandboxLimits().tmp_bytes >> 20),
    "nested_userns": Attack(TRUE, _not_passed),
    # issue 48: inode caps (nr_inodes) on every writable tmpfs, not only byte caps
    "inode_flood": Attack(TRUE, _inodes_capped, SandboxLimits(per_test_s=8.0, wall_s=20.0)),
}
RESULTS: dict[str, bool] = {}
DETAIL: dict[str, str] = {}

_FLOOD = """
import resource, sys
from replaylens.paper.tools import SandboxLimits, TestCase, run_candidate
src = sys.stdin.read()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
r = run_candidate(src, "f", [TestCase((1,), 2)], SandboxLimits(wall_s=60.0, per_test_s=60.0))
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(r.status, r.passed, len(r.stdout_head), (after - before) // 1024)
"""


def _flood_growth(src: str) -> tuple[str, int, int, int]:
    env = {**os.environ, "PYTHONPATH": str(Path(PROJECT) / "src")}
    out = subprocess.run([sys.executable, "-c", _FLOOD], input=src, capture_output=True, text=True, env=env,
                         timeout=120, check=True).stdout.split()
    return out[0], int(out[1]), int(out[2]), int(out[3])


def run_attack(name: str, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> bool:
    attack = ATTACKS[name]
    ctx = Ctx(tmp)
    ctx.hidden.write_text('{"sealed": "' + ctx.secret + '"}')
    monkeypatch.setenv(SECRET_VAR, ctx.secret)
    old = signal.signal(signal.SIGUSR1, lambda signum, frame: ctx.signals.append(signum))
    server = socket.create_server(("127.0.0.1", 0))
    ctx.port = server.getsockname()[1]
    try:
        src = candidate(name, ctx, attack.prelude)
        if name == "stdout_flood":
            status, passed, kept, growth_mb = _flood_growth(src)
            # 200 MB went through; the parent keeps output_bytes of it and grows by far less than that
            return status == "ok" and passed == 1 and kept <= 2000 and growth_mb < 64
        tests = attack.tests
        if name in ("read_sealed", "symlink_out"):
            tests = (TestCase((1,), ctx.hidden.read_text()),)
        t0 = time.monotonic()
        r = run_candidate(src, "f", tests, attack.limits)
        DETAIL[name] = repr(r)
        return attack.contained(r, ctx, time.monotonic() - t0)
    finally:
        server.close()
        signal.signal(signal.SIGUSR1, old)
        ctx.host_tmp.unlink(missing_ok=True)


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_hostile_candidate_is_contained(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    RESULTS[name] = run_attack(name, tmp_path, monkeypatch)
    assert RESULTS[name], f"{name}: not contained: {DETAIL.get(name)}"


def test_every_hostile_file_is_an_attack() -> None:
    assert {p.stem for p in HOSTILE.glob("*.txt")} - {"_prelude"} == set(ATTACKS)


def test_prelude_switches_the_audit_hook_off(tmp_path: Path) -> None:
    # the hook alone refuses a read outside the sandbox; after the prelude it records nothing, so the
    # hostile runs above are contained by the operating system, not by the hook
    src = "def f(x):\n    try:\n        open('/usr/lib/os-release').read()\n    except OSError:\n        pass\n" \
          "    return x + 1\n"
    hooked = run_candidate(src, "f", ONE)
    assert hooked.status == "violation"
    ctx = Ctx(tmp_path)
    off = run_candidate((HOSTILE / "_prelude.txt").read_text() + "\n" + src, "f", ONE)
    assert (off.status, off.passed, off.violations) == ("ok", 1, ()), ctx


def test_containment_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                            capsys: pytest.CaptureFixture[str]) -> None:
    for name in sorted(set(ATTACKS) - set(RESULTS)):  # when run alone (-k report)
        sub = tmp_path / name
        sub.mkdir()
        RESULTS[name] = run_attack(name, sub, monkeypatch)
    n, ok = len(ATTACKS), sum(RESULTS[k] for k in ATTACKS)
    with capsys.disabled():
        print(f"\ncontainment {ok}/{n}: " + ", ".join(k for k in sorted(ATTACKS) if not RESULTS[k]))
    assert ok == n
