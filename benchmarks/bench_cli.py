"""Whole-process wall times of what a user types, against a hand-written script and its floor.

Rows (each a fresh process, timed from start to exit):

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

Every row runs `--repeats` times (default 5), its arms interleaved so that a burst of load on
this shared machine hits them alike; the median is printed. With `--before SRC` (another
checkout's `src`, e.g. from `git archive`), every rankcollapse row also runs that tree, paired
with this one, and the ratio after / before is printed: the speed-up under the same load.
Targets (issue 27): version <= 0.3 s; help, probe --help, list <= 1 s; stored run <= 2 s;
probe / script <= 0.95; probe / floor <= 1.15, read as: the probe without figures against the
floor, and the probe with its figure against the floor with the cheapest such figure.

Run: .venv/bin/python benchmarks/bench_cli.py [--before /tmp/base/src] [--repeats 5]
(about 5 minutes on 2 cores, twice that with --before).
"""

from __future__ import annotations

import argparse
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
TARGETS = {"version": 0.3, "help": 1.0, "probe --help": 1.0, "list": 1.0, "stored run": 2.0}


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, default=None, help="another tree's src to pair")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rows", default=",".join([*ROWS, *HAND]))
    args = parser.parse_args()
    rows = args.rows.split(",")
    trees = {"after": SRC} | ({"before": args.before.resolve()} if args.before else {})
    work = Path(tempfile.mkdtemp(prefix="bench-cli-"))
    cwd = {}
    for name, src in trees.items():
        cwd[name] = work / name
        cwd[name].mkdir()
        if "stored run" in rows:  # every unit and the report stored before the timed runs
            wall(rankcollapse(ROWS["stored run"], work), src, cwd[name])
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.repeats):
        for row in rows:
            if row in HAND:
                argv = [sys.executable, str(HERE / "hand_probe.py"), str(work / "hand.csv")]
                times.setdefault((row, "after"), []).append(wall(argv + HAND[row], SRC, work))
                continue
            for name, src in trees.items():
                argv = rankcollapse(ROWS[row], work)
                times.setdefault((row, name), []).append(wall(argv, src, cwd[name]))
    median = {key: statistics.median(values) for key, values in times.items()}
    print(
        f"median of {args.repeats} whole-process runs, wall seconds (load {os.getloadavg()[0]:.1f})"
    )
    header = f"{'row':<14}{'after':>8}" + (
        f"{'before':>8}{'after/before':>14}" if args.before else ""
    )
    print(header + f"{'target':>9}")
    for row in rows:
        line = f"{row:<14}{median[(row, 'after')]:>8.2f}"
        if args.before and (row, "before") in median:
            before = median[(row, "before")]
            line += f"{before:>8.2f}{median[(row, 'after')] / before:>14.2f}"
        elif args.before:
            line += " " * 22
        target = TARGETS.get(row)
        print(line + (f"{'<= ' + format(target, 'g') + ' s':>9}" if target else ""))
    ratios = {  # (numerator row, denominator row): target
        ("probe", "script"): 0.95,
        ("probe no figs", "floor"): 1.15,
        ("probe", "floor + fig"): 1.15,
        ("probe", "floor"): None,  # the figure's own cost included: shown, no target
    }
    for name in trees:
        shown = [
            f"{top} / {bottom} {median[(top, name)] / median[(bottom, 'after')]:.2f}"
            + (f" (target <= {target})" if target else "")
            for (top, bottom), target in ratios.items()
            if (top, name) in median and (bottom, "after") in median
        ]
        if shown:
            print(f"{name}: " + "; ".join(shown))


if __name__ == "__main__":
    main()
