"""Imports point down the layering only (docs/architecture.md)."""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "rankcollapse"
LAYER = {
    "metrics": 1, "masks": 1,
    "nets": 2, "hf": 2,
    "paths": 3, "theory": 3,
    "tasks": 4, "train": 4,
    "plot": 5,
    "experiments": 6,
    "runner": 7, "report": 7, "cli": 7,
}  # fmt: skip


def imported_packages(path: Path) -> set[str]:
    """The rankcollapse subpackages a module imports (at any depth of the file)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "rankcollapse" and len(parts) > 1 and parts[1] in LAYER:
                found.add(parts[1])
    return found


MODULES = sorted(p for p in SRC.rglob("*.py") if p.relative_to(SRC).parts[0] in LAYER)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_module_imports_only_its_own_layer_or_below(path):
    own = path.relative_to(SRC).parts[0]
    upward = {pkg for pkg in imported_packages(path) if LAYER[pkg] > LAYER[own]}
    assert upward == set(), f"{own} (layer {LAYER[own]}) imports {upward}"
