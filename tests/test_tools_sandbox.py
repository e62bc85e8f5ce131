from __future__ import annotations

import ast
import socket
from pathlib import Path

import pytest

from conftest import require
from replaylens.paper.tools import (
    FAMILIES,
    SandboxLimits,
    SandboxUnavailable,
    TestCase,
    _sandbox,
    build_suite,
    network_isolation,
    run_candidate,
    sandbox_backend,
)

ONE = [TestCase((1,), 2)]


def test_clean_candidate_counts_passes() -> None:
    r = run_candidate("def f(x):\n    return x + 1\n", "f", [TestCase((1,), 2), TestCase((2,), 4)])
    assert (r.status, r.passed, r.total) == ("ok", 1, 2)


def test_set_order_is_the_same_in_every_run() -> None:
    # a buggy deduplication that depends on string hashing must give the same verdict every time
    src = "def f(xs):\n    return list(set(xs))\n"
    # two-element lists: each test passes for about half of all hash seeds
    tests = [TestCase(([f"a{i}", f"b{i}"],), [f"a{i}", f"b{i}"]) for i in range(12)]
    runs = [run_candidate(src, "f", tests) for _ in range(6)]
    assert all(r.status == "ok" for r in runs)
    assert len({r.passed for r in runs}) == 1


@pytest.mark.parametrize("body, expect", [
    ("def f(x):\n    while True:\n        pass\n", "timeout"),
    ("def f(x):\n    a = [0] * (10 ** 10)\n    return x + 1\n", "error:MemoryError"),
    ("import os\ndef f(x):\n    while True:\n        os.fork()\n", "violation"),
    ("import socket\ndef f(x):\n    socket.create_connection(('127.0.0.1', 80))\n    return x + 1\n", "violation"),
    ("import _socket\ndef f(x):\n    _socket.socket()\n    return x + 1\n", "violation"),
])
def test_escapes_are_contained_and_recorded_as_failed(body: str, expect: str) -> None:
    r = run_candidate(body, "f", ONE, SandboxLimits(per_test_s=1.0))
    assert r.failed and r.passed == 0
    assert expect in (r.status, *r.per_test)


def test_write_outside_directory_is_blocked(tmp_path: Path) -> None:
    target = tmp_path / "escape.txt"
    r = run_candidate(f"def f(x):\n    open({str(target)!r}, 'w').write('x')\n    return x + 1\n", "f", ONE)
    assert r.failed and r.status == "violation" and not target.exists()


def test_reading_the_hidden_test_file_fails(tmp_path: Path) -> None:
    hidden = tmp_path / "hidden_tests.json"
    hidden.write_text('{"secret": 1}')
    r = run_candidate(f"def f(x):\n    return len(open({str(hidden)!r}).read())\n", "f", [TestCase((1,), 13)])
    assert r.failed and r.status == "violation" and any("hidden_tests.json" in v for v in r.violations)


def test_file_size_limit_and_private_directory_writes() -> None:
    r = run_candidate("def f(x):\n    open('big.bin', 'wb').write(b'0' * (4 << 20))\n    return x + 1\n", "f", ONE,
                      SandboxLimits(file_bytes=1 << 20))
    assert r.failed
    ok = run_candidate("def f(x):\n    open('note.txt', 'w').write('x')\n    return x + 1\n", "f", ONE)
    assert ok.status == "ok" and ok.passed == 1


def test_type_strict_comparison() -> None:
    assert run_candidate("def f(x):\n    return x > 0\n", "f", ONE).passed == 0


def test_network_namespace_stops_a_connection_even_without_the_audit_hook() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        body = (f"import _socket\ndef f(x):\n    s = _socket.socket()\n    s.settimeout(2)\n"
                f"    s.connect(('127.0.0.1', {port}))\n    return x + 1\n")
        # control: trusted, no jail, no namespace, no hook: the candidate reaches the parent's listening socket
        reached = run_candidate(body, "f", ONE, SandboxLimits(audit_hook=False, network_namespace=False, jail=False),
                                trusted=True)
        assert (reached.status, reached.passed) == ("ok", 1)
        if sandbox_backend() == "bwrap":  # the jail's own network namespace, hook off
            jailed = run_candidate(body, "f", ONE, SandboxLimits(audit_hook=False))
            # bubblewrap brings up the namespace's own loopback, where nothing listens
            assert jailed.failed and jailed.per_test in (("error:OSError",), ("error:ConnectionRefusedError",))
        if network_isolation() != "none":  # the trusted fallback's namespace alone
            cut = run_candidate(body, "f", ONE, SandboxLimits(audit_hook=False, jail=False), trusted=True)
            assert cut.failed and cut.per_test == ("error:OSError",)
        if sandbox_backend() != "bwrap" and network_isolation() == "none":
            require("sandbox", "this kernel / container allows no network namespace")


