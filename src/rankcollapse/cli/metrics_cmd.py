"""`rankcollapse metrics`: list every registered metric with its formula and reference."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "metrics",
        description="List every registered metric: its name (for --metrics), whether it reads "
        "hidden states or attention, its formula and its reference. State metrics marked "
        "'default' are computed when --metrics is not given. 'floor: yes' marks the metrics "
        "that vanish as tokens collapse; only those are flagged at the floor of the dtype.",
    )
    parser.add_argument(
        "--kind",
        choices=["states", "attention"],
        default=None,
        help="show only the metrics of this kind (default: all)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.markup import escape
    from rich.table import Table

    from rankcollapse.cli._console import console
    from rankcollapse.metrics import DEFAULT_METRICS, METRICS

    table = Table(title="rankcollapse metrics", show_lines=True)
    table.add_column("name", style="bold", no_wrap=True)
    table.add_column("kind", no_wrap=True)
    table.add_column("floor", no_wrap=True)
    table.add_column("formula")
    table.add_column("reference")
    for name, info in METRICS.items():
        if args.kind is not None and info.kind != args.kind:
            continue
        kind = f"{info.kind} (default)" if name in DEFAULT_METRICS else info.kind
        floor = "yes" if info.vanishes else "never"
        table.add_row(name, kind, floor, escape(info.formula), escape(info.reference))
    console.print(table)
    return 0
