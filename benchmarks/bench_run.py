"""`run all --preset quick` wall time with --jobs 1, --jobs 2 and --backend ray --jobs 2.

Targets (issue 13, on this 2-core machine): `--jobs 2` and `--backend ray --jobs 2` each take at
most 0.6 x the time of `--jobs 1`, start-up included; the script also prints how much of the Ray
run is Ray's own start-up. Every setup runs into a fresh results folder (nothing is reused) in
this process, one after another, so the ratios hold on a busy machine even when the seconds do
not. The results of every setup are checked byte for byte against `--jobs 1`.

Run: .venv/bin/python benchmarks/bench_run.py [--only NAME,NAME] [--setups jobs1,jobs2,ray2]
(the full run takes several minutes per setup; --only times a subset of the experiments).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from rankcollapse.experiments import experiment_names
from rankcollapse.runner import execute, plan, session, startup_seconds

SETUPS = {"jobs1": ("process", 1), "jobs2": ("process", 2), "ray2": ("ray", 2)}
TARGET = 0.6


def run_setup(names: list[str], backend: str, jobs: int, root: Path) -> tuple[float, float]:
    """(wall seconds of the whole run, seconds of which were the workers' start-up)."""
    plans = [plan(name, "quick", results_root=root) for name in names]
    start = time.perf_counter()
    with session(backend, jobs):
        startup_seconds(backend, jobs)  # workers up and the package imported in each
        started = time.perf_counter()
        for p in plans:
            execute(p, jobs, backend=backend)
    return time.perf_counter() - start, started - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma list of experiments (default: all)")
    parser.add_argument("--setups", default=",".join(SETUPS), help="comma list of setups")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else experiment_names()
    setups = args.setups.split(",")
    print(f"run all --preset quick over {len(names)} experiments: {', '.join(names)}")
    seconds, files = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for setup in setups:
            backend, jobs = SETUPS[setup]
            root = Path(tmp) / setup
            seconds[setup] = run_setup(names, backend, jobs, root)
            files[setup] = {
                str(f.relative_to(root).parent.parent) + "/" + f.name: f.read_bytes()
                for f in sorted(root.rglob("*"))
                if f.name in ("results.csv", "claims.json")
            }
            wall, startup = seconds[setup]
            print(f"{setup:6s} ({backend}, jobs {jobs}): {wall:8.1f} s, start-up {startup:5.1f} s")
    base = seconds.get("jobs1", (None,))[0]
    for setup in setups:
        if setup == "jobs1" or base is None:
            continue
        wall, startup = seconds[setup]
        same = files[setup] == files["jobs1"]
        verdict = "ok" if wall / base <= TARGET else "MISSED"
        print(
            f"{setup}: {wall / base:.2f} x jobs1 (target <= {TARGET}: {verdict}); start-up "
            f"{startup / wall:.0%} of its time; results.csv and claims.json identical: {same}"
        )


if __name__ == "__main__":
    main()
