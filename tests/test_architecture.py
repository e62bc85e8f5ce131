"""Architecture rules (docs/architecture.md): the product core's layers import one way, the paper wing sits on
top and nothing outside it imports it, no package reaches into another's private module, the module graph
(function-local imports included) has no cycle, and the public API is exactly what ``__all__`` says."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import replaylens

SRC = Path(replaylens.__file__).parent

# The house, lowest first.  A layer imports only layers of lower rank (errors, rng and the root package's
# shared internals _imports, _durable, _memory, _gc and _jit are the base).  llm and the memory family are product
# integrations: above the core, below the CLI.  The memory family's subpackages are layers of their own (its
# stores lowest, its operations highest); its package root only re-exports.  ``stores`` and ``retrieval`` at the
# top level are the deprecated aliases of the family's packages.  The paper wing is on top of everything.
RANK: dict[str, float] = {
    "errors": 0, "rng": 0, "_imports": 0, "_durable": 0, "_memory": 0, "_gc": 0, "_jit": 0, "_jit_native": 0,
    "_version": 0, "_moved": 0,
    "settings": 0.5,
    "_cpus": 0.6,   # the CPUs a process may use and the thread counts derived from them (reads settings)
    "records": 1,
    "bandit": 1.5,
    "maps": 2,
    "interventions": 3,
    "agents": 4,
    "replay": 5,
    "readouts": 6, "inference": 6,
    "report": 7,
    "testing": 8,
    "llm": 8.5, "memory.stores": 8.5,
    "memory.bounded": 8.6, "memory.generations": 8.6,
    "memory.retrieval": 8.7,
    "memory.operations": 8.8,
    "memory": 8.9,   # the family's root: re-exports memory.bounded and memory.generations
    "stores": 8.95, "retrieval": 8.95,   # deprecated aliases of memory.stores and memory.retrieval
    "api": 9,  # the package's public namespace (``from replaylens import X``)
    "pytest_plugin": 9.5,
    "cli": 10,
    "paper": 20,
}
BASE = ("errors", "rng", "_imports", "_durable", "_memory", "_gc", "_jit", "_jit_native", "_version", "_moved")
CORE_LADDER = ("records", "maps", "interventions", "agents", "replay", "readouts", "report", "cli")


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every ``replaylens`` module a file imports (module level and function-local), resolved to absolute
    names; ``from pkg import name`` yields ``pkg.name`` when ``name`` is a submodule, else ``pkg``."""
    rel = path.relative_to(SRC.parent).with_suffix("")
    pkg_parts = list(rel.parts[:-1])  # the package a relative import is resolved against
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg_parts[: len(pkg_parts) - node.level + 1]
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            for a in node.names:
                sub = f"{mod}.{a.name}"
                out.append((node.lineno, sub if _is_module(sub) else mod))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
    return [(line, m) for line, m in out if m.split(".")[0] == "replaylens"]


def _is_module(name: str) -> bool:
    parts = name.split(".")[1:]
    p = SRC.joinpath(*parts)
    return p.with_suffix(".py").exists() or (p / "__init__.py").exists()


#: packages whose subpackages are layers of their own
FAMILIES = ("memory",)


def _layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) < 2 or not _is_module(".".join(parts[:2])):
        return "api"
    if parts[1] in FAMILIES and len(parts) > 2 and (SRC / parts[1] / parts[2] / "__init__.py").exists():
        return f"{parts[1]}.{parts[2]}"
    return parts[1]


def _source_files() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def _own_layer(path: Path) -> str:
    rel = path.relative_to(SRC)
    if len(rel.parts) == 1 and rel.name in ("__init__.py", "__main__.py"):
        return "api"
    if rel.parts[0] in FAMILIES and len(rel.parts) > 2:
        return f"{rel.parts[0]}.{rel.parts[1]}"
    return rel.parts[0].removesuffix(".py")


def test_every_top_level_package_has_a_layer() -> None:
    names = {m.name for m in pkgutil.iter_modules(replaylens.__path__)} - {"__main__"}
    for family in FAMILIES:
        names |= {f"{family}.{m.name}" for m in pkgutil.iter_modules([str(SRC / family)]) if m.ispkg}
    assert names - set(RANK) == set(), f"give these a layer in RANK: {sorted(names - set(RANK))}"


def test_the_memory_family_is_one_package() -> None:
    """Bounded memories, stores, retrieval agents, operations and generations live under replaylens.memory; the
    old top-level names are aliases nothing inside the package imports, and they still answer (with a warning)."""
    assert {m.name for m in pkgutil.iter_modules([str(SRC / "memory")]) if m.ispkg} == {
        "bounded", "generations", "operations", "retrieval", "stores"}
    users = [f"{p.relative_to(SRC)}:{line} imports {mod}" for p in _source_files()
             if _own_layer(p) not in ("stores", "retrieval")
             for line, mod in _imports(p) if _layer(mod) in ("stores", "retrieval")]
    assert users == []
    import replaylens.memory.retrieval as new_retrieval
    import replaylens.memory.stores as new_stores
    import replaylens.retrieval as old_retrieval
    import replaylens.stores as old_stores

    with pytest.warns(DeprecationWarning, match=r"replaylens\.memory\.stores\.make_store"):
        assert old_stores.make_store is new_stores.make_store
    with pytest.warns(DeprecationWarning, match=r"replaylens\.memory\.retrieval\.make_agent"):
        assert old_retrieval.make_agent is new_retrieval.make_agent
    assert old_stores.__all__ == new_stores.__all__ and old_retrieval.__all__ == new_retrieval.__all__
    with pytest.raises(AttributeError):
        _ = old_stores._chroma


