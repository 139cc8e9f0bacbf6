"""Run an experiment: resolve and validate its config, run (or reuse) every unit, store the
results and build the report.

    config = preset <- --config FILE.yaml <- --set key=value   (each merged over the last)
    DIR    = results/NAME/<first 10 hex of sha256(name, resolved config)>/
    DIR/units/<unit hash>.json  one per finished unit: typed columns, checksummed (see _store.py)
    DIR/config.yaml, manifest.json, results.csv, then claims.json, figures/, report.html

Every config is validated, every unit list built and the output folder checked for writing
before any unit runs. Units are independent; they run in this process, in spawned worker
processes or as Ray tasks (`backends.py`), a CPU unit on one torch thread, and rows are
assembled in unit order, so the results do not depend on `jobs` or the backend. `run all` hands
the units of every experiment to one set of workers, longest expected first. The driver alone writes,
under a lock on DIR/.lock: a second run of the same config waits, then reuses the units.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import platform
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml  # writes config.yaml; every read goes through rankcollapse.reading
from pydantic import BaseModel

from rankcollapse import __version__, installed_versions
from rankcollapse.errors import ConfigError, InputError, OutputError, UnitError
from rankcollapse.experiments import (
    Claim,
    Experiment,
    Summary,
    Unit,
    experiment_names,
    get_experiment,
    merged_values,
)
from rankcollapse.files import (
    canonical_json,
    check_output,
    claim_output,
    digest,
    json_bytes,
    remove_partial,
    write_atomic,
    write_changed,
)
from rankcollapse.lazy import lazy_module
from rankcollapse.presets import DEFAULT_PRESET, PRESETS
from rankcollapse.reading import MiB, parse_yaml, read_yaml, refuse_links
from rankcollapse.report import config_hash, kept_note, read_manifest, results_sha256
from rankcollapse.runner._lock import run_lock
from rankcollapse.runner._store import OLD_SUFFIX, SUFFIX, malformed, read_unit, save_unit
from rankcollapse.runner.backends import (
    UNIT_THREADS,
    Failed,
    FollowUp,
    Task,
    UnitFailure,
    check_backend,
    process_pool,
    ray_session,
    run_units,
)
from rankcollapse.runner.costs import longest_first, unit_seconds

if TYPE_CHECKING:
    import pandas as pd

    from rankcollapse.report import Report
else:  # a fully stored run neither builds nor reads its rows (`Stored.kept`)
    pd = lazy_module("pandas")

Progress = Callable[[str, int, int], None]  # (experiment name, units done, units in all)
Notify = Callable[[str], None]  # a message for the user (waiting for a lock, a file not used)

PACKAGES = ("torch", "numpy", "pandas", "pydantic", "matplotlib", "scipy", "transformers")


@dataclass
class Plan:
    """A validated run that has not started: what `execute` needs, all checked."""

    experiment: Experiment
    preset: str
    overrides: dict[str, Any]
    config: BaseModel
    units: list[Unit]
    config_hash: str
    out_dir: Path
    out_chosen: bool = False  # --out named it (else results/NAME/<hash>)

    def claim_folder(self) -> None:
        """Check the run folder (`files.claim_output`): new, empty, or a run of this config,
        holding no symbolic link (`reading.refuse_links`: never read or written through)."""
        refuse_links(self.out_dir, "run folder")
        claim_output(self.out_dir, "run", self.config_hash, flag=self.flag)

    def check_folder(self) -> None:
        """The checks of `claim_folder`, writing nothing: made again under the run lock, where
        the folder is claimed already (its marker written, its writability tried)."""
        refuse_links(self.out_dir, "run folder")
        check_output(self.out_dir, "run", self.config_hash, flag=self.flag)

    @property
    def flag(self) -> str | None:
        """How the user named the folder (`--out`), if they did."""
        return "--out" if self.out_chosen else None


@dataclass
class RunResult:
    """A finished run: the tidy results, the claims and where everything was written (its
    `report`; a report kept from an earlier run reads its results and tables when first used)."""

    name: str
    out_dir: Path
    config: BaseModel
    config_hash: str
    report: Report
    n_units: int
    n_cached: int  # reused from an earlier (killed or finished) run with the same config
    n_computed: int
    n_corrupt: int = 0  # unit files found damaged (or of an older format) and recomputed
    recomputed: list[dict[str, str]] = field(default_factory=list)  # {"unit_file", "reason"}
    waited_for_lock: float = 0.0  # seconds spent waiting for another run of this folder
    manifest: dict[str, Any] = field(default_factory=dict)

    @property
    def results(self) -> pd.DataFrame:
        return self.report.results

    @property
    def summary(self) -> Summary:
        return self.report.summary

    @property
    def report_path(self) -> Path:
        return self.report.path

    @property
    def claims(self) -> list[Claim]:
        return self.report.claims


def parse_overrides(pairs: Sequence[str], keys: Sequence[str] = ()) -> dict[str, Any]:
    """`key=value` strings (values read as YAML scalars or lists) to a dotted-key dict; `keys`
    (the experiment's config keys, when one is named) are what an error suggests. The keys
    themselves are checked with the config.

    Example:
        >>> parse_overrides(["n_layers=4", "variants=[san, san+skip]", "toy.n_tokens=8",
        ...                  "init_std=1e-3"])
        {'n_layers': 4, 'variants': ['san', 'san+skip'], 'toy.n_tokens': 8, 'init_std': 0.001}
    """
    overrides: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key.strip():
            example = (
                f"e.g. --set {keys[0]}=VALUE; keys: {', '.join(keys)}"
                if keys
                else "e.g. --set n_layers=4 or --set seeds=[0,1]"
            )
            raise ConfigError(f"--set expects key=value, got {pair!r}; {example}.")
        overrides[key.strip()] = _yaml_value(key.strip(), text)
    return overrides


MAX_YAML_BYTES = MiB  # a config is a few lines; a megabyte of YAML is not one


def _config_error(what: str, fix: str) -> Callable[[str], ConfigError]:
    return lambda problem: ConfigError(f"{what} cannot be used ({problem}); {fix}")


def _yaml_value(key: str, text: str) -> Any:
    fix = "write a number, a word or a list such as [0, 1]."
    value = parse_yaml(text, error=_config_error(f"--set {key}={text}", fix))
    # YAML 1.1 reads "1e-3" as a string; a number is what anyone typing it means.
    if isinstance(value, str) and re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+", value):
        return float(value)
    return value


def load_config_file(path: str | Path) -> dict[str, Any]:
    """The mapping in a YAML config file (merged over the preset by `plan`)."""
    fix = "pass a YAML file of keys, e.g. 'n_layers: 4'."
    values = read_yaml(path, MAX_YAML_BYTES, error=_config_error(f"config file {str(path)!r}", fix))
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise ConfigError(
            f"config file {str(path)!r} holds a {type(values).__name__}; it must be a mapping "
            "of config keys, e.g. 'depth: 4'."
        )
    return values


def plan(
    name: str | Experiment,
    preset: str = DEFAULT_PRESET,
    overrides: Mapping[str, Any] | None = None,
    config_file: str | Path | None = None,
    out: str | Path | None = None,
    results_root: str | Path = "results",
    *,
    devices_here: bool = True,
) -> Plan:
    """Resolve and validate the config (`Experiment.make_config`: the config file's values,
    then `overrides`, over the preset; with `devices_here`, its devices visible on this
    machine) and build the unit list; nothing runs, nothing is written."""
    exp = name if isinstance(name, Experiment) else get_experiment(name)
    file_values = load_config_file(config_file) if config_file is not None else {}
    values = merged_values(file_values, overrides or {})
    config = exp.make_config(preset, values, devices_here=devices_here)
    units = exp.units(config)
    if not units:
        raise ConfigError(f"{exp.name} has no units of work for this config; check its lists.")
    hashes = [canonical_json(unit) for unit in units]
    repeated = next((h for i, h in enumerate(hashes) if h in hashes[:i]), None)
    if repeated is not None:
        raise ConfigError(
            f"{exp.name}: the config asks for the unit {repeated} twice; a list in the config "
            "repeats a value. Remove the repeated value."
        )
    full_hash = config_hash(exp.name, config)
    out_dir = Path(out) if out is not None else Path(results_root) / exp.name / full_hash[:10]
    return Plan(exp, preset, values, config, units, full_hash, out_dir, out is not None)


def run_experiment(
    name: str | Experiment,
    preset: str = DEFAULT_PRESET,
    overrides: Mapping[str, Any] | None = None,
    config_file: str | Path | None = None,
    out: str | Path | None = None,
    jobs: int = 1,
    progress: Progress | None = None,
    results_root: str | Path = "results",
    *,
    backend: str = "process",
    address: str | None = None,
    notify: Notify | None = None,
    figures: bool = True,
) -> RunResult:
    """Run one experiment (by name, or an `Experiment` object) and build its report.

    Finished units of an earlier run with the same config are reused; a unit that raises is
    re-raised as `UnitError` after every other finished unit is stored, so rerunning the
    same call resumes where it stopped. `backend` is "process" (this process when jobs=1,
    else `jobs` worker processes) or "ray" (`address` joins a cluster); see `backends`.
    `figures=False` draws no figure (the report has its claims and tables).
    """
    p = plan(name, preset, overrides, config_file, out, results_root, devices_here=not address)
    return execute(
        p, jobs, progress, backend=backend, address=address, notify=notify, figures=figures
    )


def experiments_with_preset(preset: str) -> list[str]:
    """The experiments `run all --preset` runs: every one for a common preset (quick, paper),
    else those that declare it (cpu); ConfigError when none does."""
    if preset in PRESETS:
        return experiment_names()
    names = [name for name in experiment_names() if preset in get_experiment(name).presets]
    if not names:
        raise ConfigError(f"no experiment has the preset {preset!r}")
    return names


def run_all(
    preset: str = DEFAULT_PRESET,
    overrides: Mapping[str, Any] | None = None,
    config_file: str | Path | None = None,
    *,
    jobs: int = 1,
    progress: Progress | None = None,
    results_root: str | Path = "results",
    backend: str = "process",
    address: str | None = None,
    notify: Notify | None = None,
) -> list[RunResult]:
    """Run every registered experiment into results_root/NAME/<config hash>/ (with a preset
    that not every experiment has, such as cpu: every experiment that has it).

    Every config is validated (and every unit list built), and every output folder checked
    for writing, before the first unit runs. The units of all experiments go to one set of
    workers (a Ray instance or a process pool), longest expected first (`execute_all`).
    """
    plans = [
        plan(name, preset, overrides, config_file, results_root=results_root,
             devices_here=not address)
        for name in experiments_with_preset(preset)
    ]  # fmt: skip
    return execute_all(plans, jobs, progress, backend=backend, address=address, notify=notify)


def session(
    backend: str, jobs: int, address: str | None = None
) -> contextlib.AbstractContextManager:
    """Workers kept up for several `execute` calls: one Ray instance, or one process pool
    (jobs > 1); nothing for one process."""
    if backend == "ray":
        return ray_session(jobs, address)
    return process_pool(jobs) if jobs > 1 else contextlib.nullcontext()


def execute(
    plan: Plan,
    jobs: int = 1,
    progress: Progress | None = None,
    *,
    backend: str = "process",
    address: str | None = None,
    notify: Notify | None = None,
    figures: bool = True,
) -> RunResult:
    """Run the units of a plan that have no valid stored result, then store and report.

    The run folder is checked for writing first (OutputError, before any unit runs) and
    locked while the run lasts: a second run of the same config waits, then reuses the units.
    """
    return execute_all(
        [plan], jobs, progress, backend=backend, address=address, notify=notify, figures=figures
    )[0]


def execute_all(
    plans: Sequence[Plan],
    jobs: int = 1,
    progress: Progress | None = None,
    *,
    backend: str = "process",
    address: str | None = None,
    notify: Notify | None = None,
    figures: bool = True,
) -> list[RunResult]:
    """`execute` for several plans at once: the units of every plan go to one set of workers
    (no barrier between experiments); each plan's results are written as soon as its last
    unit is stored, and its report is built next (by a pool worker, before any unit not yet
    started: reports share the cores with units instead of piling up in the driver). With
    jobs > 1 the units expected to take longest start first (`expected_seconds`), so no long
    unit is left to run alone at the end. `figures=False` draws none (`build_report`): the
    report has its claims and tables only.

    A unit that raises stops the start of new units; the finished ones are stored and the
    failure is raised as `UnitError` naming its experiment and unit.
    """
    check_backend(backend, jobs)
    for p in plans:
        p.claim_folder()
    with contextlib.ExitStack() as locks:
        runs = []
        for p in plans:
            waited = locks.enter_context(run_lock(p.out_dir, notify))
            p.check_folder()  # again under the lock: another config may have claimed it first
            runs.append(_Run.open(p, jobs, backend, address, notify, waited, progress, figures))
        tasks = [(run, i) for run in runs for i in run.pending]
        if jobs > 1 and tasks:
            expected = {id(run): expected_seconds(run.plan, run.stored) for run in runs}
            tasks = sorted(tasks, key=lambda t: longest_first(expected[id(t[0])][t[1]]))
        for run in runs:
            if not run.pending and (follow_up := run.finish()):
                follow_up.run_here()

        def finished(k: int, rows: pd.DataFrame, seconds: float, where: dict) -> FollowUp | None:
            run, i = tasks[k]
            run.store(i, rows, seconds, where)
            return run.finish() if run.done == len(run.plan.units) else None

        units = [
            Task(run.plan.experiment.run_unit, run.plan.config, run.plan.units[i])
            for run, i in tasks
        ]
        try:
            if units:  # nothing to start for runs whose every unit is stored
                run_units(backend, units, finished, jobs, address)
        except UnitFailure as failure:
            run, i = tasks[failure.index]
            raise run.failed(i, failure.failed) from None
        results = [run.result for run in runs if run.result is not None]
        if len(results) < len(runs):  # each run's report is built once its last unit is stored
            raise RuntimeError("a run ended with every unit stored but no report")
        return results


def expected_seconds(plan: Plan, stored: Stored) -> list[float]:
    """Per unit, the seconds it is expected to take (to start the longest first), from the
    units stored in this folder and those of earlier runs (`earlier_times`), as
    `costs.unit_seconds` estimates them; NaN when no time is known."""
    known = [(u, s) for u, s, h in zip(plan.units, stored.seconds, stored.sha256, strict=True) if h]
    return unit_seconds(plan.units, known + earlier_times(plan))


def earlier_times(plan: Plan) -> list[tuple[Unit, float]]:
    """(unit, seconds) of every unit in the manifests of runs of the same experiment and
    preset in sibling folders of the plan's (another config, or this folder's last run)."""
    times = []
    same = {"experiment": plan.experiment.name, "preset": plan.preset}
    for path in sorted(plan.out_dir.parent.glob("*/manifest.json")):
        try:
            manifest = read_manifest(path.parent)
        except InputError:  # damaged, or a FIFO: no times from it
            continue
        if not isinstance(manifest, dict) or any(manifest.get(k) != v for k, v in same.items()):
            continue
        for entry in manifest.get("units_where") or []:
            if (
                isinstance(entry, dict)
                and isinstance(entry.get("unit"), dict)
                and isinstance(entry.get("seconds"), int | float)
            ):
                times.append((entry["unit"], float(entry["seconds"])))
    return times


@dataclass
class _Run:
    """One plan being executed: its stored and new units, manifest and, once every unit is
    stored, its results and report (`result`)."""

    plan: Plan
    paths: list[Path]
    stored: Stored
    manifest: dict[str, Any]
    backend: str
    waited: float
    progress: Progress | None
    done: int = 0
    first_start: dt.datetime | None = None  # when its first computed unit started
    figures: bool = True  # draw the report's figures
    jobs: int = 1  # the processes the user allows (`--jobs`)
    result: RunResult | None = None
    notify: Notify | None = None

    @classmethod
    def open(
        cls,
        plan: Plan,
        jobs: int,
        backend: str,
        address: str | None,
        notify: Notify | None,
        waited: float,
        progress: Progress | None,
        figures: bool = True,
    ) -> _Run:
        """Read what the (locked) folder holds and write the config and a running manifest."""
        name, out_dir = plan.experiment.name, plan.out_dir
        paths = unit_paths(plan)
        started = _now()
        write_changed(out_dir / "config.yaml", config_yaml(plan.config).encode())
        stored = load_stored(plan, paths, _last_manifest(out_dir))
        for problem in stored.recomputed:
            if notify:
                notify(
                    f"{name}: unit file {problem['unit_file']} not used: {problem['reason']}; "
                    "its unit is recomputed."
                )
        n_pending = stored.sha256.count("")
        n_cached = len(plan.units) - n_pending
        manifest = _manifest(plan, jobs, started, n_cached, n_pending, stored.recomputed)
        manifest.update(backend=backend, address=address, waited_for_lock_seconds=round(waited, 3))
        write_atomic(out_dir / "manifest.json", json_bytes(manifest))
        run = cls(
            plan,
            paths,
            stored,
            manifest,
            backend,
            waited,
            progress,
            n_cached,
            figures=figures,
            jobs=jobs,
        )
        run.notify = notify
        if progress:
            progress(name, run.done, len(plan.units))
        return run

    @property
    def pending(self) -> list[int]:
        return [i for i, h in enumerate(self.stored.sha256) if not h]

    def store(self, i: int, rows: pd.DataFrame, seconds: float, where: dict) -> None:
        """Store unit `i` as it finishes and count it."""
        where = {**where, "backend": self.backend}
        checksum = store_unit(self.plan, self.paths[i], i, rows, seconds, where)
        self.stored.rows[i], self.stored.seconds[i], self.stored.where[i] = rows, seconds, where
        self.stored.sha256[i] = checksum
        self.done += 1
        start = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=seconds)
        self.first_start = min(start, self.first_start or start)
        if self.progress:
            self.progress(self.plan.experiment.name, self.done, len(self.plan.units))

    def failed(self, i: int, failed: Failed) -> UnitError:
        """Unit `i` raised or its worker died: the manifest says so (status failed, the
        error, its traceback), and the error for the user says what is kept and what to do."""
        plan, unit = self.plan, canonical_json(self.plan.units[i])
        manifest_path = plan.out_dir / "manifest.json"
        self.manifest.update(
            status="failed",
            finished=_now(),
            failed_unit=plan.units[i],
            error=f"{failed.kind}: {failed.message}",
            traceback=failed.traceback,
        )
        write_atomic(manifest_path, json_bytes(self.manifest))
        message = failed.message.rstrip(".")  # one full stop follows, never two
        said = f"{plan.experiment.name} unit {unit} failed: {failed.kind}: {message}"
        kept = f"{self.done} of {len(plan.units)} units are stored and kept"
        if failed.died:  # its message says to rerun
            return UnitError(f"{said}. {kept}.")
        return UnitError(
            f"{said}. {kept}; its traceback is in {manifest_path}. Fix what the error names (a "
            "config value, say) and run again: the stored units are reused."
        )

    def finish(self) -> FollowUp | None:
        """Every unit is stored: write results.csv (unless it holds these rows already:
        `Stored.kept`) and the manifest; when no unit ran, keep the report built from these
        same results (`stored_report`), else return the report's building as a follow-up (on
        a pool worker it runs beside the other units)."""
        from rankcollapse.report import stored_report

        plan, stored, manifest = self.plan, self.stored, self.manifest
        if not stored.kept:
            results = pd.concat(stored.rows, ignore_index=True)
            write_atomic(plan.out_dir / "results.csv", results.to_csv(index=False).encode())
        manifest["results_sha256"] = results_sha256(plan.out_dir / "results.csv")
        manifest["rows_sha256"] = digest(stored.sha256)
        if self.first_start:  # in `run all` units of other experiments may have run first
            manifest["started"] = self.first_start.isoformat(timespec="seconds")
        manifest.update(
            finished=_now(),
            unit_seconds=round(sum(stored.seconds), 3),
            units_where=[
                {"unit": u, "seconds": round(s, 3), **w}
                for u, s, w in zip(plan.units, stored.seconds, stored.where, strict=True)
            ],
            status="complete",
        )
        write_atomic(plan.out_dir / "manifest.json", json_bytes(manifest))
        if manifest["n_computed"] == 0:  # nothing new: the stored report stands if made
            report = stored_report(plan.out_dir, plan.experiment, manifest, figures=self.figures)
            if report is not None:
                self.reported(report)
                return None
        # its figures drawn by as many processes as units run at once, forked by the worker
        # or this process (not by a Ray driver, whose client threads a fork would copy)
        processes = self.jobs if self.backend == "process" else 1
        build = partial(
            report_of_run, plan.out_dir, plan.experiment, figures=self.figures, processes=processes
        )
        return FollowUp(build, self.reported)

    def reported(self, report: Report) -> None:
        """The run's result, from its report (which says what of the user's it kept aside)."""
        for path, aside in report.kept.items():
            if self.notify:
                self.notify(kept_note(path, aside))
        plan, stored, manifest = self.plan, self.stored, self.manifest
        n_computed = manifest["n_computed"]
        self.result = RunResult(
            name=plan.experiment.name,
            out_dir=plan.out_dir,
            config=plan.config,
            config_hash=plan.config_hash,
            report=report,
            n_units=len(plan.units),
            n_cached=len(plan.units) - n_computed,
            n_computed=n_computed,
            n_corrupt=len(stored.recomputed),
            recomputed=stored.recomputed,
            waited_for_lock=self.waited,
            manifest=manifest,
        )


def report_of_run(
    out_dir: Path, experiment: Experiment, *, figures: bool, processes: int = 1
) -> Report:
    """`build_report` of a finished run (its figures drawn by up to `processes` processes),
    as the run's result holds it: its figures are in figures/ and left out of the summary (as
    a stored report's are; a figure does not pickle back from a worker)."""
    from rankcollapse.report import build_report

    report = build_report(out_dir, experiment=experiment, figures=figures, processes=processes)
    summary = dataclasses.replace(report.summary, figures={})
    return dataclasses.replace(report, built=(report.results, summary))


