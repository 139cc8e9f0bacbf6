"""A plan before a long run: the units, their count and the time they would take here.

Unit times come from the unit files already stored in the run folder (an earlier, killed or
partial run of the same config) and from a timed sample of a few pending units, run now in
this process with one torch thread and stored, so the real run reuses them. The sample covers
as many (field, value) pairs of the units as it can (a unit's cost usually follows its model,
size or part). A unit's time is taken as a product of one factor per (field, value) but the
seed, fitted to the known units' times by least squares on their logarithms:

    log seconds(unit) = c + sum over its fields f of b[f, unit[f]]

so a deep model's unit under a mask no deep unit ran is the deep unit's time scaled by what
that mask costs in the other models. A unit whose terms the known units do not determine (a
value no known unit has) is estimated at the mean time of the known units that share the most
(field, value) pairs with it. The wall time on `workers` workers is the measured
start-up of the backend plus the time at which the last unit ends when the remaining units
are dealt, in order, to the first free worker (as the process pool and Ray do):

    wall(k) = start-up(backend, k) + makespan(estimated unit times, k workers)
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rankcollapse.errors import UnitError
from rankcollapse.experiments import Unit
from rankcollapse.files import canonical_json, check_writable, write_atomic
from rankcollapse.runner._lock import run_lock
from rankcollapse.runner._store import load_unit
from rankcollapse.runner.backends import Failed, call_unit, process_pool, ray_session
from rankcollapse.runner.run import Notify, Plan, config_yaml, load_stored, store_unit, unit_paths


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
        return [s for s, src in zip(self.seconds, self.source) if src == "estimated"]

    @property
    def unseen(self) -> list[str]:
        """The units to run, but for their seed, that no stored or sampled unit is, as
        "field=value, ...": their estimate is a guess from units that differ there (a unit
        of another part, size or model may cost far more)."""
        known = {_but_seed(u) for u, s in zip(self.units, self.source) if s != "estimated"}
        todo = [_but_seed(u) for u, s in zip(self.units, self.source) if s == "estimated"]
        return list(dict.fromkeys(k for k in todo if k not in known))

    def wall_seconds(self, workers: int, startup: float = 0.0) -> float:
        """Estimated wall time of the real run on `workers` workers (see the module doc)."""
        return startup + makespan(self.remaining, workers) if self.remaining else 0.0


def makespan(seconds: Sequence[float], workers: int) -> float:
    """When the last of `seconds` ends if each goes, in order, to the first free worker.

    Example:
        >>> makespan([3.0, 1.0, 1.0, 1.0], 2)
        3.0
    """
    free = [0.0] * workers
    for s in seconds:
        heapq.heappush(free, heapq.heappop(free) + s)
    return max(free)


def dry_run(plan: Plan, samples: int = 2, notify: Notify | None = None) -> DryRun:
    """Time `samples` pending units (chosen by `_choose`) and store them; estimate the rest.
    Nothing else runs; the folder is locked while the samples run."""
    check_writable(plan.out_dir)
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
    the run folder, every other unit at their mean (NaN when none is stored). Nothing is
    written or locked, so it may read the folder of a run still going."""
    seconds, source = [], []
    for unit, path in zip(plan.units, unit_paths(plan)):
        found, _ = load_unit(path, unit)
        seconds.append(found[1] if found else 0.0)
        source.append("stored" if found else "estimated")
    return _estimated(plan, seconds, source)


def _estimated(plan: Plan, seconds: list[float], source: list[str]) -> DryRun:
    """The DryRun with every "estimated" unit at its fitted time (`_fitted`), else at the mean
    time of the known units that share the most (field, value) pairs with it (NaN when no unit
    is known)."""
    known = [i for i, src in enumerate(source) if src != "estimated"]
    fitted = _fitted(plan.units, known, seconds)
    pairs = [_pairs(unit) for unit in plan.units]
    estimate = list(seconds)
    for i, src in enumerate(source):
        if src != "estimated":
            continue
        if i in fitted:
            estimate[i] = fitted[i]
            continue
        shared = {j: len(pairs[i] & pairs[j]) for j in known}
        nearest = [seconds[j] for j in known if shared[j] == max(shared.values())]
        estimate[i] = sum(nearest) / len(nearest) if nearest else float("nan")
    return DryRun(plan.experiment.name, list(plan.units), estimate, source)


def _fitted(units: list[Unit], known: list[int], seconds: list[float]) -> dict[int, float]:
    """Per unit whose time the known units determine: exp(c + sum of b[f, value]), the least-
    squares fit of log seconds over the known units (module doc). Determined: every term of the
    unit is in a known unit and its row lies in the span of the known units' rows.

    Example:
        >>> units = [{"m": m, "k": k} for m in ("small", "big") for k in ("a", "b")]
        >>> {i: round(s, 6) for i, s in _fitted(units, [0, 1, 2], [1.0, 3.0, 10.0]).items()}
        {0: 1.0, 1: 3.0, 2: 10.0, 3: 30.0}
    """
    if not known:
        return {}
    terms = sorted(set().union(*(_cost_terms(units[j]) for j in known)))
    column = {term: k for k, term in enumerate(terms, start=1)}

    def row(unit: Unit) -> np.ndarray | None:
        if not _cost_terms(unit) <= column.keys():
            return None
        x = np.zeros(len(terms) + 1)
        x[[0, *(column[term] for term in _cost_terms(unit))]] = 1.0
        return x

    design = np.array([row(units[j]) for j in known])
    logs = np.log([max(seconds[j], 1e-6) for j in known])
    coef = np.linalg.lstsq(design, logs, rcond=None)[0]
    _, sv, vt = np.linalg.svd(design, full_matrices=False)
    span = vt[sv > sv[0] * 1e-9]
    fitted = {}
    for i, unit in enumerate(units):
        x = row(unit)
        if x is not None and np.linalg.norm(x - span.T @ (span @ x)) < 1e-6:
            fitted[i] = float(np.exp(x @ coef))
    return fitted


def _but_seed(unit: Unit) -> str:
    return ", ".join(
        f"{key}={canonical_json(value)}" for key, value in unit.items() if key != "seed"
    )


def _pairs(unit: Unit) -> set[tuple[str, str]]:
    return {(key, canonical_json(value)) for key, value in unit.items()}


def _cost_terms(unit: Unit) -> set[tuple[str, str]]:
    """The (field, value) pairs that may change a unit's cost: all but the seed."""
    return {pair for pair in _pairs(unit) if pair[0] != "seed"}


def _choose(units: list[Unit], known: list[int], pending: list[int], samples: int) -> list[int]:
    """Up to `samples` of `pending`, one at a time: the unit with the most (field, value) pairs
    no known or chosen unit has; ties go to the unit farthest along the list from those chosen
    (units often grow along the list), the first unit first."""
    pairs = [_pairs(unit) for unit in units]
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
