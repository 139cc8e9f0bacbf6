"""`run all --preset quick` wall time with --jobs 1, the default flags, --jobs 2 and --backend
ray --jobs 2.

Targets (on a 2-core machine): the default flags (one worker per core, `default_jobs`) take at
most 0.55 x the time of `--jobs 1` (issue 27); `--jobs 2` and `--backend ray --jobs 2` each
at most 0.6 x (issue 13), start-up included; the script also prints how much of each
parallel run is the workers' start-up (Ray's own start-up for ray). Every setup runs the way
`rankcollapse run all` does (one set of workers for the units of every experiment, reports
built as each experiment ends) into a fresh temporary results folder (nothing is reused), in
this process, one setup after another, so the ratios are measured under the same load. The
results of every setup are checked byte for byte against `--jobs 1`.

By default it times a subset: every experiment but the three longest (amsel2024-encoder,
amsel2024-depth, dong2021-path-effectiveness), 4.5 to 9.4 minutes at --jobs 1 on 2 cores
(2026-11-30: 271 s on a 2-core AMD EPYC, 9.4 minutes on an older machine; 4 minutes there before
issue 46 added seeds and findings), so the four setups take about 12 to 25 minutes; `--all`
times every experiment, several times longer.

Run: .venv/bin/python benchmarks/bench_run.py [--all | --only NAME,NAME] [--setups jobs1,ray2]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from rankcollapse.experiments import experiment_names
from rankcollapse.runner import default_jobs, execute_all, plan, session, startup_seconds

os.environ.setdefault("TQDM_DISABLE", "1")  # as the CLI: no third-party progress bars
SETUPS = {  # setup -> (backend, jobs); None: the default, as `rankcollapse run` picks it
    "jobs1": ("process", 1),
    "default": ("process", None),
    "jobs2": ("process", 2),
    "ray2": ("ray", 2),
}
LONGEST = ("amsel2024-encoder", "amsel2024-depth", "dong2021-path-effectiveness")
TARGETS = {"default": 0.55, "jobs2": 0.6, "ray2": 0.6}


def run_setup(
    names: list[str], backend: str, jobs: int | None, root: Path
) -> tuple[float, float, int]:
    """(wall seconds of the whole run, seconds of which were the workers' start-up, jobs)."""
    start = time.perf_counter()
    plans = [plan(name, "quick", results_root=root) for name in names]
    jobs = jobs or default_jobs(p.config for p in plans)
    with session(backend, jobs):
        startup = startup_seconds(backend, jobs)  # every worker up, torch imported in each
        if backend == "ray":
            startup = time.perf_counter() - start  # ray.init included
        execute_all(plans, jobs, backend=backend)
    return time.perf_counter() - start, startup, jobs


def unit_seconds(root: Path) -> float:
    """Sum of the units' own run times in every manifest under `root`: the work to share out
    (it grows when workers share the cores with the driver building reports)."""
    return sum(json.loads(m.read_text())["unit_seconds"] for m in root.glob("*/*/manifest.json"))


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} on {os.cpu_count()} cores"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--all", action="store_true", help="every experiment (about 30 minutes)")
    group.add_argument("--only", default="", help="comma list of experiments")
    parser.add_argument("--setups", default=",".join(SETUPS), help="comma list of setups")
    args = parser.parse_args()
    if args.only:
        names = args.only.split(",")
    else:
        names = [n for n in experiment_names() if args.all or n not in LONGEST]
    setups = args.setups.split(",")
    print(f"run all --preset quick over {len(names)} experiments: {', '.join(names)}")
    seconds, files, jobs_of = {}, {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for setup in setups:
            backend, jobs = SETUPS[setup]
            root = Path(tmp) / setup
            before = load()
            wall, startup, jobs = run_setup(names, backend, jobs, root)
            work = unit_seconds(root)
            seconds[setup], jobs_of[setup] = (wall, startup, work / jobs), jobs
            files[setup] = {
                str(f.relative_to(root).parent.parent) + "/" + f.name: f.read_bytes()
                for f in sorted(root.rglob("*"))
                if f.name in ("results.csv", "claims.json")
            }
            print(
                f"{setup:6s} ({backend}, jobs {jobs}): {wall:7.1f} s, start-up {startup:5.1f} s, "
                f"units {work:6.1f} s (sum of their own times; / {jobs} = {work / jobs:5.1f} s)"
                f"   [{before} before, {load()} after]",
                flush=True,
            )
    base = seconds.get("jobs1", (None,))[0]
    print(f"\nratios against jobs1 ({base:.1f} s):" if base else "")
    for setup in setups:
        if setup == "jobs1" or base is None:
            continue
        wall, startup, shared = seconds[setup]
        same = files[setup] == files["jobs1"]
        verdict = "ok" if wall / base <= TARGETS[setup] else "MISSED"
        print(
            f"  {setup}: {wall / base:.2f} x jobs1 (target <= {TARGETS[setup]}: {verdict}); "
            f"start-up {startup:.1f} s = {startup / wall:.0%} of its time; "
            f"without start-up {(wall - startup) / base:.2f} x; "
            f"results.csv and claims.json identical to jobs1: {same}"
        )
        reports = base - seconds["jobs1"][2]  # jobs1's time outside units: reports, figures
        print(  # units that slow each other down (shared caches, memory, a busy machine)
            f"    its floor here: the units' own times shared out evenly, {shared / base:.2f} x "
            f"jobs1 (their sum grows {shared * jobs_of[setup] / seconds['jobs1'][2]:.2f} x when "
            f"{jobs_of[setup]} run at once); with the reports ({reports:.1f} s at jobs1) shared "
            f"too, {(shared + reports / jobs_of[setup]) / base:.2f} x"
        )


if __name__ == "__main__":
    main()
