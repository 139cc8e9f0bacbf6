"""`rankcollapse run NAME|all`: run an experiment (or all of them) and build its report.

    rankcollapse run toy-collapse --preset quick --set seeds=[0,1,2] --jobs 2

Prints a progress bar (units done, time left), the claims table and the report's path.
A killed run resumes when the same command is given again.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run an experiment (or 'all') and write its results and report",
        description="Run a registered experiment (see `rankcollapse list`), or 'all' of them. "
        "Config = preset, then --config FILE.yaml, then each --set key=value (YAML values, "
        "dotted keys for nested fields). Finished units are kept: rerunning resumes.",
    )
    parser.add_argument("name", help="experiment name, or 'all'")
    parser.add_argument("--preset", default="quick", help="preset: quick or paper (default: quick)")
    parser.add_argument(
        "--config", type=Path, default=None, help="YAML file merged over the preset"
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="extend",
        nargs="+",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key, e.g. --set depth=4 seeds=[0,1]",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output folder (default: results/NAME/<config hash>/; with 'all': the results root)",
    )
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default: 1)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rankcollapse.cli._console import err_console
    from rankcollapse.errors import ConfigError
    from rankcollapse.experiments import experiment_names
    from rankcollapse.runner import execute, parse_overrides, plan

    if args.jobs < 1:
        raise ConfigError(f"--jobs is {args.jobs}; it must be at least 1 (worker processes).")
    overrides = parse_overrides(args.overrides)
    if args.name == "all":
        root = args.out or Path("results")
        names = experiment_names()
        plans = [plan(n, args.preset, overrides, args.config, results_root=root) for n in names]
    else:
        plans = [plan(args.name, args.preset, overrides, args.config, out=args.out)]
    # Every config is valid and every unit list built: only now does work start.
    for p in plans:
        with _progress_bar(err_console) as progress:
            result = execute(p, args.jobs, progress)
        print_claims(result)
    return 0


class _progress_bar:
    """A rich progress bar (on stderr) driven by the runner's (name, done, total) callback."""

    def __init__(self, console) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("units"),
            TimeElapsedColumn(),
            TextColumn("left"),
            TimeRemainingColumn(),
            console=console,
        )
        self.task = None

    def __enter__(self):
        self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.stop()

    def __call__(self, name: str, done: int, total: int) -> None:
        if self.task is None:
            self.task = self.progress.add_task(name, total=total, completed=done)
        self.progress.update(self.task, completed=done)


def print_claims(result) -> None:
    from rich.markup import escape
    from rich.table import Table

    from rankcollapse.cli._console import console
    from rankcollapse.report import format_value

    table = Table(title=f"{result.name}: claims", title_justify="left")
    for column in ("id", "claim", "measured", "expected", "result"):
        table.add_column(column, overflow="fold")
    for claim in result.claims:
        verdict = "[green]PASS[/]" if claim.passed else "[red]FAIL[/]"
        cells = (claim.id, claim.text, format_value(claim.measured), claim.expected)
        table.add_row(*map(escape, cells), verdict)
    console.print(table)
    n_passed = sum(claim.passed for claim in result.claims)
    console.print(
        f"{n_passed} of {len(result.claims)} claims passed; {result.n_computed} units run, "
        f"{result.n_cached} reused."
    )
    console.print(f"report: {result.report_path}", highlight=False, soft_wrap=True)
