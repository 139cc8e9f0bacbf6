"""A plan before a long run: the units, their count and the time they would take here.

Unit times come from the unit files already stored in the run folder (an earlier, killed or
partial run of the same config), from the manifests of earlier runs of the same experiment and
preset beside it, and from a timed sample of a few pending units, run now in this process with
one torch thread and stored, so the real run reuses them. The sample covers as many
(field, value) pairs of the units as it can (a unit's cost usually follows its model, size or
part); every other unit is estimated from these times as a product of one factor per
(field, value) (`rankcollapse.runner.costs`). The wall time on `workers` workers is the
measured start-up of the backend plus the time at which the last unit ends when the remaining
units are dealt, longest first, to the first free worker (as the real run deals them):

    wall(k) = start-up(backend, k) + makespan(estimated unit times, longest first, k workers)
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from rankcollapse.errors import UnitError
from rankcollapse.experiments import Unit
from rankcollapse.files import canonical_json, write_atomic
from rankcollapse.runner._lock import run_lock
from rankcollapse.runner._store import load_unit
from rankcollapse.runner.backends import Failed, call_unit, process_pool, ray_session
from rankcollapse.runner.costs import longest_first, makespan, unit_pairs, unit_seconds
from rankcollapse.runner.run import (
    Notify,
    Plan,
    config_yaml,
    earlier_times,
    load_stored,
    store_unit,
    unit_paths,
)


@dataclass
class DryRun:
    """The units of a plan and the seconds each takes: stored, sampled now, or estimated."""

    name: str
    units: list[Unit]
    seconds: list[float]
    source: list[str]  # per unit: "stored", "sampled" (run by the dry run) or "estimated"

    @property
    def remaining(self) -> list[float]:
        """Estimated seconds of the units a real run would still compute."""
        return [s for s, src in zip(self.seconds, self.source, strict=True) if src == "estimated"]

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


def dry_run(plan: Plan, samples: int = 2, notify: Notify | None = None) -> DryRun:
    """Time `samples` pending units (chosen by `_choose`) and store them; estimate the rest.
    Nothing else runs; the folder is locked while the samples run."""
    plan.claim_folder()
    with run_lock(plan.out_dir, notify):
        write_atomic(plan.out_dir / "config.yaml", config_yaml(plan.config).encode())
        paths = unit_paths(plan)
        stored = load_stored(plan, paths)
        source = ["stored" if rows is not None else "estimated" for rows in stored.rows]
        pending = [i for i, rows in enumerate(stored.rows) if rows is None]
        known = [i for i, src in enumerate(source) if src == "stored"]
        for i in _choose(plan.units, known, pending, samples):
            rows, seconds, where = call_unit(plan.experiment.run_unit, plan.config, plan.units[i])
            if isinstance(rows, Failed):
                raise UnitError(
                    f"{plan.experiment.name} unit {canonical_json(plan.units[i])} failed in the "
                    f"dry run: {rows.kind}: {rows.message}\n{rows.traceback}"
                )
            store_unit(plan, paths[i], i, rows, seconds, {**where, "backend": "process"})
            stored.seconds[i], source[i] = seconds, "sampled"
    return _estimated(plan, stored.seconds, source)


def stored_dry_run(plan: Plan) -> DryRun:
    """What a dry run that samples nothing says, read-only: the times of the units stored in
    the run folder, every other unit estimated from them and from earlier runs beside it (NaN
    when none is known). Nothing is written or locked, so it may read the folder of a run still
    going."""
    seconds, source = [], []
    for unit, path in zip(plan.units, unit_paths(plan), strict=True):
        found, _ = load_unit(path, unit)
        seconds.append(found[1] if found else 0.0)
        source.append("stored" if found else "estimated")
    return _estimated(plan, seconds, source)


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