def unit_paths(plan: Plan) -> list[Path]:
    """Where each unit of a plan is stored: DIR/units/<16 hex of sha256(config hash, unit)>."""
    unit_dir = plan.out_dir / "units"
    return [unit_dir / f"{digest([plan.config_hash, u])[:16]}{SUFFIX}" for u in plan.units]


@dataclass
class Stored:
    """What a run folder holds for a plan, per unit: its rows, seconds, where it ran and the
    checksum of its unit file ("": to run); and the files found and not used. `kept`: every
    unit was stored and results.csv holds their rows as the last complete run wrote them
    (the manifest's `rows_sha256` over the checksums, `results_sha256` over the file), so
    the rows are neither built nor written again (`rows` stays None)."""

    rows: list[pd.DataFrame | None]
    seconds: list[float]
    where: list[dict]
    sha256: list[str]
    recomputed: list[dict[str, str]]  # {"unit_file", "reason"}: files found and not used
    kept: bool = False


def load_stored(plan: Plan, paths: list[Path], last: dict[str, Any] | None = None) -> Stored:
    """Read every stored unit; remove temporary, damaged and old-format files (callers hold
    the run lock, so no temporary file belongs to a live writer). `last`: the folder's
    manifest before this run, whose results.csv is kept when it holds these units' rows."""
    remove_partial(plan.out_dir)  # left by a run killed while writing
    unit_dir = plan.out_dir / "units"
    if unit_dir.exists() and not unit_dir.is_dir():
        raise OutputError(
            f"{unit_dir} is a file where the units folder belongs; move it away and run again."
        )
    n = len(plan.units)
    stored = Stored([None] * n, [0.0] * n, [{} for _ in range(n)], [""] * n, [])
    files = {}
    for i, (unit, path) in enumerate(zip(plan.units, paths, strict=True)):
        if path.is_dir():  # never removed: it is not a file of ours
            raise OutputError(
                f"{path} is a folder where a unit file belongs; move it away and run again "
                "(the stored units are reused)."
            )
        found, reason = read_unit(path, unit)
        if found is not None:
            files[i] = found
            stored.seconds[i], stored.where[i], stored.sha256[i] = (
                found.seconds,
                found.where,
                found.sha256,
            )
            continue
        old = path.with_suffix(OLD_SUFFIX)
        if old.exists():  # a pickle of version 1: never loaded, it could run code
            reason, path = "older pickle format (never loaded)", old
        if reason:
            stored.recomputed.append({"unit_file": path.name, "reason": reason})
            path.unlink(missing_ok=True)
    stored.kept = len(files) == n and _results_kept(plan.out_dir, last or {}, stored.sha256)
    for i, found in [] if stored.kept else files.items():
        try:
            stored.rows[i] = found.frame()
        except (ValueError, TypeError, KeyError) as err:
            stored.sha256[i] = ""
            stored.recomputed.append({"unit_file": paths[i].name, "reason": malformed(err)})
            paths[i].unlink(missing_ok=True)
    return stored


