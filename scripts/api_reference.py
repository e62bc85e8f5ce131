"""Build the API reference of ReplayLens's public product API with pdoc (HTML, offline, no network).

    python scripts/api_reference.py [OUTPUT_DIR]        # default: docs/reference/api (git-ignored)

The paper wing (``replaylens.paper``) is documented by docs/paper/, not here. tests/test_api_reference.py
builds the same reference in CI, so a broken docstring or import cannot rot it.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

PRODUCT_MODULES = (
    "replaylens", "replaylens.settings", "replaylens.errors", "replaylens.rng", "replaylens.records",
    "replaylens.bandit", "replaylens.maps", "replaylens.interventions", "replaylens.agents", "replaylens.replay",
    "replaylens.readouts", "replaylens.inference", "replaylens.report", "replaylens.testing", "replaylens.llm",
    "replaylens.memory", "replaylens.memory.bounded", "replaylens.memory.stores", "replaylens.memory.retrieval",
    "replaylens.memory.operations", "replaylens.memory.generations",
)


def build(out: Path) -> list[Path]:
    """Render the product modules into ``out``; return the written HTML files."""
    import pdoc
    import pdoc.render

    pdoc.render.configure(docformat="restructuredtext", footer_text="ReplayLens API reference", search=False,
                          show_source=False)
    out.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():  # pdoc warns on annotations it cannot evaluate (weakref.finalize[...])
        warnings.simplefilter("ignore", UserWarning)
        # ``replaylens.replay`` is reached from ``replaylens`` (its ``__all__`` names it): listing it again
        # would make pdoc render it twice
        pdoc.pdoc(*(m for m in PRODUCT_MODULES if m != "replaylens.replay"), output_directory=out)
    return sorted(out.rglob("*.html"))


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "docs/reference/api"
    files = build(target)
    print(f"wrote {len(files)} pages to {target}")
