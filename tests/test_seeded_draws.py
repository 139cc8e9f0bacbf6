"""Every random draw in the tests is seeded, so the suite passes in any order: a torch draw
takes a `generator=` (the `rng` fixture or its own `torch.Generator().manual_seed(...)`), and a
global-stream draw (torch, numpy or `random`) only follows a seed set in the same function."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
TORCH_DRAWS = {"rand", "randn", "randint", "randperm", "normal", "bernoulli", "multinomial",
               "rand_like", "randn_like", "randint_like", "poisson"}  # fmt: skip
GLOBAL_DRAWS = {"rand", "randn", "randint", "normal", "uniform", "choice", "permutation",
                "shuffle", "random", "random_sample", "sample"}  # fmt: skip
SEEDS = {"torch.manual_seed", "np.random.seed", "numpy.random.seed", "random.seed"}


def _name(node: ast.expr) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def unseeded_draws(source: str) -> list[tuple[int, str]]:
    """(line, call) of each draw from a global stream in a function that seeds none."""
    found = []
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, ast.FunctionDef):
            continue
        calls = [c for c in ast.walk(function) if isinstance(c, ast.Call)]
        if any(_name(c.func) in SEEDS for c in calls):
            continue
        for call in calls:
            name = _name(call.func)
            head, _, last = name.rpartition(".")
            torch_draw = head == "torch" and last in TORCH_DRAWS
            if torch_draw and any(k.arg == "generator" for k in call.keywords):
                continue
            if torch_draw or (
                head in ("np.random", "numpy.random", "random") and last in GLOBAL_DRAWS
            ):
                found.append((call.lineno, name))
    return found


def test_the_scan_finds_an_unseeded_draw_and_passes_a_seeded_one():
    assert unseeded_draws("def f():\n    x = torch.randn(3)\n") == [(2, "torch.randn")]
    assert unseeded_draws("def f():\n    np.random.choice(3)\n") == [(2, "np.random.choice")]
    assert unseeded_draws("def f(rng):\n    torch.randn(3, generator=rng)\n") == []
    assert unseeded_draws("def f():\n    torch.manual_seed(0)\n    torch.rand(2)\n") == []


def test_every_draw_in_the_tests_is_seeded():
    unseeded = [f"{path.relative_to(TESTS)}:{line}: {name}"
                for path in sorted(TESTS.rglob("*.py"))
                for line, name in unseeded_draws(path.read_text())]  # fmt: skip
    assert not unseeded, f"seed these draws (the rng fixture or a Generator): {unseeded}"
