"""`rankcollapse reproduce`: the reproduction table of every paper finding from stored runs."""

from __future__ import annotations

import argparse
from pathlib import Path

from rankcollapse.presets import PRESETS


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "reproduce",
        description="Read the newest complete run of every experiment under --results and write "
        "reproduction.md and reproduction.html: one row per finding with the paper's statement "
        "and where it appears, our measured value, the preset and PASS / FAIL / not run.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--preset",
        choices=PRESETS,
        default=None,
        help="take only runs of this preset (default: paper where stored, else quick)",
    )
    parser.add_argument("--results", type=Path, default=Path("results"), help="results folder")
    parser.add_argument(
        "--out", type=Path, default=None, help="where to write the two files (default: --results)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rankcollapse.cli._console import console
    from rankcollapse.report import write_reproduction

    table, markdown, html = write_reproduction(args.results, args.out or args.results, args.preset)
    counts = table["result"].value_counts()
    console.print(
        f"{counts.get('PASS', 0)} findings pass, {counts.get('FAIL', 0)} fail, "
        f"{counts.get('not run', 0)} experiments not run."
    )
    console.print(f"wrote {markdown} and {html}", highlight=False, soft_wrap=True)
    return 0