def test_network_isolation_reports_a_known_layer() -> None:
    assert network_isolation() in ("netns", "userns+netns", "none")
    assert sandbox_backend() in ("bwrap", "none")


def test_untrusted_candidate_is_refused_without_isolation(monkeypatch: pytest.MonkeyPatch) -> None:
    src = "def f(x):\n    return x + 1\n"
    with pytest.raises(SandboxUnavailable, match="refusing to run an untrusted candidate"):
        run_candidate(src, "f", ONE, SandboxLimits(jail=False))
    monkeypatch.setattr(_sandbox, "sandbox_backend", lambda: "none")
    missing = "bubblewrap is not installed (Debian package `bubblewrap`)"
    monkeypatch.setattr(_sandbox, "bwrap_available", lambda: missing)
    with pytest.raises(SandboxUnavailable, match="bubblewrap is not installed"):
        run_candidate(src, "f", ONE)
    assert run_candidate(src, "f", ONE, trusted=True).passed == 1


def test_catalogue_runs_trusted_with_the_same_results_with_or_without_the_jail(
        monkeypatch: pytest.MonkeyPatch) -> None:
    if sandbox_backend() != "bwrap":
        require("sandbox", "comparing jailed and trusted runs needs the bubblewrap jail")
    jailed = build_suite(0, families=FAMILIES[:2], instances=(0,))
    monkeypatch.setattr(_sandbox, "sandbox_backend", lambda: "none")
    plain = build_suite(0, families=FAMILIES[:2], instances=(0,))
    assert [t.to_dict() for t in jailed.tasks] == [t.to_dict() for t in plain.tasks]
    assert jailed.sealed_doc() == plain.sealed_doc()


def test_output_is_capped_and_the_verdict_unaffected() -> None:
    src = "def f(x):\n    print('y' * (4 << 20))\n    return x + 1\n"
    r = run_candidate(src, "f", ONE, SandboxLimits(output_bytes=1000), trusted=True)
    assert (r.status, r.passed) == ("ok", 1) and r.stdout_head == "y" * 1000


def _jail_or_skip() -> None:
    if sandbox_backend() != "bwrap":
        require("sandbox", "needs the bubblewrap jail (bubblewrap missing or namespaces forbidden)")


def test_a_forged_frame_marks_the_run_a_violation() -> None:
    _jail_or_skip()
    # a protocol-valid duplicate outcome for the running test: the real one follows, so the channel is tampered
    src = ("import os, __main__\ndef f(x):\n    b = repr(('R', 0, 'ok', '2', '(1,)')).encode()\n"
           "    os.write(__main__._fd, len(b).to_bytes(4, 'big') + b)\n    return x + 1\n")
    r = run_candidate(src, "f", [TestCase((1,), 2), TestCase((2,), 3)])
    assert (r.status, r.passed) == ("violation", 0)
    assert any(v.startswith("result channel:") for v in r.violations)


def test_the_jail_is_minimal() -> None:
    _jail_or_skip()
    src = ("import os\ndef f(x):\n    print(repr((os.getuid(), os.getgid(), sorted(os.listdir('/')), dict(os.environ),"
           " os.getcwd(), sorted(p for p in os.listdir('/proc') if p.isdigit()))))\n    return x + 1\n")
    r = run_candidate(src, "f", ONE, SandboxLimits(audit_hook=False))
    assert (r.status, r.passed) == ("ok", 1)
    uid, gid, top, env, cwd, pids = ast.literal_eval(r.stdout_head)
    assert (uid, gid, env["PYTHONHASHSEED"], cwd) == (65534, 65534, "0", "/sandbox/work")
    assert set(env) <= {"PYTHONHASHSEED", "PWD", "LC_CTYPE"}  # PWD from --chdir, LC_CTYPE from locale coercion
    # no /home, /etc, /work (the project), /sys; only the jail's own processes (its init and the runner)
    assert not {"home", "etc", "work", "sys", "var", "opt"} & set(top) and {"proc", "tmp", "sandbox"} <= set(top)
    assert pids == ["1", "2"]
