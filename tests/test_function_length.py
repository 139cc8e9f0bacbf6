"""No function in src/rankcollapse over MAX_LINES lines (def line to last line, docstring
included), so each reads at a glance; a longer one is split into named steps. Only a table
(a function that is one literal of data) may be longer, and only when listed below."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "rankcollapse"
MAX_LINES = 80
# Tables allowed over MAX_LINES: "path/relative/to/src/rankcollapse.py:function" -> why.
# Only a function whose body is a table of data belongs here; none is today.
TABLES: dict[str, str] = {}


def long_functions(root: Path = SRC) -> dict[str, int]:
    """'module.py:name' -> its line count, for every function under `root` (nested ones and
    methods too) over MAX_LINES lines."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_LINES:
                    found[f"{path.relative_to(root).as_posix()}:{node.name}"] = lines
    return found


def test_no_function_over_max_lines():
    over = {name: n for name, n in long_functions().items() if name not in TABLES}
    assert not over, f"functions over {MAX_LINES} lines (split each into named steps): {over}"


def test_every_allowed_table_is_still_long():
    stale = sorted(set(TABLES) - set(long_functions()))
    assert not stale, f"allowlisted but no longer over {MAX_LINES} lines (remove them): {stale}"


def test_the_walk_finds_a_long_method_and_spares_a_short_one(tmp_path):
    """The count runs from the def line to the last line: MAX_LINES + 1 lines is too long."""
    body = lambda n: "\n".join(f"        x{i} = {i}" for i in range(n - 1))
    source = f"class C:\n    def long(self):\n{body(MAX_LINES + 1)}\n"
    source += f"    def short(self):\n{body(MAX_LINES)}\n"
    (tmp_path / "m.py").write_text(source)
    assert long_functions(tmp_path) == {"m.py:long": MAX_LINES + 1}
