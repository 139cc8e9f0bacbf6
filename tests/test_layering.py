"""Imports point down the layering only, and never into another package's private module
(docs/architecture.md)."""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "rankcollapse"
LAYER = {
    "errors": 0, "files": 0, "seeds": 0, "devices": 0, "presets": 0, "_validation": 0, "data": 0,
    "lazy": 0, "variants": 0, "process": 0, "reading": 0, "sizes": 0, "frames": 0,
    "metrics": 1, "masks": 1,
    "nets": 2, "hf": 2, "lens": 2,
    "paths": 3, "theory": 3, "measure": 3,
    "tasks": 4, "train": 4,
    "plot": 5, "tracking": 5,
    "experiments": 6,
    "runner": 7, "report": 7, "cli": 7,
}  # fmt: skip


def test_every_top_level_module_and_package_has_a_floor():
    """A new top-level module must be placed on a floor here (and in docs/architecture.md)."""
    found = {
        path.name.removesuffix(".py")
        for path in SRC.iterdir()
        if (path.suffix == ".py" or (path / "__init__.py").is_file()) and path.name != "__init__.py"
    }
    assert found - set(LAYER) == set(), f"give {sorted(found - set(LAYER))} a floor in LAYER"
    assert set(LAYER) - found == set(), f"LAYER names {sorted(set(LAYER) - found)}: gone"


def test_the_architecture_doc_names_every_top_level_module():
    doc = (SRC.parents[1] / "docs" / "architecture.md").read_text()
    house = doc[
        doc.index("```\nsrc/rankcollapse/") : doc.index("```", doc.index("src/rankcollapse/"))
    ]
    for name in LAYER:
        assert name + ("/" if (SRC / name).is_dir() else ".py") in house, name


def imported_modules(source: str) -> set[str]:
    """Every rankcollapse module (or name) a file imports, at any depth of the file, dotted."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.split(".")[0] == "rankcollapse"}


def package(path_or_name: Path | str) -> str:
    """The layer name a file or a dotted module name belongs to."""
    if isinstance(path_or_name, Path):
        return path_or_name.relative_to(SRC).parts[0].removesuffix(".py")
    parts = path_or_name.split(".")
    return parts[1] if len(parts) > 1 else ""


def imported_packages(path: Path) -> set[str]:
    return {package(name) for name in imported_modules(path.read_text())} & set(LAYER)


def private_imports(source: str, own: str) -> set[str]:
    """Imports of a `_private` module of a package other than `own`."""
    modules = {".".join(name.split(".")[:3]) for name in imported_modules(source)}
    return {
        name
        for name in modules
        if package(name) != own and name.count(".") == 2 and name.split(".")[2].startswith("_")
    }


MODULES = sorted(p for p in SRC.rglob("*.py") if package(p) in LAYER)


def module_id(path: Path) -> str:
    return str(path.relative_to(SRC))


@pytest.mark.parametrize("path", MODULES, ids=module_id)
def test_module_imports_only_its_own_layer_or_below(path):
    own = package(path)
    upward = {pkg for pkg in imported_packages(path) if LAYER[pkg] > LAYER[own]}
    assert upward == set(), f"{own} (layer {LAYER[own]}) imports {upward}"


@pytest.mark.parametrize("path", MODULES, ids=module_id)
def test_module_imports_no_private_module_of_another_package(path):
    found = private_imports(path.read_text(), package(path))
    assert found == set(), (
        f"{module_id(path)} imports private {sorted(found)}; import the package's public "
        "names (its __init__ re-exports them)"
    )


def test_the_private_import_check_finds_cross_package_imports_only():
    source = (
        "from rankcollapse.experiments._registry import merge_values\n"
        "from rankcollapse.runner import _store\n"
        "import rankcollapse.metrics._norms\n"
        "from rankcollapse.report._html import x\n"
        "from rankcollapse.experiments import get_experiment\n"
    )
    assert private_imports(source, "report") == {
        "rankcollapse.experiments._registry",
        "rankcollapse.runner._store",
        "rankcollapse.metrics._norms",
    }


@pytest.mark.parametrize("path", [p for p in MODULES if package(p) == "report"], ids=module_id)
def test_report_never_imports_the_runner(path):
    assert "runner" not in imported_packages(path), "runner uses report, never the reverse"


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_graph() -> dict[str, set[str]]:
    """Module -> the modules it imports (at any depth of the file), package __init__s left out:
    a package re-exports its modules, which is no circle."""
    paths = {module_name(p): p for p in SRC.rglob("*.py") if p.name != "__init__.py"}
    graph = {}
    for name, path in paths.items():
        imported = imported_modules(path.read_text())
        graph[name] = {m for m in imported if m in paths and m != name}
    return graph


def cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle of `graph` (a path that comes back to its start), or []."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> list[str]:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt, [*path, nxt])):
                return found
        state[node] = 2
        return []

    for start in sorted(graph):
        if start not in state and (found := visit(start, [start])):
            return found
    return []


def test_no_module_imports_itself_back_through_others():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) == []
    assert cycle(module_graph()) == [], "an import circle: move the shared part down a module"


def test_no_module_imports_a_private_name_of_another_module():
    """`from rankcollapse.x import _name` reaches past x's public face (its own helpers aside)."""
    found = []
    for path in MODULES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rankcollapse"):
                names = [a.name for a in node.names if a.name.startswith("_")]
                found += [f"{module_id(path)}: {node.module}.{n}" for n in names if n[1] != "_"]
    assert found == []
