"""A base install (no extras) runs the product: with the paper wing and every optional dependency blocked at
import time, demo, audit, check-writer, compare and view still work; the base requirements name none of them;
``replaylens --help`` lists the product's commands and one ``paper`` group; a missing extra is one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from importlib.metadata import requires
from pathlib import Path

import pytest

BLOCKED = ("replaylens.paper", "scipy", "sklearn", "openai", "llama_cpp", "ray", "chromadb", "qdrant_client",
           "langgraph", "faiss", "hnswlib", "mem0", "wordllama", "lancedb")

_BLOCKER = textwrap.dedent("""
    import os
    import sys
    BLOCKED = tuple(os.environ["LEAN_BLOCKED"].split(","))

    class _Blocker:
        def find_spec(self, name, path=None, target=None):
            if any(name == b or name.startswith(b + ".") for b in BLOCKED):
                raise ModuleNotFoundError(f"No module named {name!r} (blocked by the lean-install test)", name=name)
            return None

    sys.meta_path.insert(0, _Blocker())
    from replaylens.cli import main
    sys.argv = ["replaylens", *sys.argv[1:]]
    try:
        main()
    finally:
        leaked = sorted(m for m in sys.modules if any(m == b or m.startswith(b + ".") for b in BLOCKED))
        assert not leaked, leaked
""")


def _run(tmp: Path, *args: str, blocked: tuple[str, ...] = BLOCKED) -> subprocess.CompletedProcess[str]:
    script = tmp / "lean_cli.py"
    script.write_text(_BLOCKER)
    env = {**os.environ, "LEAN_BLOCKED": ",".join(blocked)}
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, check=False,
                          cwd=tmp, timeout=600, env=env)


@pytest.mark.slow
def test_product_commands_run_with_the_paper_wing_and_extras_blocked(tmp_path: Path) -> None:
    fast = ["--resamples", "200", "--cells", "value,pair,reorder"]
    res = _run(tmp_path, "demo", "--out", str(tmp_path / "demo"), "--scripted", "--streams", "8", *fast)
    assert res.returncode == 0, res.stderr
    inputs = tmp_path / "demo" / "inputs"
    files = ["--history", str(inputs / "history.jsonl"), "--future", str(inputs / "future.jsonl"),
             "--utilities", str(inputs / "utilities.jsonl")]
    for agent, out in (("mean", "a"), ("latest", "b")):
        res = _run(tmp_path, "audit", *files, "--agent", agent, "--out", str(tmp_path / out), *fast)
        assert res.returncode == 0, res.stderr
        assert json.loads((tmp_path / out / "summary.json").read_text())["agent"] == agent
    res = _run(tmp_path, "check-writer", "mean", "--streams", "4", "--cells", "value,pair,reorder")
    assert res.returncode == 0, res.stderr
    res = _run(tmp_path, "compare", str(tmp_path / "a"), str(tmp_path / "b"), "--resamples", "200")
    assert res.returncode == 0, res.stderr
    res = _run(tmp_path, "view", str(tmp_path / "a"), "--no-browser")
    assert res.returncode == 0 and res.stdout.strip().endswith("report.html"), res.stderr
    res = _run(tmp_path, "check-operation", "--demo")
    assert res.returncode == 0 and "keep-latest: UNSAFE for mean, SAFE for latest" in res.stdout, res.stderr
    res = _run(tmp_path, "check-store", "--demo")   # the declared wordllama embedder is an extra
    assert res.returncode == 2 and "pip install 'replaylens[stores]'" in res.stderr, res.stderr


def test_a_missing_extra_is_one_line_naming_it(tmp_path: Path) -> None:
    # the wing ships with the package; its optional dependencies may be missing
    res = _run(tmp_path, "paper", "reproduce", "--list", blocked=("scipy", "sklearn"))
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'replaylens[paper]'" in lines[0], res.stderr
    assert "Traceback" not in res.stderr


def test_help_lists_the_product_commands_and_one_paper_group(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "replaylens", "--help"], capture_output=True, text=True,
                         check=True)
    listed = res.stdout.split("Commands:")[1].split("\n\n")[0]
    names = {line.split()[0] for line in listed.splitlines() if line.strip()}
    assert names == {"audit", "check-migration", "check-operation", "check-store", "check-writer", "compare", "demo",
                     "llm", "paper", "prune", "validate", "view"}
    paper = subprocess.run([sys.executable, "-m", "replaylens", "paper", "--help"], capture_output=True, text=True,
                           check=True).stdout
    for cmd in ("reproduce", "data", "joint", "memory-audit", "tools", "reanalyze"):
        assert cmd in paper


def test_the_base_requirements_name_no_optional_package() -> None:
    base = [r for r in requires("replaylens") or [] if "extra ==" not in r]
    names = {r.split(";")[0].split("[")[0].split(">")[0].split("=")[0].split("<")[0].strip().lower() for r in base}
    assert names, "no base requirements read"
    assert names.isdisjoint({"scipy", "scikit-learn", "openai", "llama-cpp-python", "ray", "chromadb"}), names
