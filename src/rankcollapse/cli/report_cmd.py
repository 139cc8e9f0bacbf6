"""`rankcollapse report DIR`: rebuild a run's report from its stored results (no recompute)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report",
        help="rebuild report.html, claims and figures of a finished run from its results.csv",
        description="Rebuild DIR/report.html, claims.json, figures/ and tables/ from the stored "
        "DIR/results.csv and config.yaml, without running any unit.",
    )
    parser.add_argument("dir", type=Path, help="the run folder (results/NAME/<config hash>/)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rankcollapse.cli._console import console
    from rankcollapse.report import build_report

    report = build_report(args.dir)
    n_passed = sum(claim.passed for claim in report.summary.claims)
    console.print(f"{n_passed} of {len(report.summary.claims)} claims passed.")
    console.print(f"report: {report.path}", highlight=False, soft_wrap=True)
    return 0
