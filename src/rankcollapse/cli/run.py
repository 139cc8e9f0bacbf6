"""`rankcollapse run NAME|all`: run an experiment (or all of them) and build its report.

    rankcollapse run toy-collapse --preset quick --set seeds=[0,1,2] --jobs 2
    rankcollapse run all --backend ray --jobs 2          # a local Ray instance with 2 CPUs
    rankcollapse run dong2021-circle --preset paper --dry-run   # units and estimated time

Prints a progress bar (units done, time left), the claims table and the report's path.
A killed run resumes when the same command is given again; a second run of the same config
waits for the first and reuses its units.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rankcollapse.cli._common import add_figures_option
from rankcollapse.presets import DEFAULT_PRESET, PRESET_NAMES
from rankcollapse.sizes import bounds_text

if TYPE_CHECKING:
    from rich.progress import TaskID


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "run",
        description="Run a registered experiment (see `rankcollapse list`), or 'all' of them. "
        "Config = preset, then --config FILE.yaml, then each --set key=value (YAML values, "
        "dotted keys for nested fields). Finished units are kept: rerunning resumes.",
        epilog="Every size has one bound wherever it enters (--set, a YAML file, simulate's "
        f"flags, Python): {bounds_text()}; sizes that would not fit in memory are refused "
        "before anything is allocated.",
    )
    parser.add_argument("name", help="experiment name, or 'all'")
    parser.add_argument(
        "--preset",
        default=DEFAULT_PRESET,
        choices=PRESET_NAMES,
        help=f"preset: {', '.join(PRESET_NAMES)}; every experiment has quick and paper, a "
        f"few have more (`rankcollapse list`) (default: {DEFAULT_PRESET})",
    )
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
        help="override a config key, e.g. --set n_layers=4 seeds=[0,1]",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output folder (default: results/NAME/<config hash>/; with 'all': the results root)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="units at once: processes, or Ray CPUs; each CPU unit runs on one torch thread "
        "(results do not depend on --jobs), units on a GPU share it (default: one per core; "
        "one on a GPU); capped by this machine's cores and memory (about 350 MB per worker), "
        "said when it caps",
    )
    parser.add_argument(
        "--backend",
        choices=("process", "ray"),
        default="process",
        help="where units run: this machine's processes, or Ray tasks; ray needs "
        'pip install -e ".[ray]" (default: process)',
    )
    parser.add_argument(
        "--address",
        default=None,
        help="with --backend ray: the address of a running Ray cluster to join, e.g. "
        "HOST:6379 (default: start a local Ray with --jobs CPUs)",
    )
    _add_dry_run_options(parser)
    add_figures_option(parser)
    parser.set_defaults(func=run)


def _add_dry_run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the units, their count and the estimated time per backend and workers, "
        "from stored units and a timed sample of units; write nothing, run nothing else",
    )
    parser.add_argument(
        "--sample-units",
        type=int,
        default=2,
        metavar="N",
        help="with --dry-run: units to time per experiment (default: 2)",
    )
    parser.add_argument(
        "--sample-seconds",
        type=float,
        default=30.0,
        metavar="S",
        help="with --dry-run: seconds spent timing units, shared by the experiments; a unit "
        "still running then is stopped and its estimates are lower bounds (default: 30)",
    )


def run(args: argparse.Namespace) -> int:
    from rankcollapse.cli._common import print_failed_findings
    from rankcollapse.cli._console import err_console, notify
    from rankcollapse.errors import ConfigError
    from rankcollapse.experiments import get_experiment
    from rankcollapse.runner import (
        cap_jobs,
        default_jobs,
        execute_all,
        experiments_with_preset,
        parse_overrides,
        plan,
    )
    from rankcollapse.runner.backends import check_address

    if args.jobs is not None and args.jobs < 1:
        raise ConfigError(f"--jobs is {args.jobs}; it must be at least 1 (workers).")
    if args.address and args.backend != "ray":
        raise ConfigError("--address joins a Ray cluster; add --backend ray.")
    check_address(args.address)
    if args.sample_units < 0:
        raise ConfigError(
            f"--sample-units is {args.sample_units}; it must be 0 or more (units timed per "
            "experiment by --dry-run)."
        )
    if not args.sample_seconds >= 0:
        raise ConfigError(
            f"--sample-seconds is {args.sample_seconds:g}; it must be 0 or more (seconds spent "
            "timing units by --dry-run)."
        )
    keys = [] if args.name == "all" else list(get_experiment(args.name).config.model_fields)
    overrides = parse_overrides(args.overrides, keys)
    here = not args.address  # a cluster's devices are not visible from here
    if args.name == "all":
        root = args.out or Path("results")
        names = experiments_with_preset(args.preset)
        plans = [
            plan(n, args.preset, overrides, args.config, results_root=root, devices_here=here)
            for n in names
        ]
    else:
        plans = [plan(args.name, args.preset, overrides, args.config, args.out, devices_here=here)]
    if args.jobs is None:
        args.jobs = default_jobs(p.config for p in plans)
    args.jobs, capped = cap_jobs(args.jobs, remote=args.address is not None)
    if capped:
        notify(capped + " (results do not depend on --jobs).")
    if args.dry_run:  # writes nothing: no folder is claimed
        return print_dry_run(plans, args)
    # Every config is valid and every unit list built; `execute_all` claims every folder
    # (writable and ours) before any work starts. One set of workers runs the units of every
    # experiment; a bar per experiment.
    with _progress_bar(err_console) as progress:
        results = execute_all(
            plans,
            args.jobs,
            progress,
            backend=args.backend,
            address=args.address,
            notify=notify,
            figures=args.figures,
        )
    for result in results:
        print_claims(result)
        print_failed_findings(result)
    return 0


def print_dry_run(plans: list, args: argparse.Namespace) -> int:
    """A line per experiment as soon as its units are counted and timed, then the units
    (one experiment) and the estimated wall time per (backend, workers) with the sum."""
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    from rankcollapse.cli._console import console, duration
    from rankcollapse.files import canonical_json
    from rankcollapse.runner import dry_run, startup_seconds

    workers = max(2, args.jobs)
    runs = []
    spent = 0.0
    for k, p in enumerate(plans):
        budget = (args.sample_seconds - spent) / (len(plans) - k)  # what one left unused, rolls on
        start = time.perf_counter()
        runs.append(r := dry_run(p, args.sample_units, budget))
        spent += time.perf_counter() - start
        console.print(
            Text(
                f"{r.name}: {_counts(r)}; {duration(r.wall_seconds(1), r.lower_bound)} on 1 "
                f"worker, {duration(r.wall_seconds(workers), r.lower_bound)} on {workers}"
            )
        )
    setups = [("process", 1), ("process", workers)]
    if args.backend == "ray":
        setups.append(("ray", workers))
    startup = {(b, k): startup_seconds(b, k, args.address) for b, k in setups}
    if len(runs) == 1:
        table = Table(title=f"{runs[0].name}: units", title_justify="left")
        for column in ("unit", "seconds", "source"):
            table.add_column(column, overflow="fold")
        for unit, seconds, source in zip(
            runs[0].units, runs[0].seconds, runs[0].source, strict=True
        ):
            table.add_row(escape(canonical_json(unit)), f"{seconds:.3g}", source)
        console.print(table)
    table = Table(title="estimated wall time of the units still to run", title_justify="left")
    table.add_column("experiment")
    table.add_column("units (stored, sampled now)")
    for backend, k in setups:
        table.add_column(f"{backend}, {k} worker{'s' * (k > 1)}", justify="right")
    for r in runs:
        sampled = r.source.count("sampled") + r.source.count("stopped")
        counts = f"{len(r.units)} ({r.source.count('stored')}, {sampled})"
        table.add_row(
            r.name, counts, *(duration(r.wall_seconds(k), r.lower_bound) for _, k in setups)
        )
    # Workers start once per command (one Ray session serves every experiment).
    totals = [sum(r.wall_seconds(k) for r in runs) + startup[(b, k)] for b, k in setups]
    bound = any(r.lower_bound for r in runs)
    n_units = sum(len(r.units) for r in runs)
    table.add_row(
        "[bold]all[/]" if len(runs) > 1 else "with start-up",
        str(n_units),
        *(duration(t, bound) for t in totals),
    )
    console.print(table)
    console.print(
        "start-up (measured): "
        + ", ".join(f"{b} x{k}: {startup[(b, k)]:.1f} s" for b, k in setups)
        + ". Nothing was written: the real run computes the sampled units again."
        + (" >= marks a lower bound (a sampled unit outlasted --sample-seconds)." if bound else ""),
        highlight=False,
    )
    for r in runs:
        if r.unseen:
            more = f"; and {len(r.unseen) - 3} more" if len(r.unseen) > 3 else ""
            console.print(
                Text(
                    f"{r.name}: no stored or sampled unit has {'; '.join(r.unseen[:3])}{more}; "
                    "those units are estimated from units that differ there (more "
                    "--sample-units and --sample-seconds cover more)."
                )
            )
    return 0


def _counts(r) -> str:
    """'12 units (2 stored, 1 sampled)', with 'stopped' units counted where there are any."""
    counts = f"{len(r.units)} units ({r.source.count('stored')} stored, "
    counts += f"{r.source.count('sampled')} sampled"
    return counts + (f", {r.source.count('stopped')} stopped)" if r.lower_bound else ")")


class _progress_bar:
    """Rich progress bars (on stderr), one per experiment, driven by the runner's
    (name, done, total) callback; where stderr is not a terminal, a line per unit done
    (`ProgressLines`)."""

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
        from rankcollapse.cli._console import ProgressLines

        self.tasks: dict[str, TaskID] = {}
        self.lines = ProgressLines()

    def __enter__(self):
        self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.stop()

    def __call__(self, name: str, done: int, total: int) -> None:
        if name not in self.tasks:
            self.tasks[name] = self.progress.add_task(name, total=total, completed=done)
        self.progress.update(self.tasks[name], completed=done)
        self.lines(name, done, total, "units")


def print_claims(result) -> None:
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    from rankcollapse.cli._console import console
    from rankcollapse.experiments import Summary, tally
    from rankcollapse.report import format_value

    table = Table(title=f"{result.name}: findings and checks", title_justify="left")
    for column in ("kind", "id", "claim", "measured", "expected", "result"):
        table.add_column(column, overflow="fold")
    summary = Summary(claims=result.claims)  # not result.summary: its tables are not read
    colours = {"PASS": "green", "FAIL": "red", "NOT TESTED": "yellow"}
    for claim in summary.findings + summary.beyond + summary.checks:
        verdict = f"[{colours[claim.verdict]}]{claim.verdict}[/]"
        if claim.untested:
            verdict += f" ({escape(claim.untested)})"
        cells = (claim.kind, claim.id, claim.text, format_value(claim.measured), claim.expected)
        table.add_row(*map(escape, cells), verdict)
    console.print(table)
    console.print(
        escape(tally(summary.claims).text())
        + f"; {result.n_computed} units run, {result.n_cached} reused."
    )
    console.print(Text(f"report: {result.report_path}"))
