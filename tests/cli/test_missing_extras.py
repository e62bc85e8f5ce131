"""Issue 48, point 3: a missing extra is one line naming it, exit 2, on every path -- agents (``--agent llm``
with an ``openai/`` or ``local/`` model, a user's agent importing an optional package), back-ends (``--backend
ray``), stores, embedders and tokenizers -- and nothing is left behind.  Each path runs in a subprocess whose
import system refuses the extra (a ``sys.meta_path`` finder), as on an installation without it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from replaylens.bandit import make_bandit
from replaylens.records import write_evaluator, write_futures, write_history

_SRC = str(Path(__file__).resolve().parents[2] / "src")

BLOCKER = textwrap.dedent("""
    import os
    import sys
    BLOCKED = tuple(os.environ["BLOCKED"].split(","))

    class _Blocker:
        def find_spec(self, name, path=None, target=None):
            if any(name == b or name.startswith(b + ".") for b in BLOCKED):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, _Blocker())
    from replaylens.cli import main
    sys.argv = ["replaylens", *sys.argv[1:]]
    main()
""")

USER_AGENT = """\
from replaylens.agents import from_callables

def make():
    def act(s, task, menu):
        import chromadb  # an optional package the user's agent needs at its first decision
        return menu[0]
    return from_callables(dict, lambda s, t, k, o: s, act, name="needs-chroma")
"""


IMPORTING_AGENT = """\
import qdrant_client  # an optional package the user's agent module needs when it is imported
from replaylens.agents import load_agent

def make():
    return load_agent("mean")
"""


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    d = tmp_path_factory.mktemp("inputs")
    sub = make_bandit(n_streams=8, slots_per_block=8, n_future=2, rng=5)
    return ["--history", str(write_history(sub.history, d / "history.jsonl")),
            "--future", str(write_futures(sub.futures, d / "future.jsonl")),
            "--utilities", str(write_evaluator(sub.evaluator, d / "utilities.jsonl"))]


def _blocked(tmp: Path, blocked: str, *args: str) -> subprocess.CompletedProcess[str]:
    script = tmp / "blocked_cli.py"
    script.write_text(BLOCKER)
    env = {**os.environ, "BLOCKED": blocked, "PYTHONPATH": os.pathsep.join([str(tmp), _SRC])}
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, check=False, cwd=tmp,
                          timeout=300, env=env)


AUDIT_PATHS = [
    pytest.param("openai", ["--agent", "llm", "--model", "openai/some-model", "--base-url", "http://127.0.0.1:9/v1"],
                 "llm", id="agent-llm-openai"),
    pytest.param("llama_cpp", ["--agent", "llm", "--model", "local/model.gguf"], "local", id="agent-llm-local"),
    pytest.param("llama_cpp", ["--agent", "llm", "--model", "scripted/mean", "--estimate", "--tokenizer", "embedded"],
                 "local", id="tokenizer"),
    pytest.param("ray", ["--agent", "mean", "--backend", "ray"], "ray", id="backend-ray"),
    pytest.param("chromadb", ["--agent", "needs_chroma:make"], "stores", id="user-agent-import"),
    pytest.param("qdrant_client", ["--agent", "importing_agent.py:make"], "stores", id="user-file-import"),
    pytest.param("qdrant_client", ["--agent", "importing_agent:make"], "stores", id="user-module-import"),
]


@pytest.mark.parametrize(("blocked", "args", "extra"), AUDIT_PATHS)
def test_audit_paths_name_the_missing_extra(inputs: list[str], tmp_path: Path, blocked: str, args: list[str],
                                            extra: str) -> None:
    (tmp_path / "needs_chroma.py").write_text(USER_AGENT)
    (tmp_path / "importing_agent.py").write_text(IMPORTING_AGENT)
    out = tmp_path / "out"
    res = _blocked(tmp_path, blocked, "audit", *inputs, *args, "--cells", "value", "--resamples", "100",
                   "--out", str(out))
    assert res.returncode == 2, (res.stdout, res.stderr)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    assert lines[0].startswith("replaylens: error: ") and f"pip install 'replaylens[{extra}]'" in lines[0]
    assert not out.exists()   # nothing left behind: no OUT, no empty journal


@pytest.mark.parametrize(("blocked", "args"), [
    pytest.param("chromadb", ["check-migration", "--store", "chroma", "--example", "tool-use"], id="store"),
    pytest.param("wordllama", ["check-migration", "--store", "exact", "--example", "tool-use", "--embedder",
                               "wordllama"], id="embedder"),
    pytest.param("chromadb", ["demo", "--stores"], id="demo-stores"),
])
def test_store_and_embedder_paths_name_the_missing_extra(tmp_path: Path, blocked: str, args: list[str]) -> None:
    out = tmp_path / "out"
    res = _blocked(tmp_path, blocked, *args, "--out", str(out))
    assert res.returncode == 2, (res.stdout, res.stderr)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    assert "pip install 'replaylens[stores]'" in lines[0] and blocked in lines[0]
    assert not out.exists()
