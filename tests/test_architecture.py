"""Architecture rules: imports flow one way, and the public API is exactly what ``__all__`` says."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import replaylens

SRC = Path(replaylens.__file__).parent

# Lower layers never import higher ones (records → maps → interventions → agents → replay →
# readouts / inference → report → testing → experiments → cli).  errors and rng are the base.
RANK = {
    "errors": 0, "rng": 0, "_imports": 0, "_durable": 0,
    "records": 1,
    "data": 1.5, "maps": 2, "substrates": 2,
    "interventions": 3,
    "agents": 4,
    "operators": 4.5, "learned": 4.5, "controllers": 4.5, "llm": 4.5, "fitted": 4.5, "persistent": 4.5,
    "stores": 4.6,  # vector stores and embedders (an integration: imports only errors and _imports)
    "memory": 4.7, "tools": 4.7,  # memory pipelines and tool environments run their agents through llm back-ends
    "replay": 5,
    "readouts": 6, "inference": 6,
    "retrieval": 6.5,  # retrieval-memory agents and store audits (stores + replay + inference)
    "report": 7,
    "testing": 8, "reproduce": 8,
    "api": 8.5,  # the package's public namespace (``from replaylens import X``)
    "experiments": 9,
    "cli": 10,
}


def _layer(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "replaylens":
        return None
    if len(parts) < 2 or (parts[1] not in RANK and (SRC / parts[1]).exists() is False
                          and not (SRC / f"{parts[1]}.py").exists()):
        return "api"
    return parts[1].removesuffix(".py")


def _imports(path: Path) -> list[tuple[int, str]]:
    rel = path.relative_to(SRC.parent).with_suffix("")
    pkg_parts = list(rel.parts[:-1])  # the package a relative import is resolved against
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg_parts[: len(pkg_parts) - node.level + 1]
                mod = ".".join([*base, node.module] if node.module else base)
                if node.module is None:
                    out += [(node.lineno, f"{mod}.{a.name}") for a in node.names]
                    continue
            else:
                mod = node.module or ""
            out.append((node.lineno, mod))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
    return out


def _source_files() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if p.parent != SRC or p.name not in ("__init__.py", "__main__.py"))


@pytest.mark.parametrize("path", _source_files(), ids=lambda p: str(p.relative_to(SRC)))
def test_imports_flow_one_way(path: Path) -> None:
    own = path.relative_to(SRC).parts[0].removesuffix(".py")
    assert own in RANK, f"{own} has no layer: add it to RANK"
    for line, mod in _imports(path):
        other = _layer(mod)
        if other is None or other == own:
            continue
        assert other in RANK, f"{path}:{line} imports unknown layer {other}"
        base = ("errors", "rng", "_imports", "_durable")
        assert RANK[other] < RANK[own] or (RANK[other] == RANK[own] and other in base), (
            f"{path.relative_to(SRC)}:{line}: layer '{own}' must not import '{other}' "
            f"(imports flow records → maps → interventions → agents → replay → readouts → report → cli)")


def test_same_rank_layers_are_independent() -> None:
    # readouts and inference share a rank: neither may import the other
    for a, b in (("readouts", "inference"), ("inference", "readouts"), ("maps", "substrates")):
        for path in (SRC / a).rglob("*.py"):
            assert not any(_layer(m) == b for _, m in _imports(path)), f"{path} imports {b}"


def test_public_all_matches_exports() -> None:
    for name in replaylens.__all__:
        assert hasattr(replaylens, name), f"replaylens.__all__ names missing {name}"
    public = {n for n in dir(replaylens) if not n.startswith("_")}
    subpackages = {m.name for m in pkgutil.iter_modules(replaylens.__path__)}
    assert public - set(replaylens.__all__) - subpackages == set()


@pytest.mark.parametrize("sub", sorted(m.name for m in pkgutil.iter_modules(replaylens.__path__)
                                       if not m.name.startswith("_")))
def test_subpackage_all_is_exact(sub: str) -> None:
    mod = importlib.import_module(f"replaylens.{sub}")
    names = getattr(mod, "__all__", None)
    assert names is not None, f"replaylens.{sub} has no __all__"
    for n in names:
        assert hasattr(mod, n), f"replaylens.{sub}.__all__ lists missing {n}"
    assert len(set(names)) == len(names)


def test_no_global_numpy_random() -> None:
    banned = ("np.random.seed(", "np.random.rand(", "np.random.randn(", "np.random.randint(", "np.random.choice(",
              "np.random.shuffle(", "np.random.permutation(", "np.random.random(", "np.random.uniform(",
              "np.random.normal(", "import random\n")
    for path in SRC.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for b in banned:
            assert b not in text, f"{path}: uses global randomness ({b.strip()})"
