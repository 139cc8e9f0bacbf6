"""`rankcollapse list`: every registered experiment with its description and presets."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "list",
        help="list the experiments with a one-line description and their presets",
        description="List every registered experiment (run one with `rankcollapse run NAME`).",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.table import Table

    from rankcollapse.cli._console import console
    from rankcollapse.experiments import experiment_names, get_experiment

    table = Table(title="experiments", title_justify="left")
    for column in ("name", "description", "presets"):
        table.add_column(column, overflow="fold")
    for name in experiment_names():
        exp = get_experiment(name)
        table.add_row(name, exp.description, ", ".join(exp.presets))
    console.print(table)
    return 0
