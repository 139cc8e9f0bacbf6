"""Whole-process wall times of what a user types, against `python -c pass`, a hand-written
script and its floor, each with its target and "met" or "missed".

Rows (each a fresh process, timed from start to exit):

    python         python -c pass: the interpreter's own start-up, the yardstick of start-up
    version        rankcollapse --version
    help           rankcollapse --help
    probe --help   rankcollapse probe --help
    list           rankcollapse list
    stored run     rankcollapse run toy-collapse, every unit (and the report) already stored
    probe          rankcollapse probe minilm --variants transformer --random-tokens
                   --n-samples 32 --n-tokens 128 (figures included)
    script         the same measurement written by hand (`hand_probe.py`: an HF forward with
                   output_hidden_states, float64 svdvals metrics per layer, a CSV)
    probe no figs  the probe with --no-figures (the numbers, the table and results.csv)
    floor          Python start-up, importing torch and transformers, loading MiniLM, one forward
                   with hidden states (`hand_probe.py --floor`)
    floor + fig    the floor and the cheapest figure of the probe's panels, PNG and SVG
                   (`hand_probe.py --floor --figure`): matplotlib's own cost of such a figure
    dry run        rankcollapse run all --preset paper --dry-run (once, not repeated; it must
                   also leave no folder behind)

Every row runs `--repeats` times (default 5), its arms interleaved so that a burst of load on
this shared machine hits them alike; the median is printed. With `--before SRC` (another
checkout's `src`, e.g. from `git archive`), every rankcollapse row also runs that tree, paired
with this one, and the ratio after / before is printed: the speed-up under the same load.

Targets (issue 47): version, list, probe --help <= 0.1 s where Python starts in 0.021 s, read
here as <= 0.1 s x (python / 0.021 s), so a loaded or slower machine scales the target as it
scales the interpreter's start-up; a fully stored run <= 0.5 s (scaled alike); probe / script
<= 0.8 (figures included; paired, so no scaling), or, where the floor itself is above 0.8 of
the script and the probe's numbers alone do not beat it, <= the floor (said on its own
line); dry run <= 60 s on two cores. The load
average is printed: on a loaded machine the ratios are only indicative.

Run: .venv/bin/python benchmarks/bench_cli.py [--before /tmp/base/src] [--repeats 5] [--rows ...]
(about 5 minutes on 2 cores, twice that with --before; the dry run adds a minute).
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
MAIN = "import sys; from rankcollapse.cli import main; sys.exit(main())"
PROBE = [
    "probe",
    "minilm",
    "--variants",
    "transformer",
    "--random-tokens",
    "--samples",
    "32",
    "--tokens",
    "128",
]  # fmt: skip  (old option names: both trees)
ROWS = {  # row -> rankcollapse arguments
    "version": ["--version"],
    "help": ["--help"],
    "probe --help": ["probe", "--help"],
    "list": ["list"],
    "stored run": ["run", "toy-collapse"],
    "probe": PROBE,
    "probe no figs": [*PROBE, "--no-figures"],
}
ONCE = {"dry run": ["run", "all", "--preset", "paper", "--dry-run"]}  # timed once
START_UP = 0.021  # seconds of `python -c pass` on the machine the start-up targets are set for
SCALED = {"version": 0.1, "probe --help": 0.1, "list": 0.1, "stored run": 0.5}  # s at START_UP
RATIOS = {("probe", "script"): 0.8}  # (numerator row, denominator row): at most
SHOWN = [("probe no figs", "script"), ("probe no figs", "floor"), ("probe", "floor + fig")]
DRY_RUN_SECONDS = 60.0


def wall(argv: list[str], src: Path, cwd: Path) -> float:
    """Seconds from the start of `argv` (a fresh interpreter with `src` first) to its exit."""
    env = {**os.environ, "PYTHONPATH": str(src), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1"}  # fmt: skip
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)  # fmt: skip
    return time.perf_counter() - start


def rankcollapse(args: list[str], out: Path) -> list[str]:
    """The command line, with a fresh --out for a probe (so no run reuses another's folder)."""
    extra = ["--out", str(out / f"probe-{time.monotonic_ns()}")] if args[0] == "probe" else []
    return [sys.executable, "-c", MAIN, *args, *extra]


HAND = {"script": [], "floor": ["--floor"], "floor + fig": ["--floor", "--figure"]}


def verdict(value: float, target: float) -> str:
    return "met" if value <= target else "missed"


def time_rows(rows: list[str], trees: dict[str, Path], work: Path, repeats: int) -> dict:
    """{(row, tree): [seconds per repeat]}, the rows interleaved in each repeat."""
    cwd = {}
    for name, src in trees.items():
        # byte-compiled as an install is (with PYTHONDONTWRITEBYTECODE every run would
        # compile the package's modules again, a quarter of a second of a stored run)
        compileall.compile_dir(src, quiet=1)
        cwd[name] = work / name
        cwd[name].mkdir()
        if "stored run" in rows:  # every unit and the report stored before the timed runs
            wall(rankcollapse(ROWS["stored run"], work), src, cwd[name])
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(repeats):
        for row in rows:
            if row == "python":
                times.setdefault((row, "after"), []).append(
                    wall([sys.executable, "-c", "pass"], SRC, work)
                )
            elif row in HAND:
                argv = [sys.executable, str(HERE / "hand_probe.py"), str(work / "hand.csv")]
                times.setdefault((row, "after"), []).append(wall(argv + HAND[row], SRC, work))
            elif row in ROWS:
                for name, src in trees.items():
                    argv = rankcollapse(ROWS[row], work)
                    times.setdefault((row, name), []).append(wall(argv, src, cwd[name]))
    return times


def dry_run(work: Path) -> tuple[float, bool]:
    """Seconds of the paper dry run of every experiment, and whether it left no folder."""
    out = work / "dry-run-results"
    argv = [*rankcollapse(ONCE["dry run"], work), "--out", str(out)]
    return wall(argv, SRC, work), not out.exists()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, default=None, help="another tree's src to pair")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rows", default=",".join(["python", *ROWS, *HAND, *ONCE]))
    args = parser.parse_args()
    rows = args.rows.split(",")
    trees = {"after": SRC} | ({"before": args.before.resolve()} if args.before else {})
    work = Path(tempfile.mkdtemp(prefix="bench-cli-"))
    times = time_rows(rows, trees, work, args.repeats)
    median = {key: statistics.median(values) for key, values in times.items()}
    load = os.getloadavg()
    print(f"median of {args.repeats} whole-process runs, wall seconds; load average "
          f"{load[0]:.1f}, {load[1]:.1f}, {load[2]:.1f} on {os.cpu_count()} cores")  # fmt: skip
    python = median.get(("python", "after"), START_UP)
    header = f"{'row':<14}{'after':>8}" + (
        f"{'before':>8}{'after/before':>14}" if args.before else ""
    )
    print(header + f"{'target':>10}")
    for row in [r for r in rows if (r, "after") in median]:
        line = f"{row:<14}{median[(row, 'after')]:>8.3f}"
        if args.before and (row, "before") in median:
            before = median[(row, "before")]
            line += f"{before:>8.3f}{median[(row, 'after')] / before:>14.2f}"
        elif args.before:
            line += " " * 22
        if row in SCALED:
            target = SCALED[row] * python / START_UP
            line += f"{'<= ' + format(target, '.3f'):>10} {verdict(median[(row, 'after')], target)}"
        print(line)
    if "python" in rows:
        print(f"(start-up targets scaled by python -c pass: {python:.3f} s / {START_UP} s)")
    for name in trees:
        shown = [
            f"{top} / {bottom} {median[(top, name)] / median[(bottom, 'after')]:.2f}"
            + (
                f" (target <= {target}: {verdict(median[(top, name)] / median[(bottom, 'after')], target)})"
                if target
                else ""
            )
            for (top, bottom), target in [*RATIOS.items(), *((pair, None) for pair in SHOWN)]
            if (top, name) in median and (bottom, "after") in median
        ]
        if shown:
            print(f"{name}: " + "; ".join(shown))
    _floor_line(median)
    if "dry run" in rows:
        seconds, clean = dry_run(work)
        print(f"dry run (run all --preset paper --dry-run, once): {seconds:.1f} s (target <= "
              f"{DRY_RUN_SECONDS:g} s: {verdict(seconds, DRY_RUN_SECONDS)}); "
              f"{'no folder left' if clean else 'LEFT A FOLDER (missed)'}")  # fmt: skip


def _floor_line(median: dict) -> None:
    """Where the floor (start-up, imports, loading, one forward, written by hand) is above the
    target and the probe's numbers alone (no figures) do not beat it, the probe is held to the
    floor instead; where they do beat it, the floor does not bind and the target stays. The
    line says which."""
    rows = ("probe", "probe no figs", "script", "floor")
    if not all((row, "after") in median for row in rows):
        return
    probe, numbers, script, floor = (median[(row, "after")] for row in rows)
    floor, probe, numbers = floor / script, probe / script, numbers / script
    target = RATIOS[("probe", "script")]
    if floor <= target:
        return
    if numbers < floor:
        print(f"floor / script {floor:.2f} is above the target {target}, but the probe without "
              f"figures, {numbers:.2f}, is below it (its loader and imports beat the hand-written "
              f"ones): the floor does not bind, the target stays {target}")  # fmt: skip
        return
    print(f"floor / script {floor:.2f} is above the target {target} and the probe's numbers "
          f"alone reach it ({numbers:.2f}), so the probe is held to the floor: probe / script "
          f"{probe:.2f} (target <= {floor:.2f}: {verdict(probe, floor)})")  # fmt: skip


if __name__ == "__main__":
    main()
