"""A plan before a long run: the units, their count and the time they would take here.

Unit times come from the unit files already stored in the run folder (an earlier, killed or
partial run of the same config), from the manifests of earlier runs of the same experiment and
preset beside it, and from a timed sample of a few pending units, run now in this process with
one torch thread within a time budget. A dry run reads and writes nothing else: no folder is
made or locked, and the sampled units are not stored (the real run computes them). A sampled
unit still running when the budget is spent is stopped: its time so far is a lower bound, and
so is every estimate made from it. The sample covers as many (field, value) pairs of the units
as it can (a unit's cost usually follows its model, size or part); every other unit is
estimated from these times as a product of one factor per (field, value)
(`rankcollapse.runner.costs`). The wall time on `workers` workers is the measured start-up of
the backend plus the time at which the last unit ends when the units still to run are dealt,
longest first, to the first free worker (as the real run deals them):

    wall(k) = start-up(backend, k) + makespan(estimated unit times, longest first, k workers)
"""

from __future__ import annotations

import contextlib
import math
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from types import FrameType

from rankcollapse.errors import UnitError
from rankcollapse.experiments import Unit
from rankcollapse.files import canonical_json
from rankcollapse.runner._store import load_unit
from rankcollapse.runner.backends import UNIT_THREADS, Failed, call_unit, process_pool, ray_session
from rankcollapse.runner.costs import longest_first, makespan, unit_pairs, unit_seconds
from rankcollapse.runner.run import Plan, earlier_times, unit_paths


@dataclass
class DryRun:
    """The units of a plan and the seconds each takes: stored, sampled now, or estimated."""

    name: str
    units: list[Unit]
    seconds: list[float]
    # per unit: "stored", "sampled" (timed by the dry run), "stopped" (sampled, stopped when
    # the budget was spent: its seconds are a lower bound) or "estimated"
    source: list[str]

    @property
    def remaining(self) -> list[float]:
        """Estimated seconds of the units a real run would still compute (all but stored)."""
        return [s for s, src in zip(self.seconds, self.source, strict=True) if src != "stored"]

    @property
    def lower_bound(self) -> bool:
        """True when a sampled unit was stopped: the estimates are then lower bounds."""
        return "stopped" in self.source

    @property
    def unseen(self) -> list[str]:
        """The units to run, but for their seed, that no stored or sampled unit is, as
        "field=value, ...": their estimate is a guess from units that differ there (a unit
        of another part, size or model may cost far more)."""
        known = {
            _but_seed(u) for u, s in zip(self.units, self.source, strict=True) if s != "estimated"
        }
        todo = [
            _but_seed(u) for u, s in zip(self.units, self.source, strict=True) if s == "estimated"
        ]
        return list(dict.fromkeys(k for k in todo if k not in known))

    def wall_seconds(self, workers: int, startup: float = 0.0) -> float:
        """Estimated wall time of the real run on `workers` workers (see the module doc)."""
        remaining = sorted(self.remaining, key=longest_first)
        return startup + makespan(remaining, workers) if remaining else 0.0


def dry_run(plan: Plan, samples: int = 2, budget: float = math.inf) -> DryRun:
    """Time up to `samples` pending units (chosen by `_choose`) within `budget` seconds and
    estimate the rest; nothing is written (see the module doc). A unit still running when the
    budget is spent is stopped ("stopped": its time so far, a lower bound)."""
    seconds, source = _stored_times(plan)
    pending = [i for i, src in enumerate(source) if src != "stored"]
    known = [i for i, src in enumerate(source) if src == "stored"]
    end = time.perf_counter() + budget
    for i in _choose(plan.units, known, pending, samples):
        left = end - time.perf_counter()
        if left <= 0:
            break
        start = time.perf_counter()
        try:
            with _deadline(left):
                rows, took, _ = call_unit(
                    plan.experiment.run_unit, plan.config, plan.units[i], UNIT_THREADS
                )
        except _OverBudget:
            seconds[i], source[i] = time.perf_counter() - start, "stopped"
            break
        if isinstance(rows, Failed):
            raise UnitError(
                f"{plan.experiment.name} unit {canonical_json(plan.units[i])} failed in the "
                f"dry run: {rows.kind}: {rows.message}\n{rows.traceback}"
            )
        seconds[i], source[i] = took, "sampled"
    return _estimated(plan, seconds, source)


