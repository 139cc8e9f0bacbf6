"""No module of the package can run code from a file: no pickle loads, no `torch.load` without
`weights_only=True`, no `yaml.load` without a safe loader, no eval/exec."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "rankcollapse"
MODULES = sorted(SRC.rglob("*.py"))
SAFE_YAML_LOADERS = {"SafeLoader", "CSafeLoader", "BaseLoader", "CBaseLoader"}


def dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


def keyword(call: ast.Call, name: str) -> ast.AST | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def unsafe_calls(tree: ast.AST) -> list[str]:
    """`file:line name` of every call that can execute what it reads."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("pickle", "dill", "marshal"):
            loads = [a.name for a in node.names if "load" in a.name or a.name == "Unpickler"]
            found += [f"{node.lineno} from {node.module} import {n}" for n in loads]
        if not isinstance(node, ast.Call):
            continue
        name = dotted(node.func)
        bad = name in ("eval", "exec", "builtins.eval", "builtins.exec")
        bad |= name.split(".")[0] in ("pickle", "dill", "marshal", "cloudpickle") and (
            "load" in name or name.endswith("Unpickler")
        )
        bad |= name in ("np.load", "numpy.load") and not (
            isinstance(keyword(node, "allow_pickle"), ast.Constant)
            and keyword(node, "allow_pickle").value is False
        )
        if name == "torch.load":
            weights_only = keyword(node, "weights_only")
            bad |= not (isinstance(weights_only, ast.Constant) and weights_only.value is True)
        if name in ("yaml.load", "yaml.load_all"):
            loader = keyword(node, "Loader") or (node.args[1] if len(node.args) > 1 else None)
            bad |= dotted(loader).split(".")[-1] not in SAFE_YAML_LOADERS if loader else True
        bad |= name in (
            "yaml.unsafe_load",
            "yaml.full_load",
            "pd.read_pickle",
            "pandas.read_pickle",
        )
        if bad:
            found.append(f"{node.lineno} {name}")
    return found


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_module_never_loads_code_from_data(path):
    assert unsafe_calls(ast.parse(path.read_text())) == []


@pytest.mark.parametrize(
    "source",
    [
        "pickle.loads(b)",
        "import pickle as p\npickle.load(f)",
        "from pickle import loads",
        "torch.load(path)",
        "torch.load(path, weights_only=False)",
        "yaml.load(text)",
        "yaml.load(text, Loader=yaml.Loader)",
        "yaml.unsafe_load(text)",
        "eval(text)",
        "exec(code)",
        "np.load(path, allow_pickle=True)",
        "pd.read_pickle(path)",
    ],
)
def test_the_scan_finds_each_unsafe_loader(source):
    assert unsafe_calls(ast.parse(source))


def test_the_scan_allows_the_safe_forms():
    safe = (
        "torch.load(p, map_location='cpu', weights_only=True)\nyaml.safe_load(t)\n"
        "yaml.load(t, Loader=yaml.SafeLoader)\npickle.dumps(x)\njson.loads(t)\n"
        "np.load(p, allow_pickle=False)"
    )
    assert unsafe_calls(ast.parse(safe)) == []
