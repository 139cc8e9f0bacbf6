"""Helpers for tests that need a second real process: forked from this one (so the package is
already imported and a start costs milliseconds, not seconds of imports), running the CLI with
only the tiny experiment registered, its output captured in files."""

from __future__ import annotations

import multiprocessing
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runner"))


def _cli(argv: list[str], log: str, cwd: str | None, setup) -> None:
    from tiny_experiment import TINY

    from rankcollapse import cli
    from rankcollapse.experiments import _registry

    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    sys.stdout = sys.stderr = open(fd, "w", buffering=1)  # noqa: SIM115 - lives until _exit
    if cwd:
        os.chdir(cwd)
    if setup:
        setup()
    _registry._REGISTRY.clear()
    _registry._REGISTRY["tiny"] = TINY
    if argv[0] == "run" and "--jobs" not in argv:  # units here: only this process knows tiny
        argv = [*argv, "--jobs", "1"]
    # One core, so a unit gets one torch thread (cores // jobs): OpenMP threads started in a
    # forked child of a process that has used them hang (libgomp is not fork-safe).
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    code = cli.main(argv)
    sys.stdout.flush()
    os._exit(code)


class CliProcess:
    """`rankcollapse ARGV` in a forked process; `.output()` is what it printed."""

    def __init__(self, argv: list[str], log: Path, cwd: Path | None = None, setup=None) -> None:
        self.log = log
        context = multiprocessing.get_context("fork")
        self.process = context.Process(target=_cli, args=(argv, str(log), cwd and str(cwd), setup))
        self.process.start()

    def output(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def join(self, timeout: float = 600) -> int:  # minutes: a loaded 2-core machine
        self.process.join(timeout)
        if self.process.exitcode is None:
            self.process.kill()
            raise TimeoutError(f"the run did not finish within {timeout} s:\n{self.output()}")
        return self.process.exitcode


@pytest.fixture
def cli_process():
    started = []

    def start(*args, **kwargs) -> CliProcess:
        started.append(CliProcess(*args, **kwargs))
        return started[-1]

    yield start
    for p in started:
        if p.process.is_alive():
            p.process.kill()
            p.process.join()
