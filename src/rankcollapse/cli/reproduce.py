"""`rankcollapse reproduce`: the reproduction table of every paper finding from stored runs."""

from __future__ import annotations

import argparse
from pathlib import Path

from rankcollapse.presets import PRESETS


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "reproduce",
        help="one table of every paper finding beside our measurement, from stored runs",
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
    from rich.text import Text

    from rankcollapse.cli._console import console, notify
    from rankcollapse.errors import InputError
    from rankcollapse.files import claim_output
    from rankcollapse.report import write_reproduction

    out = args.results  # beside the runs it reads, by default
    if args.out is not None and args.out.resolve() != args.results.resolve():
        if not args.results.is_dir():
            raise InputError(f"results folder {str(args.results)!r} does not exist; pass the "
                             "folder `rankcollapse run` wrote to (default: results/).")  # fmt: skip
        out = claim_output(args.out, "reproduce")
    table, markdown, html = write_reproduction(args.results, out, args.preset, notify)
    counts = table["result"].value_counts()
    console.print(
        f"{counts.get('PASS', 0)} findings pass, {counts.get('FAIL', 0)} fail, "
        f"{counts.get('not run', 0)} experiments not run."
    )
    console.print(Text(f"wrote {markdown} and {html}"))
    return 0