class _OverBudget(BaseException):  # not an Exception: `call_unit` does not catch it
    """A sampled unit ran past the dry run's budget."""


@contextlib.contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Raise `_OverBudget` in the block once `seconds` have passed (a timer signal, between
    two Python steps of the unit, outside any import); no deadline where timer signals are unavailable (off the
    main thread, or a system without setitimer); none for an infinite budget."""
    if (
        math.isinf(seconds)
        or not hasattr(signal, "setitimer")
        or threading.current_thread() is not threading.main_thread()
    ):
        yield
        return

    def stop(_: int, frame: FrameType | None) -> None:
        while frame is not None:
            if frame.f_code.co_filename.startswith("<frozen importlib"):
                # never inside an import: a module cut halfway stays broken for the next unit
                signal.setitimer(signal.ITIMER_REAL, 0.05)  # again once it is done
                return
            frame = frame.f_back
        raise _OverBudget

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def stored_dry_run(plan: Plan) -> DryRun:
    """What a dry run that samples nothing says, read-only: the times of the units stored in
    the run folder, every other unit estimated from them and from earlier runs beside it (NaN
    when none is known). Nothing is written or locked, so it may read the folder of a run still
    going."""
    return _estimated(plan, *_stored_times(plan))


def _stored_times(plan: Plan) -> tuple[list[float], list[str]]:
    """Per unit, its stored seconds and "stored", or 0.0 and "estimated"; read-only."""
    seconds, source = [], []
    for unit, path in zip(plan.units, unit_paths(plan), strict=True):
        found, _ = load_unit(path, unit)
        seconds.append(found[1] if found else 0.0)
        source.append("stored" if found else "estimated")
    return seconds, source


def _estimated(plan: Plan, seconds: list[float], source: list[str]) -> DryRun:
    """The DryRun with every "estimated" unit at its `unit_seconds` from the known units of
    this folder and the earlier runs beside it (NaN when no unit is known)."""
    known = [
        (u, s) for u, s, src in zip(plan.units, seconds, source, strict=True) if src != "estimated"
    ]
    estimate = unit_seconds(plan.units, known + earlier_times(plan))
    estimate = [
        s if src == "estimated" else t for s, t, src in zip(estimate, seconds, source, strict=True)
    ]
    return DryRun(plan.experiment.name, list(plan.units), estimate, source)


def _but_seed(unit: Unit) -> str:
    return ", ".join(
        f"{key}={canonical_json(value)}" for key, value in unit.items() if key != "seed"
    )


def _choose(units: list[Unit], known: list[int], pending: list[int], samples: int) -> list[int]:
    """Up to `samples` of `pending`, one at a time: the unit with the most (field, value) pairs
    no known or chosen unit has; ties go to the unit farthest along the list from those chosen
    (units often grow along the list), the first unit first."""
    pairs = [unit_pairs(unit) for unit in units]
    covered = set().union(*(pairs[i] for i in known))
    chosen: list[int] = []
    for _ in range(min(max(samples, 0), len(pending))):
        gain = {
            i: (len(pairs[i] - covered), min(abs(i - j) for j in chosen) if chosen else -i)
            for i in pending
            if i not in chosen
        }
        best = max(gain, key=gain.__getitem__)
        chosen.append(best)
        covered |= pairs[best]
    return sorted(chosen)


def startup_seconds(backend: str, jobs: int, address: str | None = None) -> float:
    """Measured seconds to bring up `jobs` workers of `backend` ready to run a unit (0 for one
    process, which is this one)."""
    start = time.perf_counter()
    if backend == "ray":
        with ray_session(jobs, address):
            import ray

            ray.get([ray.remote(num_cpus=1)(_warm).remote() for _ in range(jobs)])
    elif jobs > 1:
        with process_pool(jobs) as pool:
            list(pool.map(_warm, range(jobs)))
    return time.perf_counter() - start


def _warm(*_: object) -> None:
    import torch  # noqa: F401  what every unit's worker imports first