def _results_kept(out_dir: Path, last: dict[str, Any], checksums: list[str]) -> bool:
    """Whether results.csv is as the last complete run wrote it from units of these checksums."""
    if last.get("status") != "complete" or last.get("rows_sha256") != digest(checksums):
        return False
    try:
        return results_sha256(out_dir / "results.csv") == last.get("results_sha256")
    except InputError:  # missing, a FIFO, too large: written again
        return False


def _last_manifest(out_dir: Path) -> dict[str, Any]:
    """The folder's manifest before this run ({} when there is none or it is damaged)."""
    try:
        return read_manifest(out_dir)
    except InputError:
        return {}


def store_unit(
    plan: Plan, path: Path, i: int, rows: Any, seconds: float, where: dict[str, Any]
) -> str:
    """Check the rows unit `i` returned and store them (atomically) at `path`; returns the
    unit file's checksum."""
    unit = plan.units[i]
    if not isinstance(rows, pd.DataFrame) or not {"metric", "value"} <= set(rows.columns):
        got = list(rows.columns) if isinstance(rows, pd.DataFrame) else type(rows).__name__
        raise UnitError(
            f"{plan.experiment.name} unit {canonical_json(unit)} returned {got}; run_unit must "
            "return a DataFrame with identifying columns, then 'metric' and 'value'."
        )
    return save_unit(path, unit, rows, seconds, where)


