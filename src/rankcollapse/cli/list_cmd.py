"""`rankcollapse list`: every registered experiment with its description and presets, read
from the generated catalogue (no experiment module is imported) and printed as plain columns
(no rich: the command answers in about the interpreter's own start-up)."""

from __future__ import annotations

from collections.abc import Sequence
import argparse
import shutil
import sys
import textwrap


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "list",
        description="List every registered experiment (run one with `rankcollapse run NAME`).",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rankcollapse.cli.catalog import read_catalog

    experiments = read_catalog()["experiments"]
    rows = [(name, ", ".join(e["presets"]), e["description"]) for name, e in experiments.items()]
    try:
        print(columns(("name", "presets", "description"), rows, _width()), flush=True)
    except BrokenPipeError:  # a reader that went away early (`| head`), as the consoles do
        from rankcollapse.process import drop_output

        drop_output(sys.stdout)
    return 0


def columns(header: tuple[str, ...], rows: Sequence[tuple[str, ...]], width: int) -> str:
    """`rows` under `header` in left-aligned columns two spaces apart, the last column wrapped
    to `width` (at least 20 characters of it).

    Example:
        >>> print(columns(("name", "text"), [("a", "one two three four five six")], 26))
        name  text
        a     one two three four
              five six
    """
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header) - 1)]
    indent = sum(w + 2 for w in widths)
    lines = []
    for row in [header, *rows]:
        start = "".join(cell.ljust(w + 2) for cell, w in zip(row[:-1], widths, strict=True))
        wrapped = textwrap.wrap(row[-1], max(width - indent, 20)) or [""]
        lines.append(start + wrapped[0])
        lines += [" " * indent + more for more in wrapped[1:]]
    return "\n".join(lines)


def _width() -> int:
    """The terminal's width; a wide page when piped (as the rich console's, `cli._console`)."""
    return shutil.get_terminal_size().columns if sys.stdout.isatty() else 200
