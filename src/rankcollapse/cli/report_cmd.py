"""`rankcollapse report DIR`: rebuild a run's report from its stored results (no recompute);
`rankcollapse report --index results/`: an index page of every stored run."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report",
        description="Rebuild DIR/report.html, claims.json, figures/ and tables/ from the stored "
        "DIR/results.csv and config.yaml, without running any unit. With --index, write "
        "DIR/index.html listing every run stored under DIR instead.",
    )
    parser.add_argument(
        "dir",
        type=Path,
        help="the run folder (results/NAME/<config hash>/), or with --index the results folder",
    )
    parser.add_argument(
        "--index",
        action="store_true",
        help="write DIR/index.html: experiment, preset, --set overrides, date, findings (pass, "
        "fail, not tested) and a link per run, then the other commands' outputs (default: off)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.text import Text

    from rankcollapse.cli._common import print_failed_findings
    from rankcollapse.cli._console import console, notify
    from rankcollapse.experiments import tally
    from rankcollapse.process import cpu_cores
    from rankcollapse.reading import shown
    from rankcollapse.report import build_report, write_index

    if args.index:
        console.print(Text(f"index: {shown(write_index(args.dir, notify))}"))
        return 0
    report = build_report(args.dir, notify=notify, processes=cpu_cores())
    console.print(Text(tally(report.summary.claims).text() + "."))
    print_failed_findings(report.summary)
    console.print(Text(f"report: {shown(report.path)}"))
    return 0
