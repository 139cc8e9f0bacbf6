"""`rankcollapse list`: every registered experiment with its description and presets, read
from the generated catalogue (no experiment module is imported)."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "list",
        description="List every registered experiment (run one with `rankcollapse run NAME`).",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.table import Table

    from rankcollapse.cli._console import console
    from rankcollapse.cli.catalog import read_catalog

    table = Table(title="experiments", title_justify="left")
    for column in ("name", "description", "presets"):
        table.add_column(column, overflow="fold")
    for name, entry in read_catalog()["experiments"].items():
        table.add_row(name, entry["description"], ", ".join(entry["presets"]))
    console.print(table)
    return 0