def config_yaml(config: BaseModel) -> str:
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)


def _manifest(
    plan: Plan, jobs: int, started: str, n_cached: int, n_pending: int, recomputed: list[dict]
) -> dict[str, Any]:
    packages = {"rankcollapse": __version__, "python": platform.python_version()}
    found = installed_versions(*PACKAGES)
    for package in PACKAGES:
        if package not in found:  # an editable or egg install: importlib.metadata finds it
            import importlib.metadata

            with contextlib.suppress(importlib.metadata.PackageNotFoundError):
                found[package] = importlib.metadata.version(package)
        if package in found:
            packages[package] = found[package]
    return {
        "experiment": plan.experiment.name,
        "description": plan.experiment.description,
        "preset": plan.preset,
        "overrides": plan.overrides,
        "config_hash": plan.config_hash,
        "started": started,
        "finished": None,
        "status": "running",
        "host": platform.node(),
        "platform": platform.platform(),
        "command": " ".join(sys.argv),
        "packages": packages,
        "torch_threads": UNIT_THREADS,  # per CPU unit, whatever jobs is (backends.call_unit)
        "jobs": jobs,
        "seeds": _seeds(plan.config.model_dump(mode="json"), plan.units),
        "n_units": len(plan.units),
        "n_cached": n_cached,
        "n_computed": n_pending,
        "n_corrupt": len(recomputed),
        "recomputed": recomputed,  # unit files that could not be used, and why
    }


def _seeds(config: Any, units: list[Unit]) -> list:
    """Every value of a key named seed/seeds in the config or the units."""
    found: set = set()

    def visit(value: Any, key: str = "") -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                visit(v, k)
        elif isinstance(value, list) and key not in ("seed", "seeds"):
            for v in value:
                visit(v, key)
        elif key in ("seed", "seeds"):
            found.update(value if isinstance(value, list) else [value])

    visit(config)
    visit(units)
    return sorted(found, key=str)


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