@pytest.mark.parametrize("path", [p for p in _source_files() if _own_layer(p) != "api" or p.name == "__init__.py"],
                         ids=lambda p: str(p.relative_to(SRC)))
def test_imports_flow_one_way(path: Path) -> None:
    own = _own_layer(path)
    if path.relative_to(SRC).as_posix() == "__main__.py":
        return
    for line, mod in _imports(path):
        other = _layer(mod)
        if other == own:
            continue
        assert other in RANK, f"{path}:{line} imports unknown layer {other}"
        assert RANK[other] < RANK[own] or (RANK[other] == RANK[own] and other in BASE), (
            f"{path.relative_to(SRC)}:{line}: layer '{own}' must not import '{other}' "
            f"(imports flow {' → '.join(CORE_LADDER)}; integrations below cli; the paper wing on top)")


def test_nothing_outside_the_paper_wing_imports_it() -> None:
    bad = [f"{p.relative_to(SRC)}:{line} imports {mod}" for p in _source_files() if _own_layer(p) != "paper"
           for line, mod in _imports(p) if _layer(mod) == "paper"]
    assert bad == []


def test_no_package_imports_another_packages_private_module() -> None:
    """``replaylens.pkg._mod`` is pkg's own business; the root package's shared internals are the exception."""
    bad = []
    for p in _source_files():
        me = _module_name(p)
        for line, mod in _imports(p):
            parts = mod.split(".")
            for i in range(2, len(parts)):
                if parts[i].startswith("_"):
                    owner = ".".join(parts[:i])
                    if not (me + ".").startswith(owner + "."):
                        bad.append(f"{p.relative_to(SRC)}:{line} imports {mod}")
                    break
    assert bad == []


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for p in _source_files():
        me = _module_name(p)
        deps = graph.setdefault(me, set())
        for _, mod in _imports(p):
            # a module that imports ``pkg`` runs pkg/__init__; a submodule import runs its parents' too
            parts = mod.split(".")
            for k in range(2, len(parts) + 1):
                target = ".".join(parts[:k])
                if target != me and _is_module(target) and not (me + ".").startswith(target + "."):
                    deps.add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> Iterator[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    counter = [0]

    def visit(v: str) -> Iterator[list[str]]:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                yield from visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                yield sorted(comp)

    for v in sorted(graph):
        if v not in index:
            yield from visit(v)


def test_module_graph_has_no_cycle() -> None:
    """Function-local imports count: a cycle hidden behind one is still a cycle between concepts.  A package's
    ``__init__`` importing its own modules is not an edge back from them."""
    graph = _graph()
    for mod, deps in graph.items():  # a module importing its own package's __init__ is the package itself
        deps -= {d for d in deps if (mod + ".").startswith(d + ".")}
    assert list(_cycles(graph)) == []


def test_the_architecture_test_sees_a_violation() -> None:
    """The checker resolves relative, function-local and ``from pkg import submodule`` imports (a rule that
    cannot see an import would pass vacuously)."""
    here = SRC / "cli" / "_app.py"
    mods = {m for _, m in _imports(here)}
    assert "replaylens.errors" in mods and "replaylens._imports" in mods
    assert _layer("replaylens.paper.experiments.memory") == "paper"
    assert _layer("replaylens.memory.stores._chroma") == "memory.stores" and _layer("replaylens.memory") == "memory"
    assert _own_layer(SRC / "memory" / "operations" / "_ops.py") == "memory.operations"
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert list(_cycles(graph)) == [["a", "b", "c"]]


def test_public_all_matches_exports() -> None:
    for name in replaylens.__all__:
        assert hasattr(replaylens, name), f"replaylens.__all__ names missing {name}"
    # ("@py_builtins"/"@pytest_ar": pytest's assertion rewriting of the package behind the pytest11 plugin)
    public = {n for n in dir(replaylens) if not n.startswith(("_", "@"))}
    subpackages = {m.name for m in pkgutil.iter_modules(replaylens.__path__)}
    assert public - set(replaylens.__all__) - subpackages == set()


def _public_packages() -> list[str]:
    out = []
    for m in pkgutil.walk_packages(replaylens.__path__, "replaylens."):
        if m.ispkg and not any(p.startswith("_") for p in m.name.split(".")[1:]):
            out.append(m.name)
    return sorted(out)


@pytest.mark.parametrize("name", _public_packages())
def test_subpackage_all_is_exact(name: str) -> None:
    mod = importlib.import_module(name)
    names = getattr(mod, "__all__", None)
    if name == "replaylens.paper":
        return  # the wing's root only documents its subpackages
    assert names is not None, f"{name} has no __all__"
    for n in names:
        assert hasattr(mod, n), f"{name}.__all__ lists missing {n}"
    assert len(set(names)) == len(names)


def test_no_global_numpy_random() -> None:
    banned = ("np.random.seed(", "np.random.rand(", "np.random.randn(", "np.random.randint(", "np.random.choice(",
              "np.random.shuffle(", "np.random.permutation(", "np.random.random(", "np.random.uniform(",
              "np.random.normal(", "import random\n")
    for path in SRC.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for b in banned:
            assert b not in text, f"{path}: uses global randomness ({b.strip()})"
