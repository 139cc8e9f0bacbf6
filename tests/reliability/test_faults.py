"""A run killed with SIGKILL at random moments (computing a unit, writing a unit file, building
the report) and resumed each time ends with the same files as an uninterrupted run, and no
stored unit is ever computed again."""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pytest
from tiny_experiment import TINY

from rankcollapse import files
from rankcollapse.runner import plan, run_experiment
from rankcollapse.runner.run import unit_paths

SAME_FILES = ("results.csv", "claims.json", "figures/res-vs-layer.png", "tables/mean-per-layer.csv")


def calls(log_dir: Path) -> list[str]:
    path = log_dir / "calls.log"
    return path.read_text().split() if path.exists() else []


def slow_writes() -> None:
    """Widen the window between a unit file's temporary write and its rename."""
    real = os.fsync

    def fsync(fd: int) -> None:
        time.sleep(0.03)
        real(fd)

    files.os.fsync = fsync


def test_kills_at_random_moments_then_resume_give_the_uninterrupted_files(tmp_path, cli_process):
    reference = run_experiment(TINY, overrides={"log_dir": str(tmp_path)}, out=tmp_path / "whole")
    log, out = tmp_path / "log", tmp_path / "run"
    log.mkdir()
    (log / "slow").write_text("0.08")
    (log / "slow-summary").write_text("0.3")
    p = plan(TINY, overrides={"log_dir": str(log)}, out=out)
    unit_of = {
        path.name: f"{u['item']}-{u['seed']}"
        for u, path in zip(p.units, unit_paths(p), strict=True)
    }
    argv = ["run", "tiny", "--set", f"log_dir={log}", "--out", str(out)]

    def stored() -> set[str]:
        return {unit_of[f.name] for f in (out / "units").glob("*.json")} if out.exists() else set()

    moments = {
        "computing a unit": lambda: len(calls(log)) >= len(stored()) + 1 and len(stored()) >= 1,
        "writing a unit file": lambda: any((out / "units").glob(f".*{files.TMP_SUFFIX}")),
        "building the report": lambda: (log / "summarizing").exists(),
    }
    rng = random.Random(0)
    # the report last: once it is built from every unit, a rerun has nothing left to kill
    schedule = ["computing a unit", "writing a unit file"] * 2 + ["random", "building the report"]
    killed = []
    for moment in schedule:
        (log / "summarizing").unlink(missing_ok=True)
        before, done_before = len(calls(log)), stored()
        run = cli_process(argv, tmp_path / "out.log", setup=slow_writes)
        deadline = time.monotonic() + (rng.uniform(0.05, 0.6) if moment == "random" else 60)
        while run.process.is_alive() and time.monotonic() < deadline:
            if moment != "random" and moments[moment]():
                break
            time.sleep(0.002)
        if run.process.is_alive():
            time.sleep(rng.uniform(0, 0.02))
            os.kill(run.process.pid, signal.SIGKILL)
            if run.join() == -signal.SIGKILL:
                killed.append(moment)
        assert not done_before & set(calls(log)[before:]), f"a stored unit ran again ({moment})"
        if moment == "building the report" and (log / "summarizing").exists():
            assert len(stored()) == 6  # every unit stored before the report is built
    print(f"killed {len(killed)} times: {killed}")
    assert len(killed) >= 5, killed
    (log / "slow").unlink()
    done_before, before = stored(), len(calls(log))
    assert cli_process(argv, tmp_path / "out.log").join() == 0
    assert not done_before & set(calls(log)[before:])
    assert stored() == {f"{i}-{s}" for i in range(3) for s in range(2)}
    for name in SAME_FILES:
        assert (out / name).read_bytes() == (reference.out_dir / name).read_bytes(), name
    assert not [f for f in out.rglob("*") if f.name.endswith(files.TMP_SUFFIX)]


def state_and_parent(stat: Path) -> tuple[str, int] | None:
    """(state letter, parent pid) from a /proc/PID/stat file; None once the process is gone."""
    try:
        fields = stat.read_text().rsplit(")", 1)[1].split()  # the name may hold spaces
    except OSError:
        return None
    return fields[0], int(fields[1])


def children(pid: int) -> list[int]:
    """Live (not zombie) processes whose parent is `pid`."""
    found = {
        int(stat.parent.name): state_and_parent(stat) for stat in Path("/proc").glob("[0-9]*/stat")
    }
    return [child for child, info in found.items() if info and info[1] == pid and info[0] != "Z"]


def alive(pid: int) -> bool:
    info = state_and_parent(Path(f"/proc/{pid}/stat"))
    return info is not None and info[0] != "Z"


def two_cores() -> None:
    """The harness pins its process to one core (threads and fork); two workers need --jobs 2
    not to be capped to that one core."""
    from rankcollapse.runner import backends

    backends.cpu_cores = lambda: 2


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc")
def test_workers_of_a_killed_run_stop_instead_of_computing_on(tmp_path, cli_process):
    """SIGKILL of the driver cannot shut its pool down: the workers notice the lost parent and
    exit within a second or so (minutes on a loaded machine) instead of finishing their (here
    20 min) units for nobody."""
    log = tmp_path / "log"
    log.mkdir()
    (log / "slow").write_text("1200")
    argv = ["run", "tiny", "--set", f"log_dir={log}", "--jobs", "2", "--out", str(tmp_path / "r")]
    run = cli_process(argv, tmp_path / "out.log", setup=two_cores)
    deadline = time.monotonic() + 600  # the event: both workers in a unit (minutes if loaded)
    while len(calls(log)) < 2 and time.monotonic() < deadline and run.process.is_alive():
        time.sleep(0.05)
    workers = children(run.process.pid)
    assert len(calls(log)) == 2 and len(workers) >= 2, run.output()
    os.kill(run.process.pid, signal.SIGKILL)
    run.join()
    deadline = time.monotonic() + 300
    while any(map(alive, workers)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [w for w in workers if alive(w)], "workers still computing after their driver died"
