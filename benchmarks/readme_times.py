"""The time columns of the README's experiment table, from stored runs (nothing is run).

    quick         the time of the latest complete quick run on one worker: its manifest's
                  `unit_seconds` (the units' times summed; reports excluded), searched in
                  every --runs folder as RUNS/NAME/*/
    paper preset  a complete paper run in those folders: the same sum, measured; else the units
                  stored in PAPER/NAME/paper by a partial run (a dry run stores nothing), every
                  other unit at their mean time, on one worker: "~2.1 h (estimate)"; only
                  when every unit still to run has a stored one that differs in its seed
                  alone, else "not run (23 of 40 units stored)"

Run: .venv/bin/python benchmarks/readme_times.py --runs /work/runs/quick /work/runs/final
        --paper /work/runs/final [--write README.md]
(prints the two columns per experiment; --write puts them in the README's table).

    --wall NAME...  what a newcomer waits instead: `rankcollapse run NAME` (quick preset) timed
                  on the wall clock in a fresh folder (imports, model loading, units, report and
                  figures), with the machine (cores, CPU) and its 1-minute load before and after;
                  --write puts the sentence between the README's WALL markers.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rankcollapse.experiments import experiment_names
from rankcollapse.runner import plan, stored_dry_run

HEADER = "| experiment | paper | what it measures |"
COLUMNS = ("quick run", "paper preset")
NOT_RUN = "not run"


def duration(seconds: float) -> str:
    """'< 1 s', '42 s', '3.5 min' or '2.1 h'."""
    if seconds < 1:
        return "< 1 s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def complete_runs(roots: list[Path], name: str, preset: str) -> list[dict]:
    """Manifests of the complete runs of `name` with `preset`, oldest first."""
    found = []
    for root in roots:
        for path in (root / name).glob("*/manifest.json"):
            manifest = json.loads(path.read_text())
            if manifest.get("preset") == preset and manifest.get("status") == "complete":
                found.append(manifest)
    return sorted(found, key=lambda m: m["finished"])


def times(name: str, roots: list[Path], paper_root: Path) -> tuple[str, str]:
    """The two cells of experiment `name`."""
    quick = complete_runs(roots, name, "quick")
    quick_cell = duration(quick[-1]["unit_seconds"]) if quick else NOT_RUN
    paper = complete_runs(roots, name, "paper")
    if paper:
        return quick_cell, duration(paper[-1]["unit_seconds"])
    estimate = stored_dry_run(plan(name, "paper", out=paper_root / name / "paper"))
    total = sum(estimate.seconds)
    if math.isnan(total):
        return quick_cell, NOT_RUN
    if estimate.unseen:  # units unlike every stored one (another model or size) may cost far more
        stored = len(estimate.units) - len(estimate.remaining)
        return quick_cell, f"{NOT_RUN} ({stored} of {len(estimate.units)} units stored)"
    return quick_cell, f"~{duration(total)} (estimate)"


def write_table(readme: Path, cells: dict[str, tuple[str, str]]) -> None:
    """Put the cells into the README's table (its first three columns stay as they are)."""
    lines = readme.read_text().split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith(HEADER))
    lines[start] = HEADER + "".join(f" {c} |" for c in COLUMNS)
    lines[start + 1] = "|---" * (3 + len(COLUMNS)) + "|"
    i = start + 2
    while i < len(lines) and lines[i].startswith("|"):
        first = lines[i].split("|")[1:4]
        name = first[0].strip().strip("`")
        lines[i] = "|" + "|".join(first) + "|" + "".join(f" {c} |" for c in cells[name])
        i += 1
    readme.write_text("\n".join(lines))


WALL = ("<!-- readme_times --wall -->", "<!-- /readme_times -->")


def machine() -> str:
    """'2 cores (AMD EPYC 7B13), Linux': what the times were measured on."""
    cpu = platform.processor() or platform.machine()
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        cpu = next(line.split(":", 1)[1].strip() for line in cpuinfo.splitlines()
                   if line.startswith("model name"))  # fmt: skip
    except (OSError, StopIteration):
        pass
    return f"{len(os.sched_getaffinity(0))} cores ({cpu}), {platform.system()}"


def wall(name: str) -> tuple[float, float, float]:
    """(seconds, load before, load after) of `rankcollapse run NAME` in a fresh folder."""
    with tempfile.TemporaryDirectory() as out:
        before = os.getloadavg()[0]
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "rankcollapse.cli", "run", name, "--out",
                        f"{out}/run"], check=True, capture_output=True)  # fmt: skip
        return time.perf_counter() - start, before, os.getloadavg()[0]


def wall_sentence(names: list[str]) -> str:
    """The README's sentence of wall-clock times, with the machine and its load."""
    parts, loads = [], []
    for name in names:
        seconds, before, after = wall(name)
        parts.append(f"`rankcollapse run {name}` {seconds:.0f} s")
        loads += [before, after]
    return (
        f"Measured by `python benchmarks/readme_times.py --wall {' '.join(names)}` on "
        f"{machine()}, at a 1-minute load average of {min(loads):.1f} to {max(loads):.1f} "
        f"({time.strftime('%Y-%m-%d')}): " + ", ".join(parts) + " from a fresh folder, "
        "wall clock (imports, models, units, report and figures)."
    )


def write_wall(readme: Path, sentence: str) -> None:
    text = readme.read_text()
    start, end = text.index(WALL[0]) + len(WALL[0]), text.index(WALL[1])
    readme.write_text(text[:start] + "\n" + sentence + "\n" + text[end:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, nargs="+", default=[Path("results")])
    parser.add_argument("--paper", type=Path, default=Path("results"))
    parser.add_argument("--write", type=Path, default=None, help="the README to update")
    parser.add_argument("--wall", nargs="+", default=None, help="experiments to time whole")
    args = parser.parse_args()
    if args.wall:
        sentence = wall_sentence(args.wall)
        print(sentence)
        if args.write:
            write_wall(args.write, sentence)
        return
    cells = {name: times(name, args.runs, args.paper) for name in experiment_names()}
    for name, (quick, paper) in cells.items():
        print(f"{name:30s} {quick:>10s}   {paper}")
    if args.write:
        write_table(args.write, cells)


if __name__ == "__main__":
    main()
