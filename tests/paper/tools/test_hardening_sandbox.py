"""Issue 26, point 4: the jail's aggregate quotas are configured, documented with their values, and the missing
seccomp layer on other architectures is said once (the attacks themselves: tests/paper/tools/hostile/*_fill,
nested_userns)."""

from __future__ import annotations

import os
from dataclasses import fields
from pathlib import Path

import pytest

from replaylens.paper.tools import SandboxLimits, _jail

DOCS = Path(__file__).resolve().parents[3] / "docs" / "paper" / "tools.md"


def _human(n: int | float) -> str:
    if isinstance(n, float):
        return f"{n:g} s"
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return str(n)


def test_the_trust_boundary_table_lists_every_limit_with_its_value() -> None:
    text = DOCS.read_text()
    lim = SandboxLimits()
    numeric = [f.name for f in fields(lim) if isinstance(getattr(lim, f.name), (int, float))
               and not isinstance(getattr(lim, f.name), bool)]
    assert {"work_bytes", "tmp_bytes", "memory_bytes", "file_bytes"} <= set(numeric)
    for name in numeric:
        value = getattr(lim, name)
        shown = _human(value) if name != "cpu_s" else f"{value} s"
        assert f"`{name}` = {shown}" in text, (name, shown)


def test_every_writable_mount_of_the_jail_is_a_sized_tmpfs() -> None:
    argv = _jail.bwrap_argv("/h", "/w", None, work_bytes=3 << 20, tmp_bytes=1 << 20)
    assert "--bind" not in argv and "/w" not in argv            # the host directory is not mounted
    assert "--disable-userns" in argv and "--unshare-user" in argv
    tmpfs = [argv[i + 1] for i, a in enumerate(argv) if a == "--tmpfs"]
    assert tmpfs == ["/dev/shm", "/tmp", "/sandbox/work"]
    for mount, size in (("/dev/shm", 1 << 20), ("/tmp", 1 << 20), ("/sandbox/work", 3 << 20)):
        i = argv.index(mount) - 1  # ... --size N --perms 1777 --tmpfs MOUNT
        assert argv[i] == "--tmpfs" and argv[i - 4:i - 2] == ["--size", str(size)], mount
    assert argv[argv.index("--remount-ro") + 1] == "/dev"


def test_capped_mounts_replace_bubblewraps_tmpfs() -> None:
    """Issue 48: with ``capped`` every writable place is a bound, size- and inode-capped tmpfs."""
    capped = {m: "/host" + m for m in _jail.JAIL_MOUNTS}
    argv = _jail.bwrap_argv("/h", "/w", None, capped=capped)
    assert "--tmpfs" not in argv and "--size" not in argv
    for mount, host in capped.items():
        i = argv.index(host)
        assert argv[i - 1:i + 2] == ["--bind", host, mount]
    assert argv.index("/dev/shm") < argv.index("--remount-ro")


@pytest.mark.skipif(_jail.inode_cap_available() is not None, reason="no private mount namespace here")
def test_capped_tmpfs_counts_inodes(tmp_path: Path) -> None:
    import subprocess
    import sys

    script = ("import os\nn = 0\ntry:\n    while n < 500:\n        open(os.path.join(" + repr(str(tmp_path))
              + ", str(n)), 'w').close()\n        n += 1\nexcept OSError:\n    pass\nprint(n)\n")
    out = subprocess.run([sys.executable, "-S", "-c", script], capture_output=True, text=True, check=True,
                         preexec_fn=lambda: _jail.capped_tmpfs([(str(tmp_path), 1 << 20, 50)])).stdout
    assert int(out) == 49 and not list(tmp_path.iterdir())   # the root takes one inode; the host saw nothing


def test_other_architectures_are_told_once_that_seccomp_is_missing(monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    real = os.uname()

    class Uname:
        sysname, nodename, release, version, machine = real.sysname, real.nodename, real.release, real.version, \
            "aarch64"

    monkeypatch.setattr(_jail.os, "uname", lambda: Uname())
    _jail.seccomp_note.cache_clear()
    try:
        assert _jail.seccomp_filter() is None
        assert _jail.seccomp_note() is not None and _jail.seccomp_note() is not None
        err = capsys.readouterr().err
        assert err.count("seccomp filter is x86-64 only") == 1 and "aarch64" in err
    finally:
        _jail.seccomp_note.cache_clear()
    monkeypatch.undo()
    if real.machine == "x86_64":
        assert _jail.seccomp_note() is None and capsys.readouterr().err == ""
