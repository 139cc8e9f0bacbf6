"""A report's figures drawn by every core (`rankcollapse report`) against one process.

`build_report(DIR, processes=N)` draws the figures through `process.map_forked`: this process
and N - 1 forked children, each drawing its share of the figures (a run uses N = `--jobs`).
This script runs EXPERIMENT (default wu2024-geometry, five figures) at `--preset quick` into
a temporary folder, or takes a finished run's folder (`--run DIR`, e.g. a wu2024-masks run:
eleven figures), then builds its report `REPEATS` times with one process and with every core,
interleaved, in this process; it prints the median seconds of each arm, their ratio and
whether both arms wrote the same bytes (report.html, every PNG and SVG).

Run: .venv/bin/python benchmarks/bench_report.py [--run DIR | --experiment NAME]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from rankcollapse.process import cpu_cores
from rankcollapse.report import build_report
from rankcollapse.runner import run_experiment

REPEATS = 3  # builds per arm, interleaved


def built_files(run: Path) -> dict[str, bytes]:
    files = [run / "report.html", *sorted((run / "figures").iterdir())]
    return {str(f.relative_to(run)): f.read_bytes() for f in files}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, help="a finished run's folder (copied, not changed)")
    parser.add_argument("--experiment", default="wu2024-geometry")
    args = parser.parse_args()
    cores = cpu_cores()
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        if args.run is not None:
            shutil.copytree(args.run, run)
        else:
            run_experiment(args.experiment, "quick", out=run, jobs=1)
        build_report(run)  # once before timing: imports, fonts
        seconds: dict[int, list[float]] = {1: [], cores: []}
        files = {}
        for _ in range(REPEATS):
            for processes in seconds:
                start = time.perf_counter()
                build_report(run, processes=processes)
                seconds[processes].append(time.perf_counter() - start)
                files[processes] = built_files(run)
        n_figures = len(list((run / "figures").glob("*.png")))
    one, every = (statistics.median(seconds[p]) for p in (1, cores))
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    print(f"report of {args.run or args.experiment}: {n_figures} figures; load average {load}")
    print(f"one process:        {one:.2f} s (median of {REPEATS})")
    print(f"{cores} processes:       {every:.2f} s")
    print(f"ratio {cores} / 1: {every / one:.2f}; same bytes: {files[1] == files[cores]}")


if __name__ == "__main__":
    main()
