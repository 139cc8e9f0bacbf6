"""`rankcollapse reproduce`: the reproduction table of every paper finding from stored runs."""

from __future__ import annotations

import argparse
from pathlib import Path

from rankcollapse.presets import PRESET_NAMES


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "reproduce",
        description="Read the newest complete run of every experiment under --results and write "
        "reproduction.md and reproduction.html (reproduction-PRESET.md/.html with --preset): one "
        "row per finding with the paper's statement and where it appears, our measured value, "
        "the preset and PASS / FAIL / NOT TESTED (with its reason) / not run; the project's own "
        "conjectures are listed apart. A file of that name that reproduce did not write is "
        "never replaced; a folder with no stored run (of --preset, when given) is refused.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--preset",
        choices=PRESET_NAMES,
        default=None,
        help="take only runs of this preset (default: paper where stored, else cpu, else quick)",
    )
    parser.add_argument("--results", type=Path, default=Path("results"), help="results folder")
    parser.add_argument(
        "--out", type=Path, default=None, help="where to write the two files (default: --results)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.text import Text

    from rankcollapse.cli._console import console, notify
    from rankcollapse.cli._output import output_folder
    from rankcollapse.errors import InputError
    from rankcollapse.report.reproduction import checked_table, verdict_counts, write_reproduction

    out, output = args.results, None  # beside the runs it reads, by default
    if args.out is not None and args.out.resolve() != args.results.resolve():
        if not args.results.is_dir():
            raise InputError(
                f"results folder {str(args.results)!r} does not exist; pass the folder "
                "`rankcollapse run` wrote to (default: results/)."
            )
        output = output_folder(args.out, args.out, "reproduce")
    table = checked_table(args.results, args.preset, notify)
    out = output.claim() if output is not None else out
    stem = "reproduction" if args.preset is None else f"reproduction-{args.preset}"
    _, markdown, html = write_reproduction(args.results, out, args.preset, stem=stem, table=table)
    paper, beyond = verdict_counts(table), verdict_counts(table, "beyond")
    console.print(
        f"Paper findings: {paper['PASS']} pass, {paper['FAIL']} fail, "
        f"{paper['NOT TESTED']} not tested; beyond the papers: {beyond['PASS']} pass, "
        f"{beyond['FAIL']} fail, {beyond['NOT TESTED']} not tested; "
        f"{int((table['result'] == 'not run').sum())} experiments not run."
    )
    console.print(Text(f"wrote {markdown} and {html}"))
    return 0
