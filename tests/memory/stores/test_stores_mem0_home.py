"""mem0 writes ``config.json`` into its home directory when imported (mem0 2.2.1: ``MEM0_DIR``, else ``~/.mem0``):
the adapter points it at a temporary directory of the process, so an audit never writes into the user's home."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from replaylens.memory.stores import EXTRA

_CHILD = """
import json, os, sys
from replaylens.memory.stores import HashingEmbedder, StoreItem, make_store
store = make_store("mem0", HashingEmbedder(64), params={"threshold": 0.0})
store.add([StoreItem("a", "rotate the signing certificate", {"action": "x"})])
hits = store.query("rotate the certificate", 1)
store.close()
import mem0.memory.setup as setup
print(json.dumps({"hit": hits[0].id, "mem0_dir": setup.mem0_dir, "env": os.environ.get("MEM0_DIR"),
                  "config": os.path.isfile(os.path.join(setup.mem0_dir, "config.json"))}))
"""


def _run(home: Path, **env: str) -> dict[str, object]:
    pytest.importorskip("mem0", reason=f"mem0 is not installed ({EXTRA})")
    src = str(Path(__file__).resolve().parents[3] / "src")
    base = {k: v for k, v in os.environ.items() if k != "MEM0_DIR"}
    res = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=300,
                         env={**base, "HOME": str(home), "MEM0_TELEMETRY": "False",
                              "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", ""), **env})
    assert res.returncode == 0, res.stderr[-2000:]
    return dict(json.loads(res.stdout.strip().splitlines()[-1]))


def test_mem0_never_writes_into_the_users_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    got = _run(home)
    assert got["hit"] == "a"
    assert not (home / ".mem0").exists(), sorted(p.name for p in home.rglob("*"))
    assert not str(got["mem0_dir"]).startswith(str(home))
    assert "replaylens-mem0-home-" in str(got["mem0_dir"]) and got["config"] is True  # mem0 wrote it there
    assert got["env"] is None  # the environment is restored after the import
    assert not Path(str(got["mem0_dir"])).exists()  # removed when the process exits


def test_a_mem0_dir_the_caller_set_is_respected(tmp_path: Path) -> None:
    home, mine = tmp_path / "home", tmp_path / "mine"
    home.mkdir()
    got = _run(home, MEM0_DIR=str(mine))
    assert got["mem0_dir"] == str(mine) and (mine / "config.json").is_file()
    assert not (home / ".mem0").exists()
