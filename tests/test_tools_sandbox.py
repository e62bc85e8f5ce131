from __future__ import annotations

import socket
from pathlib import Path

import pytest

from replaylens.tools import SandboxLimits, TestCase, network_isolation, run_candidate

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


@pytest.mark.skipif(network_isolation() == "none", reason="this kernel / container allows no network namespace")
def test_network_namespace_stops_a_connection_even_without_the_audit_hook() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        body = (f"import _socket\ndef f(x):\n    s = _socket.socket()\n    s.settimeout(2)\n"
                f"    s.connect(('127.0.0.1', {port}))\n    return x + 1\n")
        # control: with both layers switched off the candidate reaches the parent's listening socket
        reached = run_candidate(body, "f", ONE, SandboxLimits(audit_hook=False, network_namespace=False))
        assert (reached.status, reached.passed) == ("ok", 1)
        # the kernel layer alone: the child's namespace has only a down loopback, so the connect fails
        cut = run_candidate(body, "f", ONE, SandboxLimits(audit_hook=False))
        assert cut.failed and cut.per_test == ("error:OSError",)


def test_network_isolation_reports_a_known_layer() -> None:
    assert network_isolation() in ("netns", "userns+netns", "none")
