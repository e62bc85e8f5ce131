"""The README's Python examples run as written (they are the first code a user copies)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_blocks_run_in_order() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) >= 2
    ns: dict[str, object] = {}
    for block in blocks:  # later blocks continue the earlier ones, as in the README's prose
        exec(compile(block, str(README), "exec"), ns)
    decisions = ns["decisions"]
    assert isinstance(decisions, dict) and set(decisions) == {"mean", "sum", "latest"}
