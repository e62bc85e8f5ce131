"""The generated API reference (scripts/api_reference.py, pdoc) builds and documents every public name."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_api_reference_builds_and_documents_every_public_name(tmp_path: Path) -> None:
    pytest.importorskip("pdoc", reason="pdoc is part of the dev extra")
    spec = importlib.util.spec_from_file_location("api_reference", ROOT / "scripts" / "api_reference.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["api_reference"] = mod
    spec.loader.exec_module(mod)
    pages = mod.build(tmp_path)
    assert (tmp_path / "index.html").exists() or (tmp_path / "replaylens.html").exists()
    missing = []
    for name in mod.PRODUCT_MODULES:
        page = tmp_path / (name.replace(".", "/") + ".html")
        assert page in pages, f"no page for {name}"
        text = page.read_text(encoding="utf-8")
        for n in getattr(importlib.import_module(name), "__all__", ()):
            if f'id="{n}"' not in text:
                missing.append(f"{name}.{n}")
    assert missing == [], f"undocumented public names: {missing[:20]}"
